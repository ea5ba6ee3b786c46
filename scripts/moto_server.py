"""moto_server, with DynamoDB requests served one at a time and item-level transactions.

    .tools/venv/bin/python scripts/moto_server.py -H 127.0.0.1 -p PORT

Takes the same flags as `.tools/venv/bin/moto_server` and runs the same
threaded server (moto.server.main), after the patches below:

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
response) is deliberately coarse: moto's tables are plain dicts that a scan
iterates while a put changes them, and a transaction's checks and writes
must not interleave with another request's. Since patch 4 the rollback is
item-level, so the lock no longer has to protect a whole-table snapshot; it
still gives each request the isolation DynamoDB gives it. Other services
(S3, SQS, ECS, ...) are untouched and still served concurrently.

crates/testkit/it/moto_writes.rs proves the patch; docs/TESTING.md ("Test
doubles, and what they stand in for") says why it exists.

4. TransactWriteItems backs up and restores only the items it names, not
   whole tables (issue 27). moto 5.2.5 deep-copies every table a transaction
   names before it starts, so each transaction costs time and memory in the
   size of the table: at 1,000 jobs moto reached 17 GB and its time grew with
   the square of the jobs. The patch keeps moto's own method (condition
   checks, cancellation reasons, ReturnValuesOnConditionCheckFailure, the
   "multiple operations on one item" check, everything it answers) and only
   swaps its backup: before the method runs, a deep copy of each named item
   (or "absent") and each table's stream length is taken; where moto would put
   its table copies back (a canceled transaction, a validation error part way
   through), the named items and streams are put back instead, and moto's own
   "put the copy back" finds the table it already holds. Under patch 1 no
   other request runs between the backup and the restore, so the named items
   are the only state the transaction could have changed. Real DynamoDB
   isolates a transaction per item, which is what this restores.
   crates/testkit/it/moto_writes.rs (both tests) proves it. Setting
   SORTIE_MOTO_WHOLE_TABLE_TRANSACTIONS=1 leaves stock moto's backup in place
   (only to measure the "before" figures of BENCHMARKS.md).
5. A timing wrapper around every request moto serves (issue 27): its handling
   time, from the moment moto's WSGI application is called to the moment it
   returns the response (so a DynamoDB request's wait for patch 1's lock counts
   as moto's), per operation, and per request with the job ids (26-character
   ids) its body names (for SQS ReceiveMessage, its answer's body), and the job
   an `x-sortie-job` header says the request is for (`sortie dev` sends it: an
   environment's read made for a job names none). Read it from the server itself:
       GET  /_sortie/moto-timing              per-operation counts and totals
       GET  /_sortie/moto-timing/events?since=EPOCH   per-request records
       POST /_sortie/moto-timing/reset        forget everything recorded
   ("_" cannot start a bucket name, so no S3 path collides.) scripts/bench-e2e.py
   subtracts it from the end-to-end figures; scripts/soak.py counts calls with it.
6. moto's instance tracker holds its model objects weakly, so a replaced item is freed,
   and GET /_sortie/moto-memory says what moto holds (issue 27): scripts/moto_memory.py
   says why and how; SORTIE_MOTO_STRONG_INSTANCE_TRACKING=1 leaves stock moto's tracker.
7. SQS fair queues (issue 27): a standard queue whose messages carry MessageGroupId is
   delivered as AWS documents fair queues (quiet tenants' messages first), where stock
   moto ignores the group id on receive. Its rule is `_fair_order` in scripts/moto_fair_queue.py;
   crates/store/tests/it/fair_queue.rs proves it (it fails on stock moto).
8. S3 (issue 41 item 4): GetObject and HeadObject of a missing key answer 403 AccessDenied,
   and listings are refused, to a caller without s3:ListBucket (an access key id starting
   with NOLISTBUCKET), as AWS answers; every other caller gets stock moto's 404.
9. S3 (issue 41 item 7): ListObjectsV2 pages on a bucket tagged `sortie-test/list-page-cap`
   hold at most that many keys, with IsTruncated=true while more follow, as AWS may answer.
   Both are in scripts/moto_s3_strict.py; crates/store/tests/it/artifacts.rs proves them.
10. Secrets Manager's request quotas (issue 41): past 50 control-plane calls (CreateSecret,
   DeleteSecret, ListSecrets, ...) per second per account and Region, a call is answered
   `ThrottlingException` "Rate exceeded", as AWS does; stock moto answers every call. Its
   rule and its counts (GET /_sortie/secrets-throttle) are in scripts/moto_secrets_throttle.py;
   crates/api/tests/it/secrets_quota.rs proves it.
11. moto's list of its own service modules is read once (issue 47 item 15). Stock moto's
   server finds each request's backend under one process-wide lock
   (DomainDispatcherApplication.get_application) and, on the way, lists its package
   directory and stats every entry (moto.backends.list_of_moto_modules: about 175 of
   them, 0.5 ms warm) on every request, so every request of every service queued behind
   that directory walk: 17% of moto's busy time in a profile of `make demo` (py-spy). The
   directory does not change while the server runs; the list is kept, in the same order,
   and every answer is the same.
12. DynamoDB's attribute values are written out directly (issue 47 items 13 and 15):
   stock moto's generic serializer visits each of an AttributeValue's ten members by name,
   for every value of every answer (a GetItem of a 2.8 KB job item took 22.6 ms against
   7.2 ms for a small one). The wire form of a plain value is written as it is; anything
   else goes to moto's serializer. It refuses to start if the two forms differ for any of
   its samples (scripts/moto_dynamo_fast.py).
13. An update expression is parsed once per text (issue 47 items 13 and 15): stock moto
   parses each UpdateExpression twice per request and deep-copies the tree in each
   validator. The tree is kept pickled by its text (at most 512) and every caller gets a
   fresh copy of its own, so no run can change another's; it refuses to start if an update
   through a kept tree differs from one through a fresh parse (scripts/moto_dynamo_fast.py).
14. A client's connection is kept open between requests (HTTP/1.1 keep-alive; issue 47
   items 13 and 15): werkzeug's server closed every connection after one answer, so each
   request paid a new connection and a new server thread (about a fifth of moto's busy time
   under load). A request's unread body is drained before the next one is read; anything
   that cannot be framed closes the connection as before (scripts/moto_keep_alive.py).
15. Each service's table of error shapes is built once (issue 47 item 13): stock moto
   builds a new lookup factory, so a new table of every error the service defines, for
   every error answer it serializes (a ConditionalCheckFailed, an S3 404): about 4% of
   moto's CPU under the API tests. The tables depend on the service model alone.
16. STS AssumeRoleWithWebIdentity is as strict as AWS (issue 45): stock moto answers
   credentials for any token. The token's issuer must be an IAM OIDC provider of the
   role's account, its audience one of the provider's client ids, its signature verify
   with the issuer's JWKS (fetched through its discovery document), its exp be in the
   future, and the role's trust policy allow its provider with `:aud` and `:sub`
   conditions that hold; else AWS's error codes (scripts/moto_sts_web_identity.py).
17. S3 Express One Zone (issue 47 item 14): stock moto has no directory buckets. A bucket
   named `<base>--<zone id>--x-s3` is made only with its directory configuration, its
   zonal calls need a live CreateSession token and the session's signature (a presigned
   URL dies with its session, after 5 minutes), a ReadOnly session only reads, and its
   listings are out of key order (scripts/moto_s3_express.py;
   crates/store/tests/it/s3_express.rs proves it).
"""

