//! The pull protocol's calls, behind the small [`PoolApi`] trait, and [`HttpPoolApi`]: the
//! HTTPS client (hyper's legacy client with rustls on aws-lc-rs and the system's CA
//! certificates, the runner's stack), with `Authorization: Bearer <credential>` on every
//! call.
//!
//! - `POST {api}/v1/agent-pools/{pool}/claims`: 200 a [`Claim`], 204 none within the wait;
//! - `POST {api}/v1/agent-pools/{pool}/jobs/{job}/heartbeat`: 200 run or stop, 409 not held;
//! - `POST {api}/v1/agent-pools/{pool}/jobs/{job}/exit`: 200 the job's state, 409 not held.
//!
//! Each method makes one attempt; the agent decides when to try again
//! ([`AgentError::is_retryable`]). A 401 makes the credential fetch a fresh token next time.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use http::StatusCode;
use hyper_util::client::legacy::connect::HttpConnector;
use sortie_client::{endpoints, Call, Outgoing, Transport};
use sortie_core::protocol::agent::{
    AgentExit, Claim, ClaimRequest, ExitAnswer, HeartbeatAnswer, HeartbeatRequest,
};
use sortie_core::JobId;

use crate::credential::Credential;
use crate::AgentError;
use sortie_http::error_detail;

/// A claim's answer may take this much longer than the wait it asked for.
pub const CLAIM_TIMEOUT_MARGIN: Duration = Duration::from_secs(10);
/// How long a heartbeat or exit report may take.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(15);
/// How long the TCP connection may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The heartbeat's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Heartbeat {
    /// Sortie's answer: run on, or stop.
    Answer(HeartbeatAnswer),
    /// 409: the agent no longer holds the job (it was ended or requeued).
    NotHeld,
}

/// The API's reply to an exit report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExitReply {
    /// Recorded: the job's state after it.
    Recorded(ExitAnswer),
    /// 409: the job had already ended, or is not held by this agent.
    NotHeld,
}

/// The pool's side of the protocol, as the agent sees it.
#[async_trait]
pub trait PoolApi: Send + Sync {
    /// Asks for one job, waiting up to `request.wait_seconds`; `None` when none came.
    async fn claim(&self, request: &ClaimRequest) -> Result<Option<Claim>, AgentError>;
    /// Says the agent still runs `job`, and hears whether to go on.
    async fn heartbeat(
        &self,
        job: &JobId,
        request: &HeartbeatRequest,
    ) -> Result<Heartbeat, AgentError>;
    /// Reports how `job`'s runner ended (or that the agent hands it back).
    async fn exit(&self, job: &JobId, report: &AgentExit) -> Result<ExitReply, AgentError>;
}

/// [`PoolApi`] over HTTPS.
pub struct HttpPoolApi {
    transport: Transport,
    pool: String,
    credential: Arc<Credential>,
}

impl std::fmt::Debug for HttpPoolApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpPoolApi")
            .field("base", &self.transport.base_url())
            .field("pool", &self.pool)
            .finish_non_exhaustive()
    }
}

impl HttpPoolApi {
    /// A client for `pool` at the API `base` (`https://…`, no trailing `/`).
    pub fn new(base: &str, pool: &str, credential: Arc<Credential>) -> Result<Self, AgentError> {
        let mut http = HttpConnector::new();
        http.set_connect_timeout(Some(CONNECT_TIMEOUT));
        http.enforce_http(false);
        // A long poll sits idle for up to 20 s: keep the connection alive through NATs.
        http.set_keepalive(Some(Duration::from_secs(30)));
        let transport = Transport::with_connector(
            base,
            concat!("sortie-agent/", env!("CARGO_PKG_VERSION")),
            http,
        )
        .map_err(|e| AgentError::Config(e.to_string()))?;
        Ok(Self {
            transport,
            pool: pool.to_string(),
            credential,
        })
    }

