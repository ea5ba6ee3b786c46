//! The API client: [`sortie_client::Transport`] (one HTTPS or HTTP request at a time, the
//! bearer token, a 30 s timeout) as the CLI's caller, with the API's error body turned
//! into a [`CliError`] of its kind (so the exit code tells 404 from 409 from 5xx). Every
//! path comes from [`sortie_client::endpoints`].

use bytes::Bytes;
use http::header::HeaderName;
use serde::de::DeserializeOwned;
use serde_json::Value;
use sortie_client::{endpoints, Call, Outgoing, Transport, TransportError};

use crate::config::Resolved;
use crate::exit::CliError;

/// The CLI's `User-Agent`.
pub(crate) const USER_AGENT: &str = concat!("sortie-cli/", env!("CARGO_PKG_VERSION"));

/// A client of one Sortie API, as one caller.
pub struct Api {
    transport: Transport,
    token: Option<String>,
    /// Where the URL and the token came from, for the messages of a 401 or a wrong URL.
    resolved: Resolved,
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
    /// A client of the API at `resolved.api_url`, with its token when there is one. A URL
    /// no client can use is a usage error.
    pub fn new(resolved: &Resolved) -> Result<Self, CliError> {
        let transport = Transport::new(&resolved.api_url, USER_AGENT).map_err(|e| match e {
            // The URL's own problems name it (`the API URL … must start with https://`);
            // anything else (no CA certificates for HTTPS) is not the caller's typing.
            TransportError::BaseUrl(m) => CliError::Usage(m),
            other => CliError::Other(other.to_string()),
        })?;
        Ok(Self {
            transport,
            token: resolved.token.clone(),
            resolved: resolved.clone(),
        })
    }

    /// The API's base URL, without a trailing `/`.
    pub fn base_url(&self) -> &str {
        self.transport.base_url()
    }

    /// Where the URL and the token came from.
    pub fn resolved(&self) -> &Resolved {
        &self.resolved
    }

    /// `call` with a JSON body when Some and extra headers (If-Match, Idempotency-Key).
    /// A non-2xx answer becomes the [`CliError`] of its kind: 404 → NotFound, 409/412 →
    /// Conflict, 5xx → Server, other 4xx → Invalid. The message is the API's
    /// `error.message`, then each `error.fields[]` on its own line as `path: problem`.
    /// A transport error → Server("could not reach `<full URL>: <cause>`"). A 401 names the
    /// credential used and how to get one. A 404 or an answer that is not JSON probes
    /// `GET /v1/health` once: when that is not Sortie's answer, the URL is reported as
    /// not a Sortie API (Server, exit 5).
    pub async fn send(
        &self,
        call: &Call,
        body: Option<&Value>,
        headers: &[(HeaderName, &str)],
    ) -> Result<Answer, CliError> {
        let body = body
            .map(|b| serde_json::to_vec(b).map(|v| ("application/json", Bytes::from(v))))
            .transpose()
            .map_err(|e| CliError::Other(format!("the request could not be written: {e}")))?;
        self.send_raw(call, body, headers).await
    }

    /// Like [`Api::send`], with the body's bytes and content type given as they are (a
    /// runner file's YAML text, say, so the API reads it strictly).
    pub async fn send_raw(
        &self,
        call: &Call,
        body: Option<(&'static str, Bytes)>,
        headers: &[(HeaderName, &str)],
    ) -> Result<Answer, CliError> {
        let mut outgoing = Outgoing::new().bearer(self.token.as_deref());
        if let Some((content_type, bytes)) = body {
            outgoing = outgoing.raw(content_type, bytes);
        }
        for (name, value) in headers {
            outgoing = outgoing.header(name.clone(), *value);
        }
        let reply = self.transport.send(call, outgoing).await.map_err(failed)?;
        let (status, etag, body) = (reply.status.as_u16(), reply.etag.clone(), reply.value());
        if reply.is_success() {
            return Ok(Answer { status, body, etag });
        }
        if status == 401 {
            return Err(CliError::Invalid(unauthorized(
                &self.resolved,
                self.base_url(),
            )));
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
        let outgoing = Outgoing::new().bearer(self.token.as_deref());
        match self.transport.send(&endpoints::health(), outgoing).await {
            Ok(reply) if is_sortie_health(reply.status.as_u16(), &reply.value()) => None,
            Ok(_) => Some(CliError::Server(not_sortie_message(
                self.base_url(),
                &self.resolved.url_source(),
            ))),
            Err(_) => None,
        }
    }

    /// `GET url` of a presigned URL (a job's live log), its first `max_bytes` at most:
    /// `Ok(None)` for a 404 (nothing written there yet); any other failure is one line
    /// naming the URL without its query.
    pub async fn get_presigned(&self, url: &str, max_bytes: u64) -> Result<Option<Bytes>, String> {
        let reply = self
            .transport
            .get_url(url, std::time::Duration::from_secs(5), max_bytes)
            .await
            .map_err(|e| e.to_string())?;
        match reply.status.as_u16() {
            // 206: the range asked for; 200: a server that sent all of it (no longer).
            200 | 206 => Ok(Some(reply.body)),
            404 => Ok(None),
            status => Err(format!(
                "GET {} answered {status}",
                url.split('?').next().unwrap_or(url)
            )),
        }
    }

    /// `GET`, decoded.
    pub async fn get<T: DeserializeOwned>(&self, call: &Call) -> Result<T, CliError> {
        let answer = self.send(call, None, &[]).await?;
        decode(answer.body)
    }

    /// `POST` with a JSON body, decoded.
    pub async fn post<T: DeserializeOwned>(
        &self,
        call: &Call,
        body: &Value,
    ) -> Result<T, CliError> {
        let answer = self.send(call, Some(body), &[]).await?;
        decode(answer.body)
    }
}

/// The [`CliError`] of a request that got no answer: one that could not be built is the
/// caller's (a header value that is not one), one that got no answer is the server's.
fn failed(e: TransportError) -> CliError {
    match e {
        TransportError::BaseUrl(_) | TransportError::Build { .. } => CliError::Usage(e.to_string()),
        TransportError::Tls(_) => CliError::Other(e.to_string()),
        TransportError::Unreachable { .. } | TransportError::Timeout { .. } => {
            CliError::Server(e.to_string())
        }
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
    fn a_url_no_client_can_use_is_a_usage_error_naming_it() {
        for url in ["ftp://x", "https://x?a=1", "not a url", "http://"] {
            let mut r = resolved(None);
            r.api_url = url.into();
            match Api::new(&r) {
                Err(e @ CliError::Usage(_)) => assert!(e.to_string().contains(url), "{e}"),
                Err(e) => panic!("{url}: {e:?}"),
                Ok(_) => panic!("{url} was taken"),
            }
        }
        let mut r = resolved(None);
        r.api_url = "http://127.0.0.1:4242/".into();
        let api = Api::new(&r).map_err(|e| e.to_string()).unwrap();
        assert_eq!(api.base_url(), "http://127.0.0.1:4242");
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