import collections
import copy
import functools
import io
import itertools
import json
import os
import re
import sys
import threading
import time
import urllib.parse

import moto
from moto.dynamodb.responses import DynamoHandler
from moto.dynamodbstreams.responses import DynamoDBStreamsHandler
from moto.server import main

import moto_dynamo_fast  # patch 12: DynamoDB's attribute values written directly
import moto_fair_queue  # patch 7: SQS fair queues (scripts/, beside this file)
import moto_keep_alive  # patch 14: keep-alive connections
import moto_memory  # patch 6 and /_sortie/moto-memory (scripts/, beside this file)
import moto_s3_express  # patch 17: S3 Express One Zone's directory buckets and sessions
import moto_s3_strict  # patches 8 and 9: S3's 403 without ListBucket, short list pages
import moto_secrets_throttle  # patch 10: Secrets Manager's quotas (scripts/, beside this file)
import moto_sts_web_identity  # patch 16: strict AssumeRoleWithWebIdentity

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


# Patch 4: TransactWriteItems backs up and restores only the items it names.

_TXN = threading.local()


class _CopyInTransaction:
    """Stands in for the `copy` module inside moto.dynamodb.models: while a patched
    TransactWriteItems runs, deepcopy of a whole Table answers the table itself (the
    named items were backed up instead); everything else is the real `copy`."""

    def __init__(self, table_type):
        self._table_type = table_type

    def __getattr__(self, name):
        return getattr(copy, name)

    def deepcopy(self, value, memo=None):
        if getattr(_TXN, "active", False) and isinstance(value, self._table_type):
            return value
        return copy.deepcopy(value, memo)


