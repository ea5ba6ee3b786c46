//! GitLab's side of a request over [`sortie_http::rest`]: the token header, its rate limits,
//! its error bodies, the paging header, and the instance URL it accepts. Timeouts, the
//! answer cap, bounded retries and the count of requests by endpoint are the shared
//! transport's.

use std::time::Duration;

use http::header::ACCEPT;
use http::{HeaderMap, HeaderValue, StatusCode};
use sortie_http::rest::{self, header_str, reported_wait, Service};

pub(crate) use sortie_http::rest::Retry;

use crate::{GitlabError, Secret};

/// The wait assumed for a 429 that says nothing of when to come back: GitLab's throttles
/// count requests per period, one minute by default
/// (<https://docs.gitlab.com/administration/settings/user_and_ip_rate_limits/>).
const DEFAULT_RATE_LIMIT_WAIT: Duration = Duration::from_secs(60);
/// The header a personal, project or group access token goes in
/// (<https://docs.gitlab.com/api/rest/authentication/#personalprojectgroup-access-tokens>).
const TOKEN_HEADER: &str = "private-token";

/// An answer read whole.
pub(crate) struct Answer(rest::Answer);

impl std::ops::Deref for Answer {
    type Target = rest::Answer;

    fn deref(&self) -> &rest::Answer {
        &self.0
    }
}

impl From<rest::Answer> for Answer {
    fn from(answer: rest::Answer) -> Self {
        Self(answer)
    }
}

impl Answer {
    /// What the answer's `x-next-page` says
    /// (<https://docs.gitlab.com/api/rest/#pagination>).
    pub(crate) fn next_page(&self) -> NextPage {
        next_page(self.header("x-next-page"))
    }
}

/// What an offset-paged answer says of the page after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NextPage {
    /// `x-next-page` is present and empty: this was the last page.
    Last,
    /// `x-next-page` names the next page.
    Page(u32),
    /// `x-next-page` is absent (a proxy dropped it) or not a page number.
    Unknown,
}

/// Reads an `x-next-page` header: GitLab sends the next page's index, empty on the last
/// page (<https://docs.gitlab.com/api/rest/#other-pagination-headers>).
pub(crate) fn next_page(header: Option<&str>) -> NextPage {
    match header.map(str::trim) {
        None => NextPage::Unknown,
        Some("") => NextPage::Last,
        Some(text) => match text.parse::<u32>() {
            Ok(page) if page > 0 => NextPage::Page(page),
            _ => NextPage::Unknown,
        },
    }
}

/// What a request sends, besides its call name and path.
pub(crate) struct Outgoing {
    pub(crate) json: Option<Vec<u8>>,
    pub(crate) retry: Retry,
}

impl Outgoing {
    /// A request without a body, tried again on any transient failure.
    pub(crate) const READ: Self = Self {
        json: None,
        retry: Retry::Idempotent,
    };

    /// What the shared transport sends.
    pub(crate) fn rest(&self) -> rest::Outgoing<'_> {
        rest::Outgoing {
            json: self.json.as_deref(),
            retry: self.retry,
            ..rest::Outgoing::default()
        }
    }
}

/// The HTTP side of the client; its base is the REST API's root,
/// `https://gitlab.example.com/api/v4`, no trailing slash.
pub(crate) type Transport = rest::Transport<GitlabApi>;

/// A transport for the instance at `instance_url` (`https://`, or `http://` to a loopback
/// address only), sending `token`. A 2xx is an answer; what `Outgoing::retry` allows is
/// tried again, up to [`rest::MAX_ATTEMPTS`] in all.
pub(crate) fn new(instance_url: &str, token: &Secret) -> Result<Transport, GitlabError> {
    let base = api_base(instance_url)?;
    let mut headers = HeaderMap::new();
    headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
    headers.insert(TOKEN_HEADER, token_header(token)?);
    rest::Transport::new(GitlabApi, base, headers).map_err(|reason| GitlabError::InvalidUrl {
        url: instance_url.to_string(),
        reason,
    })
}

/// What is GitLab's own in reading its answers.
pub(crate) struct GitlabApi;

impl Service for GitlabApi {
    const NAME: &'static str = "GitLab";

    type Error = GitlabError;

    /// A 429: Rack::Attack's throttle, refused before GitLab handles the request.
    fn rate_limit_wait(&self, answer: &rest::Answer) -> Option<Duration> {
        (answer.status == StatusCode::TOO_MANY_REQUESTS)
            .then(|| rate_limit_wait(&answer.headers, chrono::Utc::now()))
    }

    /// A 503 may say when to come back; a short wait is honoured.
    fn server_error_wait(&self, answer: &rest::Answer) -> Option<Duration> {
        retry_after(&answer.headers, chrono::Utc::now())
    }
}

