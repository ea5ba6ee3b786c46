//! A bounded JSON-over-HTTPS transport for a code host's REST API (`sortie-github`,
//! `sortie-gitlab`): hyper's legacy client over [`crate::connector`], a timeout per request,
//! a cap on the answer read, bounded retries (server errors, lost connections, short rate
//! limits), the count of requests by endpoint, and a credential header that is never
//! printed.
//!
//! What is the service's own is plugged in through [`Service`]: which answers it returns,
//! how it says a refusal is a rate limit, whether a server error says when to come back.
//! Each client keeps its own headers, credentials, error type and error bodies.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Duration;

use http::header::{AUTHORIZATION, CONTENT_TYPE, ETAG, IF_NONE_MATCH, LINK, USER_AGENT};
use http::{HeaderMap, HeaderValue, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

/// Every request's whole exchange (connect, send, read the answer) ends within this.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The most bytes of an answer read (a page of 100 changed files with their patches fits).
pub const MAX_ANSWER_BYTES: usize = 16 * 1024 * 1024;
/// Attempts per request, the first included: server errors, lost connections and short
/// rate-limit waits are tried again up to this many times in all.
pub const MAX_ATTEMPTS: u32 = 4;
/// The wait before the second attempt after a server error or a lost connection; doubled
/// for each attempt after.
pub const BASE_BACKOFF: Duration = Duration::from_millis(200);
/// The longest wait a service may ask for that the transport sits out itself; a longer one
/// is [`Failure::RateLimited`], for the caller to requeue the work.
pub const MAX_RATE_LIMIT_WAIT: Duration = Duration::from_secs(10);
/// A wait a service asks for is capped at this when reported (a hostile header cannot
/// overflow anything); see [`reported_wait`].
pub const MAX_REPORTED_WAIT: Duration = Duration::from_secs(24 * 3600);

/// What is a service's own in how its answers are read, and its error type.
pub trait Service: Send + Sync {
    /// The service's name in logs (`GitHub answered`).
    const NAME: &'static str;

    /// The client's error, which a [`Failure`] becomes (see [`crate::impl_from_failure!`]).
    type Error: From<Failure>;

    /// Whether an answer with `status` is returned to the caller: a 2xx, unless the
    /// service says more.
    fn accepts(&self, status: StatusCode) -> bool {
        status.is_success()
    }

    /// When `answer` (neither accepted nor a server error) is a rate limit, how long it asks
    /// to wait; `None` when it is a refusal.
    fn rate_limit_wait(&self, answer: &Answer) -> Option<Duration>;

    /// The wait a server error asks for, sat out instead of the backoff when it is at most
    /// [`MAX_RATE_LIMIT_WAIT`]; `None` (the default): the backoff.
    fn server_error_wait(&self, _answer: &Answer) -> Option<Duration> {
        None
    }
}

/// An answer read whole.
pub struct Answer {
    /// The status.
    pub status: StatusCode,
    /// The headers.
    pub headers: HeaderMap,
    /// The body, at most [`MAX_ANSWER_BYTES`].
    pub body: Bytes,
}

impl Answer {
    /// The header `name` as text, when it is present and text.
    pub fn header(&self, name: &str) -> Option<&str> {
        header_str(&self.headers, name)
    }

    /// The answer's `ETag`.
    pub fn etag(&self) -> Option<String> {
        self.header(ETAG.as_str()).map(str::to_string)
    }

    /// The `rel="next"` link of the answer's `Link` header.
    pub fn next_link(&self) -> Option<String> {
        next_link(self.header(LINK.as_str())?)
    }
}

/// Which failures of a request may be tried again.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Retry {
    /// Reads, updates and writes whose repeat the service answers the same way: every lost
    /// connection, server error and short rate limit is tried again.
    #[default]
    Idempotent,
    /// A create whose repeat would make a second object: only what the service surely did
    /// not act on is tried again, a connection never made and a rate limit (refused before
    /// the request is handled).
    OnlyUnsent,
}

/// What a request sends, besides its call name and URL, and the headers every request of
/// the transport carries.
#[derive(Default)]
pub struct Outgoing<'a> {
    /// A token sent as `Authorization: Bearer` (the header marked sensitive).
    pub bearer: Option<&'a str>,
    /// A JSON body, sent with `Content-Type: application/json`.
    pub json: Option<&'a [u8]>,
    /// An `If-None-Match` ETag.
    pub if_none_match: Option<&'a str>,
    /// Which failures may be tried again.
    pub retry: Retry,
}

