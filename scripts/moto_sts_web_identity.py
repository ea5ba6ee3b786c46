"""STS AssumeRoleWithWebIdentity as strict as AWS documents it (patch 16; issue 45).

Loaded by scripts/moto_server.py; refuses to start if moto's STS handler no longer has the
shape this patch wraps.

Why: stock moto 5.2.5 answers AssumeRoleWithWebIdentity with credentials for any token, or
for none: a job identity token that was unsigned, expired, for another audience, or whose
`sub` the role's trust policy does not allow would pass every test and fail on AWS.

What AWS documents, and what the double does before moto's own handler runs
(https://docs.aws.amazon.com/STS/latest/APIReference/API_AssumeRoleWithWebIdentity.html,
https://docs.aws.amazon.com/IAM/latest/UserGuide/id_roles_providers_create_oidc.html,
https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_iam-condition-keys.html#condition-keys-wif):
- the token is a JWT signed with RS256/384/512 or ES256/384/512 whose timestamps are
  integers; anything else is `InvalidIdentityToken`;
- its `iss` must name an IAM OIDC provider of the role's account (the provider's URL is
  the issuer without `https://`): else `InvalidIdentityToken` ("No OpenIDConnect provider
  found in your account for ...");
- its `aud` must be one of the provider's client ids: else `InvalidIdentityToken`
  ("Incorrect token audience");
- the signing key is found by the token's `kid` in the JWKS that the issuer's discovery
  document (`<iss>/.well-known/openid-configuration`) names: a fetch that fails is
  `IDPCommunicationError`, a key or signature that does not verify `InvalidIdentityToken`.
  The issuer must be https; the double also takes plain http to a loopback host, where the
  test issuers listen;
- `exp` must be in the future: else `ExpiredTokenException` ("Token expired: ...");
  `nbf` and `iat` must not be in the future. AWS documents no clock skew, so the double
  allows none;
- the role's trust policy must have an Allow statement (and no Deny) for
  `sts:AssumeRoleWithWebIdentity` whose `Federated` principal is the provider's ARN and
  whose conditions hold, with `<provider url>:aud` and `<provider url>:sub` as condition
  values (`StringEquals`, `StringLike`, `StringNotEquals`, `StringNotLike`, and `...IfExists`;
  any other operator or key does not hold): else `AccessDenied` (HTTP 403, "Not authorized
  to perform sts:AssumeRoleWithWebIdentity").
A token that passes reaches moto's handler, which answers credentials as before.
GET /_sortie/sts-web-identity answers how many tokens were accepted and refused, by code.
"""

import base64
import fnmatch
import functools
import json
import threading
import time
import urllib.parse
import urllib.request

_COUNTS = {"accepted": 0, "refused": {}}
_COUNTS_LOCK = threading.Lock()
_FETCH_TIMEOUT = 5
_ACTION = "sts:AssumeRoleWithWebIdentity"


class Refused(Exception):
    """Why a token is refused: AWS's error code, HTTP status and message."""

    def __init__(self, code, message, status=400):
        super().__init__(message)
        self.code, self.message, self.status = code, message, status


def _b64(part):
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def _invalid(message="The web identity token that was passed could not be validated by AWS. "
             "Get a new identity token from the identity provider and then retry the request."):
    return Refused("InvalidIdentityToken", message)


def _decode(token):
    parts = (token or "").split(".")
    if len(parts) != 3:
        raise _invalid("Couldn't parse the web identity token: it is not a JWT")
    try:
        header = json.loads(_b64(parts[0]))
        claims = json.loads(_b64(parts[1]))
        signature = _b64(parts[2])
    except Exception:  # noqa: BLE001 any malformed part
        raise _invalid("Couldn't parse the web identity token") from None
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise _invalid("Couldn't parse the web identity token")
    return header, claims, signature, f"{parts[0]}.{parts[1]}".encode()


def _issuer_url(iss):
    """The issuer as an IAM OIDC provider's URL (host and path, no scheme)."""
    parsed = urllib.parse.urlparse(iss)
    return parsed.netloc + parsed.path.rstrip("/")


def _fetch_json(url):
    parsed = urllib.parse.urlparse(url)
    loopback = parsed.hostname in ("127.0.0.1", "localhost", "::1")
    if parsed.scheme != "https" and not (parsed.scheme == "http" and loopback):
        raise Refused("InvalidIdentityToken", f"The issuer {url} is not an https URL")
    try:
        with urllib.request.urlopen(url, timeout=_FETCH_TIMEOUT) as answer:  # noqa: S310
            return json.loads(answer.read(1024 * 1024))
    except Exception as e:  # noqa: BLE001 unreachable, not JSON, an error status
        raise Refused(
            "IDPCommunicationError",
            f"Couldn't retrieve verification key from your identity provider ({url}: {e})",
        ) from None


