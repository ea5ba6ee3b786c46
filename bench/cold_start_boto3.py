"""The boto3 side of the cold-start benchmark (scripts/bench-cold-start.py).

A Python handler as a team would write it with boto3: at init it creates the clients a
Sortie function uses (DynamoDB, SQS, EventBridge, S3, ECS, STS), then it asks the
Lambda Runtime API for its first invocation, as the Python runtime's own loop does.
The benchmark stops it there: the time to that request is its cold start.
"""

import json
import os
import urllib.request

import boto3

CLIENTS = [boto3.client(name) for name in ("dynamodb", "sqs", "events", "s3", "ecs", "sts")]


def main():
    api = os.environ["AWS_LAMBDA_RUNTIME_API"]
    while True:
        with urllib.request.urlopen(f"http://{api}/2018-06-01/runtime/invocation/next") as r:
            request_id = r.headers["Lambda-Runtime-Aws-Request-Id"]
            event = json.load(r)
        answer = urllib.request.Request(
            f"http://{api}/2018-06-01/runtime/invocation/{request_id}/response",
            data=json.dumps(event).encode(),
            method="POST",
        )
        urllib.request.urlopen(answer).close()


if __name__ == "__main__":
    main()
