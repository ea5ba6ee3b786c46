//! A `github` source: GitHub's tarball of one commit, downloaded with the short-lived,
//! read-only installation token the job spec carries ([`SourceAccess`]).
//!
//! - The request says who it is and what it wants: `Authorization: Bearer <token>`,
//!   `Accept: application/vnd.github+json`, `X-GitHub-Api-Version` and a `User-Agent`
//!   ([`USER_AGENT`]), which GitHub requires of every request
//!   (<https://docs.github.com/en/rest/using-the-rest-api/getting-started-with-the-rest-api#user-agent>).
//! - GitHub answers `GET /repos/{owner}/{repo}/tarball/{ref}` with a redirect (302) to a
//!   temporary download URL on another host, `codeload.github.com`
//!   (<https://docs.github.com/en/rest/repos/contents#download-a-repository-archive-tar>).
//!   The pilot follows at most [`MAX_REDIRECTS`] of them, and sends the token only to the
//!   origin (scheme, host and port) of the spec's URL: never to another host, another port
//!   or another scheme. A redirect from HTTPS to plain HTTP is refused (the download URL
//!   of a private repository carries its own token in its query). A URL is shown only
//!   without its query ([`without_query`]).
//! - The archive is at most [`MAX_ARCHIVE_BYTES`]; a longer answer is cut off and refused.
//! - A connection failure, a timeout or 5xx is retried (a bounded [`RetryPolicy`]); any
//!   other answer is final, and its error quotes GitHub's `message`. A rate limit (429, or
//!   403 with `x-ratelimit-remaining: 0`) is final too: GitHub asks clients to wait a minute
//!   or more before they try again, and may ban one that keeps asking
//!   (<https://docs.github.com/en/rest/using-the-rest-api/troubleshooting-the-rest-api#rate-limit-errors>).
//! - The token never appears in an error: every message is scrubbed of it before it
//!   leaves this module (an error body could echo it), and the run adds it to the
//!   process's secrets as soon as the spec arrives ([`crate::run()`]).

use std::time::Duration;

use chrono::{DateTime, Utc};
use http::header::{HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_LENGTH, LOCATION};
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use sortie_core::protocol::pilot::SourceAccess;
use sortie_http::{error_chain, error_detail};
use url::Url;

use crate::api::{http_client, retrying, without_query, Failure, HttpClient, RetryPolicy};
use crate::error::PilotError;
use crate::scrub::Patterns;

/// The most redirects followed from the spec's URL (GitHub's API answers one, to
/// codeload; the rest is margin). A further redirect fails the download.
pub const MAX_REDIRECTS: usize = 3;

/// The largest tarball downloaded, in bytes (256 MiB).
pub const MAX_ARCHIVE_BYTES: usize = 256 * 1024 * 1024;

/// The most bytes of an error answer read (its `message` is in the first few hundred).
const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;

/// The `User-Agent` of every request: GitHub refuses requests without one
/// (<https://docs.github.com/en/rest/using-the-rest-api/getting-started-with-the-rest-api#user-agent>).
pub const USER_AGENT: &str = concat!("sortie-pilot/", env!("CARGO_PKG_VERSION"));

/// The media type GitHub's REST API asks for
/// (<https://docs.github.com/en/rest/using-the-rest-api/getting-started-with-the-rest-api#accept>).
pub const ACCEPT_GITHUB: &str = "application/vnd.github+json";

/// The REST API version asked for
/// (<https://docs.github.com/en/rest/about-the-rest-api/api-versions>).
pub const API_VERSION: &str = "2022-11-28";

/// The download's default patience: 3 attempts, 1 s then 2 s apart, each at most 5 minutes.
pub const DEFAULT_RETRY: RetryPolicy = RetryPolicy {
    attempts: 3,
    first_delay: Duration::from_secs(1),
    timeout: Duration::from_secs(300),
};

/// The access a `github` or `gitlab` source needs, checked: present, and not expired at
/// `now`.
pub fn usable_access(
    access: Option<&SourceAccess>,
    now: DateTime<Utc>,
) -> Result<&SourceAccess, PilotError> {
    let access = access.ok_or_else(|| {
        PilotError::Spec(
            "the job's source is a commit of a code host but its spec has no source_access (the archive URL and token): the API did not give this job access to the repository".into(),
        )
    })?;
    if access.expires_at <= now {
        return Err(PilotError::Spec(format!(
            "the job's source token (source_access) expired at {}; it is {} now: the job must be fetched again for a fresh one",
            access.expires_at.to_rfc3339(),
            now.to_rfc3339()
        )));
    }
    if access.token.trim().is_empty() {
        return Err(PilotError::Spec(
            "the job's source_access has an empty token".into(),
        ));
    }
    Ok(access)
}

