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
    /// A client of the API at `base`: https://, or http:// to a loopback host only
    /// ([`cleartext_problem`]).
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
        if let Some(problem) = cleartext_problem(&base) {
            return Err(Error::Invalid {
                attribute: "api_url".into(),
                problem,
            });
        }
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

/// Why the token may not be sent to `url`: plain `http://` carries it in clear, so it is
/// allowed only to a loopback host (`localhost`, 127.0.0.0/8, `::1`), as `sortie dev`
/// serves. `None` for `https://` and for `http://` to loopback; other schemes are
/// refused by [`Api::new`].
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Plain http:// is refused to any host that is not loopback, whatever the port,
        /// user info or path; https:// to it is fine.
        #[test]
        fn plain_http_is_refused_to_a_host_that_is_not_loopback(
            a in 0u8..=255, b: u8, c: u8, d: u8,
            port in proptest::option::of(1u16..=65535),
            path in "(/[a-z]{0,5}){0,2}",
            user in proptest::option::of("[a-z]{1,5}(:[a-z]{1,5})?"),
        ) {
            let ip = std::net::Ipv4Addr::new(a, b, c, d);
            let port = port.map(|p| format!(":{p}")).unwrap_or_default();
            let user = user.map(|u| format!("{u}@")).unwrap_or_default();
            let url = format!("http://{user}{ip}{port}{path}");
            prop_assert_eq!(cleartext_problem(&url).is_none(), a == 127, "{}", url);
            let https = format!("https://{user}{ip}{port}{path}");
            prop_assert!(cleartext_problem(&https).is_none(), "{}", https);
            let named = format!("http://{user}api{a}.example.com{port}{path}");
            prop_assert!(cleartext_problem(&named).is_some(), "{}", named);
        }
    }

    #[test]
    fn plain_http_to_loopback_names_is_allowed_and_look_alikes_are_not() {
        for ok in [
            "http://localhost:8080",
            "http://LOCALHOST/v1",
            "http://127.0.0.1:4242",
            "http://127.1.2.3",
            "http://[::1]:4242/",
            "https://api.example.com",
        ] {
            assert_eq!(cleartext_problem(ok), None, "{ok}");
        }
        for refused in [
            "http://api.example.com",
            "http://127.0.0.1.example.com",
            "http://localhost.example.com:80",
            "http://127.0.0.1@evil.example.com",
            "http://[::2]:80",
            "http://[::ffff:10.0.0.1]",
            "http://10.0.0.1:8080",
            "HTTP://api.example.com",
        ] {
            let problem = cleartext_problem(refused).unwrap_or_else(|| panic!("{refused} allowed"));
            assert!(problem.contains("in clear"), "{problem}");
        }
    }

    #[test]
    fn a_client_of_plain_http_to_another_host_is_refused_naming_api_url() {
        let Err(Error::Invalid { attribute, problem }) = Api::new("http://api.example.com", None)
        else {
            panic!("plain http to another host is accepted");
        };
        assert_eq!(attribute, "api_url");
        assert!(problem.contains("https://"), "{problem}");
        assert!(Api::new("http://127.0.0.1:9", None).is_ok());
    }
}
