//! The expiry due list: one item per expiring environment (`ENV#<path>` / `EXPIRY`), in the
//! sparse gsi3 `EXPIRY` partition by the time the sweep must next look at it (its next
//! reminder, else its end, else its next retry). Reminders sent, failures and the
//! `sortie:expiry` destroy in flight are recorded on it by conditional writes, so a retry or
//! a second sweep never sends a reminder twice.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sortie_core::expiry::{Destroyed, Reminder};
use sortie_core::EnvPath;

use crate::{StoreError, Versioned};

/// The most entries one [`ExpiryStore::due_expiries`] page holds.
pub const MAX_EXPIRY_PAGE: u32 = 1000;

/// One expiring environment on the due list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpiryEntry {
    /// The environment.
    pub path: EnvPath,
    /// When it expires.
    pub expires_at: DateTime<Utc>,
    /// When the sweep looks at it next (its place in the due list).
    pub due: DateTime<Utc>,
    /// The reminders already sent for this end.
    #[serde(default)]
    pub sent: Vec<Reminder>,
    /// Failed destroys (or submits) in a row for this end.
    #[serde(default)]
    pub failures: u32,
    /// The latest failure, or why the expiry waits (busy, locked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_problem: Option<String>,
    /// The `sortie:expiry` destroy submitted and not yet seen ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destroy_job: Option<String>,
}

impl ExpiryEntry {
    /// A fresh entry for an end: nothing sent, due at its first reminder (or its end).
    pub fn new(path: EnvPath, expires_at: DateTime<Utc>) -> Self {
        Self {
            path,
            expires_at,
            due: sortie_core::expiry::next_due(expires_at, &[]),
            sent: vec![],
            failures: 0,
            last_problem: None,
            destroy_job: None,
        }
    }
}

/// A page of due entries and where the next page starts (`None`: the end).
#[derive(Debug, Clone, Default)]
pub struct ExpiryPage {
    /// The entries, earliest due first.
    pub entries: Vec<Versioned<ExpiryEntry>>,
    /// The cursor of the next page.
    pub next: Option<String>,
}

/// The expiry due list and the `destroyed` mark of an environment.
#[async_trait]
pub trait ExpiryStore: Send + Sync {
    /// Puts `path` on the due list expiring at `expires_at`. The same end as recorded
    /// changes nothing (its reminders stay sent); a new end starts afresh (nothing sent, no
    /// failures), keeping a destroy in flight. One conditional write.
    async fn set_expiry(&self, path: &EnvPath, expires_at: DateTime<Utc>)
        -> Result<(), StoreError>;
    /// The entry of `path`, if it is on the due list.
    async fn get_expiry(
        &self,
        path: &EnvPath,
    ) -> Result<Option<Versioned<ExpiryEntry>>, StoreError>;
    /// Takes `path` off the due list (nothing when it is not on it).
    async fn remove_expiry(&self, path: &EnvPath) -> Result<(), StoreError>;
    /// The entries due at or before `now`, earliest first, at most `limit` (at most
    /// [`MAX_EXPIRY_PAGE`]), from `after` (a page's `next`). An unreadable entry is skipped
    /// with a warning.
    async fn due_expiries(
        &self,
        now: DateTime<Utc>,
        limit: u32,
        after: Option<&str>,
    ) -> Result<ExpiryPage, StoreError>;
    /// Replaces an entry on condition that its version is still `expected`: `false` (and
    /// nothing written) when another writer changed or removed it first.
    async fn update_expiry(&self, entry: &ExpiryEntry, expected: u64) -> Result<bool, StoreError>;
    /// Sets (or, with `None`, clears) an environment's `destroyed` mark without bumping its
    /// version; `NotFound` when it is missing.
    async fn mark_destroyed(
        &self,
        path: &EnvPath,
        destroyed: Option<&Destroyed>,
    ) -> Result<(), StoreError>;
}

/// The gsi3 `EXPIRY` sort key of an entry: `<due>#<path>`.
pub(crate) fn expiry_sk(due: DateTime<Utc>, path: &EnvPath) -> String {
    crate::sortkeys::drift_sk(due, path)
}

/// The exclusive upper bound of the entries due at `now`.
pub(crate) fn expiry_due_bound(now: DateTime<Utc>) -> String {
    crate::sortkeys::drift_due_bound(now)
}
