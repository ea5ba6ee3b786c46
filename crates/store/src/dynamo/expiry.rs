//! The expiry due list: one item per expiring environment beside its environment item
//! (`ENV#<path>` / `EXPIRY`), in the sparse gsi3 `EXPIRY` partition by `<due>#<path>`,
//! with a version `v` that every write checks; and the environment item's `destroyed`.

use std::collections::HashMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sortie_core::expiry::Destroyed;
use sortie_core::EnvPath;

use super::items::from_item;
use super::keys::{env_key, key};
use super::{attribute, condition_failed, n, s, DynamoStore, Item, Written, RETRIES};
use crate::error::aws;
use crate::expiry::{expiry_due_bound, expiry_sk};
use crate::{ExpiryEntry, ExpiryPage, ExpiryStore, StoreError, Versioned, MAX_EXPIRY_PAGE};

/// gsi3 partition of the expiry due list.
const EXPIRY: &str = "EXPIRY";

fn expiry_key(path: &EnvPath) -> Item {
    key(format!("ENV#{path}"), EXPIRY)
}

fn entry_item(entry: &ExpiryEntry, version: u64) -> Item {
    let mut item: Item =
        serde_dynamo::to_item(entry).expect("domain values always serialise to DynamoDB items");
    item.extend(expiry_key(&entry.path));
    item.insert("kind".into(), s("expiry"));
    item.insert("gsi3pk".into(), s(EXPIRY));
    item.insert("gsi3sk".into(), s(expiry_sk(entry.due, &entry.path)));
    item.insert("v".into(), n(version));
    item
}

fn entry_of(item: Item) -> Result<Versioned<ExpiryEntry>, StoreError> {
    let version = item
        .get("v")
        .and_then(|v| v.as_n().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    Ok(Versioned {
        item: from_item(item)?,
        version,
    })
}

impl DynamoStore {
    /// Writes `entry` at `version`, on condition that the stored one is at `expected`
    /// (`None`: that there is none): `false` when it is not.
    async fn put_entry(
        &self,
        entry: &ExpiryEntry,
        expected: Option<u64>,
    ) -> Result<bool, StoreError> {
        let item = entry_item(entry, expected.unwrap_or(0) + 1);
        let write = match expected {
            None => self.put(item, "attribute_not_exists(pk)"),
            Some(v) => self.put_with(item, "v = :v", HashMap::from([(":v".to_string(), n(v))])),
        };
        Ok(matches!(self.write_one(write).await?, Written::Done))
    }
}

#[async_trait]
impl ExpiryStore for DynamoStore {
    async fn set_expiry(
        &self,
        path: &EnvPath,
        expires_at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        for _ in 0..RETRIES {
            let held = self.get_expiry(path).await?;
            let written = match held {
                Some(h) if h.item.expires_at == expires_at => return Ok(()),
                Some(h) => {
                    let entry = ExpiryEntry {
                        destroy_job: h.item.destroy_job,
                        ..ExpiryEntry::new(path.clone(), expires_at)
                    };
                    self.put_entry(&entry, Some(h.version)).await?
                }
                None => {
                    self.put_entry(&ExpiryEntry::new(path.clone(), expires_at), None)
                        .await?
                }
            };
            if written {
                return Ok(());
            }
        }
        Err(StoreError::VersionMismatch {
            kind: "expiry",
            id: path.to_string(),
            expected: 0,
            actual: 0,
        })
    }

    async fn get_expiry(
        &self,
        path: &EnvPath,
    ) -> Result<Option<Versioned<ExpiryEntry>>, StoreError> {
        self.get_item(expiry_key(path))
            .await?
            .map(entry_of)
            .transpose()
    }

    async fn remove_expiry(&self, path: &EnvPath) -> Result<(), StoreError> {
        self.client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(expiry_key(path)))
            .send()
            .await
            .map_err(|e| aws("dynamodb", e))?;
        Ok(())
    }

    async fn due_expiries(
        &self,
        now: DateTime<Utc>,
        limit: u32,
        after: Option<&str>,
    ) -> Result<ExpiryPage, StoreError> {
        let limit = limit.clamp(1, MAX_EXPIRY_PAGE);
        // `after` is inclusive in BETWEEN: one more is read and the cursor's own dropped.
        let (condition, low) = match after {
            Some(a) => ("gsi3pk = :e AND gsi3sk BETWEEN :after AND :due", Some(a)),
            None => ("gsi3pk = :e AND gsi3sk < :due", None),
        };
        let mut q = self
            .client
            .query()
            .table_name(&self.table)
            .index_name("gsi3")
            .key_condition_expression(condition)
            .expression_attribute_values(":e", s(EXPIRY))
            .expression_attribute_values(":due", s(expiry_due_bound(now)))
            .limit(i32::try_from(limit + 1).unwrap_or(i32::MAX));
        if let Some(a) = low {
            q = q.expression_attribute_values(":after", s(a));
        }
        let out = q.send().await.map_err(|e| aws("dynamodb", e))?;
        let mut rows: Vec<(String, Item)> = out
            .items
            .unwrap_or_default()
            .into_iter()
            .filter_map(|item| {
                let sk = item.get("gsi3sk")?.as_s().ok()?.clone();
                Some((sk, item))
            })
            .filter(|(sk, _)| after.is_none_or(|a| sk.as_str() > a))
            .collect();
        let more = rows.len() > limit as usize || out.last_evaluated_key.is_some();
        rows.truncate(limit as usize);
        let next = if more {
            rows.last().map(|(sk, _)| sk.clone())
        } else {
            None
        };
        let entries = rows
            .into_iter()
            .filter_map(|(_, item)| match entry_of(item) {
                Ok(e) => Some(e),
                Err(e) => {
                    tracing::warn!(error = %e, "an unreadable expiry entry is skipped by the sweep");
                    None
                }
            })
            .collect();
        Ok(ExpiryPage { entries, next })
    }

    async fn update_expiry(&self, entry: &ExpiryEntry, expected: u64) -> Result<bool, StoreError> {
        self.put_entry(entry, Some(expected)).await
    }

    async fn mark_destroyed(
        &self,
        path: &EnvPath,
        destroyed: Option<&Destroyed>,
    ) -> Result<(), StoreError> {
        let mut update = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(env_key(path)))
            .condition_expression("attribute_exists(pk)");
        update = match destroyed {
            Some(d) => update
                .update_expression("SET destroyed = :d")
                .set_expression_attribute_values(Some(HashMap::from([(
                    ":d".to_string(),
                    attribute(d),
                )]))),
            None => update.update_expression("REMOVE destroyed"),
        };
        match update.send().await {
            Ok(_) => Ok(()),
            Err(e) if condition_failed(&e) => Err(StoreError::NotFound {
                kind: "environment",
                id: path.to_string(),
            }),
            Err(e) => Err(aws("dynamodb", e)),
        }
    }
}
