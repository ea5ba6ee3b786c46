"""`make bench`: every promise Sortie makes about speed, measured side by side in one run.

    scripts/with-moto.sh .tools/venv/bin/python scripts/bench.py [--quick]

Runs, in this order, and prints one Markdown table at the end (each step's own output
goes to stderr as it runs):

1. Cold start: scripts/bench-cold-start.py (release zips built by `cargo lambda build`,
   each function against the bare `cold-start-probe` and a boto3 handler, medians of 20
   starts through a Lambda Runtime API double), with RSS at init and zip sizes.
2. Rule resolution at 10, 1,000 and 10,000 rules, and compiling 10,000:
   `cargo bench -p sortie-core --bench resolve` (criterion's medians).
3. Handler CPU per record: `cargo bench -p sortie-lifecycle --bench dispatch`, the
   dispatch of one submitted job and the completion of one stopped task, on the
   in-memory store (no AWS latency).
4. AWS calls per job on the dispatch path, counted by the test proxy over `--calls-jobs`
   jobs on moto (crates/lifecycle/tests/it/calls_per_job.rs).
5. End to end: `--jobs` jobs over `--envs` environments through `sortie dev` on moto,
   with runners that exit at once (scripts/bench-e2e.py), against moto's own per-call
   floor measured in the same run. 5b: local mode's submit -> running, one job at a time,
   and its hand-off from a job's end to the next claim, each against the figure recorded
   in scripts/bench-local-path.json (scripts/bench-local-path.py; twice it is a failure).
6. The log pipeline: scripts/bench_logs.py (follow latency, a 60-minute 50 MB log read
   back through the API, the log's cost per 1,000 ten-minute jobs), with a follower who
   joins mid-run.
7. The sweeper: one pass over 10,000 active jobs on the in-memory store
   (`cargo test -p sortie-lifecycle --test it -- sweep_scale::sweeper_bench`).

The defaults for 4 and 5 are 100 jobs, and 200 jobs over 20 environments. The 1,000-job
run under chaos is `make soak` (scripts/soak.py), since moto's transactions and its
instance tracker were patched to scale (scripts/moto_server.py, patches 4 and 6). `--quick` takes 5 cold starts each.
It needs the moto of scripts/with-moto.sh (steps 4 and 5) and takes about half an hour
from a cold target directory, most of it the release builds.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = sys.executable


def run(command, env=None):
    """Runs a step, its output to stderr; returns its stdout."""
    print("+ " + " ".join(command), file=sys.stderr, flush=True)
    full = dict(os.environ, **(env or {}))
    done = subprocess.run(command, cwd=ROOT, env=full, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, text=True)
    sys.stderr.write(done.stdout)
    if done.returncode != 0:
        sys.exit(f"bench: `{' '.join(command)}` failed with {done.returncode}")
    return done.stdout


def criterion_median_ns(*path):
    with open(os.path.join(ROOT, "target/criterion", *path, "new/estimates.json")) as f:
        return json.load(f)["median"]["point_estimate"]


def us(ns):
    return f"{ns / 1000:.2f} µs" if ns < 1e6 else f"{ns / 1e6:.2f} ms"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="5 cold starts each")
    ap.add_argument("--calls-jobs", type=int, default=100)
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--envs", type=int, default=20)
    args = ap.parse_args()
    if not os.environ.get("AWS_ENDPOINT_URL"):
        sys.exit("bench: run it under scripts/with-moto.sh (make bench does)")
    runs = 5 if args.quick else 20
    jobs, envs, calls_jobs = args.jobs, args.envs, args.calls_jobs
    work = tempfile.mkdtemp(prefix="sortie-bench-")
    rows = []  # (measure, figure, goal, met)

    # 1. Cold start.
    cold_json = os.path.join(work, "cold.json")
    run([PY, "scripts/bench-cold-start.py", "--runs", str(runs), "--json", cold_json])
    with open(cold_json) as f:
        cold = {r["name"]: r for r in json.load(f)["rows"]}
    for name, r in cold.items():
        is_function = name in ("api", "dispatch", "task-events", "sweeper")
        rows.append((f"cold start: {name} (median of {runs})",
                     f"{r['median_ms']:.1f} ms, {r['ratio_to_probe']:.2f}× the probe",
                     "≤ 0.80× the probe" if is_function else "",
                     (r["ratio_to_probe"] <= 0.8) if is_function else None))
        if r["rss_mib"] is not None:
            rows.append((f"RSS at init: {name}", f"{r['rss_mib']:.1f} MiB", "", None))
        if r["zip_mib"] is not None and is_function:
            rows.append((f"zip: {name}", f"{r['zip_mib']:.2f} MiB", "≤ 8 MiB", r["zip_mib"] <= 8))

    # 2. Rule resolution.
    run(["cargo", "bench", "-p", "sortie-core", "--bench", "resolve", "--", "--noplot"])
    for n in (10, 1000, 10000):
        ns = criterion_median_ns("resolve", "index", str(n))
        goal = n == 10000
        rows.append((f"resolve: {n:,} rules, depth 8", us(ns), "≤ 5 µs" if goal else "",
                     (ns <= 5000) if goal else None))
    ns = criterion_median_ns("compile", "10000")
    rows.append(("compile: 10,000 rules", us(ns), "≤ 1 ms", ns <= 1e6))

    # 3. Handler CPU per record.
    run(["cargo", "bench", "-p", "sortie-lifecycle", "--bench", "dispatch", "--", "--noplot",
         "dispatch/one_submitted_job|task_event/stopped_exit_0"])
    rows.append(("CPU per record: dispatch (in-memory store)",
                 us(criterion_median_ns("dispatch_one_submitted_job")), "", None))
    rows.append(("CPU per record: task event (in-memory store)",
                 us(criterion_median_ns("task_event_stopped_exit_0")), "", None))

    # 4. AWS calls per job.
    # --workspace: the features `cargo test --workspace` resolves, so this and step 5
    # reuse the tests' compiled dependencies (docs/TESTING.md, "Tests that run the binaries").
    out = run(["cargo", "test", "--workspace", "--test", "calls_per_job", "--",
               "--nocapture"], env={"SORTIE_CALLS_PER_JOB_JOBS": str(calls_jobs)})
    for op, n, per in re.findall(r"^\| ([\w.]+) \| (\d+) \| ([\d.]+) \|$", out, re.M):
        rows.append((f"AWS calls per job: {op.split('.')[-1]} ({calls_jobs:,} jobs)", per, "", None))
    amortised = re.search(r"per job: [\d.]+ over \d+ jobs; ([\d.]+) per job plus (\d+) AssumeRole", out)
    if amortised:
        per = float(amortised.group(1))
        rows.append(("AWS calls per job, amortised", f"{per:.2f} + {amortised.group(2)} AssumeRole",
                     "≤ 3", per <= 3.0))

    # 5. End to end.
    run(["cargo", "build", "--quiet", "--workspace", "--bins", "--tests"])
    e2e_json = os.path.join(work, "e2e.json")
    run([PY, "scripts/bench-e2e.py", "--jobs", str(jobs), "--envs", str(envs), "--json", e2e_json])
    with open(e2e_json) as f:
        e2e = json.load(f)
    floor = e2e["moto_floor_ms"]
    rows.append((f"e2e: {jobs:,} jobs over {envs} environments", f"{e2e['jobs_per_s']:.1f} jobs/s, "
                 f"states {e2e['states']}", "", None))
    rows.append(("e2e: moto's per-call floor (GetItem, median)",
                 f"{floor:.1f} ms; moto at {e2e['moto_cpu'] * 100:.0f}% of a core", "", None))
    if "moto_peak_rss_mib" in e2e:
        rows.append(("e2e: moto's peak memory", f"{e2e['moto_peak_rss_mib']:.0f} MiB", "", None))
    for name, l in e2e["latencies"].items():
        if name.endswith("Sortie's part"):
            # moto's own time subtracted (scripts/moto_server.py patch 5): issue 27's goal.
            rows.append((f"e2e: {name}", f"p50 {l['p50_ms']:.0f} ms, p99 {l['p99_ms']:.0f} ms",
                         "p99 ≤ 100 ms", l["p99_ms"] <= 100))
            continue
        goal = name in ("runner exit -> terminal", "release -> next claim")
        beyond = l["p99_ms"] - floor
        rows.append((f"e2e: {name}", f"p50 {l['p50_ms']:.0f} ms, p99 {l['p99_ms']:.0f} ms "
                     f"({l['p99_ms'] / floor:.0f}× moto's floor)",
                     "p99 ≤ moto's floor + 100 ms" if goal else "",
                     (beyond <= 100) if goal else None))

    # 5b. Local mode's own path against its recorded baseline (issue 47 item 15): submit ->
    # running one job at a time, as `make demo` submits, and the hand-off from a job's end
    # to the next one's claim; more than twice the recorded figure fails the bench.
    path_json = os.path.join(work, "local-path.json")
    done = subprocess.run([PY, "scripts/bench-local-path.py", "--json", path_json], cwd=ROOT,
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
    sys.stderr.write(done.stdout)
    with open(path_json) as f:
        path = json.load(f)
    for key, label in (("submit_to_running", "local mode: submit -> running, one job at a time"),
                       ("handoff", "local mode: hand-off, a job's end -> the next one's claim")):
        bound = path[f"{key}_p50_ms_bound"]
        rows.append((label, f"p50 {path[f'{key}_p50_ms']:.0f} ms, p99 {path[f'{key}_p99_ms']:.0f} ms",
                     f"p50 ≤ 2× the recorded ({bound:.0f} ms)",
                     path[f"{key}_p50_ms"] <= bound))

    # 6. The log pipeline (issue 27): follow latency, a 50 MB log read back, its cost.
    logs_json = os.path.join(work, "logs.json")
    run([PY, "scripts/bench_logs.py", "--json", logs_json])
    with open(logs_json) as f:
        logs = json.load(f)
    rows.append(("logs: follow latency", f"p50 {logs['follow_p50_ms']} ms, p99 {logs['follow_p99_ms']} ms",
                 "p99 ≤ 2 s", logs["follow_p99_ms"] <= 2000))
    rows.append(("logs: 60-minute 50 MB log read from offset 0",
                 f"{logs['read_s']:.2f} s in {logs['pages']} pages, largest {logs['largest_mb']:.2f} MB",
                 "< 10 s, ≤ 5 MB", logs["read_s"] < 10 and logs["largest_mb"] <= 5))
    rows.append(("logs: cost per 1,000 ten-minute jobs", f"before ${logs['before_usd']:.2f}, "
                 f"after ${logs['after_usd']:.3f}; with the rest of a job ${logs['total_usd']:.3f}",
                 "≤ $0.40 in all", logs["total_usd"] <= 0.40))

    if "join_after_p99_ms" in logs:
        rows.append(("logs: follow latency, a follower who joins mid-run",
                     f"p50 {logs['join_after_p50_ms']} ms, p99 {logs['join_after_p99_ms']} ms",
                     "p99 ≤ 2 s", logs["join_after_p99_ms"] <= 2000))

    # 7. The sweeper (issue 27): one pass over 10,000 active jobs on the in-memory store.
    command = ["cargo", "test", "-p", "sortie-lifecycle", "--test", "it", "--",
               "sweep_scale::sweeper_bench", "--nocapture"]
    print("+ " + " ".join(command), file=sys.stderr, flush=True)
    done = subprocess.run(command, cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    sys.stderr.write(done.stdout + done.stderr)
    if done.returncode != 0:
        sys.exit(f"bench: `{' '.join(command)}` failed with {done.returncode}")
    m = re.search(r"sweeper bench: one pass over (\d+) active jobs \(in-memory store, (\w+) build\): "
                  r"(\d+) ms, ([\d.]+) µs per job; (\d+) DescribeTasks, (\d+) job writes, (\d+) left "
                  r"for the next pass; goal: within one sweep period \((\d+) s\)", done.stderr)
    if m:
        jobs, build, ms, _, described, writes, left, period = m.groups()
        rows.append((f"sweeper: one pass over {int(jobs):,} active jobs ({build} build)",
                     f"{ms} ms, {described} DescribeTasks, {writes} writes, {left} left",
                     f"≤ one sweep period ({period} s)", int(ms) <= int(period) * 1000 and left == "0"))

    print()
    print(f"| measure | figure | goal | met |")
    print("|---|---|---|---|")
    for measure, figure, goal, met in rows:
        mark = "" if met is None else ("yes" if met else "**no**")
        print(f"| {measure} | {figure} | {goal} | {mark} |")
    print()
    print(f"machine: {os.uname().machine}, {os.cpu_count()} cores; "
          f"{subprocess.run(['rustc', '--version'], capture_output=True, text=True).stdout.strip()}")


if __name__ == "__main__":
    main()