/// Why a request has no answer the caller takes. Each names the call; none holds a request
/// or a credential.
#[derive(Debug)]
pub enum Failure {
    /// No answer (connection refused, reset, timed out), after the attempts allowed.
    Unreachable {
        /// The call.
        call: &'static str,
        /// How many attempts were made.
        attempts: u32,
        /// The last failure.
        reason: String,
    },
    /// A server error (5xx) to every attempt allowed.
    ServerError {
        /// The call.
        call: &'static str,
        /// The last status.
        status: u16,
        /// How many attempts were made.
        attempts: u32,
    },
    /// A rate limit longer than the transport waits, or one that outlasted the attempts.
    RateLimited {
        /// The call.
        call: &'static str,
        /// How long the service asks to wait.
        retry_after: Duration,
    },
    /// Refused for good (a 4xx that is no rate limit, or another status not accepted).
    Refused {
        /// The call.
        call: &'static str,
        /// The status.
        status: u16,
        /// The body, for the service's error text.
        body: Bytes,
    },
    /// The answer was over [`MAX_ANSWER_BYTES`].
    TooLarge {
        /// The call.
        call: &'static str,
        /// The cap, in bytes.
        limit: usize,
    },
}

/// Implements `From<`[`Failure`]`>` for a client's error enum `$error`, whose variants
/// `Unreachable { call, attempts, reason }`, `ServerError { call, status, attempts }`,
/// `RateLimited { call, retry_after }`, `Refused { call, status, message }` and
/// `TooLarge { call, limit }` take each failure as it is; `$message` (`fn(&[u8]) -> String`)
/// reads a refusal's body as the service's one-line error text. The error may have other
/// variants besides.
#[macro_export]
macro_rules! impl_from_failure {
    ($error:ty, $message:path) => {
        impl From<$crate::rest::Failure> for $error {
            fn from(failure: $crate::rest::Failure) -> Self {
                use $crate::rest::Failure;
                match failure {
                    Failure::Unreachable {
                        call,
                        attempts,
                        reason,
                    } => Self::Unreachable {
                        call,
                        attempts,
                        reason,
                    },
                    Failure::ServerError {
                        call,
                        status,
                        attempts,
                    } => Self::ServerError {
                        call,
                        status,
                        attempts,
                    },
                    Failure::RateLimited { call, retry_after } => {
                        Self::RateLimited { call, retry_after }
                    }
                    Failure::Refused { call, status, body } => Self::Refused {
                        call,
                        status,
                        message: $message(&body),
                    },
                    Failure::TooLarge { call, limit } => Self::TooLarge { call, limit },
                }
            }
        }
    };
}

/// The HTTP side of a REST client: one API root, one connection pool, the headers every
/// request carries, and the count of requests by endpoint.
pub struct Transport<S> {
    /// The API root every path is sent under (checked by [`api_root`]), no trailing slash.
    pub base: String,
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    service: S,
    headers: HeaderMap,
    calls: Mutex<BTreeMap<String, u64>>,
}

impl<S: Service> Transport<S> {
    /// A transport for `service`'s API at `base` (see [`api_root`]), sending `headers`
    /// (and `User-Agent: sortie/…`) with every request. An `https://` base needs CA
    /// certificates; an error says why there are none.
    pub fn new(service: S, base: String, headers: HeaderMap) -> Result<Self, String> {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_connect_timeout(Some(REQUEST_TIMEOUT));
        let connector = crate::connector(base.starts_with("https://"), http)?;
        Ok(Self {
            base,
            client: Client::builder(TokioExecutor::new()).build(connector),
            service,
            headers,
            calls: Mutex::new(BTreeMap::new()),
        })
    }

    /// The requests made so far, by endpoint (the `call` each was sent as).
    pub fn calls(&self) -> BTreeMap<String, u64> {
        self.calls.lock().map(|c| c.clone()).unwrap_or_default()
    }

    fn count(&self, call: &'static str) {
        if let Ok(mut calls) = self.calls.lock() {
            *calls.entry(call.to_string()).or_default() += 1;
        }
    }

    /// Sends `call` (`"METHOD /template"`, counted and logged; its method is the one sent)
    /// to `path_and_query` under the base, trying again what `out.retry` allows, up to
    /// [`MAX_ATTEMPTS`] in all. An answer the service accepts is returned; anything else is
    /// the service's error for a [`Failure`] naming `call`.
    pub async fn send(
        &self,
        call: &'static str,
        path_and_query: &str,
        out: &Outgoing<'_>,
    ) -> Result<Answer, S::Error> {
        Ok(self.attempts(call, path_and_query, out).await?)
    }

