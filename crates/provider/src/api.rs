//! The Sortie API client: JSON over HTTP(S) with the bearer token, hyper and rustls as the
//! CLI uses them, each request bounded by a timeout, an error answer turned into
//! [`Error::Api`] with the API's field problems.

use http::header;
use serde_json::Value;
use sortie_client::{Call, Outgoing, Transport, TransportError};

use crate::error::{Error, FieldProblem};

pub use sortie_client::cleartext_problem;

/// A client of one Sortie API.
#[derive(Clone)]
pub struct Api {
    transport: Transport,
    token: Option<String>,
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
        let transport = Transport::new(
            base,
            concat!("terraform-provider-sortie/", env!("CARGO_PKG_VERSION")),
        )
        .map_err(|e| Error::Config(format!("api_url: {e}")))?;
        if let Some(problem) = cleartext_problem(transport.base_url()) {
            return Err(Error::Invalid {
                attribute: "api_url".into(),
                problem,
            });
        }
        Ok(Self { transport, token })
    }

    /// One request; `if_match` is a version sent as `If-Match`.
    pub async fn send(
        &self,
        call: &Call,
        body: Option<&Value>,
        if_match: Option<u64>,
    ) -> Result<Answer, Error> {
        let mut outgoing = Outgoing::new().bearer(self.token.as_deref());
        if let Some(body) = body {
            outgoing = outgoing
                .json(body)
                .map_err(|e| Error::Transport(format!("{}: {e}", call.describe())))?;
        }
        if let Some(v) = if_match {
            outgoing = outgoing.header(header::IF_MATCH, format!("\"{v}\""));
        }
        let reply = self
            .transport
            .send(call, outgoing)
            .await
            .map_err(|e: TransportError| Error::Transport(e.to_string()))?;
        let body = reply.value();
        if reply.is_success() {
            let etag = reply.etag.map(|v| v.trim_matches('"').to_string());
            return Ok(Answer { body, etag });
        }
        Err(api_error(reply.status.as_u16(), &body))
    }

    /// `GET` (or whatever `call` says) without a body.
    pub async fn get(&self, call: &Call) -> Result<Answer, Error> {
        self.send(call, None, None).await
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

#[cfg(test)]
mod tests {
    use super::*;

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