/// The token as a header value marked sensitive (never printed by `http`'s Debug).
fn token_header(token: &Secret) -> Result<HeaderValue, GitlabError> {
    let text = token.expose();
    if text.trim().is_empty() {
        return Err(GitlabError::InvalidToken("it is empty".into()));
    }
    rest::credential(text).ok_or_else(|| {
        GitlabError::InvalidToken("it holds characters a header cannot carry".into())
    })
}

/// GitLab's error text, one line, at most 200 characters: `message` as a string, or a
/// validation failure's `message` object (`{"field": ["is too long"]}`), or `error` (with
/// its `error_description`)
/// (<https://docs.gitlab.com/api/rest/troubleshooting/#data-validation-and-error-reporting>).
pub(crate) fn gitlab_message(body: &[u8]) -> String {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(body) else {
        return sortie_http::error_detail(body);
    };
    let mut text = match value.get("message") {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(serde_json::Value::Object(fields)) => fields
            .iter()
            .take(5)
            .map(|(field, errors)| {
                let errors = match errors {
                    serde_json::Value::Array(list) => list
                        .iter()
                        .take(3)
                        .map(|e| e.as_str().map(str::to_string).unwrap_or(e.to_string()))
                        .collect::<Vec<_>>()
                        .join(", "),
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                format!("{field} {errors}")
            })
            .collect::<Vec<_>>()
            .join("; "),
        Some(serde_json::Value::Array(list)) => list
            .iter()
            .take(5)
            .map(|e| e.as_str().map(str::to_string).unwrap_or(e.to_string()))
            .collect::<Vec<_>>()
            .join("; "),
        _ => String::new(),
    };
    if text.is_empty() {
        if let Some(error) = value.get("error").and_then(|e| e.as_str()) {
            text = error.to_string();
            if let Some(detail) = value.get("error_description").and_then(|e| e.as_str()) {
                text.push_str(": ");
                text.push_str(detail);
            }
        }
    }
    if text.is_empty() {
        return sortie_http::error_detail(body);
    }
    sortie_http::one_line(&text).chars().take(200).collect()
}

/// How long a 429 asks to wait: `Retry-After` (seconds, or an HTTP date), else
/// `RateLimit-Reset` (Unix time), else `RateLimit-ResetTime` (an HTTP date), else a minute;
/// capped at a day
/// (<https://docs.gitlab.com/administration/settings/user_and_ip_rate_limits/#response-headers>).
pub(crate) fn rate_limit_wait(headers: &HeaderMap, now: chrono::DateTime<chrono::Utc>) -> Duration {
    retry_after(headers, now).unwrap_or(DEFAULT_RATE_LIMIT_WAIT)
}

/// The wait the answer's headers ask for, if any says; capped at a day.
fn retry_after(headers: &HeaderMap, now: chrono::DateTime<chrono::Utc>) -> Option<Duration> {
    let until = |at: chrono::DateTime<chrono::Utc>| {
        reported_wait(u64::try_from((at - now).num_seconds()).unwrap_or(0))
    };
    let http_date = |text: &str| {
        chrono::DateTime::parse_from_rfc2822(text.trim())
            .ok()
            .map(|d| d.with_timezone(&chrono::Utc))
    };
    if let Some(value) = header_str(headers, "retry-after") {
        if let Ok(secs) = value.trim().parse::<u64>() {
            return Some(reported_wait(secs));
        }
        if let Some(at) = http_date(value) {
            return Some(until(at));
        }
    }
    if let Some(reset) = header_str(headers, "ratelimit-reset")
        .and_then(|v| v.trim().parse::<i64>().ok())
        .and_then(|epoch| chrono::DateTime::from_timestamp(epoch, 0))
    {
        return Some(until(reset));
    }
    header_str(headers, "ratelimit-resettime")
        .and_then(http_date)
        .map(until)
}

/// The REST API root of the instance at `instance_url`: the URL without its trailing slash,
/// with `/api/v4` added unless it already ends so. It must be `https://`, or `http://` to a
/// loopback address, with no credentials, query or fragment. A path is kept (an instance
/// under a relative URL root, `https://example.com/gitlab`).
pub(crate) fn api_base(instance_url: &str) -> Result<String, GitlabError> {
    let root =
        rest::api_root(instance_url, "the token").map_err(|reason| GitlabError::InvalidUrl {
            url: instance_url.chars().take(200).collect(),
            reason,
        })?;
    Ok(if root.ends_with("/api/v4") {
        root
    } else {
        format!("{root}/api/v4")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use proptest::prelude::*;
    use sortie_http::rest::MAX_REPORTED_WAIT;

    #[test]
    fn instance_urls_become_the_api_root() {
        assert_eq!(
            api_base("https://gitlab.com").unwrap(),
            "https://gitlab.com/api/v4"
        );
        assert_eq!(
            api_base("https://git.example.com/gitlab/").unwrap(),
            "https://git.example.com/gitlab/api/v4"
        );
        assert_eq!(
            api_base("https://gitlab.com/api/v4/").unwrap(),
            "https://gitlab.com/api/v4"
        );
        assert_eq!(
            api_base("http://127.0.0.1:8080").unwrap(),
            "http://127.0.0.1:8080/api/v4"
        );
        assert!(api_base("http://[::1]:8080").is_ok());
        assert!(api_base("http://localhost:1").is_ok());
        for bad in [
            "http://gitlab.com",
            "http://10.0.0.1",
            "ftp://x",
            "https://u:p@gitlab.com",
            "https://gitlab.com?x=1",
            "https://gitlab.com/#x",
            "not a url",
        ] {
            assert!(api_base(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_next_page_header_is_read_strictly() {
        assert_eq!(next_page(Some("2")), NextPage::Page(2));
        assert_eq!(next_page(Some(" 17 ")), NextPage::Page(17));
        assert_eq!(next_page(Some("")), NextPage::Last);
        assert_eq!(next_page(None), NextPage::Unknown);
        assert_eq!(next_page(Some("0")), NextPage::Unknown);
        assert_eq!(next_page(Some("-1")), NextPage::Unknown);
        assert_eq!(next_page(Some("two")), NextPage::Unknown);
        assert_eq!(next_page(Some("99999999999")), NextPage::Unknown);
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.insert(*k, v.parse().unwrap());
        }
        map
    }

    #[test]
    fn rate_limit_waits_come_from_the_documented_headers() {
        let now = chrono::Utc
            .with_ymd_and_hms(2026, 11, 30, 12, 0, 0)
            .unwrap();
        assert_eq!(
            rate_limit_wait(&headers(&[("retry-after", "30")]), now),
            Duration::from_secs(30)
        );
        assert_eq!(
            rate_limit_wait(
                &headers(&[("retry-after", "Mon, 30 Nov 2026 12:00:42 GMT")]),
                now
            ),
            Duration::from_secs(42)
        );
        let reset = (now.timestamp() + 5).to_string();
        assert_eq!(
            rate_limit_wait(&headers(&[("ratelimit-reset", &reset)]), now),
            Duration::from_secs(5)
        );
        assert_eq!(
            rate_limit_wait(
                &headers(&[("ratelimit-resettime", "Mon, 30 Nov 2026 12:01:00 GMT")]),
                now
            ),
            Duration::from_secs(60)
        );
        // A reset in the past is no wait at all.
        assert_eq!(
            rate_limit_wait(&headers(&[("ratelimit-reset", "1")]), now),
            Duration::ZERO
        );
        assert_eq!(
            rate_limit_wait(&HeaderMap::new(), now),
            DEFAULT_RATE_LIMIT_WAIT
        );
        assert_eq!(
            rate_limit_wait(&headers(&[("retry-after", "999999999999")]), now),
            MAX_REPORTED_WAIT
        );
    }

    #[test]
    fn error_bodies_become_one_line() {
        assert_eq!(
            gitlab_message(br#"{"message":"404 Project Not Found"}"#),
            "404 Project Not Found"
        );
        assert_eq!(
            gitlab_message(
                br#"{"message":{"description":["is too long (maximum is 255 characters)"]}}"#
            ),
            "description is too long (maximum is 255 characters)"
        );
        assert_eq!(
            gitlab_message(br#"{"error":"insufficient_scope","error_description":"The request requires higher privileges"}"#),
            "insufficient_scope: The request requires higher privileges"
        );
        assert_eq!(gitlab_message(b"Retry later\n"), "Retry later");
        assert!(gitlab_message(&[b'x'; 500]).chars().count() <= 200);
    }

    #[test]
    fn a_bad_token_is_refused_without_being_quoted() {
        let err = token_header(&Secret::new("glpat-secret\nvalue"))
            .unwrap_err()
            .to_string();
        assert!(!err.contains("glpat-secret"), "{err}");
        assert!(token_header(&Secret::new("  ")).is_err());
        assert!(token_header(&Secret::new("glpat-abc"))
            .unwrap()
            .is_sensitive());
    }

    proptest! {
        #[test]
        fn hostile_rate_limit_headers_give_bounded_waits(
            retry in "\\PC{0,40}", reset in "\\PC{0,24}", reset_time in "\\PC{0,40}", now in 0i64..4_000_000_000
        ) {
            let mut map = HeaderMap::new();
            for (k, v) in [("retry-after", &retry), ("ratelimit-reset", &reset), ("ratelimit-resettime", &reset_time)] {
                if let Ok(v) = v.parse() { map.insert(k, v); }
            }
            let now = chrono::DateTime::from_timestamp(now, 0).unwrap();
            prop_assert!(rate_limit_wait(&map, now) <= MAX_REPORTED_WAIT);
        }

        #[test]
        fn next_page_parsing_never_panics(text in "\\PC{0,40}") {
            if let NextPage::Page(p) = next_page(Some(&text)) {
                prop_assert!(p > 0);
            }
        }

        #[test]
        fn error_bodies_never_panic(body in proptest::collection::vec(any::<u8>(), 0..300)) {
            prop_assert!(gitlab_message(&body).chars().count() <= 200);
        }
    }
}
