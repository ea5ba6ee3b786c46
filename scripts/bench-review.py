"""Reviewed applies and drift checks through `sortie dev`: the control plane's own latencies.

    cargo build -p sortie-cli
    scripts/with-moto.sh .tools/venv/bin/python scripts/bench-review.py \
        [--jobs 20] [--drift 20] [--sortie target/debug/sortie]

Starts `sortie dev --user bob` against the moto of scripts/with-moto.sh with a runner
that reports an empty summary and exits 0 at once (so every figure is the control
plane's and moto's, not terraform's), then:

- `--jobs` reviewed applies, one per environment (`approval: required`): each plan
  phase ends `awaiting_approval`; bob approves each; the apply phase runs. From the
  jobs' own transitions: runner exit -> awaiting_approval recorded, approve ->
  apply phase claimed (`dispatching`), approve -> `running`, approve -> succeeded;
- `--drift` environments with a drift schedule and one successful apply each, whose
  next fire is then made due (DynamoDB `next_drift_at` set in the past, the one
  time travel): due -> drift check submitted (the check job's creation), and
  due -> result recorded on the environment (`drift.checked_at`), with `sortie dev`
  sweeping every second (the deployed sweeper runs every minute).
"""

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
import importlib.util

import boto3

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The helpers bench-e2e.py already has: RFC 3339 parsing, percentiles, the API client.
_spec = importlib.util.spec_from_file_location("bench_e2e", os.path.join(ROOT, "scripts", "bench-e2e.py"))
_e2e = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_e2e)
parse_time, pct, Api = _e2e.parse_time, _e2e.pct, _e2e.Api

RUNNER = """#!/bin/sh
# Reports an empty summary (no changes) with its job token, then exits 0 at once.
curl -s -o /dev/null -X PUT -H "Authorization: Bearer $SORTIE_JOB_TOKEN" \\
  -H 'Content-Type: application/json' \\
  -d '{"add":0,"change":0,"destroy":0,"has_changes":false}' \\
  "$SORTIE_API_URL/v1/jobs/$SORTIE_JOB_ID/summary"
exit 0
"""


def wait(what, check, limit=120):
    deadline = time.time() + limit
    while True:
        got = check()
        if got:
            return got
        if time.time() > deadline:
            sys.exit(f"timed out waiting for {what}")
        time.sleep(0.1)


def at(job, state):
    times = [parse_time(t["at"]) for t in job["transitions"] if t["to"] == state]
    return times[-1] if times else None