/// Downloads GitHub tarballs: one HTTP(S) client with its limits.
#[derive(Debug)]
pub struct TarballClient {
    client: HttpClient,
    retry: RetryPolicy,
    max_bytes: usize,
}

/// Where a download is, and what may be sent there.
struct Hop {
    url: Url,
    /// Same origin (scheme, host, port) as the spec's URL: the token may be sent.
    authorized: bool,
}

impl TarballClient {
    /// A client for `url` ([`SourceAccess::url`]) with [`DEFAULT_RETRY`] and
    /// [`MAX_ARCHIVE_BYTES`].
    pub fn new(url: &str) -> Result<Self, PilotError> {
        Self::with_limits(url, DEFAULT_RETRY, MAX_ARCHIVE_BYTES)
    }

    /// A client for `url` with an explicit retry policy and size limit.
    pub fn with_limits(
        url: &str,
        retry: RetryPolicy,
        max_bytes: usize,
    ) -> Result<Self, PilotError> {
        let client = http_client(url.starts_with("https://"))
            .map_err(|e| PilotError::Source(format!("GitHub tarball: {e}")))?;
        Ok(Self {
            client,
            retry,
            max_bytes,
        })
    }

    /// The tarball `access` points at, whole. Errors name the URL without its query, quote
    /// GitHub's message, and never contain the token.
    pub async fn download(&self, access: &SourceAccess) -> Result<Vec<u8>, PilotError> {
        let token = Patterns::new([access.token.as_str()]);
        let scrubbed = |message: String| PilotError::Source(token.scrub_str(&message));
        let start = Url::parse(&access.url).map_err(|e| {
            scrubbed(format!(
                "source_access.url `{}` is not a URL: {e}",
                without_query(&access.url)
            ))
        })?;
        if !matches!(start.scheme(), "https" | "http") {
            return Err(scrubbed(format!(
                "source_access.url `{}` must be an https URL",
                without_query(&access.url)
            )));
        }
        let shown = format!("GET {}", without_query(start.as_str()));
        // Each failure scrubbed as it is made: a retried one is logged before the end.
        let once = || async {
            self.attempt(&start, &access.token)
                .await
                .map_err(|failure| match failure {
                    Failure::Transient(m) => Failure::Transient(token.scrub_str(&m)),
                    Failure::Fatal(m) => Failure::Fatal(token.scrub_str(&m)),
                })
        };
        retrying(&self.retry, &shown, once)
            .await
            .map_err(|e| scrubbed(format!("could not download the GitHub tarball: {e}")))
    }

    /// Revokes the source token itself (`DELETE` its [`SourceAccess::revoke_url`], the
    /// token as its bearer), once the archive is in hand and before any Terraform runs: a
    /// provider or an `external` data source of the job never holds a live token. The
    /// token goes only to the origin of the archive's URL; a URL elsewhere is refused.
    /// 2xx is done, and so is 401 (the token is revoked or expired already). A connection
    /// failure or 5xx is tried again within the policy; the error never holds the token.
    /// Nothing to do without a `revoke_url`.
    pub async fn revoke(&self, access: &SourceAccess) -> Result<(), PilotError> {
        let Some(revoke_url) = access.revoke_url.as_deref() else {
            return Ok(());
        };
        let token = Patterns::new([access.token.as_str()]);
        let scrubbed = |message: String| PilotError::Source(token.scrub_str(&message));
        let shown = format!("DELETE {}", without_query(revoke_url));
        let (Ok(url), Ok(origin)) = (Url::parse(revoke_url), Url::parse(&access.url)) else {
            return Err(scrubbed(format!("{shown}: not a URL")));
        };
        if !same_origin(&url, &origin) {
            return Err(scrubbed(format!(
                "{shown}: not the origin of the archive's URL, so the token is not sent there"
            )));
        }
        let once = || async {
            let attempt = self.delete(&url, &access.token);
            tokio::time::timeout(self.retry.timeout, attempt)
                .await
                .unwrap_or_else(|_| Err(Failure::Transient(format!("{shown}: no answer in time"))))
                .map_err(|failure| match failure {
                    Failure::Transient(m) => Failure::Transient(token.scrub_str(&m)),
                    Failure::Fatal(m) => Failure::Fatal(token.scrub_str(&m)),
                })
        };
        retrying(&self.retry, &shown, once)
            .await
            .map_err(|e| scrubbed(format!("could not revoke the source token: {e}")))
    }

