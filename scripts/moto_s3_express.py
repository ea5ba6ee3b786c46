"""S3 Express One Zone on moto: directory buckets, CreateSession and session-signed calls
(issue 47 item 14; patch 17).

Loaded by scripts/moto_server.py; refuses to start if moto's S3 code no longer has the
shape this patch wraps. Stock moto 5.2.5 has no directory buckets: it takes any bucket
name, answers `GET /<bucket>?session` with a listing, and serves every object call signed
with IAM credentials. A client that never made a session, or kept using one after it
expired, passed every test and would fail on AWS. This patch serves what the AWS pages
below document, and nothing more:

- Naming (https://docs.aws.amazon.com/AmazonS3/latest/userguide/directory-bucket-naming-rules.html):
  a directory bucket is `<base>--<zone id>--x-s3`, 3 to 63 characters of lowercase
  letters, digits and hyphens, starting and ending with a letter or digit; a general
  purpose bucket may not end in `--x-s3`. Both are refused with 400 InvalidBucketName.
- CreateBucket (https://docs.aws.amazon.com/AmazonS3/latest/API/API_CreateBucket.html):
  a directory bucket needs `CreateBucketConfiguration` with `Location` (Type
  `AvailabilityZone`, Name the zone id of its name) and `Bucket` (Type `Directory`,
  DataRedundancy `SingleAvailabilityZone` when given); otherwise 400 InvalidArgument or
  InvalidBucketName.
- CreateSession (https://docs.aws.amazon.com/AmazonS3/latest/API/API_CreateSession.html):
  `GET /<bucket>?session`, signed with IAM credentials, answers temporary credentials
  scoped to the bucket that "expire after 5 minutes" (`x-amz-create-session-mode`:
  `ReadWrite`, the default, or `ReadOnly`; anything else is 400 InvalidArgument).
- Zonal calls (https://docs.aws.amazon.com/AmazonS3/latest/userguide/s3-express-create-session.html):
  every object call and ListObjectsV2 and DeleteObjects on a directory bucket, except
  CopyObject and HeadBucket, must carry a session token (`x-amz-s3session-token`, or
  `X-Amz-S3session-Token` in a presigned URL's query), be signed with that session's
  access key and with the signing name `s3express`. No token, another bucket's session, a
  foreign key or the `s3` signing name: 403 AccessDenied. An unknown token: 400
  InvalidToken. An expired session: 400 ExpiredToken ("The provided token has expired."),
  so a presigned URL dies with the session that signed it, whatever its X-Amz-Expires. A
  presigned URL past its own X-Amz-Expires: 403 AccessDenied. A ReadOnly session may
  only read (GetObject, HeadObject, ListObjectsV2): a write is 403 AccessDenied.
- ListObjectsV2 (https://docs.aws.amazon.com/AmazonS3/latest/API/API_ListObjectsV2.html):
  on a directory bucket "results are not returned in lexicographical order", a `prefix`
  must end in the delimiter `/`, the only delimiter is `/`, and `start-after` is not
  supported: 400 InvalidArgument otherwise. The double answers each page in reverse key
  order, so a reader that trusts the order fails here as it would on AWS. ListObjects
  (v1) is not a directory bucket call: 501 NotImplemented.

Test hook (not AWS): `POST /_sortie/s3-express/expire-sessions?bucket=<name>` ends every
session of that bucket now, as 5 minutes passing would; it answers the number ended.

crates/store/tests/it/s3_express.rs proves each rule through the real SDK (the tests fail
on stock moto); docs/TESTING.md says why the double exists.
"""

import datetime
import functools
import re
import secrets
import threading
import time
import urllib.parse

import moto

SESSION_SECONDS = 300
_EXPIRE_PATH = "/_sortie/s3-express/expire-sessions"

_DIRECTORY_NAME = re.compile(
    r"^(?P<base>[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)--(?P<zone>[a-z0-9]+-az[0-9]+)--x-s3$"
)
_SCOPE = re.compile(r"Credential=([^/,\s&]+)/[0-9]{8}/[^/]+/([^/]+)/aws4_request")

