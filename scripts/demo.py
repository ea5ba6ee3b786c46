"""The demo's two AWS-side steps, around the `sortie` CLI that scripts/demo.sh drives:

- `demo.py bucket` creates the state bucket in (local) S3 with boto3 (moto's
  dependency) and prints a runner file that keeps state there;
- `demo.py report` reads `sortie jobs list ENV -o json` on standard input and prints
  each job's latency, then the state file's S3 key and its outputs.
"""
import json
import os
import sys

import boto3

ENDPOINT = os.environ["AWS_ENDPOINT_URL"]
STATE_BUCKET = "sortie-demo-state"
STATE_KEY = "sortie/acme/demo/hello/terraform.tfstate"
s3 = boto3.client("s3", endpoint_url=ENDPOINT, region_name="us-east-1")


def parse_time(text):
    """RFC 3339 with up to nanoseconds (Python's datetime keeps microseconds)."""
    from datetime import datetime
    base, _, frac = text.rstrip("Z").partition(".")
    micros = (frac + "000000")[:6]
    return datetime.fromisoformat(f"{base}.{micros}+00:00")


def bucket():
    try:
        s3.create_bucket(Bucket=STATE_BUCKET)
    except s3.exceptions.BucketAlreadyOwnedByYou:
        pass
    print(f"""description: local runner for the demo, state in (local) S3
runner_configuration:
  type: local
  timeout_seconds: 600
state_storage_configuration:
  type: s3
  bucket: {STATE_BUCKET}
  key_prefix: sortie/
  region: us-east-1
  endpoint: {ENDPOINT}""")


def report():
    page = json.load(sys.stdin)
    for job in reversed(page["jobs"]):
        seen = {t["to"]: t["at"] for t in job["transitions"]}

        def ms(a, b):
            return round((parse_time(seen[b]) - parse_time(seen[a])).total_seconds() * 1000, 1)

        if "running" in seen and job["state"] in seen:
            print(f"demo: {job['operation']} {job['id']} latency: submitted -> claimed {ms('queued', 'dispatching')} ms, "
                  f"-> task running {ms('queued', 'running')} ms, -> {job['state']} {ms('queued', job['state'])} ms")
    state = json.loads(s3.get_object(Bucket=STATE_BUCKET, Key=STATE_KEY)["Body"].read())
    outputs = state.get("outputs") or next(
        (m.get("outputs", {}) for m in state.get("modules", []) if m.get("path") == ["root"]), {})
    print(f"demo: state file s3://{STATE_BUCKET}/{STATE_KEY}")
    print(f"demo: outputs {json.dumps({k: v.get('value') for k, v in outputs.items()})}")


{"bucket": bucket, "report": report}[sys.argv[1]]()
