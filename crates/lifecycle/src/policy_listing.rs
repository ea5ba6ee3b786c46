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

use std::sync::Arc;

use sortie_core::policy::PolicySet;
use sortie_core::GroupPath;
use sortie_store::{PolicySetStore, StoreError, Versioned};

use crate::group_cache::GroupCache;

/// Every set in force at a group's level and above, with the group that holds it.
pub type Listing = Vec<(GroupPath, Versioned<PolicySet>)>;

/// Policy-set listings per group, each with the version it was read at.
#[derive(Clone, Default, Debug)]
pub struct PolicyListingCache {
    listings: GroupCache<Listing>,
}

impl PolicyListingCache {
    /// [`PolicySetStore::policy_sets_for`] `group`, current as of this call.
    pub async fn sets_for<S: PolicySetStore + ?Sized>(
        &self,
        store: &S,
        group: &GroupPath,
    ) -> Result<Arc<Listing>, StoreError> {
        let version = store.policy_sets_version(group.org()).await?;
        self.listings
            .get_or_load(group, version, || store.policy_sets_for(group))
            .await
    }
}
