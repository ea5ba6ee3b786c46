"""End to end through `sortie dev`: many jobs, runners that exit at once, latencies.

    scripts/with-moto.sh .tools/venv/bin/python scripts/bench-e2e.py \
        [--jobs 200] [--envs 20] [--sortie target/debug/sortie]

Starts `sortie dev` against the moto of scripts/with-moto.sh with a runner that
exits 0 at once (so every figure is the control plane's and moto's; each environment's
first runner holds until every job is submitted, so the later ones wait in its queue),
creates one runner, one rule and `--envs` environments, submits `--jobs` plans (one
client per environment, at most 32, each submitting back to back), waits until every job
is terminal, then prints, from the jobs' own transitions
and the runners' exit files (`<job>.<attempt>.exit`, written by the local
launcher's supervisor the moment the runner ends):

- jobs per second, from the first submit to the last terminal state;
- submit -> running, and submit -> terminal, p50 and p99;
- runner exit -> terminal state recorded, p50 and p99;
- release -> next claim: an environment's job ends and the next one of the
  same environment, already waiting, is claimed (`dispatching`), p50 and p99;
- moto's own per-call floor, measured in the same run: the median of 200
  sequential DynamoDB GetItem calls from this process; and moto's CPU while the
  jobs ran (moto serves one request at a time per GIL: at 100% it is the
  bottleneck, and every latency above includes its queue);
- each of "runner exit -> terminal" and "release -> next claim" split into moto's
  time and Sortie's: moto's is the part of the window in which moto was serving a
  request naming the job (the ended one or the claimed one; a DynamoDB request's
  wait for moto's lock counts as moto's), from the timing wrapper of
  scripts/moto_server.py (patch 5); Sortie's is the rest of the window. That rest
  still holds moto's time for requests that name no job (an environment's read, a
  policy set listing) and the wait in moto's queue; "Sortie's part, moto idle" is
  the window less every moto request, whoever it was for: a lower bound of Sortie's;
- "Sortie's own": the window less the time the job (or, for a release, either job)
  waited on an AWS call, as `sortie dev` timed each call it made for the job (its
  `aws call` debug lines, `sortie_wiring::job_header`: round trip, moto's queue and the
  loopback included), and moto's requests naming it (a receive): what is left is Sortie's
  code, its own queues and waits (pollers, semaphores, sleeps) and the CPU it waited for;
- `--explain N`: the N slowest windows' timelines (the job's transitions, moto's
  requests naming it or made for it, sortie dev's calls for it) and moto's other
  requests in each window; the same for the N slowest "release -> next claim" windows;
- moto's peak resident memory while the jobs ran.
"""

import argparse
import concurrent.futures
import json
import os
import statistics
import sys
import tempfile
import time

import boto3

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_common import (  # noqa: E402
    ROOT,
    aws_waits_by_job,
    TERMINAL,
    MotoProcess,
    intervals_by_job,
    moto_events,
    moto_share,
    parse_time,
    pct,
    start_dev,
    stop_dev,
)


def moto_floor(endpoint, table):
    ddb = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1")
    samples = []
    for _ in range(200):
        t = time.perf_counter()
        ddb.get_item(TableName=table, Key={"pk": {"S": "bench"}, "sk": {"S": "floor"}})
        samples.append((time.perf_counter() - t) * 1000)
    return statistics.median(samples)


def merge(spans):
    """Sorted intervals (moto_share takes them sorted; overlaps are fine)."""
    return sorted(spans)


