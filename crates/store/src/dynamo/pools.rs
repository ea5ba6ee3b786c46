//! Agent pools: one item each (`POOL#<id>`), listed by owner group through gsi1.

use super::Written;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sortie_core::GroupPath;
use std::collections::HashMap;

use super::items::{checked_item, from_item};
use super::keys::{group_pk, key};
use super::{condition_failed, n, s, DynamoStore};
use crate::error::aws;
use crate::{AgentPoolRecord, AgentPoolStore, StoreError, Versioned};

#[derive(Serialize, Deserialize)]
struct PoolItem {
    pk: String,
    sk: String,
    kind: String,
    gsi1pk: String,
    gsi1sk: String,
    version: u64,
    #[serde(flatten)]
    record: AgentPoolRecord,
}

fn pool_pk(id: &str) -> String {
    format!("POOL#{id}")
}

fn pool_item(record: &AgentPoolRecord, version: u64) -> PoolItem {
    PoolItem {
        pk: pool_pk(&record.pool.id),
        sk: "POOL".into(),
        kind: "agent_pool".into(),
        gsi1pk: group_pk(&record.pool.group),
        gsi1sk: format!("POOL#{}", record.pool.id),
        version,
        record: record.clone(),
    }
}

fn not_found(id: &str) -> StoreError {
    StoreError::NotFound {
        kind: "agent pool",
        id: id.to_string(),
    }
}

impl DynamoStore {
    async fn read_pool(&self, id: &str) -> Result<Option<PoolItem>, StoreError> {
        self.get_item(key(pool_pk(id), "POOL"))
            .await?
            .map(from_item)
            .transpose()
    }

    /// Writes `record` at `version` on condition `condition` (with `:v` the version before).
    async fn put_pool(
        &self,
        record: &AgentPoolRecord,
        version: u64,
        condition: &str,
    ) -> Result<bool, StoreError> {
        let item = checked_item("agent pool", &pool_item(record, version))?;
        let values = if version > 1 {
            HashMap::from([(":v".to_string(), n(version - 1))])
        } else {
            HashMap::new()
        };
        let write = self.put_with(item, condition, values);
        Ok(matches!(self.write_one(write).await?, Written::Done))
    }
}

#[async_trait]
impl AgentPoolStore for DynamoStore {
    async fn create_pool(
        &self,
        pool: &AgentPoolRecord,
    ) -> Result<Versioned<AgentPoolRecord>, StoreError> {
        if !self.put_pool(pool, 1, "attribute_not_exists(pk)").await? {
            return Err(StoreError::AlreadyExists {
                kind: "agent pool",
                id: pool.pool.id.clone(),
            });
        }
        Ok(Versioned {
            item: pool.clone(),
            version: 1,
        })
    }

    async fn get_pool(&self, id: &str) -> Result<Versioned<AgentPoolRecord>, StoreError> {
        let item = self.read_pool(id).await?.ok_or_else(|| not_found(id))?;
        Ok(Versioned {
            item: item.record,
            version: item.version,
        })
    }

    async fn list_pools(
        &self,
        group: &GroupPath,
    ) -> Result<Vec<Versioned<AgentPoolRecord>>, StoreError> {
        let items = self
            .query_pk(
                Some("gsi1"),
                "gsi1pk",
                &group_pk(group),
                Some(("gsi1sk", "POOL#")),
            )
            .await?;
        items
            .into_iter()
            .map(|i| {
                from_item::<PoolItem>(i).map(|p| Versioned {
                    item: p.record,
                    version: p.version,
                })
            })
            .collect()
    }

    async fn update_pool(
        &self,
        pool: &AgentPoolRecord,
        expected: Option<u64>,
    ) -> Result<Versioned<AgentPoolRecord>, StoreError> {
        let id = &pool.pool.id;
        let current = self.read_pool(id).await?.ok_or_else(|| not_found(id))?;
        Self::version_check("agent pool", id.clone(), expected, current.version)?;
        let version = current.version + 1;
        if !self.put_pool(pool, version, "version = :v").await? {
            let actual = self.read_pool(id).await?.ok_or_else(|| not_found(id))?;
            return Err(StoreError::VersionMismatch {
                kind: "agent pool",
                id: id.clone(),
                expected: current.version,
                actual: actual.version,
            });
        }
        Ok(Versioned {
            item: pool.clone(),
            version,
        })
    }

    async fn record_pool_claim(&self, id: &str, at: DateTime<Utc>) -> Result<(), StoreError> {
        // RFC 3339 UTC texts of one width order as their times.
        let at = at.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true);
        let res = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key(pool_pk(id), "POOL")))
            .update_expression("SET last_claim_at = :at")
            .condition_expression(
                "attribute_exists(pk) AND (attribute_not_exists(last_claim_at) OR last_claim_at < :at)",
            )
            .expression_attribute_values(":at", s(at))
            .send()
            .await;
        match res {
            Ok(_) => Ok(()),
            // Gone, or a later claim is recorded already.
            Err(e) if condition_failed(&e) => match self.read_pool(id).await? {
                None => Err(not_found(id)),
                Some(_) => Ok(()),
            },
            Err(e) => Err(aws("dynamodb", e)),
        }
    }

    async fn delete_pool(&self, id: &str, expected: Option<u64>) -> Result<(), StoreError> {
        let current = self.read_pool(id).await?.ok_or_else(|| not_found(id))?;
        Self::version_check("agent pool", id.to_string(), expected, current.version)?;
        let res = self
            .write_one(self.delete(
                key(pool_pk(id), "POOL"),
                "version = :v",
                HashMap::from([(":v".to_string(), n(current.version))]),
            ))
            .await?;
        match res {
            Written::Done => Ok(()),
            Written::ConditionFailed => match self.read_pool(id).await? {
                None => Err(not_found(id)),
                Some(p) => Err(StoreError::VersionMismatch {
                    kind: "agent pool",
                    id: id.to_string(),
                    expected: current.version,
                    actual: p.version,
                }),
            },
        }
    }
}
