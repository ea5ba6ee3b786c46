"""moto_server.py's patch 8: Secrets Manager's request quotas (issue 41).

Loaded by scripts/moto_server.py, whose other patches are described there.

https://docs.aws.amazon.com/secretsmanager/latest/userguide/reference_limits.html
Secrets Manager's control-plane APIs are limited to 50 requests per second per account and
Region (CreateSecret, DeleteSecret, ListSecrets, PutSecretValue, UpdateSecret, TagResource
and the others below), and DescribeSecret with GetSecretValue to 10,000 per second combined;
none of these quotas can be raised. Past a quota AWS answers HTTP 400 `ThrottlingException`
("Rate exceeded"). Stock moto 5.2.5 answers every call, however many, so a burst of submits
or job ends that would be throttled on AWS passed on moto.

This patch counts each account and Region's calls over the last second (a sliding window)
and answers a call past its quota with AWS's throttling error, before moto's own handler
runs (so a throttled call changes nothing). A throttled call is not counted. It is stricter
than AWS in one way, on purpose: every control-plane call shares ONE budget of 50 per second
(AWS gives CreateSecret, DeleteSecret, ListSecrets and the groups of the others each their
own 50 or more), so a double that passes here passes there. The read calls keep AWS's
10,000. GET /_sortie/secrets-throttle answers the counts of calls answered and throttled
per operation (crates/api/tests/it/secrets_quota.rs reads it to prove the double throttled).
"""

import collections
import functools
import json
import threading
import time

import moto

# Operation -> (quota group, calls per second). Every operation not named is a
# control-plane call of the shared 50-per-second group.
_CONTROL_PLANE = ("control-plane", 50)
_QUOTAS = {
    "GetSecretValue": ("read", 10_000),
    "DescribeSecret": ("read", 10_000),
    "BatchGetSecretValue": ("batch-read", 100),
}
_WINDOW_S = 1.0
_LOCK = threading.Lock()
_CALLS = collections.defaultdict(collections.deque)  # (account, region, group) -> times
_SEEN = collections.Counter()  # (operation, "answered" | "throttled") -> count
STATS_PATH = "/_sortie/secrets-throttle"


def admit(key, limit, now):
    """True when a call at `now` (seconds) fits `key`'s quota of `limit` calls in the last
    second; an admitted call is counted."""
    with _LOCK:
        calls = _CALLS[key]
        while calls and calls[0] <= now - _WINDOW_S:
            calls.popleft()
        if len(calls) >= limit:
            return False
        calls.append(now)
        return True


def _throttled(call_action):
    @functools.wraps(call_action)
    def quota_checked(self):
        operation = self._get_action() or "?"
        group, limit = _QUOTAS.get(operation, _CONTROL_PLANE)
        key = (self.current_account, self.region, group)
        if admit(key, limit, time.monotonic()):
            with _LOCK:
                _SEEN[(operation, "answered")] += 1
            return call_action(self)
        with _LOCK:
            _SEEN[(operation, "throttled")] += 1
        body = json.dumps({"__type": "ThrottlingException", "message": "Rate exceeded"})
        headers = dict(self.response_headers)
        headers["Content-Type"] = "application/x-amz-json-1.1"
        return 400, headers, body

    quota_checked.__sortie_throttle__ = True
    return quota_checked


def stats():
    """The calls answered and throttled, per operation."""
    with _LOCK:
        out = collections.defaultdict(dict)
        for (operation, how), n in _SEEN.items():
            out[operation][how] = n
        return dict(out)


def _stats_answer(environ, start_response):
    body = json.dumps(stats()).encode()
    start_response(
        "200 OK",
        [("Content-Type", "application/json"), ("Content-Length", str(len(body)))],
    )
    return [body]


def _with_stats(call):
    @functools.wraps(call)
    def answer(self, environ, start_response):
        if environ.get("PATH_INFO", "") == STATS_PATH:
            return _stats_answer(environ, start_response)
        return call(self, environ, start_response)

    answer.__sortie_throttle__ = True
    return answer


def install():
    """Put Secrets Manager's quotas on moto; fails loudly if moto changed shape."""
    import inspect

    from moto.core.responses import BaseResponse
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication
    from moto.secretsmanager.responses import SecretsManagerResponse

    source = inspect.getsource(BaseResponse._dispatch)
    if ("self.setup_class(" not in source or "self.call_action()" not in source
            or "self.current_account = " not in inspect.getsource(BaseResponse.setup_class)):
        raise SystemExit(f"moto_server.py: moto {moto.__version__}'s request dispatch "
                         "changed shape; revisit patch 8 (Secrets Manager quotas)")
    original = SecretsManagerResponse.call_action
    if not getattr(original, "__sortie_throttle__", False):
        SecretsManagerResponse.call_action = _throttled(original)
    call = DomainDispatcherApplication.__call__
    if not getattr(call, "__sortie_throttle__", False):
        DomainDispatcherApplication.__call__ = _with_stats(call)
