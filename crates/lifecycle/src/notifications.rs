//! Notification destinations of a group: create, read, list, update, delete, rotate a
//! webhook's signing secret, and the destinations an event reaches. The secrets (a
//! webhook's signing secret, a Slack webhook's URL) live in Secrets Manager; the store holds
//! their ARNs only.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use sortie_core::notify::{DestinationInput, EventKind, Target};
use sortie_core::{GroupPath, ValidationError};
use sortie_launch::JobSecrets;
use sortie_store::{DestinationHealth, DestinationRecord, Store, StoreError, Versioned};

/// The most destinations one group holds.
pub const MAX_DESTINATIONS_PER_GROUP: usize = 50;

/// The prefix of a webhook's signing secret (`whsec_` and 64 hex digits).
pub const SIGNING_SECRET_PREFIX: &str = "whsec_";

/// The notification service.
#[derive(Clone)]
pub struct Notifications {
    /// The repository.
    pub store: Arc<dyn Store>,
    /// Where the destinations' secrets are kept.
    pub secrets: Arc<dyn JobSecrets>,
    /// `sortie dev`: plain `http://` to loopback allowed.
    pub local: bool,
    /// Where a delivery given up on is published (`sortie.notification.failed`).
    pub bus: Arc<dyn crate::Bus>,
}

/// Why a destination was not read or written.
#[derive(Debug, thiserror::Error)]
pub enum NotificationRefusal {
    /// The document is not a valid destination.
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    /// One field is wrong in this context (a name, a missing secret, too many).
    #[error("{field}: {problem}")]
    Field {
        /// The field's path.
        field: String,
        /// What is wrong with it.
        problem: String,
    },
    /// Secrets Manager failed; its answer, quoted.
    #[error("the destination's secret could not be kept: {0}")]
    Secret(String),
    /// The store failed (`NotFound`, `AlreadyExists`, `VersionMismatch`, …).
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A destination just made or rotated, with its signing secret: shown once, never again.
/// Its `Debug` never shows the secret.
#[derive(Clone)]
pub struct WithSecret {
    /// The destination.
    pub destination: Versioned<DestinationRecord>,
    /// A webhook's signing secret (`whsec_…`), shown to its maker this once.
    pub signing_secret: Option<String>,
}

impl std::fmt::Debug for WithSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WithSecret")
            .field("destination", &self.destination)
            .field(
                "signing_secret",
                &self.signing_secret.as_ref().map(|_| "(not shown)"),
            )
            .finish()
    }
}

fn field(field: &str, problem: impl Into<String>) -> NotificationRefusal {
    NotificationRefusal::Field {
        field: field.into(),
        problem: problem.into(),
    }
}

/// A new Secrets Manager name for a secret of destination `name` of `group`: never used
/// before (a random part), so neither a destination made again under the name nor a
/// replaced secret meets a secret of before (Secrets Manager answers an existing name
/// with that secret, whatever it holds).
fn secret_name(group: &GroupPath, name: &str) -> String {
    let group = if group.is_root() { "-" } else { group.as_str() };
    format!(
        "sortie/notify/{group}/{name}/{}",
        sortie_core::tokens::random_hex(8)
    )
}

/// A new signing secret: `whsec_` and 64 hex digits from the OS random source.
fn new_signing_secret() -> String {
    format!(
        "{SIGNING_SECRET_PREFIX}{}",
        sortie_core::tokens::random_hex(32)
    )
}

impl Notifications {
    /// Keeps `value` as a new secret of destination `name` of `group`; its ARN.
    async fn keep_secret(
        &self,
        group: &GroupPath,
        name: &str,
        value: &str,
    ) -> Result<String, NotificationRefusal> {
        self.secrets
            .create(
                &secret_name(group, name),
                value,
                &[("sortie:kind", "notification")],
            )
            .await
            .map_err(NotificationRefusal::Secret)
    }

    /// The destinations of exactly `group`.
    pub async fn list(
        &self,
        group: &GroupPath,
    ) -> Result<Vec<Versioned<DestinationRecord>>, StoreError> {
        self.store.list_destinations(group).await
    }

    /// Destination `name` of `group`.
    pub async fn get(
        &self,
        group: &GroupPath,
        name: &str,
    ) -> Result<Versioned<DestinationRecord>, StoreError> {
        self.store.get_destination(group, name).await
    }

    /// Destination `name`'s last deliveries, newest first (at most
    /// [`sortie_store::HISTORY_LENGTH`]).
    pub async fn history(
        &self,
        group: &GroupPath,
        name: &str,
    ) -> Result<Vec<sortie_store::DeliveryRecord>, StoreError> {
        let destination = self.store.get_destination(group, name).await?;
        self.store.deliveries(&destination.item).await
    }

