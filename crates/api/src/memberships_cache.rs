//! The memberships each request is authorised against, cached per function instance.
//!
//! Every request needs the memberships that can apply inside its organisation (the
//! org's and the root group's): two strongly consistent queries. They change rarely,
//! so each instance keeps them per organisation for at most [`MEMBERSHIP_TTL`]. A
//! grant or revoke made through this instance is seen at once (its organisation's
//! entry is dropped); one made elsewhere, by another instance or directly in the
//! table, takes effect within the bound. docs/decisions/authorisation.md
//! records the bound.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sortie_core::Membership;
use sortie_store::{MembershipStore, StoreError};

/// The longest a cached set of memberships is used: a revoked membership stops working
/// within this bound on every instance.
pub const MEMBERSHIP_TTL: Duration = Duration::from_secs(30);

/// The most organisations one instance keeps; past it the whole cache starts afresh.
const MAX_ORGS: usize = 4096;

type Entries = HashMap<Option<String>, (Instant, Arc<Vec<Membership>>)>;

/// Memberships per organisation, each kept for at most its time to live.
#[derive(Clone)]
pub struct MembershipCache {
    ttl: Duration,
    entries: Arc<Mutex<Entries>>,
}

impl Default for MembershipCache {
    fn default() -> Self {
        Self::with_ttl(MEMBERSHIP_TTL)
    }
}

impl MembershipCache {
    /// A cache whose entries live `ttl` (zero turns caching off).
    pub fn with_ttl(ttl: Duration) -> Self {
        Self {
            ttl,
            entries: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The memberships that can apply inside `org` (the org's and the root's): from the
    /// cache while fresh, else read once from the store.
    pub async fn memberships_for(
        &self,
        store: &dyn MembershipStore,
        org: Option<&str>,
    ) -> Result<Arc<Vec<Membership>>, StoreError> {
        let key = org.map(str::to_string);
        if let Some((at, found)) = self.lock().get(&key) {
            if at.elapsed() < self.ttl {
                return Ok(found.clone());
            }
        }
        let read = Arc::new(store.memberships_for(org).await?);
        let mut entries = self.lock();
        if entries.len() >= MAX_ORGS {
            entries.clear();
        }
        entries.insert(key, (Instant::now(), read.clone()));
        Ok(read)
    }

    /// Forgets what is cached for `org` after a grant or revoke there; a change on the
    /// root group (org `None`) applies everywhere, so it forgets everything.
    pub fn invalidate(&self, org: Option<&str>) {
        let mut entries = self.lock();
        match org {
            Some(org) => {
                entries.remove(&Some(org.to_string()));
            }
            None => entries.clear(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sortie_core::{Grantee, GroupPath, Role};
    use sortie_store::{MembershipRecord, MemoryStore};

    fn grant(group: &str, subject: &str) -> MembershipRecord {
        MembershipRecord {
            id: format!("m-{subject}"),
            membership: Membership {
                group: GroupPath::parse(group).unwrap(),
                role: Role::Viewer,
                grantee: Grantee::Subject {
                    subject: subject.into(),
                    issuer: None,
                },
            },
            granted_by: "admin".into(),
            granted_at: chrono::Utc::now(),
        }
    }

    #[tokio::test]
    async fn a_change_made_elsewhere_is_seen_within_the_bound_and_one_made_here_at_once() {
        let store = MemoryStore::new();
        store.put_membership(&grant("acme", "alice")).await.unwrap();
        let cache = MembershipCache::with_ttl(Duration::from_millis(300));
        assert_eq!(
            cache
                .memberships_for(&store, Some("acme"))
                .await
                .unwrap()
                .len(),
            1
        );
        // Revoked by another instance: this one still uses what it read, within the bound.
        store
            .delete_membership(&GroupPath::parse("acme").unwrap(), "m-alice")
            .await
            .unwrap();
        assert_eq!(
            cache
                .memberships_for(&store, Some("acme"))
                .await
                .unwrap()
                .len(),
            1
        );
        tokio::time::sleep(Duration::from_millis(350)).await;
        assert!(
            cache
                .memberships_for(&store, Some("acme"))
                .await
                .unwrap()
                .is_empty(),
            "past the bound the revocation holds"
        );
        // Granted through this instance: seen at once.
        store.put_membership(&grant("acme", "bob")).await.unwrap();
        cache.invalidate(Some("acme"));
        assert_eq!(
            cache
                .memberships_for(&store, Some("acme"))
                .await
                .unwrap()
                .len(),
            1
        );
        // Another org's entry is its own.
        assert!(cache
            .memberships_for(&store, Some("globex"))
            .await
            .unwrap()
            .is_empty());
    }
}