def timeline(job, job_id, events, exited, calls=(), after=0.5):
    """One job's transitions, moto's requests naming it and sortie dev's AWS calls for it
    (`calls`: as sortie dev saw them), from 1 s before its runner's exit to `after` seconds
    past its terminal state, as offsets from the exit."""
    rows = [(parse_time(t["at"]), f"-> {t['to']}") for t in job["transitions"]]
    rows += [(start, f"sortie {op} ({(end - start) * 1000:.1f} ms round trip)")
             for start, end, op in calls]
    rows += [(start, f"moto {op} ({took * 1000:.1f} ms)")
             for start, took, op, named in events if job_id in named]
    last = max(t for t, _ in rows[: len(job["transitions"])])
    rows = [(t, what) for t, what in rows if exited - 1 <= t <= last + after]
    lines = [f"  {(t - exited) * 1000:+8.1f}  {what}" for t, what in sorted(rows)]
    ended = parse_time(job["transitions"][-1]["at"])
    others = {}
    for start, took, op, named in events:
        if exited <= start <= ended and job_id not in named:
            n, ms = others.get((op, bool(named)), (0, 0.0))
            others[(op, bool(named))] = (n + 1, ms + took * 1000)
    lines.append("  moto's other requests from the exit to the terminal state: " + ", ".join(
        f"{op}{'' if named else ' (no job)'} x{n} {ms:.0f} ms"
        for (op, named), (n, ms) in sorted(others.items(), key=lambda kv: -kv[1][1])))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--envs", type=int, default=20)
    ap.add_argument("--sortie", default=os.path.join(ROOT, "target/debug/sortie"))
    ap.add_argument("--json", help="also write the figures to this file (scripts/bench.py)")
    ap.add_argument("--explain", type=int, default=0, metavar="N",
                    help="print the timelines of the N slowest runner exit -> terminal windows "
                         "(Sortie's part): the job's transitions and moto's requests naming it")
    ap.add_argument("--snapshots", action="store_true",
                    help="keep sortie dev's snapshots of the data dir every 2 s (off: a "
                         "whole-table Scan that is sortie dev's own, not the control plane's)")
    args = ap.parse_args()
    endpoint = os.environ.get("AWS_ENDPOINT_URL")
    if not endpoint:
        sys.exit("bench-e2e.py: run it under scripts/with-moto.sh")

    work = tempfile.mkdtemp(prefix="sortie-bench-e2e-")
    runner = os.path.join(work, "runner.sh")
    go = os.path.join(work, "go")
    with open(runner, "w") as f:
        # Each environment's first runner holds until every job is submitted (the bench
        # creates `go`), so every later job is waiting when the one before it ends (a
        # submit is slower than a job's life here: without the hold no queue forms, and a
        # "release -> next claim" would time a submit racing the release); then every
        # runner exits 0 at once.
        f.write(f'#!/bin/sh\nwhile [ ! -e "{go}" ]; do sleep 0.02; done\nexit 0\n')
    os.chmod(runner, 0o755)
    stamp = str(int(time.time() * 1000))
    table = f"bench-{stamp}"
    # No periodic snapshots of the data dir: a snapshot is a Scan of the whole table that
    # holds moto's DynamoDB lock for a second or more at this size, a cost of `sortie dev`
    # alone (nothing on AWS takes it). `--snapshots` keeps them, to measure that cost.
    # Each AWS call sortie dev makes for a job, timed as it sees it (its debug lines).
    dev, api = start_dev(args.sortie, work, stamp, runner,
                         env={"RUST_LOG": "info,sortie_wiring::job_header=debug"},
                         extra=() if args.snapshots else ("--snapshot-every", "0"))
    log_name = os.path.join(work, "dev.log")
    moto = MotoProcess(endpoint)
    try:
        api.call("POST", "/v1/groups/acme/-/runners/local", {
            "runner_configuration": {"type": "local"},
            "state_storage_configuration": {"type": "local", "directory": os.path.join(work, "state")}})
        api.call("POST", "/v1/groups/acme/-/rules", {"id": "default", "runner_id": "acme/local"})
        envs = [f"acme/bench/e{i}" for i in range(args.envs)]
        for e in envs:
            api.call("POST", "/v1/groups/acme/bench/-/environments",
                     {"name": e.rsplit("/", 1)[1], "env_type": "development"})
        floor = moto_floor(endpoint, table)

        started = time.time()
        moto_before = moto.cpu_seconds()
        moto.start_sampling()
        # One client per environment (at most 32), each submitting its environment's jobs
        # back to back, so every environment builds a queue of waiting jobs however slow
        # a submit is (round robin from a few clients left none once a submit took longer
        # than a job's life, and "release -> next claim" had nothing to measure).
        # When each submit was acknowledged: a job counts as waiting from then on.
        acknowledged = {}

        def submit_all(env):
            out = []
            for _ in range(sum(1 for i in range(args.jobs) if envs[i % len(envs)] == env)):
                out.append(api.call("POST", f"/v1/environments/{env}/-/jobs",
                                    {"operation": "plan", "files": {"main.tf": ""}})["id"])
                acknowledged[out[-1]] = time.time()
            return out

        with concurrent.futures.ThreadPoolExecutor(min(32, len(envs))) as pool:
            batches = list(pool.map(submit_all, envs))
        open(go, "w").close()
        ids = [i for batch in batches for i in batch]
        jobs = {}
        deadline = time.time() + 30 + args.jobs * 2
        # An environment's jobs run one at a time, in order: while waiting, only each
        # environment's last job is polled (the harness's own reads load moto too: one
        # GET of every unfinished job every 0.5 s was ten times as many), then every job
        # is read once.
        pending = [batch[-1] for batch in batches if batch]
        while pending:
            if time.time() > deadline:
                sys.exit(f"{len(pending)} environments did not finish; see {log_name}")
            pending = [i for i in pending
                       if api.call("GET", f"/v1/jobs/{i}")["state"] not in TERMINAL]
            if pending:
                time.sleep(0.5)
        finished = time.time()
        for i in ids:
            jobs[i] = api.call("GET", f"/v1/jobs/{i}")
            if jobs[i]["state"] not in TERMINAL:
                sys.exit(f"{i} is {jobs[i]['state']} after its environment's last job ended")
        moto.stop_sampling()
        moto_busy = (moto.cpu_seconds() - moto_before) / (finished - started)
        events = moto_events(endpoint, started - 1)
        spans = intervals_by_job(events, ids)
        # Waiting on AWS for the job: its calls as sortie dev saw them (round trip, moto's
        # queue and the loopback included) and moto's requests naming it (a receive).
        calls = aws_waits_by_job(log_name, ids)
        waits = {i: sorted([(a, b) for a, b, _ in calls.get(i, [])] + spans.get(i, []))
                 for i in ids}
        # Every moto request, whoever it was for: the window's part in which moto was
        # serving anything bounds Sortie's own part from below.
        busy = sorted((start, start + took) for start, took, _op, _named in events)
        with open(os.path.join(work, "jobs.json"), "w") as f:
            json.dump(jobs, f)

        def at(job, state):
            times = [parse_time(t["at"]) for t in job["transitions"] if t["to"] == state]
            return times[-1] if times else None

        to_running, to_terminal = [], []
        split = {"runner exit -> terminal": ([], [], [], [], []),
                 "release -> next claim": ([], [], [], [], [])}
        by_env = {}
        slowest, slowest_release = [], []
        for i in ids:
            job = jobs[i]
            submitted = parse_time(job["transitions"][0]["at"])
            end = at(job, job["state"])
            running = at(job, "running")
            if running:
                to_running.append((running - submitted) * 1000)
            to_terminal.append((end - submitted) * 1000)
            exit_file = os.path.join(work, "jobs", f"{i}.{job.get('attempt', 1)}.exit")
            if os.path.exists(exit_file):
                exited = os.path.getmtime(exit_file)
                moto_s = moto_share(spans.get(i, []), exited, end)
                total, mine, theirs, idle, own = split["runner exit -> terminal"]
                own.append((end - exited - moto_share(waits[i], exited, end)) * 1000)
                total.append((end - exited) * 1000)
                theirs.append(moto_s * 1000)
                mine.append((end - exited - moto_s) * 1000)
                idle.append((end - exited - moto_share(busy, exited, end)) * 1000)
                slowest.append(((end - exited - moto_s) * 1000, i, exited))
            by_env.setdefault(job["environment"], []).append((at(job, "dispatching"), end, submitted, i))
        for runs in by_env.values():
            runs.sort()
            # Only a job that was already waiting when the one before it ended: its submit
            # was acknowledged by then (a submit still in flight, racing the release, takes
            # the free lock itself, and its window would time the submit).
            for (_, end, _, before), (claimed, _, queued, after) in zip(runs, runs[1:]):
                if claimed and queued < end <= claimed and acknowledged[after] < end:
                    both = sorted(spans.get(before, []) + spans.get(after, []))
                    moto_s = moto_share(both, end, claimed)
                    total, mine, theirs, idle, own = split["release -> next claim"]
                    waited = merge(waits[before] + waits[after])
                    own.append((claimed - end - moto_share(waited, end, claimed)) * 1000)
                    slowest_release.append((own[-1], before, after, end, claimed))
                    total.append((claimed - end) * 1000)
                    theirs.append(moto_s * 1000)
                    mine.append((claimed - end - moto_s) * 1000)
                    idle.append((claimed - end - moto_share(busy, end, claimed)) * 1000)
        states = {}
        for job in jobs.values():
            states[job["state"]] = states.get(job["state"], 0) + 1

        print(f"{args.jobs} jobs over {args.envs} environments, runners that exit at once")
        print(f"states: {states}")
        print(f"jobs per second: {args.jobs / (finished - started):.1f}")
        print(f"moto's per-call floor (DynamoDB GetItem, median of 200): {floor:.1f} ms")
        print(f"moto's CPU while the jobs ran: {moto_busy * 100:.0f}% of one core; "
              f"peak RSS {moto.peak_rss_mib:.0f} MiB")
        print("| | p50 (ms) | p99 (ms) | n |")
        print("|---|---:|---:|---:|")
        latencies = {}
        rows = [("submit -> running", to_running), ("submit -> terminal", to_terminal)]
        for name, (total, mine, theirs, idle, own) in split.items():
            rows += [(name, total), (f"{name}: moto's part", theirs), (f"{name}: Sortie's part", mine),
                     (f"{name}: Sortie's part, moto idle", idle),
                     (f"{name}: Sortie's own, not waiting on AWS for the job", own)]
        for name, values in rows:
            print(f"| {name} | {pct(values, 50):.1f} | {pct(values, 99):.1f} | {len(values)} |")
            latencies[name] = {"p50_ms": pct(values, 50), "p99_ms": pct(values, 99), "n": len(values)}
        for mine_ms, i, exited in sorted(slowest, reverse=True)[: args.explain]:
            print(f"\n{i}: Sortie's part {mine_ms:.0f} ms; offsets from the runner's exit (ms)")
            print(timeline(jobs[i], i, events, exited, calls.get(i, [])))
        for own_ms, before, after, end, claimed in sorted(slowest_release, reverse=True)[: args.explain]:
            print(f"\nrelease {before} -> claim {after}: Sortie's own {own_ms:.0f} ms; "
                  "offsets from the release (ms)")
            rows = [(start, f"{who} sortie {op} ({(stop - start) * 1000:.1f} ms round trip)")
                    for who, job in (("ended", before), ("next", after))
                    for start, stop, op in calls.get(job, [])]
            rows += [(start, f"{'ended' if before in named else 'next'} moto {op} ({took * 1000:.1f} ms)")
                     for start, took, op, named in events if before in named or after in named]
            rows.append((claimed, "-> dispatching (next)"))
            for t, what in sorted(r for r in rows if end - 0.2 <= r[0] <= claimed + 0.1):
                print(f"  {(t - end) * 1000:+8.1f}  {what}")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"jobs": args.jobs, "envs": args.envs, "states": states,
                           "jobs_per_s": args.jobs / (finished - started),
                           "moto_floor_ms": floor, "moto_cpu": moto_busy,
                           "moto_peak_rss_mib": moto.peak_rss_mib,
                           "latencies": latencies}, f, indent=2)
    finally:
        stop_dev(dev)


if __name__ == "__main__":
    main()
