//! Policy-set listings, cached per function instance and revalidated on every check, as
//! the rule index is ([`crate::RuleIndexCache`]).
//!
//! The gate needs every set of the environment's group and its ancestors: one Query per
//! level, each returning the sets' bodies (up to 256 KiB of Rego each). Sets change
//! rarely, so each instance keeps the listing per group with the policy-set version it was
//! read at. Before each use it reads the version again
//! ([`PolicySetStore::policy_sets_version`]: the org's and the root's counters, bumped in
//! the transaction of every write, strongly consistent); when it moved, the listing is read
//! afresh. So a set's change, through any instance, is seen by the next check.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sortie_core::policy::PolicySet;
use sortie_core::GroupPath;
use sortie_store::{PolicySetStore, StoreError, Versioned};

/// The most groups one instance keeps; past it the whole cache starts afresh.
const MAX_GROUPS: usize = 256;

/// Every set in force at a group's level and above, with the group that holds it.
pub type Listing = Vec<(GroupPath, Versioned<PolicySet>)>;

type Entries = HashMap<GroupPath, (u64, Arc<Listing>)>;

/// Policy-set listings per group, each with the version it was read at.
#[derive(Clone, Default)]
pub struct PolicyListingCache {
    entries: Arc<Mutex<Entries>>,
}

impl std::fmt::Debug for PolicyListingCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyListingCache")
            .field("groups", &self.lock().len())
            .finish()
    }
}

impl PolicyListingCache {
    /// [`PolicySetStore::policy_sets_for`] `group`, current as of this call.
    pub async fn sets_for<S: PolicySetStore + ?Sized>(
        &self,
        store: &S,
        group: &GroupPath,
    ) -> Result<Arc<Listing>, StoreError> {
        // The version is read before the listing: a write in between leaves a listing newer
        // than its recorded version, which the next call reads again, never older.
        let version = store.policy_sets_version(group.org()).await?;
        if let Some((at, listing)) = self.lock().get(group) {
            if *at == version {
                return Ok(listing.clone());
            }
        }
        let listing = Arc::new(store.policy_sets_for(group).await?);
        let mut entries = self.lock();
        if entries.len() >= MAX_GROUPS && !entries.contains_key(group) {
            entries.clear();
        }
        entries.insert(group.clone(), (version, listing.clone()));
        Ok(listing)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        // A panic while holding the lock cannot leave an entry half written.
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }
}