# bucket name -> zone id, for every directory bucket made through this double.
_DIRECTORY = {}
# session token -> {"bucket", "key", "secret", "mode", "expires"} (Unix seconds).
_SESSIONS = {}
_LOCK = threading.Lock()


def _error(status, code, message):
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Error><Code>{code}</Code><Message>{message}</Message>"
        "<RequestId>sortie-s3-express</RequestId></Error>"
    )
    return status, {"Content-Type": "application/xml"}, body


def _first(query, name):
    value = query.get(name)
    if isinstance(value, list):
        return value[0] if value else None
    return value


def _signature(request, query):
    """(access key id, signing name) of the request: its Authorization header or a
    presigned URL's X-Amz-Credential; (None, None) when unsigned."""
    authorization = request.headers.get("Authorization") or ""
    found = _SCOPE.search(authorization)
    if found:
        return found.group(1), found.group(2)
    credential = _first(query, "X-Amz-Credential") or ""
    found = _SCOPE.search("Credential=" + credential)
    if found:
        return found.group(1), found.group(2)
    return None, None


def _presign_expired(query):
    date, expires = _first(query, "X-Amz-Date"), _first(query, "X-Amz-Expires")
    if not date or not expires or not expires.isdigit():
        return False
    try:
        signed = datetime.datetime.strptime(date, "%Y%m%dT%H%M%SZ").replace(
            tzinfo=datetime.timezone.utc
        )
    except ValueError:
        return False
    return time.time() > signed.timestamp() + int(expires)


def _session_refusal(request, query, bucket, writes):
    """None when the call carries a live session of `bucket` that may do it; else the
    error AWS answers."""
    token = request.headers.get("x-amz-s3session-token") or _first(
        query, "X-Amz-S3session-Token"
    )
    if not token:
        return _error(
            403,
            "AccessDenied",
            "A directory bucket's zonal calls need a session token (CreateSession)",
        )
    with _LOCK:
        session = _SESSIONS.get(token)
    if session is None:
        return _error(400, "InvalidToken", "The provided token is malformed or otherwise invalid.")
    if session["bucket"] != bucket:
        return _error(403, "AccessDenied", "The session token is scoped to another bucket")
    if time.time() >= session["expires"]:
        return _error(400, "ExpiredToken", "The provided token has expired.")
    key, service = _signature(request, query)
    if key != session["key"]:
        return _error(403, "AccessDenied", "The request is not signed with the session's key")
    if service != "s3express":
        return _error(403, "AccessDenied", "A zonal call is signed with the name s3express")
    if _presign_expired(query):
        return _error(403, "AccessDenied", "Request has expired")
    if writes and session["mode"] == "ReadOnly":
        return _error(403, "AccessDenied", "A ReadOnly session may not write")
    return None


def _create_bucket(self, request, bucket):
    """CreateBucket of a directory bucket (or a refused name); None for a general purpose
    bucket moto makes itself."""
    import xmltodict

    body = self.body or b""
    try:
        config = (xmltodict.parse(body) if body else {}).get("CreateBucketConfiguration") or {}
    except Exception:  # noqa: BLE001 moto answers a malformed body itself
        return None
    config = config if isinstance(config, dict) else {}
    wanted = (config.get("Bucket") or {}).get("Type")
    named = bucket.endswith("--x-s3")
    if not named and wanted is None:
        return None
    found = _DIRECTORY_NAME.match(bucket)
    if not named or not found or not 3 <= len(bucket) <= 63:
        return _error(
            400,
            "InvalidBucketName",
            "A directory bucket is named <base>--<zone id>--x-s3 (3 to 63 characters); "
            "only a directory bucket ends in --x-s3",
        )
    location = config.get("Location") or {}
    kind = config.get("Bucket") or {}
    if wanted != "Directory" or location.get("Type") not in ("AvailabilityZone",):
        return _error(
            400,
            "InvalidArgument",
            "A directory bucket needs CreateBucketConfiguration Location "
            "(Type AvailabilityZone) and Bucket (Type Directory)",
        )
    if location.get("Name") != found.group("zone"):
        return _error(
            400,
            "InvalidBucketName",
            "The bucket name's zone id is not its Location's Name",
        )
    if kind.get("DataRedundancy") not in (None, "SingleAvailabilityZone"):
        return _error(400, "InvalidArgument", "DataRedundancy is SingleAvailabilityZone")
    from moto.s3.exceptions import BucketAlreadyExists

    try:
        self.backend.create_bucket(bucket, self.region)
    except BucketAlreadyExists:
        return _error(409, "BucketAlreadyOwnedByYou", "The bucket exists")
    with _LOCK:
        _DIRECTORY[bucket] = found.group("zone")
    return 200, {"Location": f"/{bucket}"}, ""


