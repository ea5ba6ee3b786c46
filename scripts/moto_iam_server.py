"""moto_server with IAM enforcement closer to AWS, for crates/testkit/it/iam.rs only.

    INITIAL_NO_AUTH_ACTION_COUNT=3 .tools/venv/bin/python scripts/moto_iam_server.py -H 127.0.0.1 -p PORT

Runs moto's own server (through scripts/moto_server.py's patches) after seven
changes to moto 5.2.5's IAM evaluation (moto/iam/access_control.py), and an
eighth. 1, 2 and 4 to 8 make it follow AWS where it is wrong; 3 is a
relaxation, because moto cannot know the resource of those calls:

1. A trust policy principal `arn:<partition>:iam::<account>:root` means "any
   principal of that account" (AWS's account delegation). moto compares it
   as a string and refuses every caller; a `Service` principal made it crash.
2. The session tags of AssumeRole (`Tags.member.N.Key/Value`) become the
   condition values `aws:RequestTag/<key>`, next to `sts:ExternalId`, so a
   trust policy's `StringEquals` on them is evaluated (moto only passed the
   ExternalId).
3. moto knows the resource of a call only for S3, SQS, IAM and STS; for the
   rest (ECS, DynamoDB, EventBridge) it asks about the resource "*", which a
   scoped statement never matches. For those calls the statement's Action
   decides and its Resource is not checked (moto cannot know it).

4. A presigned S3 request (query-string SigV4, no Authorization header) made
   moto answer 500 under IAM enforcement. It is now authorised as the
   principal whose key signed it, for its bucket and key, like any other
   request; its signature itself is not verified.

5. DynamoDB's TransactWriteItems and TransactGetItems are not IAM actions:
   AWS authorises each item's own action (PutItem, UpdateItem, DeleteItem,
   ConditionCheckItem, GetItem). moto asked for "dynamodb:TransactWriteItems",
   which no policy grants; it now asks for each item's action.

6. Session tags become principal tags: the tags of each AssumeRole are kept
   for the session's access key, and every request signed by that key has them
   as the condition values `aws:PrincipalTag/<key>`. moto keeps no session tags.

7. A caller's own policies are evaluated with the request's condition values
   (its `aws:RequestTag/*`, its `aws:PrincipalTag/*`, `sts:ExternalId`); moto
   passed none, so every condition of an identity policy held. And a statement
   whose condition does not hold does not apply (AWS); moto answered DENIED
   for it, whatever its Effect, so a conditional Deny denied everyone.

8. A `StringEquals` on a key absent from the request is false, as AWS
   documents ("If the key that you specify in a policy condition is not
   present in the request context, the values do not match and the condition
   is false", IAM User Guide, condition operators). moto skipped an absent
   key, so a `Deny` keyed on `aws:PrincipalTag/sortie:env` denied every
   session without that tag; and it paired values with keys by position, not
   by name. Now each key is matched by name; an absent key makes the condition
   false for the keys this server supplies (`sts:ExternalId`,
   `aws:RequestTag/*`, `aws:PrincipalTag/*`), and is still ignored for keys
   moto cannot know (`iam:PassedToService`, `ecs:CreateAction`, ...).

What this still does not check is listed in docs/TESTING.md
("Deployed IAM, proven"). INITIAL_NO_AUTH_ACTION_COUNT must be set by the
caller: it is global to this server, so never use it for the shared one.
"""

import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from urllib.parse import parse_qs, urlparse  # noqa: E402

import moto_server  # noqa: E402  (the DynamoDB lock; same server otherwise)
from moto import settings  # noqa: E402
from moto.core.authorization import ActionAuthenticatorMixin  # noqa: E402
from moto.iam import access_control  # noqa: E402
from moto.sts.responses import TokenResponse as STSResponse  # noqa: E402
from moto.iam.access_control import (  # noqa: E402
    IAMPolicy,
    IAMPolicyStatement,
    IAMRequestBase,
    PermissionResult,
)

_ROOT = re.compile(r"^arn:[a-z-]+:iam::([0-9]{12}):root$")
_ACCOUNT = re.compile(r"^arn:[a-z-]+:(?:iam|sts)::([0-9]{12}):")


def _check_principal(self, principal):
    expected = self._statement.get("Principal")
    if not expected:
        return True
    aws = expected.get("AWS") if isinstance(expected, dict) else expected
    if aws is None:
        return False  # a Service or Federated principal is never an IAM caller
    allowed = [aws] if isinstance(aws, str) else list(aws)
    caller = _ACCOUNT.match(principal)
    for a in allowed:
        if a == "*" or a == principal:
            return True
        root = _ROOT.match(a)
        if root and caller and root.group(1) == caller.group(1):
            return True
    return False


_original_format = access_control.format_incoming_conditional_values


def _format(data):
    values = _original_format(data)
    n = 1
    while f"Tags.member.{n}.Key" in data:
        key = data[f"Tags.member.{n}.Key"][0]
        values[f"aws:RequestTag/{key}"] = data[f"Tags.member.{n}.Value"][0]
        n += 1
    return values


_original_permitted = IAMPolicyStatement.is_action_permitted


