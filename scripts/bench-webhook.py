"""The webhook's answer time through `sortie dev`: GitHub waits 10 s; the goal is p99 <= 100 ms.

    cargo build -p sortie-cli
    scripts/with-moto.sh .tools/venv/bin/python scripts/bench-webhook.py \
        [--deliveries 300] [--sortie target/debug/sortie]

Starts `sortie dev` against the moto of scripts/with-moto.sh (reconciles off), connects
organisation `acme` to a GitHub App (a fresh RSA key; its API URL points at a closed
loopback port, so the work queued is never carried out and costs the answers nothing),
then sends `--deliveries` signed `pull_request` deliveries of about 25 KB each (a real
pull request event is 20 to 30 KB), each with a new `X-GitHub-Delivery`, one after
another, and as many redeliveries of ones already seen. Each answer's wall time is taken
from the request's first byte sent to the 202 read: the signature checked over the raw
body, the connection and its secret (cached), the delivery claimed by a conditional
DynamoDB put on moto, the payload read, the work queued (in memory here; SQS on AWS).
Prints p50, p99 and max for both, and moto's own per-call floor (a GetItem) beside them.
"""

import argparse
import hashlib
import hmac
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
import importlib.util

import boto3

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location("e2e_common", os.path.join(ROOT, "scripts", "e2e_common.py"))
_common = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_common)

SECRET = "bench-webhook-secret-0123456789abcdef"


def payload(number):
    """A `pull_request` "opened" delivery shaped like GitHub's, padded to about 25 KB."""
    repo = {"id": 1, "name": "infra", "full_name": "acme/infra", "private": True,
            "owner": {"login": "acme", "id": 2, "type": "Organization"}}
    return {
        "action": "opened", "number": number,
        "pull_request": {
            "number": number, "state": "open", "draft": False, "merged": False,
            "title": f"Change {number}", "body": "x" * 24_000,
            "user": {"login": "octocat", "id": 3, "type": "User"},
            "head": {"ref": f"change-{number}", "sha": hashlib.sha1(str(number).encode()).hexdigest(),
                     "repo": repo},
            "base": {"ref": "main", "sha": "0" * 40, "repo": repo},
        },
        "repository": repo,
        "installation": {"id": 4},
        "sender": {"login": "octocat", "id": 3, "type": "User"},
    }


def deliver(url, body, delivery):
    signature = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    req = urllib.request.Request(url, data=body, method="POST")
    for k, v in {"Content-Type": "application/json", "X-GitHub-Event": "pull_request",
                 "X-GitHub-Delivery": delivery, "X-Hub-Signature-256": signature,
                 "User-Agent": "GitHub-Hookshot/bench"}.items():
        req.add_header(k, v)
    start = time.perf_counter()
    with urllib.request.urlopen(req, timeout=30) as r:
        r.read()
        status = r.status
    elapsed = (time.perf_counter() - start) * 1000
    if status != 202:
        sys.exit(f"bench-webhook: delivery {delivery} answered {status}")
    return elapsed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--deliveries", type=int, default=300)
    ap.add_argument("--sortie", default=os.path.join(ROOT, "target/debug/sortie"))
    args = ap.parse_args()
    endpoint = os.environ.get("AWS_ENDPOINT_URL")
    if not endpoint:
        sys.exit("bench-webhook.py: run it under scripts/with-moto.sh")
    work = tempfile.mkdtemp(prefix="sortie-bench-webhook-")
    key = subprocess.run(["openssl", "genrsa", "2048"], check=True, capture_output=True, text=True).stdout
    stamp = str(int(time.time() * 1000))
    dev, api = _common.start_dev(args.sortie, work, stamp, "/bin/true", extra=("--reconcile-every", "0"))
    try:
        api.call("PUT", "/v1/groups/acme/-/vcs/github", {
            "app_id": 1, "api_url": "http://127.0.0.1:9", "private_key": key, "webhook_secret": SECRET})
        url = f"{api.url}/v1/vcs/github/acme/webhook"
        bodies = [json.dumps(payload(n)).encode() for n in range(1, args.deliveries + 1)]
        for i in range(5):  # warm: the secret read, the connection, moto's table
            deliver(url, bodies[i], f"warm-{i}-{uuid.uuid4()}")
        ids = [str(uuid.uuid4()) for _ in bodies]
        new = [deliver(url, b, d) for b, d in zip(bodies, ids)]
        again = [deliver(url, b, d) for b, d in zip(bodies, ids)]
        ddb = boto3.client("dynamodb")
        floor = []
        for _ in range(50):
            t = time.perf_counter()
            ddb.get_item(TableName=f"bench-{stamp}", Key={"pk": {"S": "VCS#acme"}, "sk": {"S": "CONN#github"}})
            floor.append((time.perf_counter() - t) * 1000)
        pct = _common.pct
        print(f"| deliveries | count | p50 | p99 | max |")
        print(f"|---|---:|---:|---:|---:|")
        for name, v in (("new (claimed, queued)", new), ("redelivered (seen: nothing queued)", again)):
            print(f"| {name} | {len(v)} | {pct(v, 50):.1f} ms | {pct(v, 99):.1f} ms | {max(v):.1f} ms |")
        print(f"| moto's floor: one GetItem from Python | {len(floor)} | {pct(floor, 50):.1f} ms | {pct(floor, 99):.1f} ms | {max(floor):.1f} ms |")
        print(f"goal p99 <= 100 ms: {'met' if pct(new, 99) <= 100 else 'NOT met'}")
    finally:
        dev.terminate()
        dev.wait(timeout=30)


if __name__ == "__main__":
    main()