def _named_items(backend, transact_items):
    """A deep copy of every item the transaction names (None when absent), with whether
    its hash key had an entry, and each named table's stream length."""
    saved, streams = [], {}
    for entry in transact_items:
        try:
            _, op = next(iter(entry.items()))
            table = backend.tables.get(op.get("TableName"))
            if table is None:
                continue
            if "Key" in op:
                key = op["Key"]
            else:
                attrs = op["Item"]
                key = {table.hash_key_attr: attrs[table.hash_key_attr]}
                if table.range_key_attr is not None:
                    key[table.range_key_attr] = attrs[table.range_key_attr]
            hash_value, range_value = backend.get_keys_value(table, key)
        except Exception:  # noqa: BLE001 an op that names no valid key writes nothing
            continue
        had_hash = hash_value in table.items
        current = table.items.get(hash_value)
        if range_value is not None and current is not None:
            current = current.get(range_value)
        saved.append((table, hash_value, range_value, had_hash, copy.deepcopy(current)))
        if table.stream_shard is not None and id(table) not in streams:
            streams[id(table)] = (table.stream_shard, len(table.stream_shard.items))
    return saved, streams


def _restore_named_items(saved, streams):
    for table, hash_value, range_value, had_hash, item in reversed(saved):
        if range_value is None:
            if item is None:
                table.items.pop(hash_value, None)
            else:
                table.items[hash_value] = item
            continue
        if item is None:
            by_range = table.items.get(hash_value)
            if by_range is not None:
                by_range.pop(range_value, None)
                if not by_range and not had_hash:
                    table.items.pop(hash_value, None)
        else:
            table.items[hash_value][range_value] = item
    for shard, length in streams.values():
        if len(shard.items) >= length:
            del shard.items[length:]


def _item_level_transactions(original, single_op_error):
    @functools.wraps(original)
    def transact_write_items(self, transact_items):
        saved, streams = _named_items(self, transact_items)
        _TXN.active = True
        try:
            return original(self, transact_items)
        except single_op_error:
            # Raised outside moto's try block: moto does not roll back; neither do we.
            raise
        except Exception as e:
            from moto.dynamodb.exceptions import (
                MockValidationException,
                TransactionCanceledException,
            )

            # Exactly where moto puts its table copies back.
            if isinstance(e, (MockValidationException, TransactionCanceledException)):
                _restore_named_items(saved, streams)
            raise
        finally:
            _TXN.active = False

    transact_write_items.__sortie__ = True
    return transact_write_items


def _patch_transactions():
    import inspect

    import moto.dynamodb.models as models
    from moto.dynamodb.exceptions import TransactWriteSingleOpException

    backend = models.DynamoDBBackend
    original = backend.transact_write_items
    if getattr(original, "__sortie__", False):
        return
    source = inspect.getsource(original)
    shape = (
        "copy.deepcopy(\n                    self.tables[table_name]" in source
        and source.count("self.tables[table_name] = original_table_state[table_name]") == 2
        and "raise TransactWriteSingleOpException" in source
    )
    if not shape or not isinstance(models.copy, type(copy)):
        raise SystemExit(
            f"moto_server.py: moto {moto.__version__}'s transact_write_items no longer "
            "backs up whole tables the way patch 4 expects; revisit it"
        )
    models.copy = _CopyInTransaction(models.Table)
    backend.transact_write_items = _item_level_transactions(
        original, TransactWriteSingleOpException
    )


# Patch 5: moto's own handling time, per operation and per request.

