//! GitHub's side of a request over [`sortie_http::rest`]: its headers, its rate limits, its
//! error bodies, and the API URL it accepts. Timeouts, the answer cap, bounded retries,
//! paging links and the count of requests by endpoint are the shared transport's.

use std::time::Duration;

use http::header::ACCEPT;
use http::{HeaderMap, HeaderValue, StatusCode};
use sortie_http::rest::{self, header_str, reported_wait, Service};

pub(crate) use sortie_http::rest::{Answer, Outgoing};

use crate::GithubError;

/// GitHub: for a secondary rate limit with neither `retry-after` nor a spent primary limit,
/// "wait for at least one minute before retrying"
/// (<https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api#exceeding-the-rate-limit>).
const SECONDARY_LIMIT_WAIT: Duration = Duration::from_secs(60);
/// The REST API version the client is written against
/// (<https://docs.github.com/en/rest/about-the-rest-api/api-versions>).
const API_VERSION: &str = "2022-11-28";

/// The HTTP side of the client; its base is `https://api.github.com` or
/// `https://host/api/v3`, no trailing slash.
pub(crate) type Transport = rest::Transport<GithubApi>;

/// A transport for `api_url`: `https://`, or `http://` to a loopback address only. A 2xx or
/// 304 is an answer; server errors, lost connections and short rate-limit waits are tried
/// again up to [`rest::MAX_ATTEMPTS`] times in all.
pub(crate) fn new(api_url: &str) -> Result<Transport, GithubError> {
    let invalid = |reason| GithubError::InvalidApiUrl {
        url: api_url.to_string(),
        reason,
    };
    let base = rest::api_root(api_url, "the app key").map_err(invalid)?;
    let mut headers = HeaderMap::new();
    headers.insert(
        ACCEPT,
        HeaderValue::from_static("application/vnd.github+json"),
    );
    headers.insert(
        "x-github-api-version",
        HeaderValue::from_static(API_VERSION),
    );
    rest::Transport::new(GithubApi, base, headers).map_err(invalid)
}

/// What is GitHub's own in reading its answers.
pub(crate) struct GithubApi;

impl Service for GithubApi {
    const NAME: &'static str = "GitHub";

    type Error = GithubError;

    /// A 304 answers a request sent with `If-None-Match`.
    fn accepts(&self, status: StatusCode) -> bool {
        status.is_success() || status == StatusCode::NOT_MODIFIED
    }

    fn rate_limit_wait(&self, answer: &Answer) -> Option<Duration> {
        let status = answer.status;
        if status != StatusCode::FORBIDDEN && status != StatusCode::TOO_MANY_REQUESTS {
            return None;
        }
        rate_limit_wait(
            status,
            &answer.headers,
            &github_message(&answer.body),
            chrono::Utc::now().timestamp(),
        )
    }
}

/// GitHub's `message`, with the `message` (or `code` and `field`) of each of its `errors`
/// (a 422's detail): one line, at most 200 characters
/// (<https://docs.github.com/en/rest/using-the-rest-api/troubleshooting-the-rest-api>).
pub(crate) fn github_message(body: &[u8]) -> String {
    #[derive(serde::Deserialize)]
    struct ErrorBody {
        #[serde(default)]
        message: Option<String>,
        #[serde(default)]
        errors: Vec<serde_json::Value>,
    }
    let Ok(parsed) = serde_json::from_slice::<ErrorBody>(body) else {
        return sortie_http::error_detail(body);
    };
    let mut text = parsed.message.unwrap_or_default();
    for error in parsed.errors.iter().take(5) {
        let detail = match error {
            serde_json::Value::String(s) => s.clone(),
            other => other["message"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| {
                    format!(
                        "{} {}",
                        other["field"].as_str().unwrap_or(""),
                        other["code"].as_str().unwrap_or("")
                    )
                }),
        };
        text.push_str(": ");
        text.push_str(&detail);
    }
    sortie_http::one_line(&text).chars().take(200).collect()
}

