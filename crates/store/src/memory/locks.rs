//! Environment locks and group settings (freezes, expiry limits).

use async_trait::async_trait;
use sortie_core::expiry::ExpiryLimits;
use sortie_core::lock::EnvLock;
use sortie_core::{EnvPath, GroupPath};

use super::MemoryStore;
use crate::locks::{root_freeze_refused, settings_groups};
use crate::{GroupSettings, LockOutcome, LockStore, StoreError};

fn not_found(path: &EnvPath) -> StoreError {
    StoreError::NotFound {
        kind: "environment",
        id: path.to_string(),
    }
}

#[async_trait]
impl LockStore for MemoryStore {
    async fn lock_environment(
        &self,
        path: &EnvPath,
        lock: &EnvLock,
    ) -> Result<LockOutcome, StoreError> {
        let mut st = self.lock();
        let entry = st
            .envs
            .get_mut(&path.to_string())
            .ok_or_else(|| not_found(path))?;
        if let Some(held) = &entry.record.lock {
            return Ok(LockOutcome::AlreadyHeld(held.clone()));
        }
        entry.record.lock = Some(lock.clone());
        st.audited();
        Ok(LockOutcome::Taken)
    }

    async fn unlock_environment(&self, path: &EnvPath) -> Result<Option<EnvLock>, StoreError> {
        let mut st = self.lock();
        let entry = st
            .envs
            .get_mut(&path.to_string())
            .ok_or_else(|| not_found(path))?;
        let removed = entry.record.lock.take();
        if removed.is_some() {
            st.audited();
        }
        Ok(removed)
    }

    async fn freeze_group(
        &self,
        group: &GroupPath,
        lock: &EnvLock,
    ) -> Result<LockOutcome, StoreError> {
        if group.is_root() {
            return Err(root_freeze_refused());
        }
        let mut st = self.lock();
        let settings = st
            .group_settings
            .entry(group.as_str().to_string())
            .or_default();
        if let Some(held) = &settings.freeze {
            return Ok(LockOutcome::AlreadyHeld(held.clone()));
        }
        settings.freeze = Some(lock.clone());
        st.audited();
        Ok(LockOutcome::Taken)
    }

    async fn unfreeze_group(&self, group: &GroupPath) -> Result<Option<EnvLock>, StoreError> {
        let mut st = self.lock();
        let removed = st
            .group_settings
            .get_mut(group.as_str())
            .and_then(|s| s.freeze.take());
        if removed.is_some() {
            st.audited();
        }
        Ok(removed)
    }

    async fn set_group_expiry(
        &self,
        group: &GroupPath,
        expiry: &ExpiryLimits,
    ) -> Result<(), StoreError> {
        if group.is_root() {
            return Err(root_freeze_refused());
        }
        let mut st = self.lock();
        st.group_settings
            .entry(group.as_str().to_string())
            .or_default()
            .expiry = *expiry;
        st.audited();
        Ok(())
    }

    async fn group_settings_over(
        &self,
        group: &GroupPath,
    ) -> Result<Vec<(GroupPath, GroupSettings)>, StoreError> {
        let st = self.lock();
        Ok(settings_groups(group)
            .into_iter()
            .filter_map(|g| {
                let s = st.group_settings.get(g.as_str())?.clone();
                Some((g, s))
            })
            .collect())
    }
}
