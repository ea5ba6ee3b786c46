//! The rule service: a scope's runner rules (list, read, create, replace, delete). A scope's
//! rules are one rule set with one version, checked on replace and delete. A rule is
//! validated here, against the scope and id of its URL, and its runner must exist. The API
//! checks who may act and renders; this service does it.

use std::sync::Arc;

use serde_json::{json, Value};
use sortie_core::{GroupPath, RunnerRule, ValidationError};
use sortie_store::{Store, StoreError, Versioned};

/// A scope's runner rules, over the store.
#[derive(Clone)]
pub struct Rules {
    /// The repository.
    pub store: Arc<dyn Store>,
}

/// Why a rule was not read or written.
#[derive(Debug, thiserror::Error)]
pub enum RuleRefusal {
    /// The document is not a valid rule.
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    /// One field of the document is wrong: it contradicts the URL, or names a runner that
    /// does not exist.
    #[error("{field}: {problem}")]
    Field {
        /// The field's path.
        field: String,
        /// What is wrong with it.
        problem: String,
    },
    /// The scope has no rule of that id.
    #[error("rule `{0}` was not found")]
    NoSuchRule(String),
    /// The store failed (a stale version is its `VersionMismatch`).
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl Rules {
    /// The service over `store`.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self { store }
    }

    /// The rules of exactly `scope`, with the rule set's version.
    pub async fn list(&self, scope: &GroupPath) -> Result<Versioned<Vec<RunnerRule>>, StoreError> {
        self.store.list_rules(scope).await
    }

    /// Rule `id` of `scope`, with the rule set's version.
    pub async fn get(
        &self,
        scope: &GroupPath,
        id: &str,
    ) -> Result<Versioned<RunnerRule>, RuleRefusal> {
        let rules = self.store.list_rules(scope).await?;
        let rule = rules
            .item
            .into_iter()
            .find(|r| r.id == id)
            .ok_or_else(|| RuleRefusal::NoSuchRule(id.to_string()))?;
        Ok(Versioned {
            item: rule,
            version: rules.version,
        })
    }

    /// Creates the rule `doc` describes at `scope` (its `scope` field absent or equal).
    pub async fn create(
        &self,
        scope: &GroupPath,
        doc: Value,
    ) -> Result<Versioned<RunnerRule>, RuleRefusal> {
        let rule = self.checked(doc, scope).await?;
        Ok(self.store.create_rule(&rule).await?)
    }

    /// Replaces rule `id` of `scope` with the one `doc` describes (its `id` field absent or
    /// equal), at rule-set version `expected` when given.
    pub async fn update(
        &self,
        scope: &GroupPath,
        id: &str,
        mut doc: Value,
        expected: Option<u64>,
    ) -> Result<Versioned<RunnerRule>, RuleRefusal> {
        pin_field(&mut doc, "id", id, "rule id")?;
        let rule = self.checked(doc, scope).await?;
        Ok(self.store.update_rule(&rule, expected).await?)
    }

    /// Deletes rule `id` of `scope`, at rule-set version `expected` when given.
    pub async fn delete(
        &self,
        scope: &GroupPath,
        id: &str,
        expected: Option<u64>,
    ) -> Result<(), StoreError> {
        self.store.delete_rule(scope, id, expected).await
    }

    /// Validates a rule document for `scope` and checks that its runner exists.
    async fn checked(&self, mut doc: Value, scope: &GroupPath) -> Result<RunnerRule, RuleRefusal> {
        pin_field(&mut doc, "scope", scope.as_str(), "group")?;
        let rule = RunnerRule::from_value(&doc)?;
        match self.store.get_runner(&rule.runner_id).await {
            Ok(_) => Ok(rule),
            Err(StoreError::NotFound { .. }) => Err(RuleRefusal::Field {
                field: "runner_id".into(),
                problem: format!("runner `{}` does not exist", rule.runner_id),
            }),
            Err(e) => Err(e.into()),
        }
    }
}

/// Fills `field` of a rule document with the URL's `value`, or checks that it equals it.
fn pin_field(doc: &mut Value, field: &str, value: &str, what: &str) -> Result<(), RuleRefusal> {
    if let Some(o) = doc.as_object_mut() {
        match o.get(field) {
            None => {
                o.insert(field.into(), json!(value));
            }
            Some(s) if s.as_str() == Some(value) => {}
            Some(_) => {
                return Err(RuleRefusal::Field {
                    field: field.into(),
                    problem: format!("must be `{value}`, the {what} in the URL, or absent"),
                })
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{World, RUNNER};

    #[tokio::test]
    async fn a_rule_is_pinned_to_its_url_and_must_name_a_runner_that_exists() {
        let w = World::new().await;
        let rules = Rules::new(w.store.clone());
        let scope = GroupPath::parse("acme").unwrap();
        let doc = |runner: &str| json!({"id": "r1", "runner_id": runner, "priority": 1});
        match rules.create(&scope, doc("acme/nope")).await {
            Err(RuleRefusal::Field { field, problem }) => {
                assert_eq!(field, "runner_id");
                assert_eq!(problem, "runner `acme/nope` does not exist");
            }
            other => panic!("{other:?}"),
        }
        let created = rules.create(&scope, doc(RUNNER)).await.unwrap();
        assert_eq!(created.item.scope, scope);
        let read = rules.get(&scope, "r1").await.unwrap();
        assert_eq!((read.item, read.version), (created.item, created.version));
        assert!(matches!(
            rules.get(&scope, "r2").await,
            Err(RuleRefusal::NoSuchRule(id)) if id == "r2"
        ));
        match rules.update(&scope, "r2", doc(RUNNER), None).await {
            Err(RuleRefusal::Field { field, .. }) => assert_eq!(field, "id"),
            other => panic!("{other:?}"),
        }
        rules.delete(&scope, "r1", None).await.unwrap();
        assert!(rules.list(&scope).await.unwrap().item.is_empty());
    }

    #[test]
    fn a_field_is_filled_when_absent_and_refused_when_it_differs() {
        let mut doc = json!({"runner_id": "r"});
        pin_field(&mut doc, "scope", "acme", "group").unwrap();
        assert_eq!(doc["scope"], "acme");
        pin_field(&mut doc, "scope", "acme", "group").unwrap();
        let e = pin_field(&mut doc, "scope", "other", "group").unwrap_err();
        assert_eq!(
            e.to_string(),
            "scope: must be `other`, the group in the URL, or absent"
        );
    }
}