    /// One `DELETE` of `url` with `token`: done, or why not.
    async fn delete(&self, url: &Url, token: &str) -> Result<(), Failure> {
        let shown = format!("DELETE {}", without_query(url.as_str()));
        let mut bearer = HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|_| Failure::Fatal("the source token is not a valid header value".into()))?;
        bearer.set_sensitive(true);
        let request = Request::builder()
            .method(Method::DELETE)
            .uri(url.as_str())
            .header(http::header::USER_AGENT, USER_AGENT)
            .header(AUTHORIZATION, bearer)
            .body(Full::new(Bytes::new()))
            .map_err(|e| Failure::Fatal(format!("{shown} is not a valid request: {e}")))?;
        let response = self
            .client
            .request(request)
            .await
            .map_err(|e| Failure::Transient(format!("{shown}: {}", error_chain(&e))))?;
        let status = response.status();
        if status.is_success() || status == StatusCode::UNAUTHORIZED {
            return Ok(());
        }
        let body = read_at_most(response.into_body(), MAX_ERROR_BODY_BYTES)
            .await
            .ok()
            .flatten()
            .unwrap_or_default();
        let message = format!("{shown} answered {status}: {}", error_detail(&body));
        if status.is_server_error() {
            Err(Failure::Transient(message))
        } else {
            Err(Failure::Fatal(message))
        }
    }

    /// One attempt: the spec's URL and at most [`MAX_REDIRECTS`] redirects, within the
    /// policy's timeout.
    async fn attempt(&self, start: &Url, token: &str) -> Result<Vec<u8>, Failure> {
        let walk = async {
            let mut hop = Hop {
                url: start.clone(),
                authorized: true,
            };
            for redirects in 0..=MAX_REDIRECTS {
                match self.get(&hop, token).await? {
                    Answer::Body(bytes) => return Ok(bytes),
                    Answer::Redirect(next) if redirects < MAX_REDIRECTS => {
                        hop = next_hop(start, &hop.url, &next)?;
                    }
                    Answer::Redirect(_) => break,
                }
            }
            Err(Failure::Fatal(format!(
                "GET {} was redirected more than {MAX_REDIRECTS} times",
                without_query(start.as_str())
            )))
        };
        tokio::time::timeout(self.retry.timeout, walk)
            .await
            .map_err(|_| {
                Failure::Transient(format!(
                    "GET {}: no whole answer within {} s",
                    without_query(start.as_str()),
                    self.retry.timeout.as_secs()
                ))
            })?
    }

    /// One GET of `hop`: its body, or where it redirects to.
    async fn get(&self, hop: &Hop, token: &str) -> Result<Answer, Failure> {
        let shown = without_query(hop.url.as_str());
        let mut request = Request::builder()
            .method(Method::GET)
            .uri(hop.url.as_str())
            .header(ACCEPT, ACCEPT_GITHUB)
            .header(http::header::USER_AGENT, USER_AGENT)
            .header("X-GitHub-Api-Version", API_VERSION);
        if hop.authorized {
            let mut bearer = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
                Failure::Fatal("the source token is not a valid header value".into())
            })?;
            bearer.set_sensitive(true);
            request = request.header(AUTHORIZATION, bearer);
        }
        let request = request
            .body(Full::new(Bytes::new()))
            .map_err(|e| Failure::Fatal(format!("GET {shown} is not a valid request: {e}")))?;
        let response = self
            .client
            .request(request)
            .await
            .map_err(|e| Failure::Transient(format!("GET {shown}: {}", error_chain(&e))))?;
        let status = response.status();
        if status.is_redirection() {
            let location = response
                .headers()
                .get(LOCATION)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
                .ok_or_else(|| {
                    Failure::Fatal(format!(
                        "GET {shown} answered {status} without a Location to follow"
                    ))
                })?;
            return Ok(Answer::Redirect(location));
        }
        if status.is_success() {
            let declared = response
                .headers()
                .get(CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok());
            if declared.is_some_and(|n| n > self.max_bytes as u64) {
                return Err(self.too_large(&shown));
            }
            let bytes = read_at_most(response.into_body(), self.max_bytes)
                .await
                .map_err(|e| {
                    Failure::Transient(format!("GET {shown}: the answer was cut short: {e}"))
                })?
                .ok_or_else(|| self.too_large(&shown))?;
            return Ok(Answer::Body(bytes));
        }
        let body = read_at_most(response.into_body(), MAX_ERROR_BODY_BYTES)
            .await
            .ok()
            .flatten()
            .unwrap_or_default();
        let message = refusal_message(&shown, status, &body);
        if status.is_server_error() {
            Err(Failure::Transient(message))
        } else {
            Err(Failure::Fatal(message))
        }
    }

    fn too_large(&self, shown: &str) -> Failure {
        Failure::Fatal(format!(
            "GET {shown}: the tarball is over the {}-byte limit ({} MiB)",
            self.max_bytes,
            self.max_bytes / (1024 * 1024)
        ))
    }
}

