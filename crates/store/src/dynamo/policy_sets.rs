//! Policy sets: one item per set under its group's partition (`GROUP#<group>`,
//! `POLICYSET#<name>`), the set kept as JSON text in `body` (up to 256 KiB of Rego fits
//! DynamoDB's 400 KB item).

use std::collections::HashMap;

use async_trait::async_trait;
use aws_sdk_dynamodb::types::{Put, TransactWriteItem};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sortie_core::policy::PolicySet;
use sortie_core::GroupPath;

use super::items::{from_item, to_item};
use super::keys::{group_pk, key};
use super::{n, DynamoStore, Item, TxOutcome};
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

/// The organisation's policy-set version item (`POLICYVER#` for the root), bumped in the
/// transaction of every create, update and delete of a set in it.
fn counter_key(org: Option<&str>) -> Item {
    key(
        format!("POLICYVER#{}", org.unwrap_or_default()),
        "POLICYVER",
    )
}

/// True when the transaction's first item (the set's own write) failed its condition.
fn first_failed(codes: &[Option<String>]) -> bool {
    codes
        .first()
        .is_some_and(|c| c.as_deref() == Some("ConditionalCheckFailed"))
}

fn retry_later() -> StoreError {
    StoreError::Aws {
        service: "dynamodb",
        message: "the policy-set write was cancelled; try again".into(),
        retryable: true,
    }
}

impl DynamoStore {
    /// The write of `group`'s organisation's policy-set version, for a transaction.
    fn bump_policy_sets(&self, group: &GroupPath) -> TransactWriteItem {
        self.update(
            counter_key(group.org()),
            "SET version = if_not_exists(version, :zero) + :one",
            "attribute_not_exists(pk) OR attribute_exists(pk)",
            HashMap::from([(":zero".to_string(), n(0)), (":one".to_string(), n(1))]),
            HashMap::new(),
        )
    }

    /// A set's put on condition of its current version, for a transaction.
    fn put_at_version(&self, item: Item, current: u64) -> TransactWriteItem {
        TransactWriteItem::builder()
            .put(
                Put::builder()
                    .table_name(&self.table)
                    .set_item(Some(item))
                    .condition_expression("version = :v")
                    .expression_attribute_values(":v", n(current))
                    .build()
                    .expect("table, item and condition are set"),
            )
            .build()
    }

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
        let items = vec![
            self.put(item(group, set, 1)?, "attribute_not_exists(pk)"),
            self.bump_policy_sets(group),
        ];
        match self.transact(items).await? {
            TxOutcome::Done => Ok(Versioned {
                item: set.clone(),
                version: 1,
            }),
            TxOutcome::Cancelled(codes) if first_failed(&codes) => Err(StoreError::AlreadyExists {
                kind: KIND,
                id: id(group, &set.name),
            }),
            TxOutcome::Cancelled(_) => Err(retry_later()),
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
        let items = vec![
            self.put_at_version(item(group, set, version)?, current.version),
            self.bump_policy_sets(group),
        ];
        match self.transact(items).await? {
            TxOutcome::Done => Ok(Versioned {
                item: set.clone(),
                version,
            }),
            TxOutcome::Cancelled(codes) if first_failed(&codes) => {
                Err(StoreError::VersionMismatch {
                    kind: KIND,
                    id: id(group, &set.name),
                    expected: current.version,
                    actual: self.current_version(group, &set.name).await?,
                })
            }
            TxOutcome::Cancelled(_) => Err(retry_later()),
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
        let items = vec![
            self.delete(
                set_key(group, name),
                "version = :v",
                HashMap::from([(":v".to_string(), n(current.version))]),
            ),
            self.bump_policy_sets(group),
        ];
        match self.transact(items).await? {
            TxOutcome::Done => Ok(()),
            TxOutcome::Cancelled(codes) if first_failed(&codes) => {
                match self.read_policy_set(group, name).await? {
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
                }
            }
            TxOutcome::Cancelled(_) => Err(retry_later()),
        }
    }

    async fn policy_sets_version(&self, org: Option<&str>) -> Result<u64, StoreError> {
        self.org_and_root_version(counter_key, org).await
    }
}
