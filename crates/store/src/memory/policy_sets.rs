//! Policy sets: by (group, name), each with its own version.

use async_trait::async_trait;
use sortie_core::policy::PolicySet;
use sortie_core::GroupPath;

use super::{version_check, MemoryStore};
use crate::{PolicySetStore, StoreError, Versioned};

const KIND: &str = "policy set";

fn key(group: &GroupPath, name: &str) -> (String, String) {
    (group.as_str().to_string(), name.to_string())
}

fn id(group: &GroupPath, name: &str) -> String {
    format!("{}:{name}", group.as_str())
}

/// Bumps the policy-set version of `group`'s organisation (the root's for the root).
fn bump(st: &mut super::State, group: &GroupPath) {
    *st.policy_sets_versions
        .entry(group.org().unwrap_or_default().to_string())
        .or_insert(0) += 1;
}

#[async_trait]
impl PolicySetStore for MemoryStore {
    async fn policy_sets_version(&self, org: Option<&str>) -> Result<u64, StoreError> {
        let st = self.lock();
        let of = |o: &str| st.policy_sets_versions.get(o).copied().unwrap_or(0);
        Ok(of("") + org.map_or(0, of))
    }

    async fn create_policy_set(
        &self,
        group: &GroupPath,
        set: &PolicySet,
    ) -> Result<Versioned<PolicySet>, StoreError> {
        let mut st = self.lock();
        let k = key(group, &set.name);
        if st.policy_sets.contains_key(&k) {
            return Err(StoreError::AlreadyExists {
                kind: KIND,
                id: id(group, &set.name),
            });
        }
        st.policy_sets.insert(k, (set.clone(), 1));
        bump(&mut st, group);
        st.audited();
        Ok(Versioned {
            item: set.clone(),
            version: 1,
        })
    }

    async fn get_policy_set(
        &self,
        group: &GroupPath,
        name: &str,
    ) -> Result<Versioned<PolicySet>, StoreError> {
        let st = self.lock();
        st.policy_sets
            .get(&key(group, name))
            .map(|(set, version)| Versioned {
                item: set.clone(),
                version: *version,
            })
            .ok_or_else(|| StoreError::NotFound {
                kind: KIND,
                id: id(group, name),
            })
    }

    async fn list_policy_sets(
        &self,
        group: &GroupPath,
    ) -> Result<Vec<Versioned<PolicySet>>, StoreError> {
        let st = self.lock();
        let g = group.as_str().to_string();
        Ok(st
            .policy_sets
            .range((g.clone(), String::new())..)
            .take_while(|((owner, _), _)| *owner == g)
            .map(|(_, (set, version))| Versioned {
                item: set.clone(),
                version: *version,
            })
            .collect())
    }

    async fn update_policy_set(
        &self,
        group: &GroupPath,
        set: &PolicySet,
        expected: Option<u64>,
    ) -> Result<Versioned<PolicySet>, StoreError> {
        let mut st = self.lock();
        let Some(slot) = st.policy_sets.get_mut(&key(group, &set.name)) else {
            return Err(StoreError::NotFound {
                kind: KIND,
                id: id(group, &set.name),
            });
        };
        version_check(KIND, id(group, &set.name), expected, slot.1)?;
        slot.0 = set.clone();
        slot.1 += 1;
        let version = slot.1;
        bump(&mut st, group);
        st.audited();
        Ok(Versioned {
            item: set.clone(),
            version,
        })
    }

    async fn delete_policy_set(
        &self,
        group: &GroupPath,
        name: &str,
        expected: Option<u64>,
    ) -> Result<(), StoreError> {
        let mut st = self.lock();
        let k = key(group, name);
        let Some((_, version)) = st.policy_sets.get(&k) else {
            return Err(StoreError::NotFound {
                kind: KIND,
                id: id(group, name),
            });
        };
        version_check(KIND, id(group, name), expected, *version)?;
        st.policy_sets.remove(&k);
        bump(&mut st, group);
        st.audited();
        Ok(())
    }
}
