//! Agent pools and the pull protocol's bodies.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sortie_store::{AgentPoolRecord, Versioned};
use utoipa::ToSchema;

/// OIDC trust of a pool (see `sortie_core::agent::OidcTrust`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct OidcTrust {
    /// The issuer (`iss`), `https://…`.
    pub issuer: String,
    /// The audience (`aud`) the token must carry.
    pub audience: String,
    /// The claim to match, such as `sub`.
    pub claim: String,
    /// A glob over the claim's value.
    pub pattern: String,
}

/// `POST /v1/agent-pools`: a new pool.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AgentPoolCreate {
    /// The owner group (its runners may use the pool).
    pub group: String,
    /// The pool's name, `[a-z0-9][a-z0-9-]{0,62}`.
    pub name: String,
    /// Free text.
    #[serde(default)]
    pub description: Option<String>,
    /// OIDC trust: agents authenticate with tokens of this issuer, no static secret.
    #[serde(default)]
    pub oidc: Option<OidcTrust>,
}

/// A pool token as listed: its id and when it was made (never the token).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PoolTokenView {
    /// The token's id.
    pub id: String,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// Who created it.
    pub created_by: String,
}

/// An agent pool as the API shows it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AgentPoolView {
    /// `apool-…`.
    pub id: String,
    /// The owner group.
    pub group: String,
    /// Its name.
    pub name: String,
    /// Free text.
    pub description: String,
    /// OIDC trust, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oidc: Option<OidcTrust>,
    /// Its tokens (ids only).
    pub tokens: Vec<PoolTokenView>,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// Who created it.
    pub created_by: String,
    /// The version, also sent as the ETag.
    pub version: u64,
    /// A new token, shown once: at the pool's creation and from `POST …/tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// The new token's id, with `token`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_id: Option<String>,
}

impl From<Versioned<AgentPoolRecord>> for AgentPoolView {
    fn from(v: Versioned<AgentPoolRecord>) -> Self {
        let r = v.item;
        Self {
            id: r.pool.id,
            group: r.pool.group.as_str().to_string(),
            name: r.pool.name,
            description: r.pool.description,
            oidc: r.pool.oidc.map(|o| OidcTrust {
                issuer: o.issuer,
                audience: o.audience,
                claim: o.claim,
                pattern: o.pattern,
            }),
            tokens: r
                .tokens
                .into_iter()
                .map(|t| PoolTokenView {
                    id: t.id,
                    created_at: t.created_at,
                    created_by: t.created_by,
                })
                .collect(),
            created_at: r.created_at,
            created_by: r.created_by,
            version: v.version,
            token: None,
            token_id: None,
        }
    }
}

/// A group's agent pools.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AgentPoolList {
    /// The pools.
    pub pools: Vec<AgentPoolView>,
}

/// `POST /v1/agent-pools/{id}/claims`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ClaimRequest {
    /// The agent's id: 1 to 64 of `[A-Za-z0-9._-]`.
    pub agent: String,
    /// How many jobs the agent runs now.
    #[serde(default)]
    pub running: Option<u32>,
    /// How long to wait for a job, 0 to 20 seconds (default 20).
    #[serde(default)]
    pub wait_seconds: Option<u32>,
}

/// A claimed job.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Claim {
    /// The job.
    pub job_id: String,
    /// The claim's attempt.
    pub attempt: u32,
    /// The job token for `sortie-runner` (`SORTIE_JOB_TOKEN`), shown only here.
    pub job_token: String,
    /// The API URL for `sortie-runner` (`SORTIE_API_URL`).
    pub api_url: String,
    /// The job, with its runner snapshot.
    #[schema(value_type = Object)]
    pub job: serde_json::Value,
    /// How often to heartbeat, in seconds.
    pub heartbeat_seconds: u32,
}

/// A heartbeat: which claim.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct HeartbeatRequest {
    /// The agent's id.
    pub agent: String,
    /// The claim's attempt.
    pub attempt: u32,
}

/// Run on, or stop.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct HeartbeatAnswer {
    /// `run` or `stop`.
    #[schema(value_type = String, pattern = "^(run|stop)$")]
    pub action: String,
    /// Why to stop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// An agent's exit report.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ExitReport {
    /// The agent's id.
    pub agent: String,
    /// The claim's attempt.
    pub attempt: u32,
    /// The runner's exit code, if it exited.
    #[serde(default)]
    pub exit_code: Option<i32>,
    /// The runner's last line or why it could not run (at most 1024 bytes).
    #[serde(default)]
    pub reason: Option<String>,
    /// True when the agent hands the job back unfinished.
    #[serde(default)]
    pub handed_back: Option<bool>,
}

/// The job's state after an exit report.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ExitAnswer {
    /// The job's state.
    pub state: String,
}

/// The agent holding a claimed job (see `sortie_core::agent::AgentHold`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AgentHold {
    /// The pool it was claimed from.
    pub pool: String,
    /// The claiming agent's id.
    pub agent: String,
    /// When it was claimed.
    pub claimed_at: DateTime<Utc>,
    /// Its last heartbeat.
    pub heartbeat_at: DateTime<Utc>,
    /// A stop ordered (cancel or timeout), delivered in the heartbeat answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<AgentStop>,
}

/// A stop ordered for a claimed job.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AgentStop {
    /// `sortie: canceled by …` or `sortie: timed out after …`.
    pub reason: String,
    /// When it was ordered.
    pub at: DateTime<Utc>,
}
