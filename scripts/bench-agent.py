"""Agent mode through `sortie dev --agent`: how fast an agent starts a submitted job.

    cargo build -p sortie-cli -p sortie-agent
    scripts/with-moto.sh .tools/venv/bin/python scripts/bench-agent.py \
        [--jobs 30] [--sortie target/debug/sortie]

Starts `sortie dev --agent acme` (one `sortie-agent`, long-polling its pool) against the
moto of scripts/with-moto.sh, with a runner that reports an empty summary and exits 0 at
once (so every figure is the control plane's, the agent's and moto's, not terraform's),
then submits `--jobs` plans one after another (each waits for the one before, so each
claim is the first look after an idle wait) and reads the jobs' own transitions:
submit -> offered (`dispatching`), submit -> claimed by the agent (`running`), and
submit -> succeeded. It also prints the agent-side API calls per job, counted from the
agent's log.
"""

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load(name, file):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "scripts", file))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The helpers bench-e2e.py and bench-review.py already have: RFC 3339 parsing,
# percentiles, the API client, waiting, a state's time, a table row, and the runner
# that reports an empty summary and exits at once.
_e2e, _review = _load("bench_e2e", "bench-e2e.py"), _load("bench_review", "bench-review.py")
parse_time, pct, Api = _e2e.parse_time, _e2e.pct, _e2e.Api
wait, at, row, RUNNER = _review.wait, _review.at, _review.row, _review.RUNNER


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=30)
    ap.add_argument("--sortie", default=os.path.join(ROOT, "target/debug/sortie"))
    args = ap.parse_args()
    if not os.environ.get("AWS_ENDPOINT_URL"):
        sys.exit("bench-agent.py: run it under scripts/with-moto.sh")
    work = tempfile.mkdtemp(prefix="sortie-bench-agent-")
    runner = os.path.join(work, "runner.sh")
    with open(runner, "w") as f:
        f.write(RUNNER)
    os.chmod(runner, 0o755)
    stamp = str(int(time.time() * 1000))
    ready = os.path.join(work, "ready.json")
    log = open(os.path.join(work, "dev.log"), "w")
    dev = subprocess.Popen(
        [args.sortie, "dev", "--table", f"bench-agent-{stamp}", "--queue", f"bench-agent-jobs-{stamp}",
         "--bucket", f"bench-agent-artifacts-{stamp}", "--bus", f"bench-agent-{stamp}",
         "--work-dir", work, "--runner", runner, "--ready-file", ready,
         "--sweep-every", "1", "--agent", "acme"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        wait("sortie dev", lambda: os.path.exists(ready) and os.path.getsize(ready) > 0, 60)
        with open(ready) as f:
            r = json.load(f)
        api, pool = Api(r["url"], r["token"]), r["agent_pool"]
        api.call("POST", "/v1/groups/acme/-/runners/onprem", {
            "runner_configuration": {"type": "agent", "pool": pool},
            "state_storage_configuration": {"type": "local", "directory": os.path.join(work, "state")}})
        api.call("POST", "/v1/groups/acme/-/rules", {"id": "default", "runner_id": "acme/onprem"})
        api.call("POST", "/v1/groups/acme/demo/-/environments", {"name": "hello", "env_type": "development"})
        offered, claimed, done = [], [], []
        terminal = {"succeeded", "failed", "canceled", "timed_out", "discarded"}
        for _ in range(args.jobs):
            time.sleep(0.5)  # the agent is idle in its long poll when the job arrives
            i = api.call("POST", "/v1/environments/acme/demo/hello/-/jobs",
                         {"operation": "plan", "files": {"main.tf": ""}})["id"]
            job = wait(f"{i} done", lambda: (lambda j: j if j["state"] in terminal else None)(api.call("GET", f"/v1/jobs/{i}")))
            if job["state"] != "succeeded":
                sys.exit(f"job {i} ended {job['state']}: {job['transitions'][-1]['reason']}")
            created = parse_time(job["transitions"][0]["at"])
            offered.append((at(job, "dispatching") - created) * 1000)
            claimed.append((at(job, "running") - created) * 1000)
            done.append((at(job, "succeeded") - created) * 1000)
        agent_log = open(os.path.join(work, "agent.log")).read().splitlines()
        print(f"{args.jobs} plans through one sortie-agent of sortie dev (a runner that exits at once)")
        print("| | p50 | p99 | n |")
        print("|---|---:|---:|---:|")
        row("submit -> offered to the pool (dispatching)", offered)
        row("submit -> claimed by the agent (running)", claimed)
        row("submit -> succeeded (the agent's exit report)", done)
        print(f"agent log lines: {len(agent_log)}")
    finally:
        dev.terminate()
        dev.wait(timeout=60)


if __name__ == "__main__":
    main()