/// What one GET answered.
enum Answer {
    Body(Vec<u8>),
    Redirect(String),
}

/// The hop a redirect from `from` to `location` leads to: the token goes only where the
/// spec's URL (`start`) went, the same scheme, host and port. HTTPS never leads to HTTP.
fn next_hop(start: &Url, from: &Url, location: &str) -> Result<Hop, Failure> {
    let url = from.join(location).map_err(|e| {
        Failure::Fatal(format!(
            "GET {} redirected to `{}`, which is not a URL: {e}",
            without_query(from.as_str()),
            without_query(location)
        ))
    })?;
    if !matches!(url.scheme(), "https" | "http")
        || (from.scheme() == "https" && url.scheme() != "https")
    {
        return Err(Failure::Fatal(format!(
            "GET {} redirected to {}: only https may follow https",
            without_query(from.as_str()),
            without_query(url.as_str())
        )));
    }
    Ok(Hop {
        authorized: same_origin(start, &url),
        url,
    })
}

/// True when `a` and `b` have the same scheme, host and port (the port a scheme implies
/// when absent).
pub fn same_origin(a: &Url, b: &Url) -> bool {
    a.scheme() == b.scheme()
        && a.host_str().map(str::to_ascii_lowercase) == b.host_str().map(str::to_ascii_lowercase)
        && a.port_or_known_default() == b.port_or_known_default()
}

/// The body, read to its end when it is at most `max` bytes; `Ok(None)` when it is longer
/// (reading stops there).
async fn read_at_most(
    mut body: hyper::body::Incoming,
    max: usize,
) -> Result<Option<Vec<u8>>, String> {
    let mut bytes = Vec::new();
    // Bounded: every frame adds bytes until `max` is passed, and the caller's timeout
    // bounds the time.
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| error_chain(&e))?;
        if let Ok(data) = frame.into_data() {
            if bytes.len() + data.len() > max {
                return Ok(None);
            }
            bytes.extend_from_slice(&data);
        }
    }
    Ok(Some(bytes))
}

/// The one-line error of an unsuccessful answer, with GitHub's `message` when it gave one
/// (its error bodies are `{"message": ..., "documentation_url": ...}`). GitHub answers 404,
/// not 403, to a request for a private repository the token cannot read
/// (<https://docs.github.com/en/rest/using-the-rest-api/troubleshooting-the-rest-api#404-not-found-for-an-existing-resource>).
fn refusal_message(shown: &str, status: StatusCode, body: &[u8]) -> String {
    let detail = error_detail(body);
    let hint = match status {
        StatusCode::NOT_FOUND => {
            " (the repository or the commit does not exist, or the token cannot read it)"
        }
        StatusCode::UNAUTHORIZED => " (GitHub refused the token: it may have expired)",
        StatusCode::FORBIDDEN => {
            " (the token may not read this repository, or a rate limit was reached)"
        }
        StatusCode::TOO_MANY_REQUESTS => {
            " (a GitHub rate limit was reached: run the job again later)"
        }
        _ => "",
    };
    if detail.is_empty() {
        format!("GET {shown} answered {status}{hint}")
    } else {
        format!("GET {shown} answered {status}: {detail}{hint}")
    }
}

#[cfg(test)]
#[path = "github_tests.rs"]
mod tests;
