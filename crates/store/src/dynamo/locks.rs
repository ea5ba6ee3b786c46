//! Environment locks (the environment item's `lock`) and group settings items
//! (`GROUP#<group>` / `SETTINGS`: `freeze`, `expiry`): each write one conditional
//! `UpdateItem`, the settings of a group and its ancestors one `BatchGetItem`.

use std::collections::HashMap;

use async_trait::async_trait;
use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes, ReturnValue};
use sortie_core::expiry::ExpiryLimits;
use sortie_core::lock::EnvLock;
use sortie_core::{EnvPath, GroupPath};

use super::keys::{env_key, group_pk, key};
use super::{attribute, condition_failed, s, DynamoStore, Item, Written, RETRIES};
use crate::error::aws;
use crate::locks::{root_freeze_refused, settings_groups};
use crate::{GroupSettings, LockOutcome, LockStore, StoreError};

/// The sort key of a group's settings item, in the group's partition beside its runners.
pub(super) const SETTINGS_SK: &str = "SETTINGS";

fn settings_key(group: &GroupPath) -> Item {
    key(group_pk(group), SETTINGS_SK)
}

fn not_found(path: &EnvPath) -> StoreError {
    StoreError::NotFound {
        kind: "environment",
        id: path.to_string(),
    }
}

/// The lock held in `attr` of `item`, if it reads as one.
fn lock_in(item: &Item, attr: &str) -> Result<Option<EnvLock>, StoreError> {
    item.get(attr)
        .map(|v| {
            serde_dynamo::from_attribute_value(v.clone()).map_err(|e| StoreError::Corrupt {
                key: attr.to_string(),
                message: e.to_string(),
            })
        })
        .transpose()
}

impl DynamoStore {
    /// Removes `attr` when it still holds `held` (read by the caller), with the audit
    /// scope's entry: `None`, and nothing written, when nothing was held (a repeat).
    async fn remove_held(
        &self,
        key: Item,
        attr: &str,
        held: Option<EnvLock>,
    ) -> Result<Option<EnvLock>, StoreError> {
        let Some(held) = held else {
            return Ok(None);
        };
        let write = self.update(
            key,
            "REMOVE #l",
            "#l.#at = :at AND #l.#by = :by",
            HashMap::from([
                (":at".to_string(), attribute(&held.at)),
                (":by".to_string(), s(held.by.clone())),
            ]),
            HashMap::from([
                ("#l".to_string(), attr.to_string()),
                ("#at".to_string(), "at".to_string()),
                ("#by".to_string(), "by".to_string()),
            ]),
        );
        match self.write_one(write).await? {
            Written::Done => Ok(Some(held)),
            // Removed, or replaced, meanwhile: this call removed nothing.
            Written::ConditionFailed => Ok(None),
        }
    }

    /// Reads one group's settings item, as stored.
    async fn read_settings(&self, group: &GroupPath) -> Result<Option<Item>, StoreError> {
        self.get_item(settings_key(group)).await
    }
}

#[async_trait]
impl LockStore for DynamoStore {
    async fn lock_environment(
        &self,
        path: &EnvPath,
        lock: &EnvLock,
    ) -> Result<LockOutcome, StoreError> {
        for _ in 0..RETRIES {
            let res = self
                .write_one(self.update(
                    env_key(path),
                    "SET #lock = :l",
                    "attribute_exists(pk) AND attribute_not_exists(#lock)",
                    HashMap::from([(":l".to_string(), attribute(lock))]),
                    HashMap::from([("#lock".to_string(), "lock".to_string())]),
                ))
                .await?;
            match res {
                Written::Done => return Ok(LockOutcome::Taken),
                Written::ConditionFailed => {
                    let item = self.get_item(env_key(path)).await?;
                    let Some(item) = item else {
                        return Err(not_found(path));
                    };
                    // Unlocked between the write and the read: try again.
                    if let Some(held) = lock_in(&item, "lock")? {
                        return Ok(LockOutcome::AlreadyHeld(held));
                    }
                }
            }
        }
        Err(contended("environment", path.to_string()))
    }