def _verify(header, signing_input, signature, jwk):
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
    from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

    alg = header.get("alg")
    digests = {"256": hashes.SHA256(), "384": hashes.SHA384(), "512": hashes.SHA512()}
    if not isinstance(alg, str) or alg[:2] not in ("RS", "ES") or alg[2:] not in digests:
        raise _invalid(f"The token's algorithm {alg!r} is not one AWS accepts")
    digest = digests[alg[2:]]
    try:
        if alg.startswith("ES"):
            curves = {"P-256": ec.SECP256R1(), "P-384": ec.SECP384R1(), "P-521": ec.SECP521R1()}
            curve = curves[jwk["crv"]]
            x = int.from_bytes(_b64(jwk["x"]), "big")
            y = int.from_bytes(_b64(jwk["y"]), "big")
            key = ec.EllipticCurvePublicNumbers(x, y, curve).public_key()
            half = len(signature) // 2
            if len(signature) % 2 or half == 0:
                raise ValueError("odd signature")
            der = encode_dss_signature(
                int.from_bytes(signature[:half], "big"), int.from_bytes(signature[half:], "big")
            )
            key.verify(der, signing_input, ec.ECDSA(digest))
        else:
            n = int.from_bytes(_b64(jwk["n"]), "big")
            e = int.from_bytes(_b64(jwk["e"]), "big")
            key = rsa.RSAPublicNumbers(e, n).public_key()
            key.verify(signature, signing_input, padding.PKCS1v15(), digest)
    except (InvalidSignature, KeyError, ValueError, TypeError):
        raise _invalid("The web identity token's signature could not be verified") from None


def _as_list(value):
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def _conditions_hold(conditions, values):
    """Whether every condition of a trust statement holds for `values` (key -> value)."""
    for operator, tests in (conditions or {}).items():
        if not isinstance(tests, dict):
            return False
        if_exists = operator.endswith("IfExists")
        base = operator[: -len("IfExists")] if if_exists else operator
        for key, expected in tests.items():
            actual = values.get(key.lower())
            if actual is None:
                if if_exists or base in ("StringNotEquals", "StringNotLike"):
                    continue
                return False
            expected = [str(e) for e in _as_list(expected)]
            if base == "StringEquals":
                ok = actual in expected
            elif base == "StringLike":
                ok = any(fnmatch.fnmatchcase(actual, e) for e in expected)
            elif base == "StringNotEquals":
                ok = actual not in expected
            elif base == "StringNotLike":
                ok = not any(fnmatch.fnmatchcase(actual, e) for e in expected)
            else:
                return False
            if not ok:
                return False
    return True


def _action_matches(actions):
    return any(fnmatch.fnmatchcase(_ACTION.lower(), str(a).lower()) for a in _as_list(actions))


def _trusted(policy_document, provider_arn, values):
    """Whether the trust policy lets the provider's token assume the role."""
    try:
        policy = json.loads(policy_document) if isinstance(policy_document, str) else policy_document
    except ValueError:
        return False
    allowed = False
    for statement in _as_list((policy or {}).get("Statement")):
        principal = statement.get("Principal") or {}
        federated = _as_list(principal.get("Federated")) if isinstance(principal, dict) else []
        if provider_arn not in federated or not _action_matches(statement.get("Action")):
            continue
        if not _conditions_hold(statement.get("Condition"), values):
            continue
        if statement.get("Effect") == "Deny":
            return False
        if statement.get("Effect") == "Allow":
            allowed = True
    return allowed