    /// One call with a JSON body and the current credential; the status and body of any
    /// answer that is a 2xx or in `accept`, else the error it stands for.
    async fn post(
        &self,
        call: &Call,
        body: Vec<u8>,
        timeout: Duration,
        accept: &[StatusCode],
    ) -> Result<(StatusCode, Vec<u8>), AgentError> {
        let token = self.credential.current().await?;
        let outgoing = Outgoing::new()
            .bearer(Some(token.expose()))
            .raw("application/json", body.into())
            .timeout(timeout);
        let path = &call.path;
        let reply = self.transport.send(call, outgoing).await.map_err(|e| {
            let message = format!("POST {path}: {e}");
            if e.is_transient() {
                AgentError::Transient(message)
            } else {
                AgentError::Config(message)
            }
        })?;
        if reply.is_success() || accept.contains(&reply.status) {
            return Ok((reply.status, reply.body.to_vec()));
        }
        let message = status_message(path, reply.status, &reply.body);
        Err(match reply.status {
            StatusCode::UNAUTHORIZED => {
                self.credential.refused().await;
                AgentError::Unauthorized(message)
            }
            _ if reply.is_transient() => AgentError::Transient(message),
            _ => AgentError::Refused(message),
        })
    }
}

fn encode<T: serde::Serialize>(value: &T) -> Result<Vec<u8>, AgentError> {
    serde_json::to_vec(value).map_err(|e| AgentError::Refused(format!("could not encode: {e}")))
}

fn decode<T: serde::de::DeserializeOwned>(path: &str, body: &[u8]) -> Result<T, AgentError> {
    serde_json::from_slice(body).map_err(|e| {
        AgentError::Refused(format!(
            "POST {path} answered what this agent cannot read: {e}"
        ))
    })
}

#[async_trait]
impl PoolApi for HttpPoolApi {
    async fn claim(&self, request: &ClaimRequest) -> Result<Option<Claim>, AgentError> {
        let call = endpoints::claim_job(&self.pool);
        let path = &call.path;
        let wait = u64::from(request.wait_seconds.unwrap_or(0));
        let timeout = Duration::from_secs(wait) + CLAIM_TIMEOUT_MARGIN;
        let (status, body) = self
            .post(&call, encode(request)?, timeout, &[StatusCode::NOT_FOUND])
            .await?;
        if status == StatusCode::NOT_FOUND {
            return Err(AgentError::PoolNotFound(status_message(
                path, status, &body,
            )));
        }
        if status == StatusCode::NO_CONTENT || body.is_empty() {
            return Ok(None);
        }
        decode(path, &body).map(Some)
    }

    async fn heartbeat(
        &self,
        job: &JobId,
        request: &HeartbeatRequest,
    ) -> Result<Heartbeat, AgentError> {
        let call = endpoints::agent_heartbeat(&self.pool, job.as_str());
        let path = &call.path;
        let (status, body) = self
            .post(
                &call,
                encode(request)?,
                CALL_TIMEOUT,
                &[StatusCode::CONFLICT],
            )
            .await?;
        if status == StatusCode::CONFLICT {
            return Ok(Heartbeat::NotHeld);
        }
        decode(path, &body).map(Heartbeat::Answer)
    }

    async fn exit(&self, job: &JobId, report: &AgentExit) -> Result<ExitReply, AgentError> {
        let call = endpoints::agent_exit(&self.pool, job.as_str());
        let path = &call.path;
        let (status, body) = self
            .post(
                &call,
                encode(report)?,
                CALL_TIMEOUT,
                &[StatusCode::CONFLICT],
            )
            .await?;
        if status == StatusCode::CONFLICT {
            return Ok(ExitReply::NotHeld);
        }
        decode(path, &body).map(ExitReply::Recorded)
    }
}

/// The one-line message for an unsuccessful answer: `POST <path> answered <status>: <detail>`.
pub fn status_message(path: &str, status: StatusCode, body: &[u8]) -> String {
    let lead = match status {
        StatusCode::UNAUTHORIZED => "Sortie refused the agent's credential: ",
        StatusCode::FORBIDDEN => "Sortie did not allow the agent's credential: ",
        StatusCode::NOT_FOUND => "the agent pool is unknown to this credential: ",
        _ => "",
    };
    let detail = error_detail(body);
    let mut message = format!("{lead}POST {path} answered {status}");
    if !detail.is_empty() {
        message.push_str(": ");
        message.push_str(&detail);
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_say_what_happened_on_one_line() {
        let m = status_message(
            "/v1/agent-pools/p/claims",
            StatusCode::UNAUTHORIZED,
            br#"{"error":"unauthorized","message":"bad\ntoken"}"#,
        );
        assert_eq!(
            m,
            "Sortie refused the agent's credential: POST /v1/agent-pools/p/claims answered 401 Unauthorized: bad token"
        );
        assert_eq!(
            status_message("/p", StatusCode::BAD_GATEWAY, b""),
            "POST /p answered 502 Bad Gateway"
        );
    }
}
