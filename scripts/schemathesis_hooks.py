"""schemathesis hooks for scripts/schemathesis.sh (schemathesis 4.32.5, pinned in
scripts/requirements-schemathesis.txt). They shape the stateful phase only, which
the configuration (scripts/schemathesis.toml) cannot do per phase.

1. Roots. The stateful phase starts its chains only at "root" operations, and its
   dependency analysis refuses a create as a root when a path parameter names a
   resource no operation returns: `{group}` on every create under /v1/groups (Sortie
   has no group resource; groups exist by path). So no create ever started a chain and
   the phase covered none of the document's links. Every POST whose responses declare
   OpenAPI `links` is a root too: the document itself says a chain starts there.
2. A job's configuration. A submit needs a `source` or inline `files`, a rule between
   two fields the document cannot state; in the stateful phase a submit that has
   neither gets an empty inline `main.tf`, so the submit's links (get, cancel, logs,
   approve, outputs) are followed. The fuzzing phase still sends both forms.
3. A runner's files. A runner file holds one of four runner types and three state
   storage types, each with its own rules (ARNs, bucket names, clusters), which
   generated data seldom all meets; in the stateful phase a runner create or update
   gets the fixture's `local` runner and `local` state storage (the rest of the file
   stays generated), so the runner's links (get, update, delete, check) are followed.
"""
import os

import schemathesis
from schemathesis.generation.meta import TestPhase
from schemathesis.specs.openapi import stateful

_is_likely_root = stateful.is_likely_root_transition


def _declares_links(operation) -> bool:
    responses = (operation.definition.raw or {}).get("responses") or {}
    return any(isinstance(r, dict) and r.get("links") for r in responses.values())


def _is_root(operation, node, produced_anywhere) -> bool:
    if operation.method == "post" and _declares_links(operation):
        return True
    return _is_likely_root(operation, node, produced_anywhere)


stateful.is_likely_root_transition = _is_root


@schemathesis.hook("before_call").apply_to(method="POST", path="/v1/environments/{environment}/-/jobs")
def inline_configuration(context, case, kwargs):
    meta = case.meta
    if meta is None or meta.phase.name != TestPhase.STATEFUL or not isinstance(case.body, dict):
        return
    if not case.body.get("source") and not case.body.get("files"):
        case.body["files"] = {"main.tf": ""}


@schemathesis.hook("before_call").apply_to(path="/v1/groups/{group}/-/runners/{name}")
def local_runner(context, case, kwargs):
    meta = case.meta
    if meta is None or meta.phase.name != TestPhase.STATEFUL or not isinstance(case.body, dict):
        return
    if case.method.upper() not in ("POST", "PUT"):
        return
    case.body["runner_configuration"] = {"type": "local", "timeout_seconds": 120}
    case.body["state_storage_configuration"] = {
        "type": "local",
        "directory": os.environ.get("SORTIE_STATE_DIR", "/tmp/sortie-schemathesis-state"),
    }
