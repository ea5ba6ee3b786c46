//! Notification destinations by (group, name), each with its version, its sequence of
//! deliveries and its ring of [`HISTORY_LENGTH`] slots.

use std::collections::BTreeMap;

use async_trait::async_trait;
use sortie_core::GroupPath;

use super::{version_check, MemoryStore};
use crate::notifications::HISTORY_LENGTH;
use crate::{
    DeliveryRecord, DestinationHealth, DestinationRecord, NotificationStore, StoreError, Versioned,
};

const KIND: &str = "notification destination";

/// One destination: its record and version, its last `seq`.
#[derive(Debug)]
struct Entry {
    record: DestinationRecord,
    version: u64,
    seq: u64,
}

/// The destinations, by (group, name); their histories' slots, by (group, name, when the
/// destination was made), as the table keeps them.
#[derive(Debug, Default)]
pub(super) struct NotificationState {
    destinations: BTreeMap<(String, String), Entry>,
    histories: BTreeMap<(String, String, i64), BTreeMap<u64, DeliveryRecord>>,
}

fn history_key(destination: &DestinationRecord) -> (String, String, i64) {
    (
        destination.group.as_str().to_string(),
        destination.name.clone(),
        destination.created_at.timestamp_millis(),
    )
}

fn key(group: &GroupPath, name: &str) -> (String, String) {
    (group.as_str().to_string(), name.to_string())
}

fn id(group: &GroupPath, name: &str) -> String {
    format!("{}:{name}", group.as_str())
}

fn not_found(group: &GroupPath, name: &str) -> StoreError {
    StoreError::NotFound {
        kind: KIND,
        id: id(group, name),
    }
}

fn entry_mut<'a>(
    st: &'a mut super::State,
    group: &GroupPath,
    name: &str,
) -> Result<&'a mut Entry, StoreError> {
    st.notifications
        .destinations
        .get_mut(&key(group, name))
        .ok_or_else(|| not_found(group, name))
}

#[async_trait]
impl NotificationStore for MemoryStore {
    async fn create_destination(
        &self,
        record: &DestinationRecord,
    ) -> Result<Versioned<DestinationRecord>, StoreError> {
        let mut st = self.lock();
        let k = key(&record.group, &record.name);
        if st.notifications.destinations.contains_key(&k) {
            return Err(StoreError::AlreadyExists {
                kind: KIND,
                id: id(&record.group, &record.name),
            });
        }
        st.notifications.destinations.insert(
            k,
            Entry {
                record: record.clone(),
                version: 1,
                seq: 0,
            },
        );
        let out = Versioned {
            item: record.clone(),
            version: 1,
        };
        st.audited();
        Ok(out)
    }

    async fn get_destination(
        &self,
        group: &GroupPath,
        name: &str,
    ) -> Result<Versioned<DestinationRecord>, StoreError> {
        let st = self.lock();
        st.notifications
            .destinations
            .get(&key(group, name))
            .map(|e| Versioned {
                item: e.record.clone(),
                version: e.version,
            })
            .ok_or_else(|| not_found(group, name))
    }

    async fn list_destinations(
        &self,
        group: &GroupPath,
    ) -> Result<Vec<Versioned<DestinationRecord>>, StoreError> {
        let st = self.lock();
        let g = group.as_str().to_string();
        Ok(st
            .notifications
            .destinations
            .range((g.clone(), String::new())..)
            .take_while(|((owner, _), _)| *owner == g)
            .map(|(_, e)| Versioned {
                item: e.record.clone(),
                version: e.version,
            })
            .collect())
    }

    async fn update_destination(
        &self,
        record: &DestinationRecord,
        expected: Option<u64>,
    ) -> Result<Versioned<DestinationRecord>, StoreError> {
        let mut st = self.lock();
        let Some(e) = st
            .notifications
            .destinations
            .get_mut(&key(&record.group, &record.name))
        else {
            return Err(not_found(&record.group, &record.name));
        };
        version_check(KIND, id(&record.group, &record.name), expected, e.version)?;
        let health = e.record.health.clone();
        e.record = DestinationRecord {
            health,
            ..record.clone()
        };
        e.version += 1;
        let out = Versioned {
            item: e.record.clone(),
            version: e.version,
        };
        st.audited();
        Ok(out)
    }

    async fn delete_destination(
        &self,
        group: &GroupPath,
        name: &str,
        expected: Option<u64>,
    ) -> Result<(), StoreError> {
        let mut st = self.lock();
        let k = key(group, name);
        let Some(e) = st.notifications.destinations.get(&k) else {
            return Err(not_found(group, name));
        };
        version_check(KIND, id(group, name), expected, e.version)?;
        let history = history_key(&e.record);
        st.notifications.destinations.remove(&k);
        st.notifications.histories.remove(&history);
        st.audited();
        Ok(())
    }

    async fn set_destination_health(
        &self,
        group: &GroupPath,
        name: &str,
        health: &DestinationHealth,
    ) -> Result<(), StoreError> {
        let mut st = self.lock();
        let e = entry_mut(&mut st, group, name)?;
        e.record.health = health.clone();
        Ok(())
    }

    async fn next_delivery_seq(&self, group: &GroupPath, name: &str) -> Result<u64, StoreError> {
        let mut st = self.lock();
        let e = entry_mut(&mut st, group, name)?;
        e.seq += 1;
        Ok(e.seq)
    }

    async fn put_delivery(
        &self,
        destination: &DestinationRecord,
        delivery: &DeliveryRecord,
    ) -> Result<bool, StoreError> {
        let mut st = self.lock();
        let slots = st
            .notifications
            .histories
            .entry(history_key(destination))
            .or_default();
        let slot = delivery.slot();
        if slots.get(&slot).is_some_and(|held| held.seq > delivery.seq) {
            return Ok(false);
        }
        slots.insert(slot, delivery.clone());
        Ok(true)
    }

    async fn deliveries(
        &self,
        destination: &DestinationRecord,
    ) -> Result<Vec<DeliveryRecord>, StoreError> {
        let st = self.lock();
        let mut out: Vec<DeliveryRecord> = st
            .notifications
            .histories
            .get(&history_key(destination))
            .map(|slots| slots.values().cloned().collect())
            .unwrap_or_default();
        out.sort_by_key(|d| std::cmp::Reverse(d.seq));
        out.truncate(HISTORY_LENGTH);
        Ok(out)
    }
}