_TIMING_PATH = "/_sortie/moto-timing"
_TIMING_LOCK = threading.Lock()
_TIMING_EVENTS = collections.deque(maxlen=2_000_000)
_TIMING_OPS = {}
_JOB_ID = re.compile(rb"\b[0-9a-z]{26}\b")
_SERVICE = re.compile(r"Credential=[^/]+/[^/]+/[^/]+/([^/]+)/")
_BODY_SCAN_LIMIT = 64 * 1024


def _operation(environ):
    """The request's operation ("dynamodb.UpdateItem", "sqs.SendMessage", "s3.PUT") and
    the job ids its body names or its x-sortie-job header gives; puts back the body it read."""
    target = environ.get("HTTP_X_AMZ_TARGET", "")
    service = _SERVICE.search(environ.get("HTTP_AUTHORIZATION", ""))
    service = service.group(1) if service else "unsigned"
    body = b""
    length = int(environ.get("CONTENT_LENGTH") or 0)
    if 0 < length <= _BODY_SCAN_LIMIT:
        body = environ["wsgi.input"].read(length)
        environ["wsgi.input"] = io.BytesIO(body)
    if target:
        action = target.rsplit(".", 1)[-1]
    else:
        query = urllib.parse.parse_qs(environ.get("QUERY_STRING", ""))
        action = (query.get("Action") or [""])[0]
        if not action and b"Action=" in body[:4096]:
            form = urllib.parse.parse_qs(body[:4096].decode("utf-8", "replace"))
            action = (form.get("Action") or [""])[0]
        action = action or environ.get("REQUEST_METHOD", "?")
    ids = sorted({m.decode() for m in _JOB_ID.findall(body)})[:8] if body else []
    # An S3 request names its job in its key or its listing's prefix (a presigned URL has
    # no other place to): `logs/<job id>/live`, `prefix=logs%2F<job id>%2F`.
    where = (environ.get("PATH_INFO", "") + "?" + environ.get("QUERY_STRING", "")).encode()
    for m in _JOB_ID.findall(where):
        if m.decode() not in ids:
            ids.append(m.decode())
    # `sortie dev` says which job a request is for (x-sortie-job), named in it or not.
    for_job = environ.get("HTTP_X_SORTIE_JOB", "")
    if _JOB_ID.fullmatch(for_job.encode()) and for_job not in ids:
        ids.append(for_job)
    return f"{service}.{action}", ids


def _timing_answer(environ, start_response):
    path = environ.get("PATH_INFO", "")
    with _TIMING_LOCK:
        if path.endswith("/reset"):
            _TIMING_EVENTS.clear()
            _TIMING_OPS.clear()
            answer = {"reset": True}
        elif path.endswith("/events"):
            query = urllib.parse.parse_qs(environ.get("QUERY_STRING", ""))
            since = float((query.get("since") or ["0"])[0])
            answer = {"events": [e for e in _TIMING_EVENTS if e[0] >= since]}
        else:
            answer = {
                "ops": {
                    op: {"count": n, "total_ms": total * 1000}
                    for op, (n, total) in sorted(_TIMING_OPS.items())
                },
                "events": len(_TIMING_EVENTS),
            }
    body = json.dumps(answer).encode()
    start_response(
        "200 OK",
        [("Content-Type", "application/json"), ("Content-Length", str(len(body)))],
    )
    return [body]


def _timed(call):
    @functools.wraps(call)
    def timed(self, environ, start_response):
        if environ.get("PATH_INFO", "").startswith(_TIMING_PATH):
            return _timing_answer(environ, start_response)
        try:
            op, ids = _operation(environ)
        except Exception:  # noqa: BLE001 timing must never change an answer
            op, ids = "unknown", []
        began, t0 = time.time(), time.perf_counter()
        try:
            answer = call(self, environ, start_response)
            if op.endswith(".ReceiveMessage"):
                # The jobs a receive hands out are named in its answer, not its request.
                body = b"".join(answer)
                if hasattr(answer, "close"):
                    answer.close()
                ids = sorted({m.decode() for m in _JOB_ID.findall(body)} | set(ids))[:16]
                answer = [body]
            return answer
        finally:
            took = time.perf_counter() - t0
            with _TIMING_LOCK:
                _TIMING_EVENTS.append((began, took, op, ids))
                n, total = _TIMING_OPS.get(op, (0, 0.0))
                _TIMING_OPS[op] = (n + 1, total + took)

    timed.__sortie__ = True
    return timed


