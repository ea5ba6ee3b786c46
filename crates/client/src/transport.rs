//! One request of the API and its whole answer, over hyper's legacy client and rustls
//! (aws-lc-rs, the stack the AWS SDK already builds; [`sortie_http::connector`]).

use std::time::Duration;

use http::header::{
    HeaderName, HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, ETAG, USER_AGENT,
};
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::Call;

/// How long one request may take unless the caller says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Plain HTTP and HTTPS over hyper's legacy client.
pub type HttpClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// Why a request got no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransportError {
    /// The API's base URL is not one a client can use; the message says why.
    #[error("{0}")]
    BaseUrl(String),
    /// No CA certificates to verify an `https://` API with; the message says why.
    #[error("{0}")]
    Tls(String),
    /// The request could not be built (a header value that is not one, say).
    #[error("could not build the request to {url}: {detail}")]
    Build {
        /// The URL, never the headers.
        url: String,
        /// What was wrong.
        detail: String,
    },
    /// No connection, or the answer was cut short.
    #[error("could not reach {url}: {detail}")]
    Unreachable {
        /// The URL asked.
        url: String,
        /// The cause, its sources each said once.
        detail: String,
    },
    /// No whole answer within the timeout.
    #[error("could not reach {url}: no answer within {seconds} s")]
    Timeout {
        /// The URL asked.
        url: String,
        /// The timeout.
        seconds: u64,
    },
}

impl TransportError {
    /// Worth another attempt: the API may answer next time (everything but a bad URL or
    /// request).
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Unreachable { .. } | Self::Timeout { .. })
    }
}

/// A whole answer.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The status.
    pub status: StatusCode,
    /// The `ETag` header, as sent (quotes included).
    pub etag: Option<String>,
    /// The body's bytes.
    pub body: Bytes,
}

impl Reply {
    /// A 2xx answer.
    pub fn is_success(&self) -> bool {
        self.status.is_success()
    }

    /// An answer worth another attempt: 429 or 5xx.
    pub fn is_transient(&self) -> bool {
        self.status.is_server_error() || self.status == StatusCode::TOO_MANY_REQUESTS
    }

    /// The body decoded as `T`.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_slice(&self.body)
    }

    /// The body as JSON: `Null` when empty, a string when it is not JSON (a proxy's HTML
    /// page, say), so a message can quote it.
    pub fn value(&self) -> Value {
        if self.body.iter().all(u8::is_ascii_whitespace) {
            return Value::Null;
        }
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&self.body).into_owned()))
    }

    /// A short, one-line detail of an error answer ([`sortie_http::error_detail`]).
    pub fn detail(&self) -> String {
        sortie_http::error_detail(&self.body)
    }
}

/// What goes with one request beyond its [`Call`]: the token, a body, more headers, a
/// timeout of its own. Its debug form never shows the token or a header's value.
#[derive(Default)]
pub struct Outgoing<'a> {
    token: Option<&'a str>,
    body: Option<(&'static str, Bytes)>,
    headers: Vec<(HeaderName, String)>,
    timeout: Option<Duration>,
}

impl std::fmt::Debug for Outgoing<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("Outgoing")
            .field("token", &self.token.map(|_| "<redacted>"))
            .field("content_type", &self.body.as_ref().map(|(t, _)| t))
            .field("headers", &names)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl<'a> Outgoing<'a> {
    /// Nothing more than the call.
    pub fn new() -> Self {
        Self::default()
    }

    /// `Authorization: Bearer <token>` (marked sensitive: never in a debug print).
    pub fn bearer(mut self, token: Option<&'a str>) -> Self {
        self.token = token;
        self
    }

    /// A JSON body.
    pub fn json<T: serde::Serialize + ?Sized>(self, body: &T) -> Result<Self, serde_json::Error> {
        Ok(self.raw("application/json", Bytes::from(serde_json::to_vec(body)?)))
    }

    /// A body of `content_type`, as it is.
    pub fn raw(mut self, content_type: &'static str, body: Bytes) -> Self {
        self.body = Some((content_type, body));
        self
    }

    /// One more header (`If-Match`, `Idempotency-Key`).
    pub fn header(mut self, name: HeaderName, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    /// This request's own timeout (a long poll's, say).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }
}

/// The API at one base URL, as one program (its `User-Agent`).
#[derive(Clone)]
pub struct Transport {
    base: String,
    user_agent: &'static str,
    timeout: Duration,
    client: HttpClient,
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transport")
            .field("base", &self.base)
            .field("user_agent", &self.user_agent)
            .finish_non_exhaustive()
    }
}