    /// Makes destination `name` in `group` from `body`, by `by` at `now`. A webhook gets a
    /// new signing secret, answered this once; a Slack destination needs its
    /// `slack_webhook_url`.
    pub async fn create(
        &self,
        group: &GroupPath,
        name: &str,
        body: &serde_json::Value,
        by: &str,
        now: DateTime<Utc>,
    ) -> Result<WithSecret, NotificationRefusal> {
        sortie_core::names::check_segment(name).map_err(|p| field("name", p))?;
        let input = DestinationInput::from_value(body, self.local)?;
        if self.store.list_destinations(group).await?.len() >= MAX_DESTINATIONS_PER_GROUP {
            return Err(field(
                "name",
                format!(
                    "group `{}` already holds {MAX_DESTINATIONS_PER_GROUP} notification destinations, the most one group may hold",
                    group.as_str()
                ),
            ));
        }
        let (value, signing_secret) = match (&input.spec.target, input.slack_webhook_url) {
            (Target::Webhook { .. }, _) => {
                let secret = new_signing_secret();
                (secret.clone(), Some(secret))
            }
            (Target::Slack {}, Some(url)) => (url, None),
            (Target::Slack {}, None) => {
                return Err(field(
                    "slack_webhook_url",
                    "is required to make a `slack` destination",
                ))
            }
        };
        let arn = self.keep_secret(group, name, &value).await?;
        let record = DestinationRecord {
            group: group.clone(),
            name: name.to_string(),
            spec: input.spec,
            secret_arn: Some(arn.clone()),
            health: DestinationHealth::default(),
            created_by: by.to_string(),
            created_at: now,
        };
        match self.store.create_destination(&record).await {
            Ok(destination) => Ok(WithSecret {
                destination,
                signing_secret,
            }),
            Err(e) => {
                // Nothing points at the secret: it goes (a failure here leaves a secret
                // tagged `sortie:kind=notification` and no destination).
                let _ = self.secrets.delete(&arn).await;
                Err(e.into())
            }
        }
    }

    /// Replaces destination `name`'s specification from `body`, checking its version when
    /// given. Its type cannot change (delete it and make it again); a Slack destination's
    /// URL is replaced when `slack_webhook_url` is given, and kept otherwise.
    pub async fn update(
        &self,
        group: &GroupPath,
        name: &str,
        body: &serde_json::Value,
        expected: Option<u64>,
    ) -> Result<Versioned<DestinationRecord>, NotificationRefusal> {
        let input = DestinationInput::from_value(body, self.local)?;
        let current = self.store.get_destination(group, name).await?;
        if input.spec.target.type_name() != current.item.spec.target.type_name() {
            return Err(field(
                "type",
                format!(
                    "a `{}` destination stays one: delete it and make a `{}` one",
                    current.item.spec.target.type_name(),
                    input.spec.target.type_name()
                ),
            ));
        }
        let mut record = DestinationRecord {
            spec: input.spec,
            ..current.item.clone()
        };
        let mut old_secret = None;
        if let Some(url) = input.slack_webhook_url {
            let arn = self.keep_secret(group, name, &url).await?;
            old_secret = record.secret_arn.replace(arn);
        }
        let updated = self
            .store
            .update_destination(&record, expected.or(Some(current.version)))
            .await;
        match (&updated, &old_secret, &record.secret_arn) {
            (Ok(_), Some(old), _) => {
                let _ = self.secrets.delete(old).await;
            }
            (Err(_), Some(_), Some(new)) => {
                let _ = self.secrets.delete(new).await;
            }
            _ => {}
        }
        Ok(updated?)
    }

    /// Deletes destination `name`, checking its version when given, and its secret.
    pub async fn delete(
        &self,
        group: &GroupPath,
        name: &str,
        expected: Option<u64>,
    ) -> Result<(), NotificationRefusal> {
        let current = self.store.get_destination(group, name).await?;
        self.store
            .delete_destination(group, name, expected.or(Some(current.version)))
            .await?;
        if let Some(arn) = &current.item.secret_arn {
            self.secrets
                .delete(arn)
                .await
                .map_err(NotificationRefusal::Secret)?;
        }
        Ok(())
    }

    /// A webhook's new signing secret, answered this once; the old one stops signing.
    pub async fn rotate_secret(
        &self,
        group: &GroupPath,
        name: &str,
    ) -> Result<WithSecret, NotificationRefusal> {
        let current = self.store.get_destination(group, name).await?;
        if !matches!(current.item.spec.target, Target::Webhook { .. }) {
            return Err(field(
                "type",
                "only a `webhook` destination has a signing secret (a Slack webhook's URL is replaced by an update)",
            ));
        }
        let secret = new_signing_secret();
        let arn = self.keep_secret(group, name, &secret).await?;
        let mut record = current.item.clone();
        let old = record.secret_arn.replace(arn.clone());
        match self
            .store
            .update_destination(&record, Some(current.version))
            .await
        {
            Ok(destination) => {
                if let Some(old) = old {
                    let _ = self.secrets.delete(&old).await;
                }
                Ok(WithSecret {
                    destination,
                    signing_secret: Some(secret),
                })
            }
            Err(e) => {
                let _ = self.secrets.delete(&arn).await;
                Err(e.into())
            }
        }
    }

    /// The destinations an event of `kind` reaches: those of `group` and of each of its
    /// ancestors (the group first, the root last) whose filters want it for `environment` (none for
    /// configuration that belongs to no environment).
    pub async fn destinations_for(
        &self,
        group: &GroupPath,
        kind: EventKind,
        environment: Option<&str>,
    ) -> Result<Vec<DestinationRecord>, StoreError> {
        let mut out = Vec::new();
        for level in group.self_and_ancestors() {
            for destination in self.store.list_destinations(&level).await? {
                if destination.item.spec.filters.wants(kind, environment) {
                    out.push(destination.item);
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
#[path = "notifications_tests.rs"]
mod tests;
