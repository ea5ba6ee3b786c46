//! The Sortie API client: JSON over HTTP(S) with the bearer token, hyper and rustls as the
//! CLI uses them, each request bounded by a timeout, an error answer turned into
//! [`Error::Api`] with the API's field problems.

use std::time::Duration;

use bytes::Bytes;
use http::{header, Method, Request};
use http_body_util::{BodyExt, Full};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

use crate::error::{Error, FieldProblem};

/// How long one request may take.
const TIMEOUT: Duration = Duration::from_secs(30);

/// A client of one Sortie API.
#[derive(Clone)]
pub struct Api {
    base: String,
    token: Option<String>,
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
}

/// A successful answer: its body (Null when empty) and its version (the ETag).
#[derive(Debug, Clone)]
pub struct Answer {
    /// The body.
    pub body: Value,
    /// The ETag header without its quotes.
    pub etag: Option<String>,
}

impl Api {
    /// A client of the API at `base` (http:// or https://).
    pub fn new(base: &str, token: Option<String>) -> Result<Self, Error> {
        let base = base.trim_end_matches('/').to_string();
        let https = match base.split_once("://") {
            Some(("https", rest)) if !rest.is_empty() => true,
            Some(("http", rest)) if !rest.is_empty() => false,
            _ => {
                return Err(Error::Config(format!(
                    "api_url `{base}` must start with https:// or http:// and name a host"
                )))
            }
        };
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        let connector = sortie_http::connector(https, http).map_err(Error::Config)?;
        Ok(Self {
            base,
            token,
            client: Client::builder(TokioExecutor::new()).build(connector),
        })
    }

    /// One request; `if_match` is a version sent as `If-Match`.
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        if_match: Option<u64>,
    ) -> Result<Answer, Error> {
        let url = format!("{}{path}", self.base);
        let mut request = Request::builder()
            .method(method)
            .uri(&url)
            .header(header::ACCEPT, "application/json")
            .header(
                header::USER_AGENT,
                concat!("terraform-provider-sortie/", env!("CARGO_PKG_VERSION")),
            );
        if let Some(token) = &self.token {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        if let Some(v) = if_match {
            request = request.header(header::IF_MATCH, format!("\"{v}\""));
        }
        let bytes = match body {
            Some(b) => {
                request = request.header(header::CONTENT_TYPE, "application/json");
                Bytes::from(b.to_string())
            }
            None => Bytes::new(),
        };
        let request = request
            .body(Full::new(bytes))
            .map_err(|e| Error::Transport(format!("{url}: {e}")))?;
        let exchange = async {
            let response = self.client.request(request).await?;
            let status = response.status().as_u16();
            let etag = response
                .headers()
                .get(header::ETAG)
                .and_then(|v| v.to_str().ok())
                .map(|v| v.trim_matches('"').to_string());
            let bytes = response.into_body().collect().await?.to_bytes();
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>((status, etag, bytes))
        };
        let (status, etag, bytes) = match tokio::time::timeout(TIMEOUT, exchange).await {
            Err(_) => return Err(Error::Transport(format!("{url}: no answer within 30 s"))),
            Ok(Err(e)) => {
                return Err(Error::Transport(format!(
                    "{url}: {}",
                    sortie_http::error_chain(e.as_ref())
                )))
            }
            Ok(Ok(answer)) => answer,
        };
        let body: Value = if bytes.iter().all(u8::is_ascii_whitespace) {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
        };
        if (200..300).contains(&status) {
            return Ok(Answer { body, etag });
        }
        Err(api_error(status, &body))
    }

    /// `GET path`.
    pub async fn get(&self, path: &str) -> Result<Answer, Error> {
        self.send(Method::GET, path, None, None).await
    }
}

/// The API's error body as an [`Error::Api`].
pub fn api_error(status: u16, body: &Value) -> Error {
    let e = &body["error"];
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    Error::Api {
        status,
        code: text(&e["code"]),
        message: match e["message"].as_str() {
            Some(m) => m.to_string(),
            None => sortie_http::one_line(&body.to_string()),
        },
        fields: e["fields"]
            .as_array()
            .map(|fields| {
                fields
                    .iter()
                    .map(|f| FieldProblem {
                        path: text(&f["path"]),
                        problem: text(&f["problem"]),
                    })
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// A path segment with `/` kept (environment paths, runner ids) and other reserved
/// characters escaped.
pub fn segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The group path as a URL parameter: the root group is `-`.
pub fn group_param(group: &str) -> String {
    if group.is_empty() {
        "-".to_string()
    } else {
        segment(group)
    }
}
