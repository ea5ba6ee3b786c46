//! Shaping: the strings Sortie builds from user input (a principal's subject, an
//! environment path, a job id), made to fit the AWS or Kubernetes field they go to.
//!
//! Each `is_*` check in this module tree says whether AWS would accept a value; each
//! function here turns *any* string into one it accepts, so a long or odd input can never
//! turn a launch, a stop or an AssumeRole into a refusal. Every function is total (it never
//! fails), deterministic, and cuts only on a character boundary. `crates/core/tests/it/shape.rs`
//! proves, for arbitrary input, that each output satisfies the rule it is shaped for.

use super::*;

/// Longest StopTask `reason`: 255 characters.
///
/// Source: <https://docs.aws.amazon.com/AmazonECS/latest/APIReference/API_StopTask.html>
/// (`reason`: "Up to 255 characters are allowed in this message"). Read strictly, as 255
/// UTF-8 bytes, which is never more than 255 characters.
pub const ECS_STOP_REASON_MAX: usize = 255;

/// What a shaped value that had to be cut ends with.
const CUT_MARK: &str = "...";

/// The longest prefix of `s` of at most `max` UTF-8 bytes that ends on a character boundary.
pub fn prefix_within_bytes(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// The first `max` characters of `s`.
fn prefix_chars(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}

/// True for a StopTask `reason` ECS accepts (see [`ECS_STOP_REASON_MAX`]).
pub fn is_stop_reason(s: &str) -> bool {
    s.len() <= ECS_STOP_REASON_MAX
}

/// A StopTask `reason` ECS accepts: control characters become spaces, and a reason longer
/// than [`ECS_STOP_REASON_MAX`] bytes is cut on a character boundary and ends with `...`.
/// The start (`sortie: canceled by `, `sortie: timed out after `) is always kept, so the
/// outcome read back from the stopped task is the same.
pub fn stop_reason(s: &str) -> String {
    let clean: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if clean.len() <= ECS_STOP_REASON_MAX {
        return clean;
    }
    let head = prefix_within_bytes(&clean, ECS_STOP_REASON_MAX - CUT_MARK.len());
    format!("{head}{CUT_MARK}")
}

/// A tag value that both STS session tags and ECS resource tags accept: every character
/// outside `[\p{L}\p{Z}\p{N}_.:/=+\-@]` becomes `_`, and at most [`SESSION_TAG_VALUE_MAX`]
/// (= [`ECS_TAG_VALUE_MAX`]) characters are kept.
///
/// Sources: <https://docs.aws.amazon.com/STS/latest/APIReference/API_Tag.html> and
/// <https://docs.aws.amazon.com/AmazonECS/latest/APIReference/API_Tag.html> (value 0–256,
/// "letters, numbers, and spaces representable in UTF-8, and the following characters:
/// + - = . _ : / @").
pub fn tag_value(s: &str) -> String {
    let clean: String = s
        .chars()
        .map(|c| if is_session_tag_char(c) { c } else { '_' })
        .collect();
    prefix_chars(&clean, SESSION_TAG_VALUE_MAX.min(ECS_TAG_VALUE_MAX))
}

/// A tag key that both STS and ECS accept: as [`tag_value`], at most
/// [`SESSION_TAG_KEY_MAX`] characters, never empty (`_`), and never starting with
/// `aws:`, which AWS reserves (such a key gets a `_` in front).
pub fn tag_key(s: &str) -> String {
    let clean: String = s
        .chars()
        .map(|c| if is_session_tag_char(c) { c } else { '_' })
        .collect();
    let clean = if clean.to_ascii_lowercase().starts_with("aws:") {
        format!("_{clean}")
    } else if clean.is_empty() {
        "_".to_string()
    } else {
        clean
    };
    prefix_chars(&clean, SESSION_TAG_KEY_MAX)
}

/// True for an ECS (or session) tag key that does not start with the reserved `aws:`.
pub fn is_tag_key(s: &str) -> bool {
    is_session_tag_key(s) && !s.to_ascii_lowercase().starts_with("aws:")
}

/// An STS `RoleSessionName`: every character outside `[\w+=,.@-]` becomes `-`, at most
/// [`ROLE_SESSION_NAME_MAX`] characters, padded with `-` to [`ROLE_SESSION_NAME_MIN`].
pub fn session_name(s: &str) -> String {
    let mut clean: String = s
        .chars()
        .map(|c| if is_role_name_char(c) { c } else { '-' })
        .take(ROLE_SESSION_NAME_MAX)
        .collect();
    while clean.len() < ROLE_SESSION_NAME_MIN {
        clean.push('-');
    }
    clean
}

/// A RunTask `startedBy` ECS accepts: every character outside `[\w/-]` becomes `-`, at
/// most [`ECS_STARTED_BY_MAX`] characters.
pub fn started_by_value(s: &str) -> String {
    s.chars()
        .map(|c| {
            if is_word(c) || c == '-' || c == '/' {
                c
            } else {
                '-'
            }
        })
        .take(ECS_STARTED_BY_MAX)
        .collect()
}

/// 8 hexadecimal digits of the 32-bit FNV-1a hash of `s`: a short, stable tag for a value
/// that had to be cut, so two long inputs with the same start still differ.
pub fn short_hash(s: &str) -> String {
    let mut h: u32 = 0x811c_9dc5;
    for b in s.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    format!("{h:08x}")
}

/// A Kubernetes label value: characters outside `[-_.A-Za-z0-9]` become `-`, the value
/// starts and ends alphanumeric (others are trimmed), and one longer than
/// [`LABEL_VALUE_MAX`] is cut and ends with `-` and [`short_hash`] of the whole input.
/// An input with no alphanumeric character gives the empty value, which is valid.
pub fn label_value(s: &str) -> String {
    let clean: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect();
    let trim = |t: &str| {
        t.trim_matches(|c: char| !c.is_ascii_alphanumeric())
            .to_string()
    };
    let clean = trim(&clean);
    if clean.len() <= LABEL_VALUE_MAX {
        return clean;
    }
    let hash = short_hash(s);
    let head = trim(&clean[..LABEL_VALUE_MAX - hash.len() - 1]);
    format!("{head}-{hash}")
}

/// A DNS-1123 label (a Kubernetes Job or namespace name): lower case, characters outside
/// `[a-z0-9-]` become `-`, starting and ending alphanumeric, at most [`DNS_LABEL_MAX`]
/// (a long one is cut and ends with `-` and [`short_hash`]); `x` when nothing is left.
pub fn dns_label(s: &str) -> String {
    let clean: String = s
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if is_lower_alnum(c) {
                c
            } else {
                '-'
            }
        })
        .collect();
    let trim = |t: &str| t.trim_matches('-').to_string();
    let clean = trim(&clean);
    if clean.is_empty() {
        return "x".to_string();
    }
    if clean.len() <= DNS_LABEL_MAX {
        return clean;
    }
    let hash = short_hash(s);
    let head = trim(&clean[..DNS_LABEL_MAX - hash.len() - 1]);
    if head.is_empty() {
        return hash;
    }
    format!("{head}-{hash}")
}
