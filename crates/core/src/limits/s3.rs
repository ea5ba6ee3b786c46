//! S3 bucket names and object keys, KMS key ids, the DynamoDB lock table.

use super::*;

// ---------------------------------------------------------------------------------------
// S3, KMS and the DynamoDB lock table
// ---------------------------------------------------------------------------------------

/// Shortest S3 bucket name: 3 characters.
///
/// Source: <https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html>
/// (general purpose buckets).
pub const BUCKET_NAME_MIN: usize = 3;
/// Longest S3 bucket name: 63 characters (source as [`BUCKET_NAME_MIN`]).
pub const BUCKET_NAME_MAX: usize = 63;
/// Prefixes S3 reserves: a bucket name must not start with one (source as [`BUCKET_NAME_MIN`]).
pub const BUCKET_RESERVED_PREFIXES: [&str; 3] = ["xn--", "sthree-", "amzn-s3-demo-"];
/// Suffixes S3 reserves: a bucket name must not end with one (source as [`BUCKET_NAME_MIN`]).
pub const BUCKET_RESERVED_SUFFIXES: [&str; 5] =
    ["-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3"];

/// Why `name` is not a valid general purpose S3 bucket name, or `None` when it is one:
/// 3–63 of `[a-z0-9.-]`, starting and ending with a letter or digit, no `..`, not an IPv4
/// address, none of the reserved prefixes and suffixes.
pub fn bucket_name_problem(name: &str) -> Option<String> {
    let b = name.as_bytes();
    if !(BUCKET_NAME_MIN..=BUCKET_NAME_MAX).contains(&b.len()) {
        return Some(format!(
            "must be {BUCKET_NAME_MIN} to {BUCKET_NAME_MAX} characters long"
        ));
    }
    if !name
        .chars()
        .all(|c| is_lower_alnum(c) || c == '.' || c == '-')
    {
        return Some("may only contain lowercase letters, digits, `.` and `-`".into());
    }
    if !b[0].is_ascii_alphanumeric() || !b[b.len() - 1].is_ascii_alphanumeric() {
        return Some("must start and end with a letter or digit".into());
    }
    if name.contains("..") {
        return Some("must not contain `..`".into());
    }
    if name.parse::<std::net::Ipv4Addr>().is_ok() {
        return Some("must not be formatted as an IP address".into());
    }
    if let Some(p) = BUCKET_RESERVED_PREFIXES
        .iter()
        .find(|p| name.starts_with(**p))
    {
        return Some(format!("must not start with `{p}`, which S3 reserves"));
    }
    if let Some(s) = BUCKET_RESERVED_SUFFIXES
        .iter()
        .find(|s| name.ends_with(**s))
    {
        return Some(format!("must not end with `{s}`, which S3 reserves"));
    }
    None
}

/// True for a valid general purpose S3 bucket name (see [`bucket_name_problem`]).
pub fn is_bucket_name(name: &str) -> bool {
    bucket_name_problem(name).is_none()
}

/// Longest S3 object key: 1024 bytes of UTF-8.
///
/// Source: <https://docs.aws.amazon.com/AmazonS3/latest/userguide/object-keys.html>
/// ("The object key name … has a maximum length of 1,024 bytes").
pub const OBJECT_KEY_MAX_BYTES: usize = 1024;

/// Why `key` is not an S3 object key Sortie accepts, or `None`: 1–1024 bytes and no
/// control character (S3 allows some, but they cannot survive XML 1.0 listings and are
/// the "characters to avoid" of the same page).
pub fn object_key_problem(key: &str) -> Option<String> {
    if key.is_empty() || key.len() > OBJECT_KEY_MAX_BYTES {
        return Some(format!(
            "must be 1 to {OBJECT_KEY_MAX_BYTES} bytes of UTF-8"
        ));
    }
    if has_control(key) {
        return Some("must not contain control characters".into());
    }
    None
}

/// The state object's key is `<key_prefix><environment path>/terraform.tfstate`, and
/// `use_lockfile` adds `.tflock` to it: the longest `key_prefix` that keeps the longest
/// environment path's lock file key within [`OBJECT_KEY_MAX_BYTES`].
pub const STATE_KEY_PREFIX_MAX_BYTES: usize = OBJECT_KEY_MAX_BYTES
    - super::SESSION_TAG_VALUE_MAX // the longest environment path (`names::MAX_ENV_PATH_LEN`)
    - "/terraform.tfstate".len()
    - ".tflock".len();

/// Longest KMS key id (key id, key ARN, alias name or alias ARN): 2048 characters.
///
/// Source: <https://docs.aws.amazon.com/kms/latest/APIReference/API_Encrypt.html>
/// (`KeyId`, length 1–2048).
pub const KMS_KEY_ID_MAX: usize = 2048;

/// Shortest DynamoDB table name: 3 characters of `[a-zA-Z0-9_.-]`.
///
/// Source: <https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_CreateTable.html>
/// (`TableName`, length 3–255, pattern `[a-zA-Z0-9_.-]+`).
pub const DYNAMODB_TABLE_NAME_MIN: usize = 3;
/// Longest DynamoDB table name: 255 characters (source as [`DYNAMODB_TABLE_NAME_MIN`]).
pub const DYNAMODB_TABLE_NAME_MAX: usize = 255;

/// True for a DynamoDB table name (see [`DYNAMODB_TABLE_NAME_MIN`]).
pub fn is_dynamodb_table_name(s: &str) -> bool {
    (DYNAMODB_TABLE_NAME_MIN..=DYNAMODB_TABLE_NAME_MAX).contains(&s.len())
        && s.chars().all(|c| is_word(c) || c == '.' || c == '-')
}