/// How long a 403 or 429 asks to wait, when it is a rate limit; `None` when it is not (a
/// permission refusal). GitHub
/// (<https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api#exceeding-the-rate-limit>):
/// the primary limit answers 403 or 429 with `x-ratelimit-remaining: 0`, to be retried
/// after `x-ratelimit-reset` (UTC epoch seconds); a secondary limit answers 403 or 429,
/// to be retried after `retry-after` seconds when present, else after the reset when
/// remaining is 0, else after at least a minute.
pub(crate) fn rate_limit_wait(
    status: StatusCode,
    headers: &HeaderMap,
    message: &str,
    now_epoch: i64,
) -> Option<Duration> {
    if let Some(secs) = header_str(headers, "retry-after").and_then(|v| v.trim().parse().ok()) {
        return Some(reported_wait(secs));
    }
    if header_str(headers, "x-ratelimit-remaining").map(str::trim) == Some("0") {
        let reset: i64 = header_str(headers, "x-ratelimit-reset")
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(now_epoch);
        return Some(reported_wait(
            u64::try_from(reset.saturating_sub(now_epoch)).unwrap_or(0),
        ));
    }
    let lower = message.to_ascii_lowercase();
    if status == StatusCode::TOO_MANY_REQUESTS || lower.contains("rate limit") {
        return Some(SECONDARY_LIMIT_WAIT);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use sortie_http::rest::MAX_REPORTED_WAIT;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.insert(*k, v.parse().unwrap());
        }
        map
    }

    #[test]
    fn rate_limits_are_told_from_refusals() {
        let now = 1_000;
        let forbidden = StatusCode::FORBIDDEN;
        assert_eq!(
            rate_limit_wait(forbidden, &headers(&[("retry-after", "30")]), "", now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            rate_limit_wait(
                forbidden,
                &headers(&[
                    ("x-ratelimit-remaining", "0"),
                    ("x-ratelimit-reset", "1042")
                ]),
                "API rate limit exceeded",
                now
            ),
            Some(Duration::from_secs(42))
        );
        assert_eq!(
            rate_limit_wait(
                forbidden,
                &headers(&[("x-ratelimit-remaining", "4999")]),
                "You have exceeded a secondary rate limit",
                now
            ),
            Some(SECONDARY_LIMIT_WAIT)
        );
        assert_eq!(
            rate_limit_wait(
                forbidden,
                &headers(&[("x-ratelimit-remaining", "4999")]),
                "Resource not accessible by integration",
                now
            ),
            None
        );
        assert_eq!(
            rate_limit_wait(StatusCode::TOO_MANY_REQUESTS, &HeaderMap::new(), "", now),
            Some(SECONDARY_LIMIT_WAIT)
        );
    }

    #[test]
    fn a_validation_failure_quotes_its_errors() {
        let body = br#"{"message":"Validation Failed","errors":[{"resource":"IssueComment","code":"custom","field":"body","message":"body is too long (maximum is 65536 characters)"}]}"#;
        assert_eq!(
            github_message(body),
            "Validation Failed: body is too long (maximum is 65536 characters)"
        );
        assert_eq!(github_message(br#"{"message":"Not Found"}"#), "Not Found");
        assert_eq!(github_message(b"<html>oops</html>"), "<html>oops</html>");
    }

    proptest! {
        #[test]
        fn hostile_rate_limit_headers_give_bounded_waits(
            retry in "\\PC{0,24}", remaining in "\\PC{0,8}", reset in "\\PC{0,24}", now in any::<i64>()
        ) {
            let mut map = HeaderMap::new();
            for (k, v) in [("retry-after", &retry), ("x-ratelimit-remaining", &remaining), ("x-ratelimit-reset", &reset)] {
                if let Ok(v) = v.parse() { map.insert(k, v); }
            }
            if let Some(wait) = rate_limit_wait(StatusCode::FORBIDDEN, &map, "", now) {
                prop_assert!(wait <= MAX_REPORTED_WAIT);
            }
        }

    }
}
