//! Policy sets of a group: create (validated and compiled), read, list, update, delete,
//! and the sets that apply to an environment.

use std::sync::Arc;

use serde_json::{json, Value};
use sortie_core::policy::{PolicySet, MAX_SETS_PER_GROUP};
use sortie_core::{GroupPath, ValidationError};
use sortie_policy::CompileError;
use sortie_store::{Store, StoreError, Versioned};

/// The policy set service.
#[derive(Clone)]
pub struct PolicySets {
    /// The repository.
    pub store: Arc<dyn Store>,
}

/// Why a policy set was not read or written.
#[derive(Debug, thiserror::Error)]
pub enum PolicySetRefusal {
    /// The document is not a valid policy set (fields, bounds).
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    /// A module does not compile.
    #[error(transparent)]
    Compile(#[from] CompileError),
    /// One field contradicts the URL, or the group holds too many sets.
    #[error("{field}: {problem}")]
    Field {
        /// The field's path.
        field: String,
        /// What is wrong with it.
        problem: String,
    },
    /// The store failed (`NotFound`, `AlreadyExists`, a stale version's `VersionMismatch`).
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl PolicySets {
    /// The service over `store`.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self { store }
    }

    /// The sets of exactly `group`.
    pub async fn list(&self, group: &GroupPath) -> Result<Vec<Versioned<PolicySet>>, StoreError> {
        self.store.list_policy_sets(group).await
    }

    /// Set `name` of `group`.
    pub async fn get(
        &self,
        group: &GroupPath,
        name: &str,
    ) -> Result<Versioned<PolicySet>, StoreError> {
        self.store.get_policy_set(group, name).await
    }

    /// Creates the set `doc` describes in `group` (its `name` checked against `name` when given).
    pub async fn create(
        &self,
        group: &GroupPath,
        name: Option<&str>,
        mut doc: Value,
    ) -> Result<Versioned<PolicySet>, PolicySetRefusal> {
        if let Some(name) = name {
            pin_name(&mut doc, name)?;
        }
        let set = checked(doc)?;
        if self.store.list_policy_sets(group).await?.len() >= MAX_SETS_PER_GROUP {
            return Err(PolicySetRefusal::Field {
                field: "name".into(),
                problem: format!(
                    "group `{}` already holds {MAX_SETS_PER_GROUP} policy sets, the most one group may hold",
                    group.as_str()
                ),
            });
        }
        Ok(self.store.create_policy_set(group, &set).await?)
    }

    /// Replaces set `name` of `group` with the one `doc` describes, at version `expected`
    /// when given.
    pub async fn update(
        &self,
        group: &GroupPath,
        name: &str,
        mut doc: Value,
        expected: Option<u64>,
    ) -> Result<Versioned<PolicySet>, PolicySetRefusal> {
        pin_name(&mut doc, name)?;
        let set = checked(doc)?;
        Ok(self.store.update_policy_set(group, &set, expected).await?)
    }

    /// Deletes set `name` of `group`, at version `expected` when given.
    pub async fn delete(
        &self,
        group: &GroupPath,
        name: &str,
        expected: Option<u64>,
    ) -> Result<(), StoreError> {
        self.store.delete_policy_set(group, name, expected).await
    }
}

/// Validates and compiles a policy set document.
fn checked(doc: Value) -> Result<PolicySet, PolicySetRefusal> {
    let set = PolicySet::from_value(doc)?;
    sortie_policy::compile(&set)?;
    Ok(set)
}

/// Fills `name` with the URL's name, or checks that it equals it.
fn pin_name(doc: &mut Value, name: &str) -> Result<(), PolicySetRefusal> {
    if let Some(o) = doc.as_object_mut() {
        match o.get("name") {
            None => {
                o.insert("name".into(), json!(name));
            }
            Some(s) if s.as_str() == Some(name) => {}
            Some(_) => {
                return Err(PolicySetRefusal::Field {
                    field: "name".into(),
                    problem: format!("must be `{name}`, the name in the URL, or absent"),
                })
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::World;

    fn doc(enforcement: &str, criteria: Value) -> Value {
        json!({
            "enforcement": enforcement,
            "criteria": criteria,
            "modules": [{"name": "m.rego", "rego": "package m\n\ndeny contains \"no\" if { false }\n"}],
        })
    }

    #[tokio::test]
    async fn sets_are_checked_compiled_and_pinned_to_their_url() {
        let w = World::new().await;
        let sets = PolicySets::new(w.store.clone());
        let acme = GroupPath::parse("acme").unwrap();
        let made = sets
            .create(&acme, Some("tags"), doc("mandatory", json!(null)))
            .await
            .unwrap();
        assert_eq!((made.item.name.as_str(), made.version), ("tags", 1));
        let mut bad = doc("review", json!(null));
        bad["modules"][0]["rego"] = json!("package m\n\ndeny contains msg if {\n  msg := ]\n}\n");
        match sets.create(&acme, Some("bad"), bad).await {
            Err(PolicySetRefusal::Compile(e)) => {
                assert_eq!((e.module.as_str(), e.line), ("m.rego", 4))
            }
            other => panic!("{other:?}"),
        }
        match sets
            .update(
                &acme,
                "other",
                {
                    let mut d = doc("review", json!(null));
                    d["name"] = json!("tags");
                    d
                },
                None,
            )
            .await
        {
            Err(PolicySetRefusal::Field { field, .. }) => assert_eq!(field, "name"),
            other => panic!("{other:?}"),
        }
        let updated = sets
            .update(&acme, "tags", doc("advisory", json!(null)), Some(1))
            .await
            .unwrap();
        assert_eq!(updated.version, 2);
        sets.delete(&acme, "tags", Some(2)).await.unwrap();
        assert!(sets.list(&acme).await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn applicable_sets_are_the_ancestry_s_whose_criteria_match() {
        let w = World::new().await;
        let sets = PolicySets::new(w.store.clone());
        let env = w.environment("acme/payments/prod").await;
        let group = env.path.group().clone();
        let org = GroupPath::parse(env.path.org()).unwrap();
        sets.create(
            &GroupPath::root(),
            Some("shared"),
            doc("mandatory", json!(null)),
        )
        .await
        .unwrap();
        sets.create(
            &org,
            Some("other-type"),
            doc("review", json!({"env_types": ["no-such-type"]})),
        )
        .await
        .unwrap();
        sets.create(
            &group,
            Some("own"),
            doc("advisory", json!({"env_types": [env.env_type]})),
        )
        .await
        .unwrap();
        let sibling = GroupPath::parse(&format!("{}-sibling", group.as_str())).unwrap();
        sets.create(&sibling, Some("sibling"), doc("mandatory", json!(null)))
            .await
            .unwrap();
        let names: Vec<(String, String)> = w
            .jobs
            .sets_in_force(&env)
            .await
            .unwrap()
            .into_iter()
            .map(|a| (a.group, a.set.name))
            .collect();
        assert_eq!(
            names,
            vec![
                (GroupPath::root().to_string(), "shared".to_string()),
                (group.to_string(), "own".to_string()),
            ]
        );
    }
}
