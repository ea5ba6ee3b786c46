"""A short scenario against `sortie dev` through nothing but a generated client.

Run by scripts/generated-client.sh, which generates the package `sortie_client` with
openapi-python-client from the document `sortie dev` serves and puts it on PYTHONPATH.
It creates a runner, a rule and a nested environment (acme/payments/dev, whose path
the client percent-encodes as one segment), submits a plan and waits for it, reads its
log and outputs, applies and reads the apply's outputs, then deletes the environment.
Any answer the client cannot parse, or an unexpected status, fails the scenario.

Environment: SORTIE_READY (the ready file of `sortie dev`: url and token),
SORTIE_STATE_DIR (the local runner's state directory).
"""

import json
import os
import sys
import time

from sortie_client import AuthenticatedClient
from sortie_client.api.environments import (
    create_environment,
    delete_environment,
    get_environment,
    get_environment_outputs,
)
from sortie_client.api.jobs import get_job, get_job_logs, get_job_outputs, submit_job
from sortie_client.api.meta import health
from sortie_client.api.rules import create_rule, get_rule
from sortie_client.api.runners import create_runner, get_runner
from sortie_client.models import (
    EnvironmentCreate,
    EnvironmentCreated,
    EnvironmentView,
    ErrorBody,
    Health,
    JobRequest,
    JobState,
    JobView,
    LogsPage,
    OutputsView,
    RuleCreate,
    RunnerSpec,
    RunnerView,
)

GROUP = "acme/payments"
ENVIRONMENT = "acme/payments/dev"
MAIN_TF = 'output "greeting" {\n  value = "hello from a generated client"\n}\n'
TERMINAL = {
    JobState.SUCCEEDED,
    JobState.FAILED,
    JobState.CANCELED,
    JobState.TIMED_OUT,
    JobState.DISCARDED,
}


def step(text):
    print(f"generated client: {text}", flush=True)


def expect(response, status, model):
    """The parsed answer of `response`, which must have `status` and parse as `model`."""
    body = response.content.decode("utf-8", "replace")
    assert response.status_code == status, f"want {status}, got {response.status_code}: {body}"
    assert isinstance(response.parsed, model), f"want a {model.__name__}, got {response.parsed!r}: {body}"
    return response.parsed


def wait(client, job_id, timeout=120):
    """The job once terminal (or awaiting approval)."""
    deadline = time.monotonic() + timeout
    while True:
        job = expect(get_job.sync_detailed(job_id, client=client), 200, JobView)
        if job.state in TERMINAL or job.state == JobState.AWAITING_APPROVAL:
            return job
        assert time.monotonic() < deadline, f"job {job_id} is still {job.state.value}"
        time.sleep(0.5)


def log_of(client, job_id):
    text, offset = "", 0
    while True:
        page = expect(get_job_logs.sync_detailed(job_id, client=client, offset=offset), 200, LogsPage)
        text += page.data
        if not page.more:
            return text
        offset = page.next_offset


def main():
    ready = json.load(open(os.environ["SORTIE_READY"]))
    state_dir = os.environ["SORTIE_STATE_DIR"]
    client = AuthenticatedClient(base_url=ready["url"], token=ready["token"], timeout=30.0)

    assert expect(health.sync_detailed(client=client), 200, Health).status == "ok"

    step("a runner acme/local and a rule acme:default")
    spec = RunnerSpec.from_dict(
        {
            "description": "local runner for the generated-client scenario",
            "runner_configuration": {"type": "local", "timeout_seconds": 120},
            "state_storage_configuration": {"type": "local", "directory": state_dir},
        }
    )
    runner = expect(create_runner.sync_detailed("acme", "local", client=client, body=spec), 201, RunnerView)
    assert runner.id == "acme/local", runner
    expect(get_runner.sync_detailed("acme", "local", client=client), 200, RunnerView)
    rule = RuleCreate.from_dict({"id": "default", "runner_id": "acme/local"})
    expect(create_rule.sync_detailed("acme", client=client, body=rule), 201, object)
    expect(get_rule.sync_detailed("acme", "default", client=client), 200, object)

    step(f"the nested environment {ENVIRONMENT}, its path sent percent-encoded")
    body = EnvironmentCreate.from_dict({"name": "dev", "env_type": "development"})
    created = expect(create_environment.sync_detailed(GROUP, client=client, body=body), 201, EnvironmentCreated)
    assert created.path == ENVIRONMENT, created
    assert created.runner.runner_id == "acme/local", created
    # The client writes the path as one encoded segment: the canonical form.
    url = get_environment._get_kwargs(ENVIRONMENT)["url"]
    assert url == "/v1/environments/acme%2Fpayments%2Fdev", url
    env = expect(get_environment.sync_detailed(ENVIRONMENT, client=client), 200, EnvironmentView)
    assert env.path == ENVIRONMENT, env

    step("a plan, waited for, with its log and outputs")
    request = JobRequest.from_dict({"operation": "plan", "files": {"main.tf": MAIN_TF}})
    plan = expect(submit_job.sync_detailed(ENVIRONMENT, client=client, body=request), 201, JobView)
    assert plan.environment == ENVIRONMENT, plan
    plan = wait(client, plan.id)
    assert plan.state == JobState.SUCCEEDED, f"{plan.id} {plan.state.value}: {log_of(client, plan.id)}"
    log = log_of(client, plan.id)
    assert "terraform plan" in log and "plan succeeded" in log, log
    # A plan has no outputs: the error envelope, parsed by the client.
    missing = expect(get_job_outputs.sync_detailed(plan.id, client=client), 404, ErrorBody)
    assert "only a succeeded apply" in missing.error.message, missing

    step("an apply, and its outputs")
    request = JobRequest.from_dict({"operation": "apply", "files": {"main.tf": MAIN_TF}})
    apply = expect(submit_job.sync_detailed(ENVIRONMENT, client=client, body=request), 201, JobView)
    apply = wait(client, apply.id)
    assert apply.state == JobState.SUCCEEDED, f"{apply.id} {apply.state.value}: {log_of(client, apply.id)}"
    for response in (
        get_job_outputs.sync_detailed(apply.id, client=client),
        get_environment_outputs.sync_detailed(ENVIRONMENT, client=client),
    ):
        outputs = expect(response, 200, OutputsView)
        assert outputs.outputs["greeting"].value == "hello from a generated client", outputs

    step(f"{ENVIRONMENT} deleted")
    response = delete_environment.sync_detailed(ENVIRONMENT, client=client)
    assert response.status_code == 204, response.content
    gone = expect(get_environment.sync_detailed(ENVIRONMENT, client=client), 404, ErrorBody)
    assert gone.error.code == "not_found", gone
    step("passed")


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print(f"generated client: FAILED: {e}", file=sys.stderr)
        sys.exit(1)
