//! Kubernetes' own rules as the double applies them: `Status` errors, label selectors,
//! label and name syntax, query strings, and the random names and uids it hands out.

use std::collections::BTreeMap;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde_json::{json, Value};

use super::state::Answer;
use super::{KubeRequest, TOKEN_PREFIX};

/// Whether the request carries `Authorization: Bearer k8s-aws-v1.<base64url, no padding>`.
pub(super) fn authenticated(request: &KubeRequest) -> bool {
    request
        .bearer()
        .and_then(|token| token.strip_prefix(TOKEN_PREFIX))
        .is_some_and(|rest| !rest.is_empty() && URL_SAFE_NO_PAD.decode(rest).is_ok())
}

/// A Kubernetes `Status` failure.
pub(super) fn failure(code: u16, reason: &str, message: &str, details: Option<Value>) -> Answer {
    let mut status = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    });
    if let Some(details) = details {
        status["details"] = details;
    }
    (code, status)
}

pub(super) fn bad_request(message: &str) -> Answer {
    failure(400, "BadRequest", message, None)
}

pub(super) fn invalid(name: &str, message: &str) -> Answer {
    failure(
        422,
        "Invalid",
        message,
        Some(json!({"name": name, "group": "batch", "kind": "Job"})),
    )
}

pub(super) fn job_not_found(name: &str) -> Answer {
    failure(
        404,
        "NotFound",
        &format!("jobs.batch \"{name}\" not found"),
        Some(json!({"name": name, "group": "batch", "kind": "jobs"})),
    )
}

pub(super) fn method_not_allowed(request: &KubeRequest) -> Answer {
    failure(
        405,
        "MethodNotAllowed",
        &format!(
            "the server does not allow this method on the requested resource ({} {})",
            request.method, request.path
        ),
        None,
    )
}

/// The `reason` Kubernetes gives with an HTTP status.
pub(super) fn reason_for(code: u16) -> &'static str {
    match code {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        406 => "NotAcceptable",
        409 => "Conflict",
        410 => "Expired",
        415 => "UnsupportedMediaType",
        422 => "Invalid",
        429 => "TooManyRequests",
        500 => "InternalError",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "Unknown",
    }
}

/// An equality label selector: every (key, value) must be a label of the object.
pub(super) type Selector = Vec<(String, String)>;

/// The request's `labelSelector`, or the `400` answering one the double does not support.
pub(super) fn selector_of(request: &KubeRequest) -> Result<Selector, Answer> {
    let text = request
        .query
        .get("labelSelector")
        .map(String::as_str)
        .unwrap_or_default();
    parse_selector(text).map_err(|message| bad_request(&message))
}

/// Parses `k=v,k2==v2` (equality terms only; the double supports no other syntax).
pub(super) fn parse_selector(text: &str) -> Result<Selector, String> {
    let mut terms = Vec::new();
    if text.trim().is_empty() {
        return Ok(terms);
    }
    for term in text.split(',') {
        let term = term.trim();
        let unsupported = || {
            format!(
                "unable to parse requirement {term:?}: the KubeDouble supports only equality \
                 selectors (k=v, k==v)"
            )
        };
        if term.contains("!=") {
            return Err(unsupported());
        }
        let (key, value) = term
            .split_once("==")
            .or_else(|| term.split_once('='))
            .ok_or_else(unsupported)?;
        let (key, value) = (key.trim(), value.trim());
        let key_ok = !key.is_empty()
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
        let value_ok = value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if !key_ok || !value_ok {
            return Err(unsupported());
        }
        terms.push((key.to_string(), value.to_string()));
    }
    Ok(terms)
}

/// Whether `object`'s `metadata.labels` carry every term of `selector`.
pub(super) fn matches(selector: &Selector, object: &Value) -> bool {
    let labels = object.pointer("/metadata/labels");
    selector.iter().all(|(key, value)| {
        labels
            .and_then(|labels| labels.get(key))
            .and_then(Value::as_str)
            == Some(value.as_str())
    })
}

/// A label name or value: at most 63 of `[A-Za-z0-9_.-]`, starting and ending alphanumeric
/// (a value may also be empty). Kubernetes, "Labels and Selectors", syntax and character
/// set: <https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#syntax-and-character-set>.
pub(super) fn is_label_text(s: &str) -> bool {
    let alnum = |c: char| c.is_ascii_alphanumeric();
    s.len() <= 63
        && s.chars().all(|c| alnum(c) || matches!(c, '-' | '_' | '.'))
        && (s.is_empty() || (s.starts_with(alnum) && s.ends_with(alnum)))
}

