//! The API client: one HTTPS (or HTTP) request at a time over hyper and rustls, with the
//! bearer token, a 30 s timeout, and the API's error body turned into a [`CliError`] of
//! its kind (so the exit code tells 404 from 409 from 5xx).

use std::time::Duration;

use bytes::Bytes;
use http::{header, Method, Request};
use http_body_util::{BodyExt, Full};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::config::Resolved;
use crate::exit::CliError;

/// How long one request may take, connection included.
const TIMEOUT: Duration = Duration::from_secs(30);

/// A client of one Sortie API, as one caller.
pub struct Api {
    base: String,
    token: Option<String>,
    /// Where the URL and the token came from, for the messages of a 401 or a wrong URL.
    resolved: Resolved,
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
}

/// One answer: status, JSON body (Null when empty), ETag header.
#[derive(Debug, Clone)]
pub struct Answer {
    /// The HTTP status.
    #[allow(
        dead_code,
        reason = "part of the client's interface, for callers that tell 200 from 201"
    )]
    pub status: u16,
    /// The body as JSON; `Null` when it was empty.
    pub body: Value,
    /// The `ETag` header, as sent (quotes included).
    pub etag: Option<String>,
}

impl Api {
    /// A client of the API at `resolved.api_url`, with its token when there is one.
    pub fn new(resolved: &Resolved) -> Result<Self, CliError> {
        let base = resolved.api_url.trim_end_matches('/').to_string();
        let uri: http::Uri = base
            .parse()
            .map_err(|e| CliError::Usage(format!("the API URL `{base}` is not a URL: {e}")))?;
        let https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => {
                return Err(CliError::Usage(format!(
                    "the API URL `{base}` must start with https:// or http://"
                )))
            }
        };
        if uri.host().is_none_or(str::is_empty) {
            return Err(CliError::Usage(format!("the API URL `{base}` has no host")));
        }
        if uri.query().is_some() {
            return Err(CliError::Usage(format!(
                "the API URL `{base}` must not have a query"
            )));
        }
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        let connector = sortie_http::connector(https, http).map_err(CliError::Other)?;
        let client = Client::builder(TokioExecutor::new()).build(connector);
        Ok(Self {
            base,
            token: resolved.token.clone(),
            resolved: resolved.clone(),
            client,
        })
    }

    /// The API's base URL, without a trailing `/`.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// Where the URL and the token came from.
    pub fn resolved(&self) -> &Resolved {
        &self.resolved
    }

    /// Any method; a JSON body when Some; extra headers (e.g. If-Match, Idempotency-Key).
    /// A non-2xx answer becomes the [`CliError`] of its kind: 404 → NotFound, 409/412 →
    /// Conflict, 5xx → Server, other 4xx → Invalid. The message is the API's
    /// `error.message`, then each `error.fields[]` on its own line as `path: problem`.
    /// A transport error → Server("could not reach `<full URL>: <cause>`"). A 401 names the
    /// credential used and how to get one. A 404 or an answer that is not JSON probes
    /// `GET /v1/health` once: when that is not Sortie's answer, the URL is reported as
    /// not a Sortie API (Server, exit 5).
    pub async fn send(
        &self,
        method: http::Method,
        path: &str,
        body: Option<&Value>,
        headers: &[(&str, &str)],
    ) -> Result<Answer, CliError> {
        let body = body.map(|b| ("application/json", Bytes::from(b.to_string())));
        self.send_raw(method, path, body, headers).await
    }

    /// Like [`Api::send`], with the body's bytes and content type given as they are (a
    /// runner file's YAML text, say, so the API reads it strictly).
    pub async fn send_raw(
        &self,
        method: http::Method,
        path: &str,
        body: Option<(&str, Bytes)>,
        headers: &[(&str, &str)],
    ) -> Result<Answer, CliError> {
        let (status, etag, body) = self.exchange(method, path, body, headers).await?;
        if (200..300).contains(&status) {
            return Ok(Answer { status, body, etag });
        }
        if status == 401 {
            return Err(CliError::Invalid(unauthorized(&self.resolved, &self.base)));
        }
        if status == 404 || matches!(body, Value::String(_)) {
            if let Some(e) = self.not_sortie().await {
                return Err(e);
            }
        }
        Err(error_of(status, &body))
    }

    /// `Some` error when `GET /v1/health` does not answer as a Sortie API does (200 with
    /// `{"status": "ok"}`); `None` when it does, or when the API could not be reached
    /// (the first request's own error says more then).
    async fn not_sortie(&self) -> Option<CliError> {
        match self.exchange(Method::GET, "/v1/health", None, &[]).await {
            Ok((status, _, body)) if is_sortie_health(status, &body) => None,
            Ok(_) => Some(CliError::Server(not_sortie_message(
                &self.base,
                &self.resolved.url_source(),
            ))),
            Err(_) => None,
        }
    }

    /// One request and its answer: status, ETag, body (JSON, a string when not JSON,
    /// Null when empty). Fails only when the API could not be reached.
    async fn exchange(
        &self,
        method: http::Method,
        path: &str,
        body: Option<(&str, Bytes)>,
        headers: &[(&str, &str)],
    ) -> Result<(u16, Option<String>, Value), CliError> {
        let url = format!("{}{path}", self.base);
        let mut request = Request::builder()
            .method(method)
            .uri(&url)
            .header(header::ACCEPT, "application/json")
            .header(
                header::USER_AGENT,
                concat!("sortie-cli/", env!("CARGO_PKG_VERSION")),
            );
        if let Some(token) = &self.token {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let bytes = match body {
            Some((content_type, bytes)) => {
                request = request.header(header::CONTENT_TYPE, content_type);
                bytes
            }
            None => Bytes::new(),
        };
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        // The error names the URL, never the headers (the token is one of them).
        let request = request.body(Full::new(bytes)).map_err(|e| {
            CliError::Usage(format!(
                "could not build the request to {url}: {}",
                sortie_http::error_chain(&e)
            ))
        })?;
        let exchange = async {
            let response = self.client.request(request).await?;
            let status = response.status().as_u16();
            let etag = response
                .headers()
                .get(header::ETAG)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            let bytes = response.into_body().collect().await?.to_bytes();
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>((status, etag, bytes))
        };
        let (status, etag, bytes) = match tokio::time::timeout(TIMEOUT, exchange).await {
            Err(_) => {
                return Err(CliError::Server(format!(
                    "could not reach {url}: no answer within {} s",
                    TIMEOUT.as_secs()
                )))
            }
            Ok(Err(e)) => {
                return Err(CliError::Server(format!(
                    "could not reach {url}: {}",
                    sortie_http::error_chain(e.as_ref())
                )))
            }
            Ok(Ok(answer)) => answer,
        };
        let body = if bytes.iter().all(u8::is_ascii_whitespace) {
            Value::Null
        } else {
            match serde_json::from_slice(&bytes) {
                Ok(v) => v,
                // Not JSON (a proxy's HTML page, say): keep the text for the message.
                Err(_) => Value::String(String::from_utf8_lossy(&bytes).into_owned()),
            }
        };
        Ok((status, etag, body))
    }

    /// `GET path`, decoded.
    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, CliError> {
        let answer = self.send(Method::GET, path, None, &[]).await?;
        decode(answer.body)
    }

    /// `POST path` with a JSON body, decoded.
    pub async fn post<T: DeserializeOwned>(&self, path: &str, body: &Value) -> Result<T, CliError> {
        let answer = self.send(Method::POST, path, Some(body), &[]).await?;
        decode(answer.body)
    }
}

