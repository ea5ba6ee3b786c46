//! The one place that splits the `/-/` separator.
//!
//! Group and environment paths contain `/` (`acme/payments`), so in URLs they end
//! at a `-` segment: `/v1/groups/acme/payments/-/runners/r1`,
//! `/v1/environments/acme/payments/prod/-/jobs`, and the root group is
//! `/v1/groups/-/runners`. Before routing, [`canonical_path`] rewrites such a
//! path so that the group or environment becomes **one** percent-encoded segment
//! (`/v1/groups/acme%2Fpayments/-/runners/r1`), which axum's `Router` matches
//! against the templates of the route table (`/v1/groups/{group}/-/runners/{name}`);
//! the path extractors decode it back and parse it. An empty path (the root
//! group) becomes the segment [`EMPTY_SEGMENT`].
//!
//! A client may also send the group or environment path as one percent-encoded
//! segment, as OpenAPI clients encode a path parameter (`acme%2Fpayments%2Fprod`):
//! the canonical form for clients. Each segment is decoded once, so both forms give
//! the same path. The root group's parameter is `-` (`/v1/groups/-/-/runners`, or
//! `/v1/groups/-/runners` written by hand).

use axum::extract::Request;
use axum::http::uri::{PathAndQuery, Uri};

/// The segment that stands for an empty group or environment path (the root group).
/// No real path can be `-`: its first `-` segment would be the separator.
pub const EMPTY_SEGMENT: &str = "-";

/// The request's path as the client sent it, before [`canonical_path`], for messages.
#[derive(Debug, Clone)]
pub(crate) struct OriginalPath(pub String);

/// Rewrites a request path for the router: one trailing `/` is dropped, and the
/// group or environment path of `/v1/groups/...` and `/v1/environments/...` routes
/// becomes one percent-encoded segment. A group route without the separator is left
/// as it is, so no route matches it (404).
pub fn canonical_path(path: &str) -> String {
    let path = path
        .strip_suffix('/')
        .filter(|p| !p.is_empty())
        .unwrap_or(path);
    for (prefix, separator_required) in [("/v1/groups/", true), ("/v1/environments/", false)] {
        let Some(rest) = path.strip_prefix(prefix) else {
            continue;
        };
        let segments: Vec<&str> = rest.split('/').collect();
        let (name, tail) = match segments.iter().position(|s| *s == "-") {
            // `-/-/...`: the root group written as its parameter `-`, then the separator
            // (no route's tail starts with `-`).
            Some(0) if segments.get(1) == Some(&"-") => {
                (String::new(), Some(segments[2..].join("/")))
            }
            Some(i) => (
                decode_name(&segments[..i]),
                Some(segments[i + 1..].join("/")),
            ),
            None if separator_required => return path.to_string(),
            None => (decode_name(&segments), None),
        };
        let mut out = format!("{prefix}{}", encode_segment(&name));
        if let Some(tail) = tail {
            out.push_str("/-/");
            out.push_str(&tail);
        }
        return out;
    }
    path.to_string()
}

/// A group or environment path from its URL segments, each percent-decoded once
/// (`ac%6De` is `acme`, `acme%2Fpayments` is `acme/payments`). A segment that
/// [`encoded_segment_problem`] refuses is kept as sent, so that the path extractor
/// names the problem (400 naming `group` or `environment`).
fn decode_name(segments: &[&str]) -> String {
    segments
        .iter()
        .map(|segment| match decode_param(segment) {
            Ok(decoded) if encoded_segment_problem(segment, &decoded).is_none() => decoded,
            _ => segment.to_string(),
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// Why a URL segment of a group or environment path, `decoded` once, cannot stand:
/// it still holds a `%` (encoded twice, such as `%252F`), or an escape made a `-`
/// segment, which would be the separator (`%2D`, `a%2F-%2Fb`). `None` when it is fine.
pub(crate) fn encoded_segment_problem(raw: &str, decoded: &str) -> Option<&'static str> {
    if decoded.contains('%') {
        return Some(
            "is percent-encoded twice (it still holds `%` once decoded): encode the path once, `/` as %2F",
        );
    }
    if decoded != raw && decoded.split('/').any(|piece| piece == EMPTY_SEGMENT) {
        return Some(
            "encodes the `-` separator as a segment (%2D): a group or environment path has no `-` segment",
        );
    }
    None
}

/// Why a decoded group or environment path cannot stand for its shape: an empty
/// segment (`acme//prod`, a trailing `/`) or a `.` or `..` segment. `None` when its
/// segments are all there (their characters are checked when the path is parsed).
pub(crate) fn path_shape_problem(path: &str) -> Option<String> {
    if path.is_empty() {
        return None;
    }
    path.split('/').find_map(|segment| match segment {
        "" => Some(format!("`{path}` has an empty segment")),
        "." | ".." => Some(format!(
            "`{path}` has a `{segment}` segment: paths are never relative"
        )),
        _ => None,
    })
}

/// Decodes one path segment's percent-escapes strictly: `%` must be followed by two
/// hex digits, and the result must be UTF-8. The error is the problem, for a 400.
pub(crate) fn decode_param(raw: &str) -> Result<String, &'static str> {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .filter(|h| h.iter().all(u8::is_ascii_hexdigit))
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or("has a malformed percent-escape (`%` must be followed by two hex digits)")?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| "is not valid UTF-8 once percent-decoded")
}

/// The value of a `{group}` or `{environment}` segment, as the router decoded it.
pub(crate) fn decode_segment(segment: &str) -> &str {
    if segment == EMPTY_SEGMENT {
        ""
    } else {
        segment
    }
}