/// Why the API server would refuse `labels` (a `metadata.labels` object), as its own words,
/// or `None`: each key an optional DNS-1123 subdomain prefix (at most 253) and `/`, then a
/// non-empty name; each value a string that is empty or a valid name.
pub(super) fn labels_problem(labels: &Value) -> Option<String> {
    let Some(labels) = labels.as_object() else {
        return Some("must be a map of strings".into());
    };
    for (key, value) in labels {
        let (prefix, name) = match key.rsplit_once('/') {
            Some((p, n)) => (Some(p), n),
            None => (None, key.as_str()),
        };
        let prefix_ok = prefix
            .is_none_or(|p| !p.is_empty() && p.len() <= 253 && p.split('.').all(is_dns1123_label));
        if !prefix_ok || name.is_empty() || !is_label_text(name) {
            return Some(format!(
                "Invalid value: \"{key}\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character, at most 63 characters, with an optional DNS subdomain prefix and '/'"
            ));
        }
        let Some(text) = value.as_str() else {
            return Some(format!(
                "Invalid value: {value}: label values must be strings"
            ));
        };
        if !is_label_text(text) {
            return Some(format!(
                "Invalid value: \"{text}\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character, at most 63 characters"
            ));
        }
    }
    None
}

/// A label value Kubernetes accepts: empty, or at most 63 of `[-_.A-Za-z0-9]` starting
/// and ending alphanumeric (<https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#syntax-and-character-set>).
pub(super) fn is_label_value(v: &str) -> bool {
    let alnum = |c: char| c.is_ascii_alphanumeric();
    v.is_empty()
        || (v.len() <= 63
            && v.chars().all(|c| alnum(c) || matches!(c, '-' | '_' | '.'))
            && v.starts_with(alnum)
            && v.ends_with(alnum))
}

/// The first label of the Job or its pod template whose value Kubernetes refuses, in the
/// API server's words (`metadata.labels: Invalid value: ...`).
pub(super) fn invalid_label(job: &Value) -> Option<String> {
    let places = [
        ("metadata.labels", &job["metadata"]["labels"]),
        (
            "spec.template.metadata.labels",
            &job["spec"]["template"]["metadata"]["labels"],
        ),
    ];
    places.into_iter().find_map(|(path, labels)| {
        labels.as_object()?.values().find_map(|v| {
            let v = v.as_str().unwrap_or_default();
            (!is_label_value(v)).then(|| {
                format!(
                    "{path}: Invalid value: \"{v}\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
                )
            })
        })
    })
}

/// A DNS-1123 label: 1 to 63 of `[a-z0-9-]`, starting and ending alphanumeric.
pub(super) fn is_dns1123_label(name: &str) -> bool {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    !name.is_empty()
        && name.len() <= 63
        && name.chars().all(|c| alnum(c) || c == '-')
        && name.starts_with(alnum)
        && name.ends_with(alnum)
}

pub(super) fn parse_query(query: &str) -> BTreeMap<String, String> {
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(key), percent_decode(value))
        })
        .collect()
}

/// Decodes `%XX` escapes and `+` (a space), as Go's `url.ParseQuery` does.
pub(super) fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let hex = |b: u8| (b as char).to_digit(16);
    let mut i = 0;
    while i < bytes.len() {
        let high = bytes.get(i + 1).copied().and_then(hex);
        let low = bytes.get(i + 2).copied().and_then(hex);
        match (bytes[i], high, low) {
            (b'%', Some(high), Some(low)) => {
                out.push((high * 16 + low) as u8);
                i += 3;
            }
            (b'+', _, _) => {
                out.push(b' ');
                i += 1;
            }
            (byte, _, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

pub(super) fn random_bytes<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).expect("random bytes");
    bytes
}

/// `len` random characters of `[a-z0-9]`, like the suffix of a generated name.
pub(super) fn random_suffix(len: usize) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    random_bytes::<16>()
        .iter()
        .take(len)
        .map(|b| ALPHABET[usize::from(*b) % ALPHABET.len()] as char)
        .collect()
}

/// A random UUID (version 4), as Kubernetes gives every object.
pub(super) fn random_uid() -> String {
    let mut b = random_bytes::<16>();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|byte| format!("{byte:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}
