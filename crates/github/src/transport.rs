//! One request to GitHub: timeouts, the answer cap, bounded retries, rate limits, paging
//! links, and the count of requests by endpoint.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Duration;

use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, ETAG, IF_NONE_MATCH, LINK, USER_AGENT};
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use crate::GithubError;

/// Every request's whole exchange (connect, send, read the answer) ends within this.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The most bytes of an answer read (a page of 100 changed files with their patches fits).
pub(crate) const MAX_ANSWER_BYTES: usize = 16 * 1024 * 1024;
/// Attempts per request, the first included: server errors, lost connections and short
/// rate-limit waits are tried again up to this many times in all.
pub(crate) const MAX_ATTEMPTS: u32 = 4;
/// The wait before the second attempt after a server error or a lost connection; doubled
/// for each attempt after.
pub(crate) const BASE_BACKOFF: Duration = Duration::from_millis(200);
/// The longest rate-limit wait the client sits out itself; a longer one is returned as
/// [`GithubError::RateLimited`] for the caller to requeue the work.
pub(crate) const MAX_RATE_LIMIT_WAIT: Duration = Duration::from_secs(10);
/// A wait GitHub asks for is capped at this when reported (a hostile header cannot
/// overflow anything).
const MAX_REPORTED_WAIT: Duration = Duration::from_secs(24 * 3600);
/// GitHub: for a secondary rate limit with neither `retry-after` nor a spent primary limit,
/// "wait for at least one minute before retrying"
/// (<https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api#exceeding-the-rate-limit>).
const SECONDARY_LIMIT_WAIT: Duration = Duration::from_secs(60);
/// The REST API version the client is written against
/// (<https://docs.github.com/en/rest/about-the-rest-api/api-versions>).
const API_VERSION: &str = "2022-11-28";

/// An answer read whole.
pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
}

impl Answer {
    /// The answer's `ETag`.
    pub(crate) fn etag(&self) -> Option<String> {
        header_str(&self.headers, ETAG.as_str()).map(str::to_string)
    }

    /// The `rel="next"` link of the answer's `Link` header
    /// (<https://docs.github.com/en/rest/using-the-rest-api/using-pagination-in-the-rest-api>).
    pub(crate) fn next_link(&self) -> Option<String> {
        next_link(header_str(&self.headers, LINK.as_str())?)
    }
}

/// What a request sends, besides its call name and path.
#[derive(Default)]
pub(crate) struct Outgoing<'a> {
    pub(crate) bearer: Option<&'a str>,
    pub(crate) json: Option<Vec<u8>>,
    pub(crate) if_none_match: Option<&'a str>,
}

/// The HTTP side of the client.
pub(crate) struct Transport {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    /// `https://api.github.com` or `https://host/api/v3`, no trailing slash.
    pub(crate) base: String,
    calls: Mutex<BTreeMap<String, u64>>,
}

impl Transport {
    /// A transport for `api_url`: `https://`, or `http://` to a loopback address only.
    pub(crate) fn new(api_url: &str) -> Result<Self, GithubError> {
        let base = check_api_url(api_url)?;
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_connect_timeout(Some(REQUEST_TIMEOUT));
        let connector =
            sortie_http::connector(base.starts_with("https://"), http).map_err(|reason| {
                GithubError::InvalidApiUrl {
                    url: api_url.to_string(),
                    reason,
                }
            })?;
        Ok(Self {
            client: Client::builder(TokioExecutor::new()).build(connector),
            base,
            calls: Mutex::new(BTreeMap::new()),
        })
    }

    /// The requests made so far, by endpoint (`METHOD /path/{template}`).
    pub(crate) fn calls(&self) -> BTreeMap<String, u64> {
        self.calls.lock().map(|c| c.clone()).unwrap_or_default()
    }

    fn count(&self, call: &'static str) {
        if let Ok(mut calls) = self.calls.lock() {
            *calls.entry(call.to_string()).or_default() += 1;
        }
    }