/// True for Sortie's answer to `GET /v1/health`: 200 with `{"status": "ok"}`.
pub fn is_sortie_health(status: u16, body: &Value) -> bool {
    status == 200 && body.get("status").and_then(Value::as_str) == Some("ok")
}

/// The message of a URL that is not a Sortie API.
pub fn not_sortie_message(base: &str, source: &str) -> String {
    format!(
        "{base} is not a Sortie API: it does not answer GET {base}/v1/health as Sortie does (the URL came from {source}; give the API's base URL, such as https://sortie.example.com)"
    )
}

/// The message of a 401: the credential used, by name, and how to get one.
pub fn unauthorized(resolved: &Resolved, base: &str) -> String {
    match resolved.token_origin {
        None => format!(
            "{base} needs a token, and none was given: {}",
            resolved.how_to_get_a_token()
        ),
        Some(_) => format!(
            "{base} refused the token from {} (it is not valid for this API, or it expired): {}",
            resolved.credential(),
            resolved.how_to_get_a_token()
        ),
    }
}

/// Decodes an answer's body with the API's own types.
pub fn decode<T: DeserializeOwned>(body: Value) -> Result<T, CliError> {
    serde_json::from_value(body)
        .map_err(|e| CliError::Other(format!("the API's answer was not understood: {e}")))
}

