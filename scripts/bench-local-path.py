"""Local mode's own path, timed as a person meets it, against a recorded baseline.

    scripts/with-moto.sh .tools/venv/bin/python scripts/bench-local-path.py \
        [--jobs 15] [--json FILE] [--record]

Issue 47 item 15: the local path got slower and nobody noticed. This starts `sortie dev`
against the moto of scripts/with-moto.sh, with a runner that exits 0 at once, and times:

- **submit -> running, idle**: `--jobs` plans submitted one at a time to one environment,
  each waited for before the next (as `make demo` submits), the first left out as the
  warm-up: from the job's `queued` transition to its `running` one, p50 and p99;
- **hand-off**: `--jobs` plans queued on one environment while its first runner holds
  (it waits for a file the bench creates once every job is queued), then released: from
  a job's terminal transition to the next job's `dispatching` (its claim), p50 and p99.

It compares each p50 with `scripts/bench-local-path.json` (the figures recorded on this
kind of machine, with the commit and the machine) and exits 1 when either is more than
twice its recorded figure: a slowdown of that size is a regression to find, not noise.
`--record` writes the figures of this run as the new baseline instead (say why in the
commit). `make bench` runs it (step 5b).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_common import ROOT, TERMINAL, parse_time, pct, start_dev, stop_dev  # noqa: E402

BASELINE = os.path.join(ROOT, "scripts", "bench-local-path.json")
# A figure more than this many times its recorded baseline fails the bench.
FACTOR = 2.0


def at(job, state):
    """When `job` last moved to `state` (epoch seconds), or None."""
    times = [parse_time(t["at"]) for t in job["transitions"] if t["to"] == state]
    return times[-1] if times else None


def wait_terminal(api, job_id, deadline):
    while True:
        job = api.call("GET", f"/v1/jobs/{job_id}")
        if job["state"] in TERMINAL:
            return job
        if time.time() > deadline:
            sys.exit(f"bench-local-path: job {job_id} is still {job['state']}")
        time.sleep(0.05)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=15)
    ap.add_argument("--sortie", default=os.path.join(ROOT, "target/debug/sortie"))
    ap.add_argument("--json", help="also write the figures to this file (scripts/bench.py)")
    ap.add_argument("--record", action="store_true",
                    help="write this run's figures as the baseline instead of checking")
    args = ap.parse_args()
    if not os.environ.get("AWS_ENDPOINT_URL"):
        sys.exit("bench-local-path.py: run it under scripts/with-moto.sh")
    if args.jobs < 3:
        sys.exit("bench-local-path.py: --jobs must be at least 3")

    work = tempfile.mkdtemp(prefix="sortie-bench-path-")
    runner, go = os.path.join(work, "runner.sh"), os.path.join(work, "go")
    with open(runner, "w") as f:
        # Holds while `go` is absent, then exits 0: the idle phase runs with `go` there;
        # the hand-off phase removes it, queues every job, and creates it again.
        f.write(f'#!/bin/sh\nwhile [ ! -e "{go}" ]; do sleep 0.02; done\nexit 0\n')
    os.chmod(runner, 0o755)
    stamp = str(int(time.time() * 1000))
    dev, api = start_dev(args.sortie, work, stamp, runner, extra=("--snapshot-every", "0"))
    try:
        api.call("POST", "/v1/groups/acme/-/runners/local", {
            "runner_configuration": {"type": "local"},
            "state_storage_configuration": {"type": "local",
                                            "directory": os.path.join(work, "state")}})
        api.call("POST", "/v1/groups/acme/-/rules", {"id": "default", "runner_id": "acme/local"})
        for name in ("idle", "queue"):
            api.call("POST", "/v1/groups/acme/path/-/environments",
                     {"name": name, "env_type": "development"})
        plan = {"operation": "plan", "files": {"main.tf": ""}}

        # Submit -> running, one job at a time.
        open(go, "w").close()
        idle = []
        for _ in range(args.jobs):
            job_id = api.call("POST", "/v1/environments/acme/path/idle/-/jobs", plan)["id"]
            job = wait_terminal(api, job_id, time.time() + 60)
            if job["state"] != "succeeded":
                sys.exit(f"bench-local-path: job {job_id} {job['state']}: {job.get('reason')}")
            idle.append((at(job, "running") - at(job, "queued")) * 1000)
        idle = idle[1:]  # the first is the warm-up (connections, caches)

        # Hand-off: every job queued behind the first, then released.
        os.remove(go)
        ids = [api.call("POST", "/v1/environments/acme/path/queue/-/jobs", plan)["id"]
               for _ in range(args.jobs)]
        open(go, "w").close()
        jobs = [wait_terminal(api, i, time.time() + 60 + 5 * args.jobs) for i in ids]
        handoff = [(at(b, "dispatching") - at(a, a["state"])) * 1000
                   for a, b in zip(jobs, jobs[1:])]
    finally:
        stop_dev(dev)

    figures = {
        "submit_to_running_p50_ms": round(pct(idle, 50), 1),
        "submit_to_running_p99_ms": round(pct(idle, 99), 1),
        "handoff_p50_ms": round(pct(handoff, 50), 1),
        "handoff_p99_ms": round(pct(handoff, 99), 1),
        "jobs": args.jobs,
    }
    print(f"submit -> running, idle ({len(idle)} jobs): p50 {figures['submit_to_running_p50_ms']} ms, "
          f"p99 {figures['submit_to_running_p99_ms']} ms")
    print(f"hand-off, a job's end -> the next one's claim ({len(handoff)}): "
          f"p50 {figures['handoff_p50_ms']} ms, p99 {figures['handoff_p99_ms']} ms")
    if args.record:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                                capture_output=True, text=True).stdout.strip()
        figures["recorded"] = {"commit": commit, "machine": f"{os.uname().machine}, "
                               f"{os.cpu_count()} cores", "at": time.strftime("%Y-%m-%d")}
        with open(BASELINE, "w") as f:
            json.dump(figures, f, indent=2)
            f.write("\n")
        print(f"bench-local-path: recorded as the baseline in {os.path.relpath(BASELINE, ROOT)}")
        failures = []
    else:
        with open(BASELINE) as f:
            baseline = json.load(f)
        failures = []
        for key, label in (("submit_to_running_p50_ms", "submit -> running p50"),
                           ("handoff_p50_ms", "hand-off p50")):
            bound = FACTOR * baseline[key]
            figures[key + "_bound"] = bound
            if figures[key] > bound:
                failures.append(f"{label} {figures[key]} ms is over {FACTOR:g}x its recorded "
                                f"{baseline[key]} ms ({baseline['recorded']['commit']})")
        figures["failures"] = failures
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=2)
    if failures:
        sys.exit("bench-local-path: FAILED: " + "; ".join(failures))


if __name__ == "__main__":
    main()
