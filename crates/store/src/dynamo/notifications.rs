//! Notification destinations: one item per destination under its group's partition
//! (`GROUP#<group>`, `NOTIFY#<name>`), the record as JSON text in `body`, its health apart
//! in `health` (so health never bumps the version), and its sequence of deliveries in
//! `seq`. Its history is a ring of [`HISTORY_LENGTH`] items (`NOTIFYLOG#<group>:<name>@<the
//! destination's creation, in milliseconds>`, `SLOT#<nnn>`), each written on condition that
//! no newer delivery holds its slot, each expiring 30 days after its last attempt.

use super::Written;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sortie_core::GroupPath;
use std::collections::HashMap;

use super::items::{from_item, to_item};
use super::keys::{group_pk, key};
use super::{condition_failed, n, s, DynamoStore, Item};
use crate::error::aws;
use crate::notifications::HISTORY_LENGTH;
use crate::{
    DeliveryRecord, DestinationHealth, DestinationRecord, NotificationStore, StoreError, Versioned,
};

const KIND: &str = "notification destination";

/// How long a history item outlives its last attempt (the table's TTL, `expires_at`):
/// a deleted destination's leftovers go by themselves.
const HISTORY_DAYS: i64 = 30;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct DestinationItem {
    pk: String,
    sk: String,
    kind: String,
    version: u64,
    updated_at: DateTime<Utc>,
    /// The record without its health, as JSON text.
    body: String,
    /// The health, as JSON text (absent: healthy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    health: Option<String>,
    /// The last delivery's `seq`.
    #[serde(default)]
    seq: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct SlotItem {
    pk: String,
    sk: String,
    kind: String,
    seq: u64,
    /// The delivery, as JSON text.
    body: String,
    /// Seconds since the epoch: the table's TTL.
    expires_at: i64,
}

fn sk(name: &str) -> String {
    format!("NOTIFY#{name}")
}

fn destination_key(group: &GroupPath, name: &str) -> Item {
    key(group_pk(group), &sk(name))
}

fn id(group: &GroupPath, name: &str) -> String {
    format!("{}:{name}", group.as_str())
}

fn history_pk(destination: &DestinationRecord) -> String {
    format!(
        "NOTIFYLOG#{}:{}@{}",
        destination.group.as_str(),
        destination.name,
        destination.created_at.timestamp_millis()
    )
}

fn invalid(problem: String) -> StoreError {
    StoreError::Invalid {
        path: "notification_destination".into(),
        problem,
    }
}

fn json<T: Serialize>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| invalid(e.to_string()))
}

fn item(record: &DestinationRecord, version: u64) -> Result<Item, StoreError> {
    let mut without_health = record.clone();
    without_health.health = DestinationHealth::default();
    Ok(to_item(&DestinationItem {
        pk: group_pk(&record.group),
        sk: sk(&record.name),
        kind: "notification_destination".into(),
        version,
        updated_at: Utc::now(),
        body: json(&without_health)?,
        health: None,
        seq: 0,
    }))
}

fn decode(i: Item) -> Result<Versioned<DestinationRecord>, StoreError> {
    let item: DestinationItem = from_item(i)?;
    let mut record: DestinationRecord = serde_json::from_str(&item.body).map_err(|e| {
        invalid(format!(
            "stored destination `{}` is unreadable: {e}",
            item.sk
        ))
    })?;
    record.health = match &item.health {
        Some(text) => serde_json::from_str(text)
            .map_err(|e| invalid(format!("stored health of `{}` is unreadable: {e}", item.sk)))?,
        None => DestinationHealth::default(),
    };
    Ok(Versioned {
        item: record,
        version: item.version,
    })
}

impl DynamoStore {
    async fn read_destination(
        &self,
        group: &GroupPath,
        name: &str,
    ) -> Result<Option<Versioned<DestinationRecord>>, StoreError> {
        self.get_item(destination_key(group, name))
            .await?
            .map(decode)
            .transpose()
    }