    async fn unlock_environment(&self, path: &EnvPath) -> Result<Option<EnvLock>, StoreError> {
        if crate::audit::pending() {
            let item = self
                .get_item(env_key(path))
                .await?
                .ok_or_else(|| not_found(path))?;
            return self
                .remove_held(env_key(path), "lock", lock_in(&item, "lock")?)
                .await;
        }
        let res = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(env_key(path)))
            .update_expression("REMOVE #lock")
            .condition_expression("attribute_exists(pk)")
            .expression_attribute_names("#lock", "lock")
            .return_values(ReturnValue::AllOld)
            .send()
            .await;
        match res {
            Ok(out) => lock_in(&out.attributes.unwrap_or_default(), "lock"),
            Err(e) if condition_failed(&e) => Err(not_found(path)),
            Err(e) => Err(aws("dynamodb", e)),
        }
    }

    async fn freeze_group(
        &self,
        group: &GroupPath,
        lock: &EnvLock,
    ) -> Result<LockOutcome, StoreError> {
        if group.is_root() {
            return Err(root_freeze_refused());
        }
        for _ in 0..RETRIES {
            let res = self
                .write_one(self.update(
                    settings_key(group),
                    "SET #f = :f, kind = :k, #g = :g",
                    "attribute_not_exists(#f)",
                    HashMap::from([
                        (":f".to_string(), attribute(lock)),
                        (":k".to_string(), s("group_settings")),
                        (":g".to_string(), s(group.as_str())),
                    ]),
                    HashMap::from([
                        ("#f".to_string(), "freeze".to_string()),
                        ("#g".to_string(), "group".to_string()),
                    ]),
                ))
                .await?;
            match res {
                Written::Done => return Ok(LockOutcome::Taken),
                Written::ConditionFailed => {
                    let item = self.read_settings(group).await?.unwrap_or_default();
                    if let Some(held) = lock_in(&item, "freeze")? {
                        return Ok(LockOutcome::AlreadyHeld(held));
                    }
                }
            }
        }
        Err(contended("group", group.to_string()))
    }

    async fn unfreeze_group(&self, group: &GroupPath) -> Result<Option<EnvLock>, StoreError> {
        if crate::audit::pending() {
            let item = self.read_settings(group).await?.unwrap_or_default();
            return self
                .remove_held(settings_key(group), "freeze", lock_in(&item, "freeze")?)
                .await;
        }
        let res = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(settings_key(group)))
            .update_expression("REMOVE #f")
            .condition_expression("attribute_exists(pk)")
            .expression_attribute_names("#f", "freeze")
            .return_values(ReturnValue::AllOld)
            .send()
            .await;
        match res {
            Ok(out) => lock_in(&out.attributes.unwrap_or_default(), "freeze"),
            // No settings item: nothing was frozen.
            Err(e) if condition_failed(&e) => Ok(None),
            Err(e) => Err(aws("dynamodb", e)),
        }
    }

    async fn set_group_expiry(
        &self,
        group: &GroupPath,
        expiry: &ExpiryLimits,
    ) -> Result<(), StoreError> {
        if group.is_root() {
            return Err(root_freeze_refused());
        }
        self.write_one(self.update(
            settings_key(group),
            "SET expiry = :e, kind = :k, #g = :g",
            "attribute_exists(pk) OR attribute_not_exists(pk)",
            HashMap::from([
                (":e".to_string(), attribute(expiry)),
                (":k".to_string(), s("group_settings")),
                (":g".to_string(), s(group.as_str())),
            ]),
            HashMap::from([("#g".to_string(), "group".to_string())]),
        ))
        .await?;
        Ok(())
    }

    async fn group_settings_over(
        &self,
        group: &GroupPath,
    ) -> Result<Vec<(GroupPath, GroupSettings)>, StoreError> {
        let groups = settings_groups(group);
        if groups.is_empty() {
            return Ok(vec![]);
        }
        // A path is at most a few dozen segments deep: one batch (of at most 100 keys).
        let keys: Vec<Item> = groups.iter().take(100).map(settings_key).collect();
        let mut request = HashMap::from([(
            self.table.clone(),
            KeysAndAttributes::builder()
                .set_keys(Some(keys))
                .consistent_read(true)
                .build()
                .expect("keys are set"),
        )]);
        let mut found: Vec<Item> = Vec::new();
        let mut done = false;
        for _ in 0..RETRIES {
            let out = self
                .client
                .batch_get_item()
                .set_request_items(Some(request))
                .send()
                .await
                .map_err(|e| aws("dynamodb", e))?;
            found.extend(
                out.responses
                    .unwrap_or_default()
                    .remove(&self.table)
                    .unwrap_or_default(),
            );
            match out.unprocessed_keys {
                Some(u) if !u.is_empty() => request = u,
                _ => {
                    done = true;
                    break;
                }
            }
        }
        if !done {
            // Never answer "not frozen" for a freeze that was not read.
            return Err(contended("group settings", group.to_string()));
        }
        let mut by_group: HashMap<String, GroupSettings> = HashMap::new();
        for item in found {
            let Some(AttributeValue::S(g)) = item.get("group").cloned() else {
                continue;
            };
            let settings = GroupSettings {
                freeze: lock_in(&item, "freeze")?,
                expiry: item
                    .get("expiry")
                    .map(|v| serde_dynamo::from_attribute_value(v.clone()))
                    .transpose()
                    .map_err(|e| StoreError::Corrupt {
                        key: format!("{}/{SETTINGS_SK}", group_pk(group)),
                        message: e.to_string(),
                    })?
                    .unwrap_or_default(),
            };
            by_group.insert(g, settings);
        }
        Ok(groups
            .into_iter()
            .filter_map(|g| {
                let s = by_group.remove(g.as_str())?;
                Some((g, s))
            })
            .collect())
    }
}

/// A conditional write that kept losing to concurrent changes: worth retrying later.
fn contended(kind: &str, id: String) -> StoreError {
    StoreError::Aws {
        service: "dynamodb",
        message: format!("{kind} `{id}` kept changing under a conditional write"),
        retryable: true,
    }
}
