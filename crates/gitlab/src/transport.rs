//! One request to GitLab: the token header, timeouts, the answer cap, bounded retries, rate
//! limits, the paging header, and the count of requests by endpoint.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Duration;

use http::header::{ACCEPT, CONTENT_TYPE, USER_AGENT};
use http::{HeaderMap, HeaderValue, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use crate::{GitlabError, Secret};

/// Every request's whole exchange (connect, send, read the answer) ends within this.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The most bytes of an answer read (a page of 100 diffs, each cut by GitLab's diff limits,
/// fits).
pub(crate) const MAX_ANSWER_BYTES: usize = 16 * 1024 * 1024;
/// Attempts per request, the first included: server errors, lost connections and short
/// rate-limit waits are tried again up to this many times in all.
pub(crate) const MAX_ATTEMPTS: u32 = 4;
/// The wait before the second attempt after a server error or a lost connection; doubled
/// for each attempt after.
pub(crate) const BASE_BACKOFF: Duration = Duration::from_millis(200);
/// The longest wait GitLab may ask for (`Retry-After`) that the client sits out itself; a
/// longer one is returned as [`GitlabError::RateLimited`] for the caller to requeue the
/// work.
pub(crate) const MAX_RATE_LIMIT_WAIT: Duration = Duration::from_secs(10);
/// A wait GitLab asks for is capped at this when reported (a hostile header cannot
/// overflow anything).
const MAX_REPORTED_WAIT: Duration = Duration::from_secs(24 * 3600);
/// The wait assumed for a 429 that says nothing of when to come back: GitLab's throttles
/// count requests per period, one minute by default
/// (<https://docs.gitlab.com/administration/settings/user_and_ip_rate_limits/>).
const DEFAULT_RATE_LIMIT_WAIT: Duration = Duration::from_secs(60);
/// The header a personal, project or group access token goes in
/// (<https://docs.gitlab.com/api/rest/authentication/#personalprojectgroup-access-tokens>).
const TOKEN_HEADER: &str = "private-token";

/// An answer read whole.
pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
}

impl Answer {
    /// What the answer's `x-next-page` says
    /// (<https://docs.gitlab.com/api/rest/#pagination>).
    pub(crate) fn next_page(&self) -> NextPage {
        next_page(header_str(&self.headers, "x-next-page"))
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

/// Which failures of a request may be tried again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Retry {
    /// Reads, updates and writes whose repeat GitLab answers the same way: every lost
    /// connection, server error and short rate limit is tried again.
    Idempotent,
    /// A create whose repeat would make a second object (a note, an access token): only
    /// what GitLab surely did not act on is tried again, a connection never made and a 429
    /// (refused before the request is handled).
    OnlyUnsent,
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
}

/// The HTTP side of the client.
pub(crate) struct Transport {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    /// The REST API's root, `https://gitlab.example.com/api/v4`, no trailing slash.
    pub(crate) base: String,
    token: HeaderValue,
    calls: Mutex<BTreeMap<String, u64>>,
}

impl Transport {
    /// A transport for the instance at `instance_url` (`https://`, or `http://` to a
    /// loopback address only), sending `token`.
    pub(crate) fn new(instance_url: &str, token: &Secret) -> Result<Self, GitlabError> {
        let base = api_base(instance_url)?;
        let token = token_header(token)?;
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_connect_timeout(Some(REQUEST_TIMEOUT));
        let connector =
            sortie_http::connector(base.starts_with("https://"), http).map_err(|reason| {
                GitlabError::InvalidUrl {
                    url: instance_url.to_string(),
                    reason,
                }
            })?;
        Ok(Self {
            client: Client::builder(TokioExecutor::new()).build(connector),
            base,
            token,
            calls: Mutex::new(BTreeMap::new()),
        })
    }

    /// The requests made so far, by endpoint (`METHOD /path/:template`).
    pub(crate) fn calls(&self) -> BTreeMap<String, u64> {
        self.calls.lock().map(|c| c.clone()).unwrap_or_default()
    }

    fn count(&self, call: &'static str) {
        if let Ok(mut calls) = self.calls.lock() {
            *calls.entry(call.to_string()).or_default() += 1;
        }
    }

