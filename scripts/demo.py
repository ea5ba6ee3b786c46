"""Drives `sortie dev` like a user would: runner, rule, environment, then a plan and
an apply of examples/hello, following each log live. Standard library only, plus
boto3 (moto's dependency) to create and read the state bucket."""
import json
import os
import pathlib
import sys
import time
import urllib.error
import urllib.request

import boto3

ready = json.loads(pathlib.Path(sys.argv[1]).read_text())
URL, TOKEN = ready["url"], ready["token"]
ENDPOINT = os.environ["AWS_ENDPOINT_URL"]
STATE_BUCKET = "sortie-demo-state"


def call(method, path, body=None, content_type="application/json"):
    data = None
    if body is not None:
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    req = urllib.request.Request(URL + path, data=data, method=method)
    req.add_header("Authorization", f"Bearer {TOKEN}")
    if data is not None:
        req.add_header("Content-Type", content_type)
    try:
        with urllib.request.urlopen(req) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def parse_time(text):
    """RFC 3339 with up to nanoseconds (Python's datetime keeps microseconds)."""
    from datetime import datetime
    base, _, frac = text.rstrip("Z").partition(".")
    micros = (frac + "000000")[:6]
    return datetime.fromisoformat(f"{base}.{micros}+00:00")


def must(expected, result, what):
    status, body = result
    if status != expected:
        sys.exit(f"demo: {what} answered {status}: {json.dumps(body, indent=2)}")
    return body


s3 = boto3.client("s3", endpoint_url=ENDPOINT, region_name="us-east-1")
try:
    s3.create_bucket(Bucket=STATE_BUCKET)
except s3.exceptions.BucketAlreadyOwnedByYou:
    pass

runner = f"""description: local runner for the demo, state in (local) S3
runner_configuration:
  type: local
  timeout_seconds: 600
state_storage_configuration:
  type: s3
  bucket: {STATE_BUCKET}
  key_prefix: sortie/
  region: us-east-1
  endpoint: {ENDPOINT}
"""
must(201, call("POST", "/v1/groups/acme/-/runners/local", runner, "application/yaml"), "creating the runner")
print("demo: runner acme/local created")
must(201, call("POST", "/v1/groups/acme/-/rules", {"id": "default", "runner_id": "acme/local"}), "creating the rule")
print("demo: rule acme:default -> acme/local")
env = must(201, call("POST", "/v1/groups/acme/demo/-/environments", {"name": "hello", "env_type": "development"}), "creating the environment")
print(f"demo: environment {env['path']} linked to {env['runner']['runner_id']} by rule {env['resolution']['rule']['id']}")

files = {p.name: p.read_text() for p in sorted(pathlib.Path("examples/hello").glob("*.tf"))}
variables = {"greeting": "Hello from Sortie"}


def run(operation):
    job = must(201, call("POST", "/v1/environments/acme/demo/hello/-/jobs",
                         {"operation": operation, "source": {"type": "inline"}, "files": files, "variables": variables}),
               f"submitting the {operation}")
    print(f"demo: {operation} job {job['id']} queued; following its log")
    offset, deadline = 0, time.time() + 110
    while time.time() < deadline:
        logs = must(200, call("GET", f"/v1/jobs/{job['id']}/logs?offset={offset}"), "reading the log")
        if logs["data"]:
            sys.stdout.write("".join(f"  | {line}\n" for line in logs["data"].splitlines()))
            sys.stdout.flush()
        offset = logs["next_offset"]
        if not logs["more"]:
            break
        time.sleep(0.5)
    final = must(200, call("GET", f"/v1/jobs/{job['id']}"), "reading the job")
    summary = final.get("summary") or {}
    seen = {t["to"]: t["at"] for t in final["transitions"]}
    def ms(a, b):
        return round((parse_time(seen[b]) - parse_time(seen[a])).total_seconds() * 1000, 1)
    if "running" in seen:
        print(f"demo: latency: submitted -> claimed {ms('queued', 'dispatching')} ms, -> runner started {ms('queued', 'running')} ms, -> {final['state']} {ms('queued', final['state'])} ms")
    print(f"demo: {operation} {final['state']}: {final['transitions'][-1]['reason']}")
    print(f"demo: changes: {summary.get('add', '?')} to add, {summary.get('change', '?')} to change, {summary.get('destroy', '?')} to destroy")
    if final["state"] != "succeeded":
        sys.exit(f"demo: the {operation} did not succeed")
    return final


run("plan")
run("apply")
key = "sortie/acme/demo/hello/terraform.tfstate"
state = json.loads(s3.get_object(Bucket=STATE_BUCKET, Key=key)["Body"].read())
outputs = state.get("outputs") or next((m.get("outputs", {}) for m in state.get("modules", []) if m.get("path") == ["root"]), {})
print(f"demo: state file s3://{STATE_BUCKET}/{key}")
print(f"demo: outputs {json.dumps({k: v.get('value') for k, v in outputs.items()})}")
