//! Compiled rule indexes, cached per function instance and revalidated on every use.
//!
//! Resolving a runner needs every rule of the environment's group and its ancestors,
//! compiled into a [`RuleIndex`]: one query per scope and about a millisecond of CPU at
//! 10,000 rules. Rules change rarely, so each instance keeps the index per group with
//! the rule-set version it was compiled at. Before each use it reads the version again
//! ([`RuleStore::rules_version`]: the org's and the root's counters, strongly
//! consistent); when it moved, the index is read and compiled afresh. So a rule change,
//! through any instance, is seen by the next resolution.

use std::sync::Arc;

use sortie_core::{GroupPath, RuleIndex};
use sortie_store::{RuleStore, StoreError};

use crate::group_cache::GroupCache;

/// Compiled rule indexes per group, each with the rule-set version it was compiled at.
#[derive(Clone, Default, Debug)]
pub struct RuleIndexCache {
    indexes: GroupCache<RuleIndex>,
}

impl RuleIndexCache {
    /// The index of every rule that applies in `group`, current as of this call.
    pub async fn index_for(
        &self,
        store: &dyn RuleStore,
        group: &GroupPath,
    ) -> Result<Arc<RuleIndex>, StoreError> {
        let version = store.rules_version(group.org()).await?;
        self.indexes
            .get_or_load(group, version, || async {
                Ok(RuleIndex::compile(store.rules_for(group).await?))
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sortie_core::{Environment, RunnerId, RunnerLink, RunnerRule};
    use sortie_store::MemoryStore;

    fn rule(scope: &str, id: &str, runner: &str, priority: i32) -> RunnerRule {
        RunnerRule {
            id: id.into(),
            scope: GroupPath::parse(scope).unwrap(),
            runner_id: RunnerId::parse(runner).unwrap(),
            criteria: Default::default(),
            priority,
        }
    }

    fn winner(index: &RuleIndex, env: &Environment) -> RunnerId {
        index.resolve(&env.facts()).unwrap().rule.runner_id.clone()
    }

    #[tokio::test]
    async fn an_index_is_reused_until_a_rule_that_applies_changes_then_recompiled() {
        let store = MemoryStore::new();
        let cache = RuleIndexCache::default();
        let team = GroupPath::parse("acme/payments").unwrap();
        let env = Environment {
            settings: Default::default(),
            path: sortie_core::EnvPath::parse("acme/payments/prod").unwrap(),
            env_type: "production".into(),
            labels: Default::default(),
            tags: Default::default(),
            runner: RunnerLink {
                runner_id: RunnerId::parse("acme/a").unwrap(),
                rule_id: "default".into(),
                linked_by: "alice".into(),
                linked_at: chrono::Utc::now(),
            },
        };
        store
            .create_rule(&rule("acme", "default", "acme/a", 0))
            .await
            .unwrap();

        let first = cache.index_for(&store, &team).await.unwrap();
        let again = cache.index_for(&store, &team).await.unwrap();
        assert!(
            Arc::ptr_eq(&first, &again),
            "unchanged rules: the same index"
        );
        assert_eq!(winner(&again, &env), RunnerId::parse("acme/a").unwrap());

        // Another organisation's rule does not touch acme's index.
        store
            .create_rule(&rule("globex", "x", "globex/x", 9))
            .await
            .unwrap();
        let still = cache.index_for(&store, &team).await.unwrap();
        assert!(Arc::ptr_eq(&first, &still), "another org's change");

        // A rule of the team, then a shared (root) rule: each seen by the next call.
        store
            .create_rule(&rule("acme/payments", "team", "acme/b", 0))
            .await
            .unwrap();
        let after = cache.index_for(&store, &team).await.unwrap();
        assert!(!Arc::ptr_eq(&first, &after));
        assert_eq!(winner(&after, &env), RunnerId::parse("acme/b").unwrap());
        store.delete_rule(&team, "team", None).await.unwrap();
        let reverted = cache.index_for(&store, &team).await.unwrap();
        assert_eq!(winner(&reverted, &env), RunnerId::parse("acme/a").unwrap());
        let before_root = cache.index_for(&store, &team).await.unwrap();
        store
            .create_rule(&rule("", "shared", "shared", 0))
            .await
            .unwrap();
        let after_root = cache.index_for(&store, &team).await.unwrap();
        assert!(
            !Arc::ptr_eq(&before_root, &after_root),
            "a root rule applies everywhere"
        );
    }
}