# Patch 11: moto's list of its service modules, read once.


def _patch_module_list():
    from moto import backends

    original = backends.list_of_moto_modules
    if getattr(original, "__sortie__", False):
        return
    modules = tuple(original())

    def list_of_moto_modules():
        return iter(modules)

    list_of_moto_modules.__sortie__ = True
    backends.list_of_moto_modules = list_of_moto_modules


# Patch 15: moto's table of each service's errors, built once per service.


def _patch_error_tables():
    import inspect

    from moto.core import errors

    factory = errors.ErrorLookupFactory
    if getattr(factory.__init__, "__sortie__", False):
        return
    if (
        "ErrorLookupFactory().for_service(" not in inspect.getsource(errors.get_error_model)
        or "self._error_lut_cache" not in inspect.getsource(factory.for_service)
    ):
        raise SystemExit(
            f"moto_server.py: moto {moto.__version__} looks up its errors another way; "
            "revisit patch 15"
        )
    # One table per service id, shared by every factory. A race builds a table twice at
    # most; both are the same, and a dict's get and set are atomic under the GIL.
    tables = {}

    def __init__(self):
        self._error_lut_cache = tables

    __init__.__sortie__ = True
    factory.__init__ = __init__


def _patch_timing():
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    call = DomainDispatcherApplication.__call__
    if not getattr(call, "__sortie__", False):
        DomainDispatcherApplication.__call__ = _timed(call)


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
    if not os.environ.get("SORTIE_MOTO_WHOLE_TABLE_TRANSACTIONS"):
        # Set only to measure stock moto's whole-table backups (BENCHMARKS.md "before").
        _patch_transactions()
    _patch_timing()
    # Patch 6 and /_sortie/moto-memory (scripts/moto_memory.py). SORTIE_MOTO_STRONG_INSTANCE_
    # TRACKING=1 leaves stock moto's tracker, only to measure BENCHMARKS.md's "before".
    moto_memory.install(
        _DYNAMODB_LOCK,
        lambda: {"timing events (patch 5)": {"records": len(_TIMING_EVENTS)}},
        weak_tracking=not os.environ.get("SORTIE_MOTO_STRONG_INSTANCE_TRACKING"),
    )
    _patch_module_list()
    _patch_error_tables()
    moto_fair_queue.install()
    moto_s3_strict.install()
    moto_s3_express.install()
    moto_secrets_throttle.install()
    if not os.environ.get("SORTIE_MOTO_LENIENT_WEB_IDENTITY"):
        # Set only to show a test failing on stock moto's AssumeRoleWithWebIdentity.
        moto_sts_web_identity.install()
    if not os.environ.get("SORTIE_MOTO_GENERIC_SERIALIZER"):
        # Set only to measure stock moto's serializer (BENCHMARKS.md "before").
        moto_dynamo_fast.install()
    if not os.environ.get("SORTIE_MOTO_PARSE_EVERY_TIME"):
        # Set only to measure stock moto's parsing (BENCHMARKS.md "before").
        moto_dynamo_fast.install_parse_once()
    if not os.environ.get("SORTIE_MOTO_CLOSE_EVERY_CONNECTION"):
        # Set only to measure werkzeug's one request per connection (BENCHMARKS.md "before").
        moto_keep_alive.install()


if __name__ == "__main__":
    patch()
    moto_memory.start_memory_report()
    print(
        f"moto_server.py: moto {moto.__version__}, DynamoDB requests serialised, "
        "IAM SimulatePrincipalPolicy added, EKS cluster endpoint and CA from test tags, "
        "transactions back up only their items, request timing at /_sortie/moto-timing, "
        "model objects tracked weakly, memory at /_sortie/moto-memory, "
        "SQS fair queues on standard queues, S3 403 for a missing key without ListBucket, "
        "short S3 list pages on tagged buckets, "
        "Secrets Manager's request quotas, the module list read once, "
        "DynamoDB attribute values written directly, update expressions parsed once, "
        "keep-alive connections, error tables built once, "
        "AssumeRoleWithWebIdentity verified as AWS does",
        file=sys.stderr,
        flush=True,
    )
    sys.exit(main(sys.argv[1:]))
