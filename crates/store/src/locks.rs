//! Locks and freezes: an environment's `lock` attribute and a group's settings item
//! (`GROUP#<group>` / `SETTINGS`: its freeze and its expiry limits). Every write is one
//! conditional write; none bumps a version (a lock is not an edit, and never makes a
//! person's `If-Match` stale).

use async_trait::async_trait;
use sortie_core::expiry::ExpiryLimits;
use sortie_core::lock::EnvLock;
use sortie_core::{EnvPath, GroupPath};

use crate::StoreError;

/// What a lock (or freeze) write did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockOutcome {
    /// The lock is now held, as given.
    Taken,
    /// Someone holds it already: this lock (the write changed nothing).
    AlreadyHeld(EnvLock),
}

/// A group's settings: its freeze and its expiry limits. Absent settings read as the
/// default (no freeze, no limits).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GroupSettings {
    /// The group's freeze, while every environment below it is locked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freeze: Option<EnvLock>,
    /// The expiry default and maximum the group sets for everything below it.
    #[serde(default)]
    pub expiry: ExpiryLimits,
}

/// Environment locks, group freezes and group settings.
#[async_trait]
pub trait LockStore: Send + Sync {
    /// Locks an environment on condition that it exists and is not locked:
    /// [`LockOutcome::AlreadyHeld`] with the present lock otherwise; `NotFound` when the
    /// environment is missing. Never bumps the version.
    async fn lock_environment(
        &self,
        path: &EnvPath,
        lock: &EnvLock,
    ) -> Result<LockOutcome, StoreError>;
    /// Removes an environment's lock and answers it (`None` when it was not locked);
    /// `NotFound` when the environment is missing. Never bumps the version.
    async fn unlock_environment(&self, path: &EnvPath) -> Result<Option<EnvLock>, StoreError>;
    /// Freezes a group (creating its settings item when it has none) on condition that it
    /// is not frozen: [`LockOutcome::AlreadyHeld`] with the present freeze otherwise. The
    /// root group is refused (`Invalid`): a freeze is for one organisation or below.
    async fn freeze_group(
        &self,
        group: &GroupPath,
        lock: &EnvLock,
    ) -> Result<LockOutcome, StoreError>;
    /// Removes a group's freeze and answers it (`None` when it was not frozen).
    async fn unfreeze_group(&self, group: &GroupPath) -> Result<Option<EnvLock>, StoreError>;
    /// Sets a group's expiry limits (creating its settings item when it has none).
    async fn set_group_expiry(
        &self,
        group: &GroupPath,
        expiry: &ExpiryLimits,
    ) -> Result<(), StoreError>;
    /// The settings of `group` and of each of its ancestors below the root, deepest
    /// first, only those that have settings: one batch read (at most the path's depth,
    /// bounded by the name limits).
    async fn group_settings_over(
        &self,
        group: &GroupPath,
    ) -> Result<Vec<(GroupPath, GroupSettings)>, StoreError>;
}

/// The groups whose settings hold for `group`: itself and its ancestors, without the root.
pub(crate) fn settings_groups(group: &GroupPath) -> Vec<GroupPath> {
    group
        .self_and_ancestors()
        .into_iter()
        .filter(|g| !g.is_root())
        .collect()
}

/// The refusal of a freeze (or expiry limits) of the root group.
pub(crate) fn root_freeze_refused() -> StoreError {
    StoreError::Invalid {
        path: "group".into(),
        problem: "the root group spans every organisation; freeze (or set expiry limits on) one organisation, such as `acme`, or a group below it".into(),
    }
}
