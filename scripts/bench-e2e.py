"""End to end through `sortie dev`: many jobs, runners that exit at once, latencies.

    scripts/with-moto.sh .tools/venv/bin/python scripts/bench-e2e.py \
        [--jobs 200] [--envs 20] [--sortie target/debug/sortie]

Starts `sortie dev` against the moto of scripts/with-moto.sh with a runner that
exits 0 at once (so every figure is the control plane's and moto's), creates one
runner, one rule and `--envs` environments, submits `--jobs` plans round robin,
(from 8 clients at once), waits until every job is terminal, then prints, from the jobs' own transitions
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
  bottleneck, and every latency above includes its queue).
"""

import argparse
import concurrent.futures
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

import boto3

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_time(text):
    # RFC 3339 with up to nanoseconds; Python takes microseconds.
    text = text.replace("Z", "+00:00")
    if "." in text:
        head, rest = text.split(".", 1)
        frac, zone = rest[: rest.index("+")], rest[rest.index("+"):]
        text = f"{head}.{frac[:6].ljust(6, '0')}{zone}"
    return dt.datetime.fromisoformat(text).timestamp()


def pct(values, p):
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(p / 100 * len(ordered) + 0.5) - 1))
    return ordered[k]


class Api:
    def __init__(self, url, token):
        self.url, self.token = url, token

    def call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.token}")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=30) as r:
            text = r.read()
            return json.loads(text) if text else None


def moto_cpu_seconds(endpoint):
    """CPU seconds used so far by the moto server listening on `endpoint`'s port."""
    port = endpoint.rsplit(":", 1)[1].strip("/")
    total = 0.0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
            if not any(b"moto_server" in a for a in args) or port.encode() not in args:
                continue
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except OSError:
            continue
    return total


def moto_floor(endpoint, table):
    ddb = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1")
    samples = []
    for _ in range(200):
        t = time.perf_counter()
        ddb.get_item(TableName=table, Key={"pk": {"S": "bench"}, "sk": {"S": "floor"}})
        samples.append((time.perf_counter() - t) * 1000)
    return statistics.median(samples)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--envs", type=int, default=20)
    ap.add_argument("--sortie", default=os.path.join(ROOT, "target/debug/sortie"))
    ap.add_argument("--json", help="also write the figures to this file (scripts/bench.py)")
    args = ap.parse_args()
    endpoint = os.environ.get("AWS_ENDPOINT_URL")
    if not endpoint:
        sys.exit("bench-e2e.py: run it under scripts/with-moto.sh")

    work = tempfile.mkdtemp(prefix="sortie-bench-e2e-")
    runner = os.path.join(work, "runner.sh")
    with open(runner, "w") as f:
        f.write("#!/bin/sh\nexit 0\n")
    os.chmod(runner, 0o755)
    stamp = str(int(time.time() * 1000))
    table = f"bench-{stamp}"
    ready = os.path.join(work, "ready.json")
    log = open(os.path.join(work, "dev.log"), "w")
    dev = subprocess.Popen(
        [args.sortie, "dev", "--table", table, "--queue", f"bench-jobs-{stamp}",
         "--bucket", f"bench-artifacts-{stamp}", "--bus", f"bench-{stamp}",
         "--work-dir", work, "--runner", runner, "--ready-file", ready],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.time() + 60
        while not (os.path.exists(ready) and os.path.getsize(ready) > 0):
            if time.time() > deadline or dev.poll() is not None:
                sys.exit(f"sortie dev did not start; see {log.name}")
            time.sleep(0.1)
        with open(ready) as f:
            r = json.load(f)
        api = Api(r["url"], r["token"])
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
        moto_before = moto_cpu_seconds(endpoint)
        # Submitted by 8 clients at once, so environments build queues of waiting jobs.
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            ids = list(pool.map(
                lambda i: api.call("POST", f"/v1/environments/{envs[i % len(envs)]}/-/jobs",
                                   {"operation": "plan", "files": {"main.tf": ""}})["id"],
                range(args.jobs)))
        terminal = {"succeeded", "failed", "canceled", "timed_out"}
        jobs = {}
        deadline = time.time() + 30 + args.jobs * 2
        pending = list(ids)
        while pending:
            if time.time() > deadline:
                sys.exit(f"{len(pending)} jobs did not finish; see {log.name}")
            still = []
            for i in pending:
                job = api.call("GET", f"/v1/jobs/{i}")
                (jobs.__setitem__(i, job) if job["state"] in terminal else still.append(i))
            pending = still
            if pending:
                time.sleep(0.5)
        finished = time.time()
        moto_busy = (moto_cpu_seconds(endpoint) - moto_before) / (finished - started)

        def at(job, state):
            times = [parse_time(t["at"]) for t in job["transitions"] if t["to"] == state]
            return times[-1] if times else None

        to_running, to_terminal, exit_to_terminal, release_to_claim = [], [], [], []
        by_env = {}
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
                exit_to_terminal.append((end - os.path.getmtime(exit_file)) * 1000)
            by_env.setdefault(job["environment"], []).append((at(job, "dispatching"), end, submitted))
        for runs in by_env.values():
            runs.sort()
            # Only a job that was already waiting when the one before it ended.
            for (_, end, _), (claimed, _, queued) in zip(runs, runs[1:]):
                if claimed and queued < end <= claimed:
                    release_to_claim.append((claimed - end) * 1000)
        states = {}
        for job in jobs.values():
            states[job["state"]] = states.get(job["state"], 0) + 1

        print(f"{args.jobs} jobs over {args.envs} environments, runners that exit at once")
        print(f"states: {states}")
        print(f"jobs per second: {args.jobs / (finished - started):.1f}")
        print(f"moto's per-call floor (DynamoDB GetItem, median of 200): {floor:.1f} ms")
        print(f"moto's CPU while the jobs ran: {moto_busy * 100:.0f}% of one core")
        print("| | p50 (ms) | p99 (ms) | n |")
        print("|---|---:|---:|---:|")
        latencies = {}
        for name, values in [("submit -> running", to_running),
                             ("submit -> terminal", to_terminal),
                             ("runner exit -> terminal", exit_to_terminal),
                             ("release -> next claim", release_to_claim)]:
            print(f"| {name} | {pct(values, 50):.1f} | {pct(values, 99):.1f} | {len(values)} |")
            latencies[name] = {"p50_ms": pct(values, 50), "p99_ms": pct(values, 99), "n": len(values)}
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"jobs": args.jobs, "envs": args.envs, "states": states,
                           "jobs_per_s": args.jobs / (finished - started),
                           "moto_floor_ms": floor, "moto_cpu": moto_busy,
                           "latencies": latencies}, f, indent=2)
    finally:
        dev.terminate()
        try:
            dev.wait(timeout=10)
        except subprocess.TimeoutExpired:
            dev.kill()


if __name__ == "__main__":
    main()