def _create_session(request, query, bucket):
    key, _service = _signature(request, query)
    if key is None or request.headers.get("x-amz-s3session-token"):
        return _error(403, "AccessDenied", "CreateSession is signed with IAM credentials")
    mode = request.headers.get("x-amz-create-session-mode") or "ReadWrite"
    if mode not in ("ReadWrite", "ReadOnly"):
        return _error(400, "InvalidArgument", "x-amz-create-session-mode is ReadWrite or ReadOnly")
    token = "sortie-s3x-" + secrets.token_urlsafe(24)
    session = {
        "bucket": bucket,
        "key": "ASIAS3X" + secrets.token_hex(8).upper(),
        "secret": secrets.token_urlsafe(30),
        "mode": mode,
        "expires": time.time() + SESSION_SECONDS,
    }
    with _LOCK:
        # a bounded table: sessions past their end are dropped as new ones come
        now = time.time()
        for old in [t for t, s in _SESSIONS.items() if s["expires"] < now - SESSION_SECONDS]:
            del _SESSIONS[old]
        _SESSIONS[token] = session
    expires = datetime.datetime.fromtimestamp(session["expires"], datetime.timezone.utc)
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<CreateSessionResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        f"<Credentials><SessionToken>{token}</SessionToken>"
        f"<SecretAccessKey>{session['secret']}</SecretAccessKey>"
        f"<AccessKeyId>{session['key']}</AccessKeyId>"
        f"<Expiration>{expires.strftime('%Y-%m-%dT%H:%M:%SZ')}</Expiration>"
        "</Credentials></CreateSessionResult>"
    )
    return 200, {"Content-Type": "application/xml"}, body


_CONTENTS = re.compile(r"<Contents>.*?</Contents>", re.S)


def _reversed_listing(response):
    status, headers, body = response
    text = body.decode() if isinstance(body, bytes) else body
    found = _CONTENTS.findall(text)
    if status != 200 or len(found) < 2:
        return response
    start = text.index(found[0])
    end = text.rindex(found[-1]) + len(found[-1])
    return status, headers, text[:start] + "".join(reversed(found)) + text[end:]


def _listing_refusal(query):
    prefix = _first(query, "prefix")
    delimiter = _first(query, "delimiter")
    if prefix and not prefix.endswith("/"):
        return _error(400, "InvalidArgument", "A directory bucket's prefix must end in /")
    if delimiter not in (None, "/"):
        return _error(400, "InvalidArgument", "A directory bucket's only delimiter is /")
    if _first(query, "start-after") is not None:
        return _error(400, "InvalidArgument", "start-after is not supported for directory buckets")
    return None