    /// Why a write on condition of `expected` failed: the destination is gone, or another
    /// write moved its version.
    async fn lost_race(&self, group: &GroupPath, name: &str, expected: u64) -> StoreError {
        match self.read_destination(group, name).await {
            Ok(None) => Self::not_found(group, name),
            Ok(Some(now)) => StoreError::VersionMismatch {
                kind: KIND,
                id: id(group, name),
                expected,
                actual: now.version,
            },
            Err(e) => e,
        }
    }

    fn not_found(group: &GroupPath, name: &str) -> StoreError {
        StoreError::NotFound {
            kind: KIND,
            id: id(group, name),
        }
    }
}

#[async_trait]
impl NotificationStore for DynamoStore {
    async fn create_destination(
        &self,
        record: &DestinationRecord,
    ) -> Result<Versioned<DestinationRecord>, StoreError> {
        let result = self
            .write_one(self.put_with(item(record, 1)?, "attribute_not_exists(pk)", Item::new()))
            .await?;
        match result {
            Written::Done => Ok(Versioned {
                item: DestinationRecord {
                    health: DestinationHealth::default(),
                    ..record.clone()
                },
                version: 1,
            }),
            Written::ConditionFailed => Err(StoreError::AlreadyExists {
                kind: KIND,
                id: id(&record.group, &record.name),
            }),
        }
    }

    async fn get_destination(
        &self,
        group: &GroupPath,
        name: &str,
    ) -> Result<Versioned<DestinationRecord>, StoreError> {
        self.read_destination(group, name)
            .await?
            .ok_or_else(|| Self::not_found(group, name))
    }

    async fn list_destinations(
        &self,
        group: &GroupPath,
    ) -> Result<Vec<Versioned<DestinationRecord>>, StoreError> {
        let items = self
            .query_pk(None, "pk", &group_pk(group), Some(("sk", "NOTIFY#")))
            .await?;
        items.into_iter().map(decode).collect()
    }

    async fn update_destination(
        &self,
        record: &DestinationRecord,
        expected: Option<u64>,
    ) -> Result<Versioned<DestinationRecord>, StoreError> {
        let (group, name) = (&record.group, record.name.as_str());
        let current = self.get_destination(group, name).await?;
        Self::version_check(KIND, id(group, name), expected, current.version)?;
        let version = current.version + 1;
        let mut without_health = record.clone();
        without_health.health = DestinationHealth::default();
        let result = self
            .write_one(self.update(
                destination_key(group, name),
                "SET body = :body, version = :next, updated_at = :now",
                "version = :current",
                HashMap::from([
                    (":body".to_string(), s(json(&without_health)?)),
                    (":next".to_string(), n(version)),
                    (":current".to_string(), n(current.version)),
                    (":now".to_string(), s(Utc::now().to_rfc3339())),
                ]),
                HashMap::new(),
            ))
            .await?;
        match result {
            Written::Done => Ok(Versioned {
                item: DestinationRecord {
                    health: current.item.health,
                    ..record.clone()
                },
                version,
            }),
            Written::ConditionFailed => Err(self.lost_race(group, name, current.version).await),
        }
    }

    async fn delete_destination(
        &self,
        group: &GroupPath,
        name: &str,
        expected: Option<u64>,
    ) -> Result<(), StoreError> {
        let current = self.get_destination(group, name).await?;
        Self::version_check(KIND, id(group, name), expected, current.version)?;
        let result = self
            .write_one(self.delete(
                destination_key(group, name),
                "version = :current",
                HashMap::from([(":current".to_string(), n(current.version))]),
            ))
            .await?;
        match result {
            Written::Done => {}
            Written::ConditionFailed => {
                return Err(self.lost_race(group, name, current.version).await)
            }
        }
        // Its history, at most HISTORY_LENGTH items: what a failure here leaves, the TTL
        // takes, and a destination made again under the name starts its own history.
        let slots = self
            .query_pk(None, "pk", &history_pk(&current.item), None)
            .await?;
        for slot in slots {
            let key: Item = slot
                .into_iter()
                .filter(|(k, _)| k == "pk" || k == "sk")
                .collect();
            self.client
                .delete_item()
                .table_name(&self.table)
                .set_key(Some(key))
                .send()
                .await
                .map_err(|e| aws("dynamodb", e))?;
        }
        Ok(())
    }