def row(name, values):
    print(f"| {name} | {pct(values, 50):.0f} ms | {pct(values, 99):.0f} ms | {len(values)} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=20)
    ap.add_argument("--drift", type=int, default=20)
    ap.add_argument("--sortie", default=os.path.join(ROOT, "target/debug/sortie"))
    args = ap.parse_args()
    endpoint = os.environ.get("AWS_ENDPOINT_URL")
    if not endpoint:
        sys.exit("bench-review.py: run it under scripts/with-moto.sh")
    work = tempfile.mkdtemp(prefix="sortie-bench-review-")
    runner = os.path.join(work, "runner.sh")
    with open(runner, "w") as f:
        f.write(RUNNER)
    os.chmod(runner, 0o755)
    stamp = str(int(time.time() * 1000))
    table = f"bench-review-{stamp}"
    ready = os.path.join(work, "ready.json")
    log = open(os.path.join(work, "dev.log"), "w")
    dev = subprocess.Popen(
        [args.sortie, "dev", "--table", table, "--queue", f"bench-review-jobs-{stamp}",
         "--bucket", f"bench-review-artifacts-{stamp}", "--bus", f"bench-review-{stamp}",
         "--work-dir", work, "--runner", runner, "--ready-file", ready,
         "--sweep-every", "1", "--user", "bob"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        wait("sortie dev", lambda: os.path.exists(ready) and os.path.getsize(ready) > 0, 60)
        with open(ready) as f:
            r = json.load(f)
        api, bob = Api(r["url"], r["token"]), Api(r["url"], r["users"]["bob"])
        api.call("POST", "/v1/groups/acme/-/runners/local", {
            "runner_configuration": {"type": "local"},
            "state_storage_configuration": {"type": "local", "directory": os.path.join(work, "state")}})
        api.call("POST", "/v1/groups/acme/-/rules", {"id": "default", "runner_id": "acme/local"})
        api.call("POST", "/v1/groups/acme/-/memberships",
                 {"role": "deployer", "grantee": {"kind": "subject", "subject": "bob"}})

        # Reviewed applies.
        exit_to_awaiting, approve_to_claim, approve_to_running, approve_to_done = [], [], [], []
        for i in range(args.jobs):
            api.call("POST", "/v1/groups/acme/review/-/environments",
                     {"name": f"r{i}", "env_type": "production", "approval": "required"})
        ids = [api.call("POST", f"/v1/environments/acme/review/r{i}/-/jobs",
                        {"operation": "apply", "files": {"main.tf": ""}})["id"]
               for i in range(args.jobs)]
        for i in ids:
            job = wait(f"{i} awaiting approval", lambda: (lambda j: j if j["state"] == "awaiting_approval" else None)(api.call("GET", f"/v1/jobs/{i}")))
            exit_file = os.path.join(work, "jobs", f"{i}.1.exit")
            if os.path.exists(exit_file):
                exit_to_awaiting.append((at(job, "awaiting_approval") - os.path.getmtime(exit_file)) * 1000)
        approved_at = {}
        for i in ids:
            approved_at[i] = time.time()
            bob.call("POST", f"/v1/jobs/{i}/approve", {"comment": "bench"})
        terminal = {"succeeded", "failed", "canceled", "timed_out", "discarded"}
        for i in ids:
            job = wait(f"{i} done", lambda: (lambda j: j if j["state"] in terminal else None)(api.call("GET", f"/v1/jobs/{i}")))
            if job["state"] != "succeeded":
                sys.exit(f"job {i} ended {job['state']}: {job['transitions'][-1]['reason']}")
            approved = at(job, "queued")  # the approval's own transition
            approve_to_claim.append((at(job, "dispatching") - approved) * 1000)
            approve_to_running.append((at(job, "running") - approved) * 1000)
            approve_to_done.append((at(job, "succeeded") - approved) * 1000)

        # Drift checks.
        ddb = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1")
        envs = [f"acme/drift/d{i}" for i in range(args.drift)]
        for e in envs:
            api.call("POST", "/v1/groups/acme/drift/-/environments",
                     {"name": e.rsplit("/", 1)[1], "env_type": "development",
                      "drift_schedule": "0 0 1 1 *"})
            j = api.call("POST", f"/v1/environments/{e}/-/jobs",
                         {"operation": "apply", "files": {"main.tf": ""}})["id"]
            wait(f"{j} applied", lambda: api.call("GET", f"/v1/jobs/{j}")["state"] == "succeeded")
        due = {}
        for e in envs:
            # As chrono's serde writes a time (`Z`, milliseconds here): advance_drift's
            # condition compares the stored text.
            past = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=1)).strftime(
                "%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
            ddb.update_item(TableName=table, Key={"pk": {"S": f"ENV#{e}"}, "sk": {"S": "ENV"}},
                            UpdateExpression="SET next_drift_at = :t, gsi3sk = :s",
                            ExpressionAttributeValues={":t": {"S": past}, ":s": {"S": f"{past}#{e}"}})
            due[e] = time.time()
        due_to_submitted, due_to_recorded, verdicts = [], [], {}
        for e in envs:
            env = wait(f"{e} drift", lambda: (lambda v: v if v.get("drift") else None)(api.call("GET", f"/v1/environments/{e}")))
            check = api.call("GET", f"/v1/jobs/{env['drift']['job_id']}")
            due_to_submitted.append((parse_time(check["transitions"][0]["at"]) - due[e]) * 1000)
            due_to_recorded.append((parse_time(env["drift"]["checked_at"]) - due[e]) * 1000)
            verdicts[env["drift"]["status"]] = verdicts.get(env["drift"]["status"], 0) + 1

        print(f"{args.jobs} reviewed applies and {args.drift} drift checks through sortie dev (runners that exit at once)")
        print(f"drift verdicts: {verdicts}")
        print("| | p50 | p99 | n |")
        print("|---|---:|---:|---:|")
        row("plan phase's runner exit -> awaiting_approval", exit_to_awaiting)
        row("approve -> apply phase claimed", approve_to_claim)
        row("approve -> apply phase running", approve_to_running)
        row("approve -> succeeded", approve_to_done)
        row("drift due -> check submitted (sweep every 1 s)", due_to_submitted)
        row("drift due -> verdict recorded", due_to_recorded)
        print(f"moto per-call reference: see scripts/bench-e2e.py; sortie dev's log: {log.name}")
    finally:
        dev.terminate()
        try:
            dev.wait(10)
        except subprocess.TimeoutExpired:
            dev.kill()


if __name__ == "__main__":
    main()
