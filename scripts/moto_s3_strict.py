"""S3 in moto as strict as AWS where Sortie's reads depend on it (issue 41, items 4 and 7).

Loaded by scripts/moto_server.py (patches 8 and 9); refuses to start if moto's S3 code no
longer has the shape these patches wrap.

8. A missing key answers 403 AccessDenied to a caller without s3:ListBucket.
   AWS: "If you don't have the s3:ListBucket permission, Amazon S3 returns an HTTP status
   code 403 Access Denied error" for a GetObject or HeadObject of a key that does not exist
   (https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html and
   API_HeadObject.html, "Permissions"). Stock moto answers 404 NoSuchKey to everyone, so a
   reader that only handled 404 passed every test and wedged on AWS. moto does not
   evaluate IAM by default, so the double decides who lacks s3:ListBucket by the request's
   access key id: a key id that starts with `NOLISTBUCKET` (NO_LIST_BUCKET_KEY_PREFIX)
   stands for a role without s3:ListBucket on any bucket. Such a caller gets, as on AWS:
     - GetObject of a missing key: 403 with an AccessDenied error body;
     - HeadObject of a missing key: 403 with no body (a HEAD has none);
     - ListObjects / ListObjectsV2: 403 AccessDenied (it may not list).
   Every other access key id (the tests' `testing`) stands for a role with s3:ListBucket,
   as infra/template.yaml grants every role that reads artifacts, and gets stock moto's
   404 NoSuchKey. The key id is read from the Authorization header's or a presigned URL's
   `Credential=` (or SigV2's AWSAccessKeyId), so a presigned GET signed by such a key is
   refused the same way.

9. ListObjectsV2 answers short pages on a bucket tagged `sortie-test/list-page-cap`.
   AWS: a ListObjectsV2 page holds at most MaxKeys keys and may hold fewer while
   `IsTruncated` is true (https://docs.aws.amazon.com/AmazonS3/latest/API/API_ListObjectsV2.html:
   "returns some or all (up to 1,000) of the objects"; a reader must page by IsTruncated
   and NextContinuationToken). Stock moto always fills a page to MaxKeys, so a reader that
   took a short page for the end passed. On a bucket whose tag `sortie-test/list-page-cap`
   is a whole number N >= 1 (set with PutBucketTagging), every page holds at most N keys,
   with IsTruncated=true and a continuation token while more follow; MaxKeys in the answer
   stays what was asked. A bucket without the tag is served as stock moto serves it. (This
   is test set-up like patch 3's EKS tags: no real bucket carries the tag.)

crates/store/tests/it/artifacts.rs proves both (its tests fail on stock moto); docs/TESTING.md
says why they exist.
"""

import functools
import re

import moto

NO_LIST_BUCKET_KEY_PREFIX = "NOLISTBUCKET"
LIST_PAGE_CAP_TAG = "sortie-test/list-page-cap"

_CREDENTIAL = re.compile(r"Credential=([^/,\s&]+)/")

_ACCESS_DENIED = (
    '<?xml version="1.0" encoding="UTF-8"?>\n'
    "<Error><Code>AccessDenied</Code><Message>Access Denied</Message>"
    "<RequestId>sortie-strict-s3</RequestId></Error>"
)


def _access_key_id(response):
    """The access key id that signed the request: its Authorization header (SigV4 or V2) or
    a presigned URL's query (SigV4 X-Amz-Credential or V2 AWSAccessKeyId); or ""."""
    authorization = response.headers.get("Authorization") or ""
    found = _CREDENTIAL.search(authorization)
    if found:
        return found.group(1)
    if authorization.startswith("AWS "):
        return authorization[4:].split(":", 1)[0]
    query = response.querystring
    credential = (query.get("X-Amz-Credential") or query.get("AWSAccessKeyId") or [""])[0]
    return credential.split("/", 1)[0]


def lacks_list_bucket(response):
    """Whether the caller stands for a role without s3:ListBucket (patch 8)."""
    return _access_key_id(response).startswith(NO_LIST_BUCKET_KEY_PREFIX)