    /// Sends `call` (`"METHOD /template"`) to `path_and_query` under the API root, trying
    /// again what `out.retry` allows, up to [`MAX_ATTEMPTS`] in all. A 2xx is returned;
    /// anything else is an error naming `call`.
    pub(crate) async fn send(
        &self,
        call: &'static str,
        path_and_query: &str,
        out: &Outgoing,
    ) -> Result<Answer, GitlabError> {
        let method = call
            .split_once(' ')
            .and_then(|(m, _)| Method::from_bytes(m.as_bytes()).ok())
            .unwrap_or(Method::GET);
        let uri = format!("{}{}", self.base, path_and_query);
        let mut attempt = 0;
        loop {
            attempt += 1;
            self.count(call);
            let outcome = tokio::time::timeout(
                REQUEST_TIMEOUT,
                self.exchange(call, method.clone(), &uri, out),
            )
            .await
            .unwrap_or_else(|_| Err(Lost::sent(format!("no answer within {REQUEST_TIMEOUT:?}"))));
            let answer = match outcome {
                Ok(answer) => answer,
                Err(lost) if lost.reason == TOO_LARGE => {
                    return Err(GitlabError::TooLarge {
                        call,
                        limit: MAX_ANSWER_BYTES,
                    })
                }
                Err(lost) => {
                    tracing::debug!(call, attempt, reason = %lost.reason, "GitLab request failed");
                    let may_retry = out.retry == Retry::Idempotent || lost.unsent;
                    if !may_retry || attempt >= MAX_ATTEMPTS {
                        return Err(GitlabError::Unreachable {
                            call,
                            attempts: attempt,
                            reason: lost.reason,
                        });
                    }
                    tokio::time::sleep(backoff(attempt)).await;
                    continue;
                }
            };
            let status = answer.status;
            tracing::debug!(call, attempt, status = status.as_u16(), "GitLab answered");
            if status.is_success() {
                return Ok(answer);
            }
            let now = chrono::Utc::now();
            if status == StatusCode::TOO_MANY_REQUESTS {
                // Rack::Attack refuses a throttled request before GitLab handles it, so even
                // a create is safe to send again.
                let wait = rate_limit_wait(&answer.headers, now);
                if wait <= MAX_RATE_LIMIT_WAIT && attempt < MAX_ATTEMPTS {
                    tracing::info!(
                        call,
                        wait_ms = wait.as_millis() as u64,
                        "GitLab rate limit: waiting"
                    );
                    tokio::time::sleep(wait).await;
                    continue;
                }
                return Err(GitlabError::RateLimited {
                    call,
                    retry_after: wait,
                });
            }
            if status.is_server_error() {
                if out.retry != Retry::Idempotent || attempt >= MAX_ATTEMPTS {
                    return Err(GitlabError::ServerError {
                        call,
                        status: status.as_u16(),
                        attempts: attempt,
                    });
                }
                // A 503 may say when to come back; a short wait is honoured.
                let wait = retry_after(&answer.headers, now)
                    .filter(|w| *w <= MAX_RATE_LIMIT_WAIT)
                    .unwrap_or_else(|| backoff(attempt));
                tokio::time::sleep(wait).await;
                continue;
            }
            return Err(GitlabError::Refused {
                call,
                status: status.as_u16(),
                message: gitlab_message(&answer.body),
            });
        }
    }

