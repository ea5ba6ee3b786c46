//! Notification destinations and their deliveries, as the API shows them: never a secret,
//! except a webhook's signing secret in the one answer that makes it (create, rotate).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sortie_core::notify::{EventKind, Target};
use sortie_store::{DeliveryRecord, DestinationHealth, DestinationRecord, Versioned};
use utoipa::ToSchema;

/// A destination's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum DestinationType {
    /// A signed POST to `url`.
    Webhook,
    /// A Slack incoming webhook (its URL is a secret, never shown).
    Slack,
}

/// A notification destination: where it is, what it is, what it wants and its health.
/// (Flat, not the stored specification flattened: a tagged enum flattened into an object
/// is an `allOf` of a `oneOf`, which OpenAPI generators cannot read.)
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Destination {
    /// The group it belongs to: it hears the environments at or below it.
    pub group: String,
    /// Its name, unique in the group.
    pub name: String,
    /// Free text shown to users.
    #[serde(default)]
    pub description: String,
    /// `webhook` or `slack`.
    pub r#type: DestinationType,
    /// A webhook's URL (a Slack destination's is a secret, never shown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The kinds of event sent; empty or absent: every kind.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<EventKind>,
    /// A glob over environment paths (`**`: every environment of the group).
    pub environments: String,
    /// Unhealthy from the first delivery given up on, until one succeeds.
    pub health: DestinationHealth,
    /// Its version, as its ETag carries it.
    pub version: u64,
    /// Who made it.
    pub created_by: String,
    /// When.
    pub created_at: DateTime<Utc>,
    /// A webhook's signing secret (`whsec_…`): only in the answer that made or rotated it,
    /// never again. Keep it: it verifies `X-Sortie-Signature`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signing_secret: Option<String>,
}

impl Destination {
    /// The view of `stored`, with the signing secret when it was just made.
    pub fn of(stored: Versioned<DestinationRecord>, signing_secret: Option<String>) -> Self {
        let d = stored.item;
        let (r#type, url) = match d.spec.target {
            Target::Webhook { url } => (DestinationType::Webhook, Some(url)),
            Target::Slack {} => (DestinationType::Slack, None),
        };
        Self {
            group: d.group.as_str().to_string(),
            name: d.name,
            description: d.spec.description,
            r#type,
            url,
            events: d.spec.filters.events,
            environments: d.spec.filters.environments,
            health: d.health,
            version: stored.version,
            created_by: d.created_by,
            created_at: d.created_at,
            signing_secret,
        }
    }
}

/// A destination as written (create and replace), YAML or JSON.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DestinationBody {
    /// `webhook` or `slack`.
    pub r#type: String,
    /// A webhook's `https://` URL (`http://` to loopback only in `sortie dev`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// A Slack incoming webhook's URL: required to make a `slack` destination, replaced when
    /// given to an update; kept as a secret, never shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slack_webhook_url: Option<String>,
    /// The kinds of event sent; empty or absent: every kind.
    #[serde(default)]
    pub events: Vec<sortie_core::notify::EventKind>,
    /// A glob over environment paths (`acme/payments/**`, `**/prod`); `**` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environments: Option<String>,
    /// Free text shown to users.
    #[serde(default)]
    pub description: String,
}

/// The destinations of one group.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DestinationList {
    /// By name.
    pub destinations: Vec<Destination>,
}

/// A destination's history: its last deliveries, newest first (at most 100).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DeliveryList {
    /// Newest first.
    pub deliveries: Vec<DeliveryRecord>,
}

/// One delivery made when asked (a test or a redelivery), as its one attempt left it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DeliveryAttempt {
    /// The delivery, as its history now holds it.
    pub delivery: DeliveryRecord,
}