/// Percent-encodes every byte but the unreserved ones (`A-Z a-z 0-9 - . _ ~`), so that
/// no decoded character (`/`, `%`, `#`, `?`, a space, a non-ASCII letter) can change
/// the shape of the rewritten URI: the router sees exactly one segment.
fn encode_segment(path: &str) -> String {
    if path.is_empty() {
        return EMPTY_SEGMENT.to_string();
    }
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Applies [`canonical_path`] to a request, keeping its query and remembering the
/// original path.
pub(crate) fn rewrite(mut request: Request) -> Request {
    let original = request.uri().path().to_string();
    let path = canonical_path(&original);
    if path != original {
        let pq = match request.uri().query() {
            Some(q) => format!("{path}?{q}"),
            None => path,
        };
        if let Ok(pq) = PathAndQuery::try_from(pq) {
            let mut parts = request.uri().clone().into_parts();
            parts.path_and_query = Some(pq);
            if let Ok(uri) = Uri::from_parts(parts) {
                *request.uri_mut() = uri;
            }
        }
    }
    request.extensions_mut().insert(OriginalPath(original));
    request
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_and_environment_paths_become_one_segment() {
        let cases = [
            (
                "/v1/groups/acme/payments/-/runners",
                "/v1/groups/acme%2Fpayments/-/runners",
            ),
            ("/v1/groups/-/runners", "/v1/groups/-/-/runners"),
            (
                "/v1/groups/acme/-/rules/prod",
                "/v1/groups/acme/-/rules/prod",
            ),
            (
                "/v1/groups/acme/-/rules/prod/",
                "/v1/groups/acme/-/rules/prod",
            ),
            ("/v1/groups/acme/runners", "/v1/groups/acme/runners"),
            ("/v1/groups/a%2Fb/-/runners", "/v1/groups/a%2Fb/-/runners"),
            ("/v1/groups/-/-/runners", "/v1/groups/-/-/runners"),
            (
                "/v1/environments/acme%2Fpayments%2Fprod/-/jobs",
                "/v1/environments/acme%2Fpayments%2Fprod/-/jobs",
            ),
            (
                "/v1/environments/acme%2fpayments/prod",
                "/v1/environments/acme%2Fpayments%2Fprod",
            ),
            (
                "/v1/groups/a%252Fb/-/runners",
                "/v1/groups/a%25252Fb/-/runners",
            ),
            (
                "/v1/groups/a%2F-%2Fb/-/runners",
                "/v1/groups/a%252F-%252Fb/-/runners",
            ),
            (
                "/v1/environments/acme/payments/prod/-/jobs",
                "/v1/environments/acme%2Fpayments%2Fprod/-/jobs",
            ),
            (
                "/v1/environments/acme/payments/prod",
                "/v1/environments/acme%2Fpayments%2Fprod",
            ),
            ("/v1/environments/acme/jobs", "/v1/environments/acme%2Fjobs"),
            ("/v1/environments/-/jobs", "/v1/environments/-/-/jobs"),
            ("/v1/jobs/x/logs", "/v1/jobs/x/logs"),
            ("/v1/health/", "/v1/health"),
            ("/", "/"),
        ];
        for (given, want) in cases {
            assert_eq!(canonical_path(given), want, "{given}");
        }
    }

    #[test]
    fn segments_are_percent_decoded_strictly() {
        assert_eq!(decode_param("r%31").as_deref(), Ok("r1"));
        assert_eq!(decode_param("%C3%A9").as_deref(), Ok("é"));
        for bad in ["%", "r%3", "%zz", "%+1", "%FF", "%C3%28"] {
            assert!(decode_param(bad).is_err(), "{bad}");
        }
        // Escapes in group paths are decoded, except into `/` or the separator.
        assert_eq!(
            canonical_path("/v1/groups/ac%6De/pay/-/runners"),
            "/v1/groups/acme%2Fpay/-/runners"
        );
        assert_eq!(
            canonical_path("/v1/groups/%2D/-/runners"),
            "/v1/groups/%252D/-/runners"
        );
        assert_eq!(
            canonical_path("/v1/groups/a%zz/-/rules"),
            "/v1/groups/a%25zz/-/rules"
        );
    }

    #[test]
    fn no_decoded_character_can_split_or_end_the_rewritten_segment() {
        // `%23` is `#` and `%3F` is `?`: once decoded they must not start a fragment or
        // a query in the rewritten URI (schemathesis found a 405 here).
        let path = canonical_path("/v1/environments/%C2%B4MS%C2%8A%23/-/refresh-runner");
        assert_eq!(
            path, "/v1/environments/%C2%B4MS%C2%8A%23/-/refresh-runner",
            "one segment, every reserved byte escaped"
        );
        let path = canonical_path("/v1/groups/a%3Fb/c d/-/runners");
        assert_eq!(path, "/v1/groups/a%3Fb%2Fc%20d/-/runners");
        assert!(PathAndQuery::try_from(path.as_str()).is_ok());
    }

    #[test]
    fn the_rewrite_keeps_the_query_and_the_original_path() {
        let req = Request::builder()
            .uri("/v1/environments/acme/prod/-/jobs?limit=5")
            .body(axum::body::Body::empty())
            .unwrap();
        let req = rewrite(req);
        assert_eq!(
            req.uri().to_string(),
            "/v1/environments/acme%2Fprod/-/jobs?limit=5"
        );
        assert_eq!(
            req.extensions().get::<OriginalPath>().unwrap().0,
            "/v1/environments/acme/prod/-/jobs"
        );
    }
}