def check(token, role_arn, iam_backend, now=None):
    """Raises Refused unless `token` may assume `role_arn` (see the module's doc)."""
    now = time.time() if now is None else now
    header, claims, signature, signing_input = _decode(token)
    for claim in ("exp", "iat", "nbf"):
        if claim in claims and not isinstance(claims[claim], int):
            raise _invalid(f"The token's {claim} must be an integer")
    iss = claims.get("iss")
    if not isinstance(iss, str) or not iss:
        raise _invalid("The token has no issuer (iss)")
    url = _issuer_url(iss)
    provider = None
    for candidate in iam_backend.open_id_providers.values():
        if candidate.url.rstrip("/") == url:
            provider = candidate
    if provider is None:
        raise _invalid(f"No OpenIDConnect provider found in your account for {iss}")
    audiences = _as_list(claims.get("aud"))
    if not any(a in provider.client_id_list for a in audiences):
        raise _invalid("Incorrect token audience")
    if "exp" not in claims:
        raise _invalid("The token has no expiry (exp)")
    if now >= claims["exp"]:
        raise Refused(
            "ExpiredTokenException",
            f"Token expired: current date/time {int(now)} must be before the expiration "
            f"date/time {claims['exp']}",
        )
    for claim in ("nbf", "iat"):
        if claim in claims and claims[claim] > now:
            raise _invalid(f"The token's {claim} is in the future")
    discovery = _fetch_json(iss.rstrip("/") + "/.well-known/openid-configuration")
    if discovery.get("issuer", "").rstrip("/") != iss.rstrip("/"):
        raise _invalid("The issuer's discovery document names another issuer")
    jwks = _fetch_json(discovery.get("jwks_uri", ""))
    keys = [k for k in _as_list(jwks.get("keys")) if k.get("kid") == header.get("kid")]
    if not keys:
        raise _invalid(f"No key {header.get('kid')!r} in the issuer's JWKS")
    _verify(header, signing_input, signature, keys[0])
    role = iam_backend.get_role_by_arn(role_arn)
    values = {f"{url}:aud".lower(): audiences[0], f"{url}:sub".lower(): str(claims.get("sub", ""))}
    if not _trusted(role.assume_role_policy_document, provider.arn, values):
        raise Refused("AccessDenied", f"Not authorized to perform {_ACTION}", status=403)


def _count(code):
    with _COUNTS_LOCK:
        if code is None:
            _COUNTS["accepted"] += 1
        else:
            _COUNTS["refused"][code] = _COUNTS["refused"].get(code, 0) + 1


def _error_answer(refused):
    body = (
        '<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error>'
        f"<Type>Sender</Type><Code>{refused.code}</Code>"
        f"<Message>{_xml(refused.message)}</Message></Error>"
        "<RequestId>c6104cbe-af31-11e0-8154-cbc7ccf896c7</RequestId></ErrorResponse>"
    )
    # moto reads an answer's status from its headers (BaseResponse._transform_response).
    return refused.status, {"Content-Type": "text/xml", "status": refused.status}, body


def _xml(text):
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _strict(original):
    @functools.wraps(original)
    def assume_role_with_web_identity(self):
        from moto.iam.models import iam_backends
        from moto.utilities.utils import get_partition

        role_arn = self._get_param("RoleArn") or ""
        account = role_arn.split(":")[4] if role_arn.count(":") >= 5 else self.current_account
        try:
            backend = iam_backends[account][get_partition(self.region)]
            try:
                backend.get_role_by_arn(role_arn)
            except Exception:  # noqa: BLE001 moto's own answer for a missing role follows
                return original(self)
            check(self._get_param("WebIdentityToken"), role_arn, backend)
        except Refused as refused:
            _count(refused.code)
            return _error_answer(refused)
        _count(None)
        return original(self)

    assume_role_with_web_identity.__sortie__ = True
    return assume_role_with_web_identity


COUNTS_PATH = "/_sortie/sts-web-identity"


def counts_answer(environ, start_response):
    with _COUNTS_LOCK:
        body = json.dumps(_COUNTS).encode()
    start_response("200 OK", [("Content-Type", "application/json"),
                              ("Content-Length", str(len(body)))])
    return [body]


def install():
    """Patch 16; raises SystemExit if moto's STS handler changed shape."""
    import inspect

    from moto.sts.responses import TokenResponse

    current = TokenResponse.assume_role_with_web_identity
    if getattr(current, "__sortie__", False):
        return
    source = inspect.getsource(current)
    if 'self._get_param("RoleArn")' not in source or "assume_role_with_web_identity(" not in source:
        raise SystemExit(
            "moto_sts_web_identity.py: moto's AssumeRoleWithWebIdentity changed shape; "
            "revisit patch 16"
        )
    TokenResponse.assume_role_with_web_identity = _strict(current)

    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    call = DomainDispatcherApplication.__call__

    @functools.wraps(call)
    def answer(self, environ, start_response):
        if environ.get("PATH_INFO", "") == COUNTS_PATH:
            return counts_answer(environ, start_response)
        return call(self, environ, start_response)

    DomainDispatcherApplication.__call__ = answer