def _denied():
    return 403, {"Content-Type": "application/xml"}, _ACCESS_DENIED


def _get_missing_key_denied(original, missing_key):
    @functools.wraps(original)
    def key_response_get(self, query, key_name):
        try:
            return original(self, query, key_name)
        except missing_key:
            if lacks_list_bucket(self):
                return _denied()
            raise

    key_response_get.__sortie__ = True
    return key_response_get


def _head_missing_key_denied(original):
    @functools.wraps(original)
    def head_object(self, bucket_name, query, key_name, headers):
        status, response_headers, body = original(self, bucket_name, query, key_name, headers)
        if status == 404 and lacks_list_bucket(self):
            return 403, {}, ""
        return status, response_headers, body

    head_object.__sortie__ = True
    return head_object


def _listing_denied(original):
    @functools.wraps(original)
    def listing(self, *args, **kwargs):
        if lacks_list_bucket(self):
            return _denied()
        return original(self, *args, **kwargs)

    listing.__sortie__ = True
    return listing


def _page_cap(backend, bucket):
    """The bucket's `sortie-test/list-page-cap`, or None."""
    try:
        tags = backend.tagger.get_tag_dict_for_resource(bucket.arn)
    except Exception:  # noqa: BLE001 no tags: stock behaviour
        return None
    value = tags.get(LIST_PAGE_CAP_TAG, "")
    return int(value) if value.isdigit() and int(value) >= 1 else None


def _short_pages(original):
    @functools.wraps(original)
    def list_objects_v2(self, bucket, prefix, delimiter, continuation_token, start_after, max_keys):
        cap = _page_cap(self, bucket)
        if cap is not None and max_keys > cap:
            max_keys = cap
        return original(self, bucket, prefix, delimiter, continuation_token, start_after, max_keys)

    list_objects_v2.__sortie__ = True
    return list_objects_v2


def install():
    """Patches 8 and 9; raises SystemExit if moto's S3 code changed shape."""
    import inspect

    from moto.s3.exceptions import MissingKey
    from moto.s3.models import S3Backend
    from moto.s3.responses import S3Response
    from moto.utilities.tagging_service import TaggingService

    get = S3Response._key_response_get
    head = S3Response.head_object
    if getattr(get, "__sortie__", False):
        return
    get_key = inspect.getsource(S3Response._get_key)
    shape = (
        "return self.get_object()" in inspect.getsource(get)
        and "raise MissingKey(key=key_name)" in get_key
        and 'return 404, response_headers, ""' in inspect.getsource(head)
        and list(inspect.signature(head).parameters)
        == ["self", "bucket_name", "query", "key_name", "headers"]
        and list(inspect.signature(S3Backend.list_objects_v2).parameters)
        == [
            "self",
            "bucket",
            "prefix",
            "delimiter",
            "continuation_token",
            "start_after",
            "max_keys",
        ]
        and "self.backend.list_objects_v2(" in inspect.getsource(S3Response.list_objects_v2)
        and "def list_objects(self)" in inspect.getsource(S3Response)
        and hasattr(TaggingService, "get_tag_dict_for_resource")
        and "self.tagger = TaggingService()" in inspect.getsource(S3Backend.__init__)
    )
    if not shape:
        raise SystemExit(
            f"moto_s3_strict.py: moto {moto.__version__}'s S3 GetObject, HeadObject or "
            "ListObjectsV2 no longer has the shape patches 8 and 9 wrap; revisit them"
        )
    S3Response._key_response_get = _get_missing_key_denied(get, MissingKey)
    S3Response.head_object = _head_missing_key_denied(head)
    S3Response.list_objects_v2 = _listing_denied(S3Response.list_objects_v2)
    S3Response.list_objects = _listing_denied(S3Response.list_objects)
    S3Backend.list_objects_v2 = _short_pages(S3Backend.list_objects_v2)
