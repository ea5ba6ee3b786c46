"""moto_server, with DynamoDB requests served one at a time.

    .tools/venv/bin/python scripts/moto_server.py -H 127.0.0.1 -p PORT

Takes the same flags as `.tools/venv/bin/moto_server` and runs the same
threaded server (moto.server.main), after three patches:

1. Every DynamoDB (and DynamoDB Streams) request is handled under a single
   process-wide lock (below).
2. IAM SimulatePrincipalPolicy, which moto 5.2.5 does not have, is answered
   for a role from the role's own inline and attached policies, evaluated by
   moto's IAM policy engine (moto/iam/access_control.py), with the request's
   ContextEntries as condition values. `runner check` asks it whether the
   launcher role may pass the runner's roles to ECS. It is a double: no
   permissions boundary, SCP or resource policy is considered, and moto's
   engine knows fewer condition operators than AWS.
3. An EKS cluster created with the tag `sortie-test/endpoint` and/or
   `sortie-test/ca-data` describes that tag's value as its `endpoint` and/or
   its `certificateAuthority.data`. Stock moto gives every cluster a made-up
   endpoint and 1400 random characters as its CA, so nothing could connect to
   or verify against it; the `eks` runner's tests create a cluster whose
   endpoint is the Kubernetes API double (crates/testkit/src/kube.rs) and whose CA is
   the double's test CA (base64 of its PEM, as EKS answers it). This is test
   set-up, not a relaxation: moto validates nothing more or less than before,
   a cluster without those tags is described exactly as stock moto describes
   it, and the tags stay on the cluster like any other. (Real EKS caps a tag
   value at 256 characters, so such a CA could not travel in a real tag;
   moto does not check, and no real cluster ever carries these tags.)
   crates/testkit/it/kube_double.rs proves it.

Why (patch 1): moto 5.2.5's DynamoDBBackend.transact_write_items deep-copies every
table a transaction names before it starts, and when the transaction fails
(e.g. a ConditionCheck) it puts those copies back, undoing every other
client's write acknowledged in between. The deep copy also iterates tables
that other request threads are changing, so it can die with "dictionary
changed size during iteration" and answer 500. Real DynamoDB does neither.
With one request at a time the snapshot is exactly the state the failed
transaction found, so the rollback undoes only its own writes.

Serialising the whole handler (parse, backend call, serialisation of the
response) is deliberately coarse: the rollback is whole-table, so any
narrower lock would have to cover every write path anyway. Other services
(S3, SQS, ECS, ...) are untouched and still served concurrently.

crates/testkit/it/moto_writes.rs proves the patch; docs/TESTING.md ("Test
doubles, and what they stand in for") says why it exists.
"""

import functools
import sys
import threading

import moto
from moto.dynamodb.responses import DynamoHandler
from moto.dynamodbstreams.responses import DynamoDBStreamsHandler
from moto.server import main

_DYNAMODB_LOCK = threading.RLock()


def _serialised(call_action):
    @functools.wraps(call_action)
    def locked(self, *args, **kwargs):
        with _DYNAMODB_LOCK:
            return call_action(self, *args, **kwargs)

    locked.__sortie_serialised__ = True
    return locked