    async fn attempts(
        &self,
        call: &'static str,
        path_and_query: &str,
        out: &Outgoing<'_>,
    ) -> Result<Answer, Failure> {
        let url = format!("{}{}", self.base, path_and_query);
        let url = url.as_str();
        let method = call
            .split_once(' ')
            .and_then(|(m, _)| Method::from_bytes(m.as_bytes()).ok())
            .unwrap_or(Method::GET);
        let name = S::NAME;
        let mut attempt = 0;
        loop {
            attempt += 1;
            self.count(call);
            let outcome = tokio::time::timeout(
                REQUEST_TIMEOUT,
                self.exchange(call, method.clone(), url, out),
            )
            .await
            .unwrap_or_else(|_| Err(Lost::sent(format!("no answer within {REQUEST_TIMEOUT:?}"))));
            let answer = match outcome {
                Ok(answer) => answer,
                Err(Lost::TooLarge) => {
                    return Err(Failure::TooLarge {
                        call,
                        limit: MAX_ANSWER_BYTES,
                    })
                }
                Err(Lost::Failed { reason, unsent }) => {
                    tracing::debug!(call, attempt, %reason, "{name} request failed");
                    let may_retry = out.retry == Retry::Idempotent || unsent;
                    if !may_retry || attempt >= MAX_ATTEMPTS {
                        return Err(Failure::Unreachable {
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
            tracing::debug!(call, attempt, status = status.as_u16(), "{name} answered");
            if self.service.accepts(status) {
                return Ok(answer);
            }
            if status.is_server_error() {
                if out.retry != Retry::Idempotent || attempt >= MAX_ATTEMPTS {
                    return Err(Failure::ServerError {
                        call,
                        status: status.as_u16(),
                        attempts: attempt,
                    });
                }
                let wait = self
                    .service
                    .server_error_wait(&answer)
                    .filter(|w| *w <= MAX_RATE_LIMIT_WAIT)
                    .unwrap_or_else(|| backoff(attempt));
                tokio::time::sleep(wait).await;
                continue;
            }
            // A rate limit is refused before the request is handled, so even a create is
            // safe to send again.
            if let Some(wait) = self.service.rate_limit_wait(&answer) {
                if wait <= MAX_RATE_LIMIT_WAIT && attempt < MAX_ATTEMPTS {
                    tracing::info!(
                        call,
                        wait_ms = wait.as_millis() as u64,
                        "{name} rate limit: waiting"
                    );
                    tokio::time::sleep(wait).await;
                    continue;
                }
                return Err(Failure::RateLimited {
                    call,
                    retry_after: wait,
                });
            }
            return Err(Failure::Refused {
                call,
                status: status.as_u16(),
                body: answer.body,
            });
        }
    }

    async fn exchange(
        &self,
        call: &'static str,
        method: Method,
        url: &str,
        out: &Outgoing<'_>,
    ) -> Result<Answer, Lost> {
        // The error names the call, never the request (its headers hold a credential).
        let invalid = || Lost::unsent(format!("{call}: not a valid request"));
        let mut request = Request::builder()
            .method(method)
            .uri(url)
            .header(USER_AGENT, concat!("sortie/", env!("CARGO_PKG_VERSION")));
        if let Some(headers) = request.headers_mut() {
            headers.extend(self.headers.clone());
        }
        if let Some(bearer) = out.bearer {
            let mut value =
                HeaderValue::from_str(&format!("Bearer {bearer}")).map_err(|_| invalid())?;
            value.set_sensitive(true);
            request = request.header(AUTHORIZATION, value);
        }
        if let Some(etag) = out.if_none_match {
            request = request.header(IF_NONE_MATCH, etag);
        }
        let body = match out.json {
            Some(json) => {
                request = request.header(CONTENT_TYPE, "application/json");
                Bytes::copy_from_slice(json)
            }
            None => Bytes::new(),
        };
        let request = request.body(Full::new(body)).map_err(|_| invalid())?;
        let response = self.client.request(request).await.map_err(|e| {
            let reason = crate::error_chain(&e);
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
                    Lost::TooLarge
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

/// A request that got no usable answer.
enum Lost {
    /// The answer was over the cap.
    TooLarge,
    /// Why, and whether the request surely never reached the service.
    Failed { reason: String, unsent: bool },
}

impl Lost {
    fn sent(reason: String) -> Self {
        Self::Failed {
            reason,
            unsent: false,
        }
    }
    fn unsent(reason: String) -> Self {
        Self::Failed {
            reason,
            unsent: true,
        }
    }
}

/// The wait before attempt `attempt + 1`: [`BASE_BACKOFF`] doubled per attempt made.
fn backoff(attempt: u32) -> Duration {
    BASE_BACKOFF.saturating_mul(1 << attempt.saturating_sub(1).min(8))
}

/// A wait of `secs` a service asks for, capped at [`MAX_REPORTED_WAIT`].
pub fn reported_wait(secs: u64) -> Duration {
    Duration::from_secs(secs).min(MAX_REPORTED_WAIT)
}

/// The header `name` of `headers` as text, when it is present and text.
pub fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// `text` as a header value marked sensitive (never printed by `http`'s `Debug`), for a
/// credential; `None` when it cannot be a header value. The text is never quoted.
pub fn credential(text: &str) -> Option<HeaderValue> {
    let mut value = HeaderValue::from_str(text).ok()?;
    value.set_sensitive(true);
    Some(value)
}

/// The `rel="next"` URL of a `Link` header (RFC 8288):
/// `<url>; rel="next", <url>; rel="last"`.
pub fn next_link(link: &str) -> Option<String> {
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

/// `url` without its trailing slash, when it is `https://`, or `http://` to a loopback
/// address, with a host and no credentials, query or fragment; else why not.
/// `credentials_home` names where credentials belong instead (`the token`).
pub fn api_root(url: &str, credentials_home: &str) -> Result<String, String> {
    let url = url::Url::parse(url).map_err(|e| e.to_string())?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!(
            "credentials belong in {credentials_home}, not the URL"
        ));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err("a query or fragment is not allowed".into());
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
                return Err("http:// is allowed only to a loopback address; use https://".into());
            }
        }
        _ => return Err("the scheme must be https".into()),
    }
    if url.host().is_none() {
        return Err("no host".into());
    }
    Ok(url.as_str().trim_end_matches('/').to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn api_roots_are_https_or_loopback_http() {
        for (url, root) in [
            ("https://api.github.com", "https://api.github.com"),
            (
                "https://ghe.example.com/api/v3/",
                "https://ghe.example.com/api/v3",
            ),
            ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
            ("http://[::1]:8080", "http://[::1]:8080"),
            ("http://localhost:1", "http://localhost:1"),
        ] {
            assert_eq!(api_root(url, "the app key").as_deref(), Ok(root), "{url}");
        }
        let loopback_only = "http:// is allowed only to a loopback address; use https://";
        for (url, why) in [
            ("http://api.github.com", loopback_only),
            ("http://10.0.0.1", loopback_only),
            ("ftp://x", "the scheme must be https"),
            (
                "https://u:p@api.github.com",
                "credentials belong in the app key, not the URL",
            ),
            (
                "https://api.github.com?x=1",
                "a query or fragment is not allowed",
            ),
            (
                "https://gitlab.com/#x",
                "a query or fragment is not allowed",
            ),
            ("not a url", "relative URL without a base"),
        ] {
            assert_eq!(api_root(url, "the app key").unwrap_err(), why, "{url}");
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

    #[test]
    fn backoff_doubles_and_stays_bounded() {
        assert_eq!(backoff(1), BASE_BACKOFF);
        assert_eq!(backoff(2), BASE_BACKOFF * 2);
        assert_eq!(backoff(3), BASE_BACKOFF * 4);
        assert!(backoff(u32::MAX) <= BASE_BACKOFF * 256);
    }

    #[test]
    fn reported_waits_are_capped() {
        assert_eq!(reported_wait(30), Duration::from_secs(30));
        assert_eq!(reported_wait(u64::MAX), MAX_REPORTED_WAIT);
    }

    #[test]
    fn a_credential_is_sensitive_and_never_quoted() {
        assert!(credential("glpat-abc").unwrap().is_sensitive());
        assert!(credential("a\nb").is_none());
        let shown = format!("{:?}", credential("glpat-abc").unwrap());
        assert!(!shown.contains("glpat-abc"), "{shown}");
    }

    proptest! {
        #[test]
        fn link_parsing_never_panics(link in "\\PC{0,200}") {
            let _ = next_link(&link);
        }
    }
}
