//! Notification destinations (issue 44), each with its health and the history of its
//! deliveries: a ring of [`HISTORY_LENGTH`] slots, so the history is bounded by
//! construction.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sortie_core::notify::DestinationSpec;
use sortie_core::GroupPath;

pub use sortie_core::notify::delivery::HISTORY_LENGTH;

use crate::{StoreError, Versioned};

/// A destination as stored: where it is, what it is, its secret's ARN and its health.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DestinationRecord {
    /// The group it belongs to (it hears the environments at or below it).
    pub group: GroupPath,
    /// Its name, unique in the group.
    pub name: String,
    /// What it is and what it wants.
    #[serde(flatten)]
    pub spec: DestinationSpec,
    /// The Secrets Manager secret holding its signing secret (a webhook) or its URL (Slack).
    /// Never the secret itself; never shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_arn: Option<String>,
    /// Whether its last delivery succeeded.
    #[serde(default)]
    pub health: DestinationHealth,
    /// Who made it.
    pub created_by: String,
    /// When.
    pub created_at: DateTime<Utc>,
}

/// A destination's health: unhealthy from the first delivery given up on, until one
/// succeeds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DestinationHealth {
    /// False once a delivery was given up on, until one succeeds.
    #[serde(default = "yes")]
    pub healthy: bool,
    /// Since when it fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failing_since: Option<DateTime<Utc>>,
    /// Why its last delivery was given up on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failure: Option<String>,
}

fn yes() -> bool {
    true
}

impl Default for DestinationHealth {
    /// Healthy: no delivery has failed yet.
    fn default() -> Self {
        Self {
            healthy: true,
            failing_since: None,
            last_failure: None,
        }
    }
}

/// Where a delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum DeliveryState {
    /// A receiver answered 2xx.
    Delivered,
    /// It failed and will be tried again.
    Retrying,
    /// It failed for good.
    GaveUp,
}

/// One delivery in a destination's history, as its last attempt left it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DeliveryRecord {
    /// Its place in the destination's sequence of deliveries (its slot is this modulo
    /// [`HISTORY_LENGTH`]; a newer delivery in the slot wins over an older one's retry).
    pub seq: u64,
    /// The delivery's id (`X-Sortie-Delivery`), the same on every attempt.
    pub id: String,
    /// The event's type, such as `sortie.job.ended`.
    pub event_type: String,
    /// When the event happened.
    pub event_time: DateTime<Utc>,
    /// The event's environment, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<String>,
    /// How many attempts were made.
    pub attempts: u32,
    /// When the last attempt was made.
    pub attempted_at: DateTime<Utc>,
    /// The last answer's status, if there was an answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Where it stands.
    pub state: DeliveryState,
    /// The last attempt's time to its answer, in milliseconds.
    pub latency_ms: u64,
    /// The first kilobyte of the last answer.
    #[serde(default)]
    pub answer: String,
    /// Why the last attempt failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// EventBridge's id of the event (a redelivery sends the same event again).
    #[serde(default)]
    pub event_id: String,
    /// The event's detail, kept for a redelivery: `null` when it was larger than
    /// [`KEPT_DETAIL_BYTES`] (such a delivery cannot be redelivered). Events never carry
    /// secrets.
    #[serde(default)]
    pub detail: serde_json::Value,
}

/// The largest event detail a delivery's history keeps, in bytes of JSON.
pub const KEPT_DETAIL_BYTES: usize = 8 * 1024;

impl DeliveryRecord {
    /// Its slot in the ring.
    pub fn slot(&self) -> u64 {
        self.seq % HISTORY_LENGTH as u64
    }
}

/// Destinations and their deliveries.
#[async_trait]
pub trait NotificationStore: Send + Sync {
    /// Creates a destination; `AlreadyExists` if its name is taken in its group.
    async fn create_destination(
        &self,
        record: &DestinationRecord,
    ) -> Result<Versioned<DestinationRecord>, StoreError>;
    /// Reads one destination.
    async fn get_destination(
        &self,
        group: &GroupPath,
        name: &str,
    ) -> Result<Versioned<DestinationRecord>, StoreError>;
    /// The destinations of exactly this group, by name.
    async fn list_destinations(
        &self,
        group: &GroupPath,
    ) -> Result<Vec<Versioned<DestinationRecord>>, StoreError>;
    /// Replaces a destination (its specification, its secret's ARN), checking its version
    /// when given; its health is kept.
    async fn update_destination(
        &self,
        record: &DestinationRecord,
        expected: Option<u64>,
    ) -> Result<Versioned<DestinationRecord>, StoreError>;
    /// Deletes a destination and its history, checking its version when given.
    async fn delete_destination(
        &self,
        group: &GroupPath,
        name: &str,
        expected: Option<u64>,
    ) -> Result<(), StoreError>;
    /// Records a destination's health; its version stays (health is not configuration).
    async fn set_destination_health(
        &self,
        group: &GroupPath,
        name: &str,
        health: &DestinationHealth,
    ) -> Result<(), StoreError>;
    /// The next number in the destination's sequence of deliveries (1, 2, …): a new
    /// delivery's `seq`.
    async fn next_delivery_seq(&self, group: &GroupPath, name: &str) -> Result<u64, StoreError>;
    /// Writes a delivery in its slot of `destination`'s history, unless a newer delivery (a
    /// higher `seq`) holds it: true when written. A history belongs to one destination: a
    /// destination deleted and made again under the same name starts a new one.
    async fn put_delivery(
        &self,
        destination: &DestinationRecord,
        delivery: &DeliveryRecord,
    ) -> Result<bool, StoreError>;
    /// `destination`'s history, newest first: at most [`HISTORY_LENGTH`] deliveries.
    async fn deliveries(
        &self,
        destination: &DestinationRecord,
    ) -> Result<Vec<DeliveryRecord>, StoreError>;
}
