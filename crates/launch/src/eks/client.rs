//! A small Kubernetes API client: JSON over HTTPS with hyper and rustls (the stack the AWS
//! SDK already brings), trusting only the cluster's CA from DescribeCluster, with a bearer
//! token per request and a deadline on every call, so a dead or wrong endpoint fails a job
//! with a clear reason instead of hanging it.
//!
//! Why not `kube`: its EKS authentication is an exec plugin (`aws eks get-token`), which a
//! Lambda cannot run, and it added about 5.7 MB and 43 crates in a measurement here. Sortie
//! calls six endpoints; `k8s-openapi` gives their types.

use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::LaunchError;

/// How long one Kubernetes API call may take, connection and TLS included.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the TCP connection may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A Kubernetes API answer that was not a success: its status and its `Status` message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeRefusal {
    /// The HTTP status.
    pub status: StatusCode,
    /// The `Status` object's `reason` (`NotFound`, `AlreadyExists`, `Forbidden`, ...).
    pub reason: String,
    /// The `Status` object's `message`, or the body.
    pub message: String,
}

/// Why a call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KubeError {
    /// The API answered with an error status.
    Refused(KubeRefusal),
    /// No answer: the connection or TLS failed before the request was sent. `tls` when the
    /// server's certificate was refused.
    NotSent {
        /// What failed.
        message: String,
        /// True for a TLS (certificate) failure: it will not get better by retrying.
        tls: bool,
    },
    /// The request may have reached the API: a timeout or a dropped connection.
    Unknown(String),
    /// The answer could not be decoded.
    Garbled(String),
}

impl KubeError {
    /// As a launch error, for an operation named in words (`create Job`).
    /// `may_have_acted` is true for a write whose outcome an unknown answer leaves open.
    pub fn into_launch(self, operation: &str, may_have_acted: bool) -> LaunchError {
        match self {
            Self::Refused(r) => {
                let text = format!(
                    "Kubernetes {operation} failed: {} {}: {}",
                    r.status.as_u16(),
                    r.reason,
                    r.message
                );
                match r.status.as_u16() {
                    401 => LaunchError::Fatal(format!("{text} (the cluster does not accept the launcher role's token: map the role with an EKS access entry)")),
                    429 => LaunchError::Retryable(text),
                    s if s >= 500 && may_have_acted => LaunchError::Uncertain(text),
                    s if s >= 500 => LaunchError::Retryable(text),
                    _ => LaunchError::Fatal(text),
                }
            }
            Self::NotSent { message, tls: true } => {
                LaunchError::Fatal(format!("Kubernetes {operation} failed: {message}"))
            }
            Self::NotSent { message, .. } => {
                LaunchError::Retryable(format!("Kubernetes {operation} failed: {message}"))
            }
            Self::Unknown(m) if may_have_acted => {
                LaunchError::Uncertain(format!("Kubernetes {operation} failed: {m}"))
            }
            Self::Unknown(m) | Self::Garbled(m) => {
                LaunchError::Retryable(format!("Kubernetes {operation} failed: {m}"))
            }
        }
    }

    /// True for a 404.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::Refused(r) if r.status == StatusCode::NOT_FOUND)
    }
}

/// One cluster's API: its endpoint, and a connection pool that trusts only its CA.
#[derive(Clone)]
pub struct KubeClient {
    endpoint: String,
    http: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
}

impl std::fmt::Debug for KubeClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeClient")
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

impl KubeClient {
    /// A client for the API at `endpoint` (`https://...`), trusting only the PEM
    /// certificates in `ca_pem` (DescribeCluster's `certificateAuthority.data`, decoded).
    pub fn new(endpoint: &str, ca_pem: &[u8]) -> Result<Self, String> {
        let endpoint = endpoint.trim_end_matches('/').to_string();
        if !endpoint.starts_with("https://") {
            return Err(format!("the cluster endpoint `{endpoint}` is not https://"));
        }
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca_pem) {
            let cert = cert.map_err(|e| format!("the cluster CA is not PEM: {e}"))?;
            roots
                .add(cert)
                .map_err(|e| format!("the cluster CA is not a usable certificate: {e}"))?;
        }
        if roots.is_empty() {
            return Err("the cluster CA holds no certificate".into());
        }
        let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
        connector.enforce_http(false);
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_only()
            .enable_http1()
            .wrap_connector(connector);
        let http = Client::builder(TokioExecutor::new()).build(https);
        Ok(Self { endpoint, http })
    }

    /// The API's endpoint.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Calls `method path` with the bearer `token` and an optional JSON body; decodes the
    /// JSON answer.
    pub async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        token: &str,
        body: Option<&Value>,
    ) -> Result<T, KubeError> {
        let mut request = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.endpoint))
            .header(http::header::AUTHORIZATION, format!("Bearer {token}"))
            .header(http::header::ACCEPT, "application/json");
        let bytes = match body {
            Some(b) => {
                request = request.header(http::header::CONTENT_TYPE, "application/json");
                Bytes::from(serde_json::to_vec(b).unwrap_or_default())
            }
            None => Bytes::new(),
        };
        let request = request
            .body(Full::new(bytes))
            .map_err(|e| KubeError::NotSent {
                message: e.to_string(),
                tls: false,
            })?;
        let url = format!("{}{path}", self.endpoint);
        let answer = tokio::time::timeout(CALL_TIMEOUT, async {
            let response = self.http.request(request).await.map_err(|e| {
                let chain = sortie_http::error_chain(&e);
                if e.is_connect() {
                    KubeError::NotSent {
                        // rustls reaches hyper-util's connect error as text only.
                        tls: chain.contains("invalid peer certificate"),
                        message: format!("could not reach {url}: {chain}"),
                    }
                } else {
                    KubeError::Unknown(format!("{url}: {chain}"))
                }
            })?;
            let status = response.status();
            let body = response
                .into_body()
                .collect()
                .await
                .map_err(|e| KubeError::Unknown(format!("{url}: reading the answer: {e}")))?
                .to_bytes();
            Ok::<_, KubeError>((status, body))
        })
        .await
        .map_err(|_| {
            KubeError::Unknown(format!(
                "{url} did not answer within {}s",
                CALL_TIMEOUT.as_secs()
            ))
        })??;
        let (status, body) = answer;
        if !status.is_success() {
            let parsed: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let text = |k: &str| parsed.get(k).and_then(Value::as_str).map(str::to_string);
            return Err(KubeError::Refused(KubeRefusal {
                status,
                reason: text("reason")
                    .unwrap_or_else(|| status.canonical_reason().unwrap_or("error").to_string()),
                message: text("message")
                    .unwrap_or_else(|| String::from_utf8_lossy(&body).chars().take(300).collect()),
            }));
        }
        serde_json::from_slice(&body).map_err(|e| {
            KubeError::Garbled(format!("{url}: the answer is not what was expected: {e}"))
        })
    }
}

/// Percent-encodes a query value (label selectors carry `=`, `,` and `/`).
pub fn query_value(v: &str) -> String {
    let mut out = String::new();
    for b in v.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