    async fn exchange(
        &self,
        call: &'static str,
        method: Method,
        uri: &str,
        out: &Outgoing,
    ) -> Result<Answer, Lost> {
        let mut request = Request::builder()
            .method(method)
            .uri(uri)
            .header(USER_AGENT, concat!("sortie/", env!("CARGO_PKG_VERSION")))
            .header(ACCEPT, "application/json")
            .header(TOKEN_HEADER, self.token.clone());
        let body = match &out.json {
            Some(json) => {
                request = request.header(CONTENT_TYPE, "application/json");
                Bytes::from(json.clone())
            }
            None => Bytes::new(),
        };
        // The error names the call, never the request (its header holds the token).
        let request = request
            .body(Full::new(body))
            .map_err(|_| Lost::unsent(format!("{call}: not a valid request")))?;
        let response = self.client.request(request).await.map_err(|e| {
            let reason = sortie_http::error_chain(&e);
            if e.is_connect() {
                Lost::unsent(reason)
            } else {
                Lost::sent(reason)
            }
        })?;
        let (parts, body) = response.into_parts();
        let body = Limited::new(body, MAX_ANSWER_BYTES)
            .collect()
            .await
            .map_err(|e| {
                if e.is::<http_body_util::LengthLimitError>() {
                    Lost::sent(TOO_LARGE.to_string())
                } else {
                    Lost::sent(format!("reading the answer: {e}"))
                }
            })?
            .to_bytes();
        Ok(Answer {
            status: parts.status,
            headers: parts.headers,
            body,
        })
    }
}

/// The token as a header value marked sensitive (never printed by `http`'s Debug).
fn token_header(token: &Secret) -> Result<HeaderValue, GitlabError> {
    let text = token.expose();
    if text.trim().is_empty() {
        return Err(GitlabError::InvalidToken("it is empty".into()));
    }
    let mut value = HeaderValue::from_str(text).map_err(|_| {
        GitlabError::InvalidToken("it holds characters a header cannot carry".into())
    })?;
    value.set_sensitive(true);
    Ok(value)
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

/// A request that got no usable answer, and whether it surely never reached GitLab.
struct Lost {
    reason: String,
    unsent: bool,
}

impl Lost {
    fn sent(reason: String) -> Self {
        Self {
            reason,
            unsent: false,
        }
    }
    fn unsent(reason: String) -> Self {
        Self {
            reason,
            unsent: true,
        }
    }
}

const TOO_LARGE: &str = "answer over the size cap";

/// The wait before attempt `attempt + 1`: [`BASE_BACKOFF`] doubled per attempt made.
fn backoff(attempt: u32) -> Duration {
    BASE_BACKOFF.saturating_mul(1 << attempt.saturating_sub(1).min(8))
}

fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
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
    let cap = |secs: u64| Duration::from_secs(secs).min(MAX_REPORTED_WAIT);
    let until = |at: chrono::DateTime<chrono::Utc>| {
        cap(u64::try_from((at - now).num_seconds()).unwrap_or(0))
    };
    let http_date = |text: &str| {
        chrono::DateTime::parse_from_rfc2822(text.trim())
            .ok()
            .map(|d| d.with_timezone(&chrono::Utc))
    };
    if let Some(value) = header_str(headers, "retry-after") {
        if let Ok(secs) = value.trim().parse::<u64>() {
            return Some(cap(secs));
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
    let bad = |reason: &str| GitlabError::InvalidUrl {
        url: instance_url.chars().take(200).collect(),
        reason: reason.to_string(),
    };
    let url = url::Url::parse(instance_url).map_err(|e| bad(&e.to_string()))?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err(bad("credentials belong in the token, not the URL"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(bad("a query or fragment is not allowed"));
    }
    match url.scheme() {
        "https" => {}
        "http" => {
            let loopback = match url.host() {
                Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
                Some(url::Host::Ipv4(ip)) => IpAddr::V4(ip).is_loopback(),
                Some(url::Host::Ipv6(ip)) => IpAddr::V6(ip).is_loopback(),
                None => false,
            };
            if !loopback {
                return Err(bad(
                    "http:// is allowed only to a loopback address; use https://",
                ));
            }
        }
        _ => return Err(bad("the scheme must be https")),
    }
    if url.host().is_none() {
        return Err(bad("no host"));
    }
    let root = url.as_str().trim_end_matches('/');
    Ok(if root.ends_with("/api/v4") {
        root.to_string()
    } else {
        format!("{root}/api/v4")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use proptest::prelude::*;

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
    fn backoff_doubles_and_stays_bounded() {
        assert_eq!(backoff(1), BASE_BACKOFF);
        assert_eq!(backoff(2), BASE_BACKOFF * 2);
        assert_eq!(backoff(3), BASE_BACKOFF * 4);
        assert!(backoff(u32::MAX) <= BASE_BACKOFF * 256);
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
