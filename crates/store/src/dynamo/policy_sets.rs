//! Policy sets: one item per set under its group's partition (`GROUP#<group>`,
//! `POLICYSET#<name>`), the set kept as JSON text in `body` (up to 256 KiB of Rego fits
//! DynamoDB's 400 KB item).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sortie_core::policy::PolicySet;
use sortie_core::GroupPath;

use super::items::{from_item, to_item};
use super::keys::{group_pk, key};
use super::{condition_failed, n, DynamoStore, Item};
use crate::error::aws;
use crate::{PolicySetStore, StoreError, Versioned};

const KIND: &str = "policy set";

#[derive(Debug, Clone, Serialize, Deserialize)]
struct PolicySetItem {
    pk: String,
    sk: String,
    kind: String,
    version: u64,
    updated_at: DateTime<Utc>,
    /// The set, as JSON text.
    body: String,
}

fn set_key(group: &GroupPath, name: &str) -> Item {
    key(group_pk(group), &format!("POLICYSET#{name}"))
}

fn id(group: &GroupPath, name: &str) -> String {
    format!("{}:{name}", group.as_str())
}

fn item(group: &GroupPath, set: &PolicySet, version: u64) -> Result<Item, StoreError> {
    let body = serde_json::to_string(set).map_err(|e| StoreError::Invalid {
        path: "policy_set".into(),
        problem: e.to_string(),
    })?;
    Ok(to_item(&PolicySetItem {
        pk: group_pk(group),
        sk: format!("POLICYSET#{}", set.name),
        kind: "policy_set".into(),
        version,
        updated_at: Utc::now(),
        body,
    }))
}

fn decode(i: Item) -> Result<Versioned<PolicySet>, StoreError> {
    let item: PolicySetItem = from_item(i)?;
    let set = serde_json::from_str(&item.body).map_err(|e| StoreError::Invalid {
        path: "policy_set".into(),
        problem: format!("stored policy set `{}` is unreadable: {e}", item.sk),
    })?;
    Ok(Versioned {
        item: set,
        version: item.version,
    })
}

impl DynamoStore {
    async fn read_policy_set(
        &self,
        group: &GroupPath,
        name: &str,
    ) -> Result<Option<Versioned<PolicySet>>, StoreError> {
        self.get_item(set_key(group, name))
            .await?
            .map(decode)
            .transpose()
    }

    async fn current_version(&self, group: &GroupPath, name: &str) -> Result<u64, StoreError> {
        Ok(self
            .read_policy_set(group, name)
            .await?
            .map(|v| v.version)
            .unwrap_or(0))
    }
}

#[async_trait]
impl PolicySetStore for DynamoStore {
    async fn create_policy_set(
        &self,
        group: &GroupPath,
        set: &PolicySet,
    ) -> Result<Versioned<PolicySet>, StoreError> {
        let res = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item(group, set, 1)?))
            .condition_expression("attribute_not_exists(pk)")
            .send()
            .await;
        match res {
            Ok(_) => Ok(Versioned {
                item: set.clone(),
                version: 1,
            }),
            Err(e) if condition_failed(&e) => Err(StoreError::AlreadyExists {
                kind: KIND,
                id: id(group, &set.name),
            }),
            Err(e) => Err(aws("dynamodb", e)),
        }
    }

    async fn get_policy_set(
        &self,
        group: &GroupPath,
        name: &str,
    ) -> Result<Versioned<PolicySet>, StoreError> {
        self.read_policy_set(group, name)
            .await?
            .ok_or_else(|| StoreError::NotFound {
                kind: KIND,
                id: id(group, name),
            })
    }

    async fn list_policy_sets(
        &self,
        group: &GroupPath,
    ) -> Result<Vec<Versioned<PolicySet>>, StoreError> {
        let items = self
            .query_pk(None, "pk", &group_pk(group), Some(("sk", "POLICYSET#")))
            .await?;
        items.into_iter().map(decode).collect()
    }

    async fn update_policy_set(
        &self,
        group: &GroupPath,
        set: &PolicySet,
        expected: Option<u64>,
    ) -> Result<Versioned<PolicySet>, StoreError> {
        let current = self.get_policy_set(group, &set.name).await?;
        Self::version_check(KIND, id(group, &set.name), expected, current.version)?;
        let version = current.version + 1;
        let res = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item(group, set, version)?))
            .condition_expression("version = :v")
            .expression_attribute_values(":v", n(current.version))
            .send()
            .await;
        match res {
            Ok(_) => Ok(Versioned {
                item: set.clone(),
                version,
            }),
            Err(e) if condition_failed(&e) => Err(StoreError::VersionMismatch {
                kind: KIND,
                id: id(group, &set.name),
                expected: current.version,
                actual: self.current_version(group, &set.name).await?,
            }),
            Err(e) => Err(aws("dynamodb", e)),
        }
    }

    async fn delete_policy_set(
        &self,
        group: &GroupPath,
        name: &str,
        expected: Option<u64>,
    ) -> Result<(), StoreError> {
        let current = self.get_policy_set(group, name).await?;
        Self::version_check(KIND, id(group, name), expected, current.version)?;
        let res = self
            .client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(set_key(group, name)))
            .condition_expression("version = :v")
            .expression_attribute_values(":v", n(current.version))
            .send()
            .await;
        match res {
            Ok(_) => Ok(()),
            Err(e) if condition_failed(&e) => match self.read_policy_set(group, name).await? {
                None => Err(StoreError::NotFound {
                    kind: KIND,
                    id: id(group, name),
                }),
                Some(now) => Err(StoreError::VersionMismatch {
                    kind: KIND,
                    id: id(group, name),
                    expected: current.version,
                    actual: now.version,
                }),
            },
            Err(e) => Err(aws("dynamodb", e)),
        }
    }
}