/// The [`CliError`] of a non-2xx answer: its kind by status, its message and field
/// problems from the API's error body.
pub fn error_of(status: u16, body: &Value) -> CliError {
    let error = &body["error"];
    let mut message = match error["message"].as_str() {
        Some(m) if !m.is_empty() => m.to_string(),
        _ => match body {
            Value::String(text) if !text.trim().is_empty() => {
                format!("HTTP {status}: {}", first_chars(text.trim(), 500))
            }
            _ => format!("HTTP {status}"),
        },
    };
    let lines: Vec<String> = error["fields"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|field| {
            let path = field["path"].as_str().unwrap_or_default();
            let problem = field["problem"].as_str().unwrap_or_default();
            if path.is_empty() {
                problem.to_string()
            } else {
                format!("{path}: {problem}")
            }
        })
        .collect();
    if let Some(first) = lines.first() {
        // The API's message often sums the fields up (`2 problem(s): a; b`): keep only
        // its head, then one field per line.
        let fields = lines.join("\n");
        message = match message.find(first.as_str()) {
            Some(i) => {
                let head = message[..i]
                    .trim_end()
                    .trim_end_matches([':', ';'])
                    .trim_end();
                if head.is_empty() {
                    fields
                } else {
                    format!("{head}:\n{fields}")
                }
            }
            None => format!("{message}\n{fields}"),
        };
    }
    // A 404's nearest names the caller may see.
    let near: Vec<&str> = error["did_you_mean"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if !near.is_empty() {
        message = format!("{message}\ndid you mean: {}", near.join(", "));
    }
    match status {
        404 => CliError::NotFound(message),
        409 | 412 => CliError::Conflict(message),
        500..=599 => CliError::Server(message),
        _ => CliError::Invalid(message),
    }
}

fn first_chars(text: &str, n: usize) -> String {
    match text.char_indices().nth(n) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Origin;
    use serde_json::json;

    #[test]
    fn an_error_body_becomes_its_kind_with_field_lines() {
        let body = json!({"error": {"code": "invalid", "message": "the runner file is invalid",
            "fields": [{"path": "runner_configuration.subnets[0]", "problem": "must not be empty"}]}});
        let e = error_of(400, &body);
        assert_eq!(
            e,
            CliError::Invalid(
                "the runner file is invalid\nrunner_configuration.subnets[0]: must not be empty"
                    .into()
            )
        );
        let summed = json!({"error": {"code": "invalid_request",
            "message": "2 problem(s): a: is bad; b: is worse",
            "fields": [{"path": "a", "problem": "is bad"}, {"path": "b", "problem": "is worse"}]}});
        assert_eq!(
            error_of(400, &summed).to_string(),
            "2 problem(s):\na: is bad\nb: is worse"
        );
        let one = json!({"error": {"code": "invalid_request", "message": "a: is bad",
            "fields": [{"path": "a", "problem": "is bad"}]}});
        assert_eq!(error_of(400, &one).to_string(), "a: is bad");
        assert_eq!(error_of(404, &body).exit_code(), 3);
        assert_eq!(error_of(409, &body).exit_code(), 4);
        assert_eq!(error_of(412, &body).exit_code(), 4);
        assert_eq!(error_of(503, &Value::Null).exit_code(), 5);
        assert_eq!(error_of(503, &Value::Null).to_string(), "HTTP 503");
    }

    fn resolved(token_origin: Option<Origin>) -> Resolved {
        Resolved {
            api_url: "https://x".into(),
            token: token_origin.as_ref().map(|_| "secret-token".into()),
            url_origin: Origin::Variable,
            token_origin,
            context: None,
        }
    }

    #[test]
    fn a_401_names_the_credential_and_how_to_get_one_never_a_header() {
        let cases = [
            (None, "none was given"),
            (Some(Origin::Flag), "the flag --token"),
            (Some(Origin::Variable), "the variable SORTIE_TOKEN"),
            (
                Some(Origin::Context("prod".into())),
                "context `prod`'s token",
            ),
            (
                Some(Origin::TokenCommand("prod".into())),
                "context `prod`'s token_command",
            ),
        ];
        for (origin, named) in cases {
            let text = unauthorized(&resolved(origin), "https://x");
            assert!(text.contains(named), "{text}");
            assert!(
                !text.to_lowercase().contains("header") && !text.contains("Bearer"),
                "{text}"
            );
            assert!(!text.contains("secret-token"), "{text}");
        }
        assert!(is_sortie_health(200, &json!({"status": "ok"})));
        assert!(!is_sortie_health(
            200,
            &json!({"status": "up", "version": 2})
        ));
        assert!(!is_sortie_health(404, &json!({"status": "ok"})));
        assert!(!is_sortie_health(200, &Value::String("<html>".into())));
    }
}
