//! The guarded client of notification deliveries: one POST to a URL a tenant gave, which
//! must not reach anything inside Sortie's network.
//!
//! [`GuardedClient::post`]:
//! - parses the URL with [`sortie_core::notify::address::destination_url`] (`https://`; plain
//!   `http://` only to loopback, and only for a local client);
//! - resolves the host once, and refuses it when any address it resolves to is internal
//!   ([`sortie_core::notify::address::checked_addresses`]);
//! - connects to an address that was checked (never resolving again, so DNS rebinding
//!   changes nothing), with TLS for the URL's host name (SNI and certificate);
//! - sends one HTTP/1.1 request and follows no redirect (a 3xx is an answer like any other);
//! - gives up after [`GuardedClient::timeout`] (10 s: connection, TLS, answer and body) and
//!   reads at most [`MAX_ANSWER_BYTES`] of the answer.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use sortie_core::notify::address::{checked_addresses, destination_url};
pub use sortie_core::notify::delivery::MAX_ANSWER_BYTES;
use url::Host;

/// What a receiver answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The HTTP status.
    pub status: u16,
    /// Its `Retry-After` header, as sent.
    pub retry_after: Option<String>,
    /// The first [`MAX_ANSWER_BYTES`] of its body.
    pub body: Vec<u8>,
    /// From the start of the attempt to the end of what was read.
    pub latency: Duration,
}

/// Why there is no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// Nothing within the timeout.
    TimedOut,
    /// Not reached: a name that does not resolve, a refused connection, a bad certificate.
    Unreachable(String),
    /// The guard refused the URL or an address it resolves to.
    Refused(String),
}

/// Resolves a host name to its addresses.
#[async_trait::async_trait]
pub trait Resolve: Send + Sync {
    /// The addresses of `host`, in the resolver's order.
    async fn resolve(&self, host: &str, port: u16) -> Result<Vec<IpAddr>, String>;
}

/// The system's resolver (`getaddrinfo`, through tokio).
pub struct SystemResolver;

#[async_trait::async_trait]
impl Resolve for SystemResolver {
    async fn resolve(&self, host: &str, port: u16) -> Result<Vec<IpAddr>, String> {
        tokio::net::lookup_host((host, port))
            .await
            .map(|addrs| addrs.map(|a| a.ip()).collect())
            .map_err(|e| format!("`{host}` does not resolve: {e}"))
    }
}

/// Names pinned to addresses, as curl's `--resolve` pins them (`sortie dev --resolve`),
/// then the system's resolver. The guard checks a pinned address as any other.
pub struct PinnedResolver {
    /// Each name and the address it resolves to.
    pub pins: Vec<(String, IpAddr)>,
}

#[async_trait::async_trait]
impl Resolve for PinnedResolver {
    async fn resolve(&self, host: &str, port: u16) -> Result<Vec<IpAddr>, String> {
        let pinned: Vec<IpAddr> = self
            .pins
            .iter()
            .filter(|(name, _)| name.eq_ignore_ascii_case(host))
            .map(|(_, ip)| *ip)
            .collect();
        if pinned.is_empty() {
            SystemResolver.resolve(host, port).await
        } else {
            Ok(pinned)
        }
    }
}

/// Sends deliveries, guarded.
#[derive(Clone)]
pub struct GuardedClient {
    tls: tokio_rustls::TlsConnector,
    resolver: Arc<dyn Resolve>,
    /// Plain http and loopback addresses allowed (`sortie dev`).
    local: bool,
    /// How long one attempt may take in all.
    pub timeout: Duration,
}

impl GuardedClient {
    /// A client trusting `roots`; `local` lets it send to loopback (`sortie dev`).
    pub fn new(roots: rustls::RootCertStore, resolver: Arc<dyn Resolve>, local: bool) -> Self {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("aws-lc-rs supports the default protocol versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        Self {
            tls: tokio_rustls::TlsConnector::from(Arc::new(config)),
            resolver,
            local,
            timeout: Duration::from_secs(sortie_core::notify::delivery::ATTEMPT_TIMEOUT_SECONDS),
        }
    }

    /// A client trusting the system's CA certificates and resolving with the system's
    /// resolver.
    pub fn system(local: bool) -> Self {
        Self::system_resolving(local, Arc::new(SystemResolver))
    }

