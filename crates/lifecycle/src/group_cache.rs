//! One value per group, kept per function instance with the store version it was read at
//! and revalidated on every use: the shared mechanism of [`crate::RuleIndexCache`] and
//! [`crate::PolicyListingCache`].
//!
//! The caller reads the version first (the org's and the root's counters, bumped in the
//! transaction of every write, strongly consistent), then asks for the value at that
//! version: the kept one when it was read at the same version, else a fresh load, kept.
//! Reading the version before the value means a write in between leaves a value newer
//! than its recorded version, which the next call reads again, never an older one.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};

use sortie_core::GroupPath;
use sortie_store::StoreError;

/// The most groups one instance keeps; past it the whole cache starts afresh.
pub const MAX_GROUPS: usize = 256;

type Entries<T> = HashMap<GroupPath, (u64, Arc<T>)>;

/// Values per group, each with the version it was read at.
pub struct GroupCache<T> {
    entries: Arc<Mutex<Entries<T>>>,
}

impl<T> Clone for GroupCache<T> {
    fn clone(&self) -> Self {
        Self {
            entries: self.entries.clone(),
        }
    }
}

impl<T> Default for GroupCache<T> {
    fn default() -> Self {
        Self {
            entries: Arc::default(),
        }
    }
}

impl<T> std::fmt::Debug for GroupCache<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupCache")
            .field("groups", &self.lock().len())
            .finish()
    }
}

impl<T> GroupCache<T> {
    /// `group`'s value as of `version`: the kept one when it was read at that version,
    /// else `load`'s, kept with `version`.
    pub async fn get_or_load<F, Fut>(
        &self,
        group: &GroupPath,
        version: u64,
        load: F,
    ) -> Result<Arc<T>, StoreError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, StoreError>>,
    {
        if let Some((at, value)) = self.lock().get(group) {
            if *at == version {
                return Ok(value.clone());
            }
        }
        let value = Arc::new(load().await?);
        let mut entries = self.lock();
        if entries.len() >= MAX_GROUPS && !entries.contains_key(group) {
            entries.clear();
        }
        entries.insert(group.clone(), (version, value.clone()));
        Ok(value)
    }

    fn lock(&self) -> MutexGuard<'_, Entries<T>> {
        // A panic while holding the lock cannot leave an entry half written.
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }
}