def _is_action_permitted(self, action, resource="*", principal=None, incoming=None):
    # A statement whose condition does not hold does not apply (7).
    if self._statement.get("Condition") and not self._check_conditions(incoming):
        return PermissionResult.NEUTRAL
    if resource == "*" and self._statement.get("Resource") not in (None, "*"):
        statement = dict(self._statement, Resource="*")
        return _original_permitted(IAMPolicyStatement(statement), action, resource, principal, incoming)
    return _original_permitted(self, action, resource, principal, incoming)


_original_authorize = ActionAuthenticatorMixin._authenticate_and_authorize_action


def _authorize(self, iam_request_cls, resource="*"):
    query = parse_qs(urlparse(self.uri).query)
    if "Authorization" in self.headers or "X-Amz-Credential" not in query:
        return _original_authorize(self, iam_request_cls, resource)
    if ActionAuthenticatorMixin.request_count < settings.INITIAL_NO_AUTH_ACTION_COUNT:
        return _original_authorize(self, iam_request_cls, resource)
    headers = dict(self.headers)
    headers["Authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={query['X-Amz-Credential'][0]}, "
        "SignedHeaders=host, Signature=presigned"
    )
    if "X-Amz-Security-Token" in query:
        headers["X-Amz-Security-Token"] = query["X-Amz-Security-Token"][0]
    iam_request = iam_request_cls(
        account_id=self.current_account,
        method=self.method,
        path=self.raw_path,
        data=self.data,
        body=self.raw_body,
        headers=headers,
        action=self._get_action(),
    )
    iam_request.check_action_permitted(resource)


_original_assume_role = STSResponse.assume_role

_TRANSACT = {"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem",
             "ConditionCheck": "ConditionCheckItem", "Get": "GetItem"}
def _check_action_permitted(self, resource):
    if self._action not in ("dynamodb:TransactWriteItems", "dynamodb:TransactGetItems"):
        return _check_own_policies(self, resource)
    body = json.loads(self._body or b"{}")
    actions = {f"dynamodb:{_TRANSACT[kind]}"
               for item in body.get("TransactItems", []) for kind in item}
    whole = self._action
    try:
        for action in sorted(actions):
            self._action = action
            _check_own_policies(self, resource)
    finally:
        self._action = whole


_SESSION_TAGS = {}  # access key id of an assumed-role session -> its tags


def _assume_role(self):
    result = _original_assume_role(self)
    # moto parses the query's Tags.member.N.Key/Value into a list of dicts.
    tags = {tag["Key"]: tag["Value"] for tag in self._get_param("Tags", []) or []}
    if tags:
        access_key = result.result["Credentials"].access_key_id
        _SESSION_TAGS[access_key] = tags
    return result


def _condition_values(request):
    values = access_control.format_incoming_conditional_values(request._data)
    key = getattr(request._access_key, "_access_key_id", None)
    for k, v in _SESSION_TAGS.get(key, {}).items():
        values[f"aws:PrincipalTag/{k}"] = v
    return values


def _check_own_policies(self, resource):
    """moto's IAMRequestBase.check_action_permitted, with the condition values (7)."""
    if self._action == "sts:GetCallerIdentity":
        return
    values = _condition_values(self)
    permitted = False
    for policy in self._access_key.collect_policies():
        result = IAMPolicy(policy).is_action_permitted(self._action, resource, None, values)
        if result == PermissionResult.DENIED:
            self._raise_access_denied()
        elif result == PermissionResult.PERMITTED:
            permitted = True
    if self._is_assuming_role_operation(resource):
        permitted = permitted and self._check_role_trust_relationship(resource)
    if not permitted:
        self._raise_access_denied()


_SUPPLIED_KEYS = ("sts:ExternalId", "aws:RequestTag/", "aws:PrincipalTag/")


def _check_conditions(self, incoming):
    """StringEquals, key by key, with AWS's rule for an absent key (8)."""
    incoming = incoming or {}
    for operator, pairs in (self._statement.get("Condition") or {}).items():
        if operator != "StringEquals":
            continue  # moto evaluates no other operator
        for key, expected in pairs.items():
            wanted = [expected] if isinstance(expected, str) else list(expected)
            if key in incoming:
                if incoming[key] not in wanted:
                    return False
            elif key.startswith(_SUPPLIED_KEYS):
                return False
    return True


def patch():
    moto_server.patch()
    IAMPolicyStatement._check_principal = _check_principal
    IAMPolicyStatement.is_action_permitted = _is_action_permitted
    IAMPolicyStatement._check_conditions = _check_conditions
    access_control.format_incoming_conditional_values = _format
    ActionAuthenticatorMixin._authenticate_and_authorize_action = _authorize
    IAMRequestBase.check_action_permitted = _check_action_permitted
    STSResponse.assume_role = _assume_role
    assert PermissionResult.PERMITTED


if __name__ == "__main__":
    if "INITIAL_NO_AUTH_ACTION_COUNT" not in os.environ:
        raise SystemExit("moto_iam_server.py: set INITIAL_NO_AUTH_ACTION_COUNT")
    patch()
    print("moto_iam_server.py: IAM enforced after "
          f"{os.environ['INITIAL_NO_AUTH_ACTION_COUNT']} actions", file=sys.stderr, flush=True)
    sys.exit(moto_server.main(sys.argv[1:]))
