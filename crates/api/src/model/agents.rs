//! Agent pools as the API shows them. The pull protocol's bodies are
//! `sortie_core::protocol::agent`'s own types (their schemas derived there).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sortie_core::agent_pool::OidcTrust;
use sortie_store::{AgentPoolRecord, Versioned};
use utoipa::ToSchema;

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
            oidc: r.pool.oidc,
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