def _simulate_principal_policy(self):
    """IAM SimulatePrincipalPolicy for a role: allowed, explicitDeny or implicitDeny for
    each action and resource, from the role's own policies (see patch 2 above)."""
    from moto.core.responses import ActionResult
    from moto.iam.access_control import (
        IAMPolicy,
        IAMPolicyStatement,
        PermissionResult,
    )

    role = self.backend.get_role_by_arn(self._get_param("PolicySourceArn"))
    policies = [IAMPolicy(document) for document in role.policies.values()]
    policies += [IAMPolicy(managed) for managed in role.managed_policies.values()]
    statements = []
    for policy in policies:
        listed = policy._policy_json["Statement"]
        statements += listed if isinstance(listed, list) else [listed]
    context = {}
    for entry in self._get_param("ContextEntries", []) or []:
        values = entry.get("ContextKeyValues") or []
        if values:
            context[entry["ContextKeyName"]] = values[0]
    results = []
    for action in self._get_param("ActionNames", []) or []:
        for resource in self._get_param("ResourceArns", []) or ["*"]:
            decision = "implicitDeny"
            for statement in statements:
                # AWS's simulator: a condition on a key the context does not give
                # does not hold (moto's engine would call it met).
                keys = {
                    key
                    for block in (statement.get("Condition") or {}).values()
                    for key in block
                }
                if not keys <= context.keys():
                    continue
                outcome = IAMPolicyStatement(statement).is_action_permitted(
                    action, resource, None, context
                )
                # moto answers DENIED for an Allow whose condition does not hold;
                # AWS calls that statement not applicable.
                deny = statement.get("Effect") == "Deny"
                if outcome == PermissionResult.DENIED and deny:
                    decision = "explicitDeny"
                    break
                if outcome == PermissionResult.PERMITTED and not deny:
                    decision = "allowed"
            results.append(
                {
                    "EvalActionName": action,
                    "EvalResourceName": resource,
                    "EvalDecision": decision,
                }
            )
    return ActionResult({"EvaluationResults": results, "IsTruncated": False})


_EKS_ENDPOINT_TAG = "sortie-test/endpoint"
_EKS_CA_DATA_TAG = "sortie-test/ca-data"


def _cluster_from_test_tags(init):
    """Wraps moto's EKS Cluster.__init__: endpoint and CA data from the test tags (see
    patch 3 above)."""

    @functools.wraps(init)
    def initialise(self, *args, **kwargs):
        init(self, *args, **kwargs)
        if not (hasattr(self, "endpoint") and hasattr(self, "certificate_authority")):
            raise RuntimeError(
                f"moto_server.py: moto {moto.__version__}'s EKS Cluster has no "
                "endpoint or certificate_authority; revisit patch 3"
            )
        tags = getattr(self, "tags", None) or {}
        if _EKS_ENDPOINT_TAG in tags:
            self.endpoint = tags[_EKS_ENDPOINT_TAG]
        if _EKS_CA_DATA_TAG in tags:
            self.certificate_authority = {"data": tags[_EKS_CA_DATA_TAG]}

    initialise.__sortie__ = True
    return initialise


def patch():
    """Serialise DynamoDB's request handlers, add IAM SimulatePrincipalPolicy, and let an
    EKS cluster's test tags name its endpoint and CA; fails loudly if moto changed shape."""
    import inspect

    from moto.eks.models import Cluster
    from moto.iam.responses import IamResponse

    if "tags" not in inspect.signature(Cluster.__init__).parameters:
        raise SystemExit(
            f"moto_server.py: moto {moto.__version__}'s EKS Cluster takes no tags; "
            "revisit patch 3"
        )
    if not getattr(Cluster.__init__, "__sortie__", False):
        Cluster.__init__ = _cluster_from_test_tags(Cluster.__init__)

    if hasattr(IamResponse, "simulate_principal_policy") and not getattr(
        IamResponse.simulate_principal_policy, "__sortie__", False
    ):
        raise SystemExit(
            f"moto_server.py: moto {moto.__version__} has its own "
            "SimulatePrincipalPolicy; drop this patch"
        )
    _simulate_principal_policy.__sortie__ = True
    IamResponse.simulate_principal_policy = _simulate_principal_policy
    for handler in (DynamoHandler, DynamoDBStreamsHandler):
        # call_action is what BaseResponse._dispatch calls for every request;
        # it runs the backend method and serialises its result.
        original = getattr(handler, "call_action", None)
        if not callable(original):
            raise SystemExit(
                f"moto_server.py: moto {moto.__version__} has no "
                f"{handler.__name__}.call_action to serialise; revisit this patch"
            )
        if not getattr(original, "__sortie_serialised__", False):
            handler.call_action = _serialised(original)


if __name__ == "__main__":
    patch()
    print(
        f"moto_server.py: moto {moto.__version__}, DynamoDB requests serialised, "
        "IAM SimulatePrincipalPolicy added, EKS cluster endpoint and CA from test tags",
        file=sys.stderr,
        flush=True,
    )
    sys.exit(main(sys.argv[1:]))