def _bucket_calls(original):
    @functools.wraps(original)
    def bucket_response(self, request, full_url):
        bucket = self.parse_bucket_name_from_url(request, full_url)
        if not bucket:
            return original(self, request, full_url)
        query = self._get_querystring(request, full_url)
        method = request.method
        if method == "PUT" and not query:
            made = _create_bucket(self, request, bucket)
            if made is not None:
                return made
            return original(self, request, full_url)
        with _LOCK:
            directory = bucket in _DIRECTORY
        if not directory:
            return original(self, request, full_url)
        if method == "DELETE" and not query:
            answer = original(self, request, full_url)
            if isinstance(answer, tuple) and answer[0] in (200, 204):
                with _LOCK:
                    _DIRECTORY.pop(bucket, None)
            return answer
        if method == "GET" and "session" in query:
            return _create_session(request, query, bucket)
        if method == "GET" and _first(query, "list-type") == "2":
            refusal = _session_refusal(request, query, bucket, writes=False)
            refusal = refusal or _listing_refusal(query)
            if refusal:
                return refusal
            return _reversed_listing(self._send_response(original(self, request, full_url)))
        if method == "GET" and not query:
            return _error(501, "NotImplemented", "ListObjects is not supported for directory buckets; use ListObjectsV2")
        if method == "POST" and "delete" in query:
            refusal = _session_refusal(request, query, bucket, writes=True)
            if refusal:
                return refusal
        return original(self, request, full_url)

    bucket_response.__sortie__ = True
    return bucket_response


def _key_calls(original):
    @functools.wraps(original)
    def key_response(self, request, full_url):
        bucket = self.parse_bucket_name_from_url(request, full_url)
        with _LOCK:
            directory = bucket in _DIRECTORY
        if not directory:
            return original(self, request, full_url)
        if request.method == "PUT" and request.headers.get("x-amz-copy-source"):
            return original(self, request, full_url)  # CopyObject: IAM, as HeadBucket
        query = self._get_querystring(request, full_url)
        writes = request.method in ("PUT", "POST", "DELETE")
        refusal = _session_refusal(request, query, bucket, writes=writes)
        if refusal:
            return refusal
        return original(self, request, full_url)

    key_response.__sortie__ = True
    return key_response


def _expire_answer(environ, start_response):
    query = urllib.parse.parse_qs(environ.get("QUERY_STRING", ""))
    bucket = (query.get("bucket") or [""])[0]
    now = time.time()
    ended = 0
    with _LOCK:
        for session in _SESSIONS.values():
            if session["bucket"] == bucket and session["expires"] > now:
                session["expires"] = now
                ended += 1
    body = f'{{"ended": {ended}}}'.encode()
    start_response(
        "200 OK",
        [("Content-Type", "application/json"), ("Content-Length", str(len(body)))],
    )
    return [body]


def _with_expire_hook(call):
    @functools.wraps(call)
    def answering(self, environ, start_response):
        if environ.get("PATH_INFO", "") == _EXPIRE_PATH and environ.get("REQUEST_METHOD") == "POST":
            return _expire_answer(environ, start_response)
        return call(self, environ, start_response)

    answering.__sortie_s3_express__ = True
    return answering


def install():
    """Patch 17; raises SystemExit if moto's S3 code changed shape."""
    import inspect

    from moto.moto_server import werkzeug_app
    from moto.s3.responses import S3Response

    if getattr(S3Response._bucket_response, "__sortie__", False):
        return
    shape = (
        list(inspect.signature(S3Response._bucket_response).parameters)
        == ["self", "request", "full_url"]
        and list(inspect.signature(S3Response._key_response).parameters)
        == ["self", "request", "full_url"]
        and "self._bucket_response(request, full_url)" in inspect.getsource(S3Response.bucket_response)
        and "self._key_response(request, full_url)" in inspect.getsource(S3Response.key_response)
        and hasattr(S3Response, "_get_querystring")
        and hasattr(S3Response, "_send_response")
        and isinstance(getattr(werkzeug_app, "SIGNING_ALIASES", None), dict)
    )
    if not shape:
        raise SystemExit(
            f"moto_s3_express.py: moto {moto.__version__}'s S3 responses no longer have the "
            "shape patch 17 wraps; revisit it"
        )
    # a zonal call is signed with the name s3express; moto routes by signing name
    werkzeug_app.SIGNING_ALIASES["s3express"] = "s3"
    S3Response._bucket_response = _bucket_calls(S3Response._bucket_response)
    S3Response._key_response = _key_calls(S3Response._key_response)
    app = werkzeug_app.DomainDispatcherApplication
    if not getattr(app.__call__, "__sortie_s3_express__", False):
        app.__call__ = _with_expire_hook(app.__call__)