    async fn set_destination_health(
        &self,
        group: &GroupPath,
        name: &str,
        health: &DestinationHealth,
    ) -> Result<(), StoreError> {
        let result = self
            .write_one(self.update(
                destination_key(group, name),
                "SET health = :health",
                "attribute_exists(pk)",
                HashMap::from([(":health".to_string(), s(json(health)?))]),
                HashMap::new(),
            ))
            .await?;
        match result {
            Written::Done => Ok(()),
            Written::ConditionFailed => Err(Self::not_found(group, name)),
        }
    }

    async fn next_delivery_seq(&self, group: &GroupPath, name: &str) -> Result<u64, StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(destination_key(group, name)))
            .update_expression("SET seq = if_not_exists(seq, :zero) + :one")
            .condition_expression("attribute_exists(pk)")
            .expression_attribute_values(":zero", n(0))
            .expression_attribute_values(":one", n(1))
            .return_values(aws_sdk_dynamodb::types::ReturnValue::UpdatedNew)
            .send()
            .await;
        match result {
            Ok(out) => out
                .attributes()
                .and_then(|a| a.get("seq"))
                .and_then(|v| v.as_n().ok())
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| invalid("the delivery sequence is unreadable".into())),
            Err(e) if condition_failed(&e) => Err(Self::not_found(group, name)),
            Err(e) => Err(aws("dynamodb", e)),
        }
    }

    async fn put_delivery(
        &self,
        destination: &DestinationRecord,
        delivery: &DeliveryRecord,
    ) -> Result<bool, StoreError> {
        let slot = SlotItem {
            pk: history_pk(destination),
            sk: format!("SLOT#{:03}", delivery.slot()),
            kind: "notification_delivery".into(),
            seq: delivery.seq,
            body: json(delivery)?,
            expires_at: (delivery.attempted_at + chrono::Duration::days(HISTORY_DAYS)).timestamp(),
        };
        let result = self
            .write_one(self.put_with(
                to_item(&slot),
                "attribute_not_exists(pk) OR seq <= :seq",
                HashMap::from([(":seq".to_string(), n(delivery.seq))]),
            ))
            .await?;
        match result {
            Written::Done => Ok(true),
            Written::ConditionFailed => Ok(false),
        }
    }

    async fn deliveries(
        &self,
        destination: &DestinationRecord,
    ) -> Result<Vec<DeliveryRecord>, StoreError> {
        let items = self
            .query_pk(None, "pk", &history_pk(destination), None)
            .await?;
        let mut out = Vec::with_capacity(items.len());
        for i in items {
            let slot: SlotItem = from_item(i)?;
            out.push(
                serde_json::from_str::<DeliveryRecord>(&slot.body).map_err(|e| {
                    invalid(format!("stored delivery `{}` is unreadable: {e}", slot.sk))
                })?,
            );
        }
        out.sort_by_key(|d| std::cmp::Reverse(d.seq));
        out.truncate(HISTORY_LENGTH);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_history_belongs_to_one_destination_and_has_a_hundred_slots() {
        let record: DestinationRecord = serde_json::from_value(serde_json::json!({
            "group": "acme/web", "name": "ops", "type": "webhook",
            "url": "https://hooks.example.com/x", "created_by": "alice",
            "created_at": "2026-11-30T00:00:00Z",
        }))
        .unwrap();
        assert_eq!(history_pk(&record), "NOTIFYLOG#acme/web:ops@1795996800000");
        let mut again = record.clone();
        again.created_at += chrono::Duration::milliseconds(1);
        assert_ne!(history_pk(&record), history_pk(&again));
    }
}