    /// Sends `call` (`"METHOD /template"`) to `path_and_query` under the base, retrying
    /// server errors, lost connections and short rate-limit waits up to [`MAX_ATTEMPTS`]
    /// times in all. A 2xx or 304 is returned; anything else is an error naming `call`.
    pub(crate) async fn send(
        &self,
        call: &'static str,
        path_and_query: &str,
        out: &Outgoing<'_>,
    ) -> Result<Answer, GithubError> {
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
            .unwrap_or_else(|_| Err(Lost(format!("no answer within {REQUEST_TIMEOUT:?}"))));
            let answer = match outcome {
                Ok(answer) => answer,
                Err(Lost(reason)) if reason == TOO_LARGE => {
                    return Err(GithubError::TooLarge {
                        call,
                        limit: MAX_ANSWER_BYTES,
                    })
                }
                Err(Lost(reason)) => {
                    tracing::debug!(call, attempt, %reason, "GitHub request failed");
                    if attempt >= MAX_ATTEMPTS {
                        return Err(GithubError::Unreachable {
                            call,
                            attempts: attempt,
                            reason,
                        });
                    }
                    tokio::time::sleep(backoff(attempt)).await;
                    continue;
                }
            };
            let status = answer.status;
            tracing::debug!(call, attempt, status = status.as_u16(), "GitHub answered");
            if status.is_success() || status == StatusCode::NOT_MODIFIED {
                return Ok(answer);
            }
            if status.is_server_error() {
                if attempt >= MAX_ATTEMPTS {
                    return Err(GithubError::ServerError {
                        call,
                        status: status.as_u16(),
                        attempts: attempt,
                    });
                }
                tokio::time::sleep(backoff(attempt)).await;
                continue;
            }
            let message = github_message(&answer.body);
            if status == StatusCode::FORBIDDEN || status == StatusCode::TOO_MANY_REQUESTS {
                if let Some(wait) = rate_limit_wait(
                    status,
                    &answer.headers,
                    &message,
                    chrono::Utc::now().timestamp(),
                ) {
                    if wait <= MAX_RATE_LIMIT_WAIT && attempt < MAX_ATTEMPTS {
                        tracing::info!(
                            call,
                            wait_ms = wait.as_millis() as u64,
                            "GitHub rate limit: waiting"
                        );
                        tokio::time::sleep(wait).await;
                        continue;
                    }
                    return Err(GithubError::RateLimited {
                        call,
                        retry_after: wait,
                    });
                }
            }
            return Err(GithubError::Refused {
                call,
                status: status.as_u16(),
                message,
            });
        }
    }

    async fn exchange(
        &self,
        call: &'static str,
        method: Method,
        uri: &str,
        out: &Outgoing<'_>,
    ) -> Result<Answer, Lost> {
        let mut request = Request::builder()
            .method(method)
            .uri(uri)
            // GitHub: "All API requests must include a valid User-Agent header"
            // (https://docs.github.com/en/rest/using-the-rest-api/getting-started-with-the-rest-api#user-agent).
            .header(USER_AGENT, concat!("sortie/", env!("CARGO_PKG_VERSION")))
            .header(ACCEPT, "application/vnd.github+json")
            .header("x-github-api-version", API_VERSION);
        if let Some(bearer) = out.bearer {
            request = request.header(AUTHORIZATION, format!("Bearer {bearer}"));
        }
        if let Some(etag) = out.if_none_match {
            request = request.header(IF_NONE_MATCH, etag);
        }
        let body = match &out.json {
            Some(json) => {
                request = request.header(CONTENT_TYPE, "application/json");
                Bytes::from(json.clone())
            }
            None => Bytes::new(),
        };
        // The error names the call, never the request (its header holds a credential).
        let request = request
            .body(Full::new(body))
            .map_err(|_| Lost(format!("{call}: not a valid request")))?;
        let response = self
            .client
            .request(request)
            .await
            .map_err(|e| Lost(sortie_http::error_chain(&e)))?;
        let (parts, body) = response.into_parts();
        let body = Limited::new(body, MAX_ANSWER_BYTES)
            .collect()
            .await
            .map_err(|e| {
                if e.is::<http_body_util::LengthLimitError>() {
                    Lost(TOO_LARGE.to_string())
                } else {
                    Lost(format!("reading the answer: {e}"))
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

/// A request that got no usable answer, and why.
struct Lost(String);
const TOO_LARGE: &str = "answer over the size cap";

/// The wait before attempt `attempt + 1`: [`BASE_BACKOFF`] doubled per attempt made.
fn backoff(attempt: u32) -> Duration {
    BASE_BACKOFF.saturating_mul(1 << attempt.saturating_sub(1).min(8))
}

fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
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
    let cap = |secs: u64| Duration::from_secs(secs).min(MAX_REPORTED_WAIT);
    if let Some(secs) = header_str(headers, "retry-after").and_then(|v| v.trim().parse().ok()) {
        return Some(cap(secs));
    }
    if header_str(headers, "x-ratelimit-remaining").map(str::trim) == Some("0") {
        let reset: i64 = header_str(headers, "x-ratelimit-reset")
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(now_epoch);
        return Some(cap(
            u64::try_from(reset.saturating_sub(now_epoch)).unwrap_or(0)
        ));
    }
    let lower = message.to_ascii_lowercase();
    if status == StatusCode::TOO_MANY_REQUESTS || lower.contains("rate limit") {
        return Some(SECONDARY_LIMIT_WAIT);
    }
    None
}

/// The `rel="next"` URL of a `Link` header: `<url>; rel="next", <url>; rel="last"`.
pub(crate) fn next_link(link: &str) -> Option<String> {
    link.split(',').find_map(|part| {
        let (url, params) = part.trim().split_once(';')?;
        let url = url.trim().strip_prefix('<')?.strip_suffix('>')?;
        params
            .split(';')
            .any(|p| {
                let p = p.trim();
                p == "rel=\"next\"" || p == "rel=next"
            })
            .then(|| url.to_string())
    })
}

/// `api_url` without its trailing slash, when it is `https://`, or `http://` to a loopback
/// address, with no credentials, query or fragment.
fn check_api_url(api_url: &str) -> Result<String, GithubError> {
    let bad = |reason: &str| GithubError::InvalidApiUrl {
        url: api_url.to_string(),
        reason: reason.to_string(),
    };
    let url = url::Url::parse(api_url).map_err(|e| bad(&e.to_string()))?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err(bad("credentials belong in the app key, not the URL"));
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
    Ok(url.as_str().trim_end_matches('/').to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn api_urls_are_https_or_loopback_http() {
        assert_eq!(
            check_api_url("https://api.github.com").unwrap(),
            "https://api.github.com"
        );
        assert_eq!(
            check_api_url("https://ghe.example.com/api/v3/").unwrap(),
            "https://ghe.example.com/api/v3"
        );
        assert!(check_api_url("http://127.0.0.1:8080").is_ok());
        assert!(check_api_url("http://[::1]:8080").is_ok());
        assert!(check_api_url("http://localhost:1").is_ok());
        for bad in [
            "http://api.github.com",
            "http://10.0.0.1",
            "ftp://x",
            "https://u:p@api.github.com",
            "https://api.github.com?x=1",
            "not a url",
        ] {
            assert!(check_api_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn next_links_are_found_among_others() {
        let link = r#"<https://api.github.com/repositories/1/pulls/2/files?per_page=100&page=2>; rel="next", <https://api.github.com/repositories/1/pulls/2/files?per_page=100&page=3>; rel="last""#;
        assert_eq!(
            next_link(link).as_deref(),
            Some("https://api.github.com/repositories/1/pulls/2/files?per_page=100&page=2")
        );
        assert_eq!(next_link(r#"<https://x/?page=1>; rel="prev""#), None);
        assert_eq!(next_link("garbage"), None);
    }

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

    #[test]
    fn backoff_doubles_and_stays_bounded() {
        assert_eq!(backoff(1), BASE_BACKOFF);
        assert_eq!(backoff(2), BASE_BACKOFF * 2);
        assert_eq!(backoff(3), BASE_BACKOFF * 4);
        assert!(backoff(u32::MAX) <= BASE_BACKOFF * 256);
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

        #[test]
        fn link_parsing_never_panics(link in "\\PC{0,200}") {
            let _ = next_link(&link);
        }
    }
}