    /// A client trusting the system's CA certificates (`SSL_CERT_FILE` is honoured),
    /// resolving with `resolver`.
    pub fn system_resolving(local: bool, resolver: Arc<dyn Resolve>) -> Self {
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls_native_certs::load_native_certs().certs {
            let _ = roots.add(cert);
        }
        Self::new(roots, resolver, local)
    }

    /// POSTs `body` to `url` with `headers` (and `content-type: application/json`), as the
    /// module says.
    pub async fn post(
        &self,
        url: &str,
        headers: &[(&str, &str)],
        body: Vec<u8>,
    ) -> Result<Answer, Failure> {
        let started = Instant::now();
        let url = destination_url(url, self.local).map_err(Failure::Refused)?;
        match tokio::time::timeout(self.timeout, self.exchange(&url, headers, body)).await {
            Ok(Ok((status, retry_after, body))) => Ok(Answer {
                status,
                retry_after,
                body,
                latency: started.elapsed(),
            }),
            Ok(Err(failure)) => Err(failure),
            Err(_) => Err(Failure::TimedOut),
        }
    }

    async fn exchange(
        &self,
        url: &url::Url,
        headers: &[(&str, &str)],
        body: Vec<u8>,
    ) -> Result<(u16, Option<String>, Vec<u8>), Failure> {
        let host = url.host_str().unwrap_or_default().to_string();
        let port = url.port_or_known_default().unwrap_or(443);
        let resolved = match url.host() {
            Some(Host::Ipv4(ip)) => vec![IpAddr::V4(ip)],
            Some(Host::Ipv6(ip)) => vec![IpAddr::V6(ip)],
            _ => self
                .resolver
                .resolve(&host, port)
                .await
                .map_err(Failure::Unreachable)?,
        };
        let addresses =
            checked_addresses(&host, &resolved, self.local).map_err(Failure::Refused)?;
        let mut last = String::new();
        let mut stream = None;
        for ip in addresses {
            match tokio::net::TcpStream::connect(SocketAddr::new(ip, port)).await {
                Ok(s) => {
                    stream = Some(s);
                    break;
                }
                Err(e) => last = format!("could not connect to {ip} port {port}: {e}"),
            }
        }
        let stream = stream.ok_or(Failure::Unreachable(last))?;
        let _ = stream.set_nodelay(true);
        let authority = match url.port() {
            Some(p) => format!("{}:{p}", url.host_str().unwrap_or_default()),
            None => url.host_str().unwrap_or_default().to_string(),
        };
        let path = match url.query() {
            Some(q) => format!("{}?{q}", url.path()),
            None => url.path().to_string(),
        };
        let mut request = hyper::Request::post(path)
            .header(hyper::header::HOST, authority)
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .header(
                hyper::header::USER_AGENT,
                concat!("sortie-notify/", env!("CARGO_PKG_VERSION")),
            );
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| Failure::Refused(format!("not a valid request: {e}")))?;
        if url.scheme() == "https" {
            let name = rustls_pki_types::ServerName::try_from(host.clone())
                .map_err(|e| Failure::Refused(format!("`{host}` is not a TLS server name: {e}")))?;
            let tls = self
                .tls
                .connect(name, stream)
                .await
                .map_err(|e| Failure::Unreachable(format!("TLS with `{host}` failed: {e}")))?;
            send(TokioIo::new(tls), request).await
        } else {
            send(TokioIo::new(stream), request).await
        }
    }
}

/// One request on a fresh HTTP/1.1 connection over `io`; the status, `Retry-After` and the
/// first [`MAX_ANSWER_BYTES`] of the body.
async fn send<T>(
    io: TokioIo<T>,
    request: hyper::Request<Full<Bytes>>,
) -> Result<(u16, Option<String>, Vec<u8>), Failure>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| Failure::Unreachable(format!("HTTP failed: {e}")))?;
    let driver = tokio::spawn(async move {
        let _ = connection.await;
    });
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| Failure::Unreachable(format!("no answer: {e}")))?;
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get(hyper::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .map(String::from);
    let mut body = response.into_body();
    let mut read = Vec::new();
    while read.len() < MAX_ANSWER_BYTES {
        match body.frame().await {
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref() {
                    let room = MAX_ANSWER_BYTES - read.len();
                    read.extend_from_slice(&data[..data.len().min(room)]);
                }
            }
            // A body cut short still answered with its status.
            Some(Err(_)) | None => break,
        }
    }
    driver.abort();
    Ok((status, retry_after, read))
}

#[cfg(test)]
#[path = "deliver_tests.rs"]
mod tests;
