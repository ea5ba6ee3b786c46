//! IAM role ARNs and STS AssumeRole (ExternalId, session names, session tags).

use super::*;

// ---------------------------------------------------------------------------------------
// IAM role ARNs
// ---------------------------------------------------------------------------------------

/// Longest IAM role ARN: 2048 characters.
///
/// Source: <https://docs.aws.amazon.com/IAM/latest/APIReference/API_Role.html> (`Arn`,
/// length 20–2048) and STS AssumeRole `RoleArn` (20–2048),
/// <https://docs.aws.amazon.com/STS/latest/APIReference/API_AssumeRole.html>.
pub const ROLE_ARN_MAX: usize = 2048;

/// Longest IAM role name: 64 characters of `[\w+=,.@-]+`.
///
/// Source: <https://docs.aws.amazon.com/IAM/latest/APIReference/API_CreateRole.html>
/// (`RoleName`, length 1–64, pattern `[\w+=,.@-]+`).
pub const ROLE_NAME_MAX: usize = 64;

/// Longest IAM path: 512 characters, `/` or `/…/` of U+0021–U+007E.
///
/// Source: <https://docs.aws.amazon.com/IAM/latest/APIReference/API_CreateRole.html>
/// (`Path`, length 1–512, pattern `(\u002F)|(\u002F[\u0021-\u007E]+\u002F)`).
pub const ROLE_PATH_MAX: usize = 512;

/// True for a character IAM allows in a role (or user) name: `[\w+=,.@-]`.
pub fn is_role_name_char(c: char) -> bool {
    is_word(c) || "+=,.@-".contains(c)
}

/// Why `arn` is not an IAM role ARN `arn:<partition>:iam::<account>:role/<path/><name>`,
/// or `None` when it is one.
pub fn role_arn_problem(arn: &str) -> Option<String> {
    if arn.len() > ROLE_ARN_MAX {
        return Some(format!("is longer than {ROLE_ARN_MAX} characters"));
    }
    if has_space_or_control(arn) {
        return Some("must not contain whitespace or control characters".into());
    }
    let Some([_, _, service, region, account, resource]) = arn_parts(arn) else {
        return Some(format!(
            "is not an ARN in a known partition ({})",
            PARTITIONS.join(", ")
        ));
    };
    if service != "iam" || !region.is_empty() || !is_account_id(account) {
        return Some("is not an IAM ARN (arn:<partition>:iam::<12-digit account>:…)".into());
    }
    let Some(rest) = resource.strip_prefix("role/") else {
        return Some("is not a role ARN (…:role/<name>)".into());
    };
    // `role/a/b/name`: the path is `/a/b/`, the name `name`.
    let (path_inner, name) = match rest.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, rest),
    };
    if name.is_empty() || name.chars().count() > ROLE_NAME_MAX {
        return Some(format!("role name must be 1 to {ROLE_NAME_MAX} characters"));
    }
    if !name.chars().all(is_role_name_char) {
        return Some("role name may only contain letters, digits and +=,.@_-".into());
    }
    if let Some(inner) = path_inner {
        let path_len = inner.len() + 2;
        if inner.is_empty() || path_len > ROLE_PATH_MAX {
            return Some(format!(
                "role path must be `/` or `/…/`, at most {ROLE_PATH_MAX} characters"
            ));
        }
        if !inner.chars().all(|c| ('\u{21}'..='\u{7e}').contains(&c)) {
            return Some("role path may only contain printable ASCII characters".into());
        }
    }
    None
}

/// True for a valid IAM role ARN (see [`role_arn_problem`]).
pub fn is_role_arn(arn: &str) -> bool {
    role_arn_problem(arn).is_none()
}

// ---------------------------------------------------------------------------------------
// STS AssumeRole
// ---------------------------------------------------------------------------------------