impl Transport {
    /// A transport to the API at `base` (`https://…` or `http://…`, a host, no query; a
    /// trailing `/` is dropped), with hyper's default connector.
    pub fn new(base: &str, user_agent: &'static str) -> Result<Self, TransportError> {
        Self::with_connector(base, user_agent, connector())
    }

    /// [`Transport::new`] over a connector of the caller's (its keep-alive and connect
    /// timeout, say).
    pub fn with_connector(
        base: &str,
        user_agent: &'static str,
        http: HttpConnector,
    ) -> Result<Self, TransportError> {
        let base = base.trim_end_matches('/').to_string();
        let https = check_base(&base)?;
        let connector = sortie_http::connector(https, http).map_err(TransportError::Tls)?;
        Ok(Self {
            base,
            user_agent,
            timeout: DEFAULT_TIMEOUT,
            client: Client::builder(TokioExecutor::new()).build(connector),
        })
    }

    /// The same transport with another default timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The base URL, without a trailing `/`.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// The default timeout of one request.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The HTTP client itself, for a request that is not the API's (a presigned URL).
    pub fn http(&self) -> &HttpClient {
        &self.client
    }

    /// `GET url`, a URL that is not the API's (a presigned S3 URL): no token, no `Accept`;
    /// its first `max_bytes` bytes at most (a `Range`; an answer that says it is longer is
    /// refused unread), within `timeout`, whatever its status. An error names the URL
    /// without its query (a presigned URL's signature is a credential).
    pub async fn get_url(
        &self,
        url: &str,
        timeout: Duration,
        max_bytes: u64,
    ) -> Result<Reply, TransportError> {
        let shown = url.split(['?', '#']).next().unwrap_or(url).to_string();
        let request = Request::builder()
            .method(http::Method::GET)
            .uri(url)
            .header(USER_AGENT, self.user_agent)
            .header(
                http::header::RANGE,
                format!("bytes=0-{}", max_bytes.saturating_sub(1)),
            )
            .body(Full::new(Bytes::new()))
            .map_err(|e| TransportError::Build {
                url: shown.clone(),
                detail: sortie_http::error_chain(&e),
            })?;
        self.exchange(request, shown, timeout, Some(max_bytes))
            .await
    }

    /// Sends `call` and reads its whole answer, whatever its status.
    pub async fn send(&self, call: &Call, outgoing: Outgoing<'_>) -> Result<Reply, TransportError> {
        let url = format!("{}{}", self.base, call.path);
        let build = |detail: String| TransportError::Build {
            url: url.clone(),
            detail,
        };
        let mut request = Request::builder()
            .method(call.method.clone())
            .uri(&url)
            .header(ACCEPT, "application/json")
            .header(USER_AGENT, self.user_agent);
        if let Some(token) = outgoing.token {
            let mut bearer = HeaderValue::from_str(&format!("Bearer {token}"))
                .map_err(|_| build("the token is not a valid header value".into()))?;
            bearer.set_sensitive(true);
            request = request.header(AUTHORIZATION, bearer);
        }
        let body = match outgoing.body {
            Some((content_type, bytes)) => {
                request = request.header(CONTENT_TYPE, content_type);
                bytes
            }
            None => Bytes::new(),
        };
        for (name, value) in outgoing.headers {
            request = request.header(name, value);
        }
        // An error names the URL, never the headers (the token is one of them).
        let request = request
            .body(Full::new(body))
            .map_err(|e| build(sortie_http::error_chain(&e)))?;
        let timeout = outgoing.timeout.unwrap_or(self.timeout);
        self.exchange(request, url, timeout, None).await
    }

