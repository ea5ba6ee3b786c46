//! Rules: one versioned rule set per scope, and a rule version per organisation.

use async_trait::async_trait;
use sortie_core::{GroupPath, RunnerRule};

use super::{version_check, MemoryStore};
use crate::{RuleStore, StoreError, Versioned};

#[async_trait]
impl RuleStore for MemoryStore {
    async fn create_rule(&self, rule: &RunnerRule) -> Result<Versioned<RunnerRule>, StoreError> {
        let mut st = self.lock();
        let set = st
            .rules
            .entry(rule.scope.as_str().to_string())
            .or_insert_with(|| (0, vec![]));
        if set.1.iter().any(|r| r.id == rule.id) {
            return Err(StoreError::AlreadyExists {
                kind: "rule",
                id: format!("{}:{}", rule.scope.as_str(), rule.id),
            });
        }
        set.1.push(rule.clone());
        set.0 += 1;
        let version = set.0;
        st.bump_rules_version(&rule.scope);
        st.audited();
        Ok(Versioned {
            item: rule.clone(),
            version,
        })
    }

    async fn list_rules(
        &self,
        scope: &GroupPath,
    ) -> Result<Versioned<Vec<RunnerRule>>, StoreError> {
        let st = self.lock();
        Ok(match st.rules.get(scope.as_str()) {
            Some((version, rules)) => Versioned {
                item: rules.clone(),
                version: *version,
            },
            None => Versioned {
                item: vec![],
                version: 0,
            },
        })
    }

    async fn rules_for(&self, group: &GroupPath) -> Result<Vec<RunnerRule>, StoreError> {
        let st = self.lock();
        Ok(group
            .self_and_ancestors()
            .iter()
            .filter_map(|g| st.rules.get(g.as_str()))
            .flat_map(|(_, rules)| rules.iter().cloned())
            .collect())
    }

    async fn update_rule(
        &self,
        rule: &RunnerRule,
        expected: Option<u64>,
    ) -> Result<Versioned<RunnerRule>, StoreError> {
        let rule_id = format!("{}:{}", rule.scope.as_str(), rule.id);
        let mut st = self.lock();
        let set = st
            .rules
            .get_mut(rule.scope.as_str())
            .ok_or_else(|| StoreError::NotFound {
                kind: "rule",
                id: rule_id.clone(),
            })?;
        version_check("rule", rule_id.clone(), expected, set.0)?;
        let Some(slot) = set.1.iter_mut().find(|r| r.id == rule.id) else {
            return Err(StoreError::NotFound {
                kind: "rule",
                id: rule_id,
            });
        };
        *slot = rule.clone();
        set.0 += 1;
        let version = set.0;
        st.bump_rules_version(&rule.scope);
        st.audited();
        Ok(Versioned {
            item: rule.clone(),
            version,
        })
    }

    async fn delete_rule(
        &self,
        scope: &GroupPath,
        id: &str,
        expected: Option<u64>,
    ) -> Result<(), StoreError> {
        let rule_id = format!("{}:{id}", scope.as_str());
        let mut st = self.lock();
        // Like the table's rule-set item, an emptied set stays, keeping its version.
        let set = st
            .rules
            .get_mut(scope.as_str())
            .ok_or_else(|| StoreError::NotFound {
                kind: "rule",
                id: rule_id.clone(),
            })?;
        version_check("rule", rule_id.clone(), expected, set.0)?;
        let before = set.1.len();
        set.1.retain(|r| r.id != id);
        if set.1.len() == before {
            return Err(StoreError::NotFound {
                kind: "rule",
                id: rule_id,
            });
        }
        set.0 += 1;
        st.bump_rules_version(scope);
        st.audited();
        Ok(())
    }

    async fn rules_version(&self, org: Option<&str>) -> Result<u64, StoreError> {
        let st = self.lock();
        let of = |o: &str| st.rules_versions.get(o).copied().unwrap_or(0);
        Ok(of("") + org.map(of).unwrap_or(0))
    }
}