/// Shortest ExternalId: 2 characters.
///
/// Source: <https://docs.aws.amazon.com/STS/latest/APIReference/API_AssumeRole.html>
/// (`ExternalId`, length 2–1224, pattern `[\w+=,.@:\/-]*`).
pub const EXTERNAL_ID_MIN: usize = 2;
/// Longest ExternalId: 1224 characters (same source as [`EXTERNAL_ID_MIN`]).
pub const EXTERNAL_ID_MAX: usize = 1224;

/// Why `id` is not a valid STS ExternalId, or `None` when it is one.
pub fn external_id_problem(id: &str) -> Option<String> {
    let n = id.chars().count();
    if !(EXTERNAL_ID_MIN..=EXTERNAL_ID_MAX).contains(&n) {
        return Some(format!(
            "must be {EXTERNAL_ID_MIN} to {EXTERNAL_ID_MAX} characters long"
        ));
    }
    if !id.chars().all(|c| is_word(c) || "+=,.@:/-".contains(c)) {
        return Some("may only contain letters, digits and +=,.@:/_- (STS ExternalId)".into());
    }
    None
}

/// Shortest RoleSessionName: 2 characters.
///
/// Source: <https://docs.aws.amazon.com/STS/latest/APIReference/API_AssumeRole.html>
/// (`RoleSessionName`, length 2–64, pattern `[\w+=,.@-]*`).
pub const ROLE_SESSION_NAME_MIN: usize = 2;
/// Longest RoleSessionName: 64 characters (same source as [`ROLE_SESSION_NAME_MIN`]).
pub const ROLE_SESSION_NAME_MAX: usize = 64;

/// True for a valid RoleSessionName, such as the launcher's `sortie-<job id>`.
pub fn is_role_session_name(s: &str) -> bool {
    (ROLE_SESSION_NAME_MIN..=ROLE_SESSION_NAME_MAX).contains(&s.len())
        && s.chars().all(is_role_name_char)
}

/// Most session tags on one AssumeRole: 50.
///
/// Source: <https://docs.aws.amazon.com/STS/latest/APIReference/API_AssumeRole.html>
/// (`Tags`, "maximum number of 50 items") and `Tag`,
/// <https://docs.aws.amazon.com/STS/latest/APIReference/API_Tag.html>.
pub const SESSION_TAGS_MAX: usize = 50;
/// Longest session tag key: 128 characters (key length 1–128, source as [`SESSION_TAGS_MAX`]).
pub const SESSION_TAG_KEY_MAX: usize = 128;
/// Longest session tag value: 256 characters (value length 0–256, source as
/// [`SESSION_TAGS_MAX`]). Sortie's `sortie:runner` session tag carries the runner id, so
/// a runner id is at most this long (see [`crate::names::MAX_ENV_PATH_LEN`]).
pub const SESSION_TAG_VALUE_MAX: usize = 256;

/// True for a character of a session tag key or value: `[\p{L}\p{Z}\p{N}_.:/=+\-@]`.
///
/// `\p{L}` is read as [`char::is_alphabetic`] (which also admits a few combining marks),
/// `\p{Z}` as the space separators below, `\p{N}` as [`char::is_numeric`].
pub fn is_session_tag_char(c: char) -> bool {
    let separator = matches!(
        c,
        ' ' | '\u{a0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200a}' | '\u{2028}' | '\u{2029}' | '\u{202f}' | '\u{205f}' | '\u{3000}'
    );
    c.is_alphabetic() || separator || c.is_numeric() || "_.:/=+-@".contains(c)
}

/// True for a valid session tag key (1–128 characters).
pub fn is_session_tag_key(s: &str) -> bool {
    (1..=SESSION_TAG_KEY_MAX).contains(&s.chars().count()) && s.chars().all(is_session_tag_char)
}

/// True for a valid session tag value (0–256 characters).
pub fn is_session_tag_value(s: &str) -> bool {
    s.chars().count() <= SESSION_TAG_VALUE_MAX && s.chars().all(is_session_tag_char)
}