    /// Sends `request` and reads its whole answer within `timeout`; with `max_bytes`, an
    /// answer whose Content-Length says it is longer is refused unread. Errors name `url`.
    async fn exchange(
        &self,
        request: Request<Full<Bytes>>,
        url: String,
        timeout: Duration,
        max_bytes: Option<u64>,
    ) -> Result<Reply, TransportError> {
        let unreachable = |detail: String| TransportError::Unreachable {
            url: url.clone(),
            detail,
        };
        let exchange = async {
            let response = self
                .client
                .request(request)
                .await
                .map_err(|e| unreachable(sortie_http::error_chain(&e)))?;
            let status = response.status();
            let header = |name| {
                response
                    .headers()
                    .get(name)
                    .and_then(|v: &HeaderValue| v.to_str().ok())
                    .map(str::to_string)
            };
            let etag = header(ETAG);
            let length = header(CONTENT_LENGTH).and_then(|v| v.parse::<u64>().ok());
            if let (Some(length), Some(max)) = (length, max_bytes) {
                if length > max {
                    return Err(unreachable(format!(
                        "the answer is {length} bytes, more than the {max} asked for"
                    )));
                }
            }
            let body = response
                .into_body()
                .collect()
                .await
                .map_err(|e| {
                    unreachable(format!(
                        "the answer was cut short: {}",
                        sortie_http::error_chain(&e)
                    ))
                })?
                .to_bytes();
            Ok(Reply { status, etag, body })
        };
        tokio::time::timeout(timeout, exchange)
            .await
            .unwrap_or_else(|_| {
                Err(TransportError::Timeout {
                    url: url.clone(),
                    seconds: timeout.as_secs(),
                })
            })
    }
}

/// hyper's default connector, for `http://` and `https://` URLs alike.
fn connector() -> HttpConnector {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http
}

/// A bare HTTP(S) client for URLs that are not the API's (a presigned S3 URL, a GitHub
/// archive); `https` when HTTPS is needed (then CA certificates are required:
/// [`sortie_http::connector`]).
pub fn http_client(https: bool) -> Result<HttpClient, String> {
    let connector = sortie_http::connector(https, connector())?;
    Ok(Client::builder(TokioExecutor::new()).build(connector))
}

/// Whether `base` is HTTPS, or why no client can use it.
fn check_base(base: &str) -> Result<bool, TransportError> {
    let uri: http::Uri = base
        .parse()
        .map_err(|e| TransportError::BaseUrl(format!("the API URL `{base}` is not a URL: {e}")))?;
    let https = match uri.scheme_str() {
        Some("https") => true,
        Some("http") => false,
        _ => {
            return Err(TransportError::BaseUrl(format!(
                "the API URL `{base}` must start with https:// or http://"
            )))
        }
    };
    if uri.host().is_none_or(str::is_empty) {
        return Err(TransportError::BaseUrl(format!(
            "the API URL `{base}` has no host"
        )));
    }
    if uri.query().is_some() {
        return Err(TransportError::BaseUrl(format!(
            "the API URL `{base}` must not have a query"
        )));
    }
    Ok(https)
}

/// Why a token may not be sent to `url`: plain `http://` carries it in clear, so it is
/// allowed only to a loopback host (`localhost`, 127.0.0.0/8, `::1`), as `sortie dev`
/// serves. `None` for `https://` and for `http://` to loopback.
pub fn cleartext_problem(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    if !scheme.eq_ignore_ascii_case("http") {
        return None;
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = match host_port.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => host_port.split(':').next().unwrap_or_default(),
    };
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|ip| ip.is_loopback())
        || host
            .parse::<std::net::Ipv6Addr>()
            .is_ok_and(|ip| ip.is_loopback());
    (!loopback).then(|| {
        format!(
            "`{url}` is plain http:// to `{host}`, which is not this machine: the token would travel in clear. Use https:// (plain http:// is allowed only to localhost, 127.0.0.0/8 or ::1)"
        )
    })
}
