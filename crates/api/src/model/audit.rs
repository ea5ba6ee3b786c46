//! The audit trail as the API shows it: each entry as stored, parsed, and sealed.

use serde::{Deserialize, Serialize};
use sortie_core::audit::{AuditEntry, Seal};
use utoipa::ToSchema;

/// One audit entry.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AuditRecordView {
    /// The entry, read from `stored` (absent when the stored bytes no longer read as one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry: Option<AuditEntry>,
    /// The entry exactly as stored: the bytes its seal's digest covers.
    pub stored: String,
    /// Its place in the chain, once sealed (entries are sealed about a minute after
    /// they are written).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seal: Option<Seal>,
}

/// A page of an organisation's audit trail.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AuditList {
    /// The entries, newest first (or oldest first with `order=oldest`).
    pub entries: Vec<AuditRecordView>,
    /// The cursor of the next page, when there may be more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
    /// The chain's last seal: what a verification of every sealed entry must reach.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head: Option<Seal>,
}
