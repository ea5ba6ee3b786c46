//! Deliveries: an event fanned out to the destinations that want it ([`Notifications::fan_out`]),
//! then each delivery sent one attempt at a time ([`Notifications::attempt`]), signed, its
//! answer kept in the destination's history, and what follows decided by
//! [`sortie_core::notify::delivery::next`]. The function that runs them (not built yet)
//! carries a [`PendingDelivery`] between attempts as a queue message.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sortie_core::notify::delivery::{
    self as d, Attempt, Next, DELIVERY_HEADER, EVENT_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER,
};
use sortie_core::notify::{kind_of, message, EventKind, Target, NOTIFICATION_FAILED};
use sortie_core::{EnvPath, GroupPath};
use sortie_http::deliver::{Answer, Failure, GuardedClient};
use sortie_store::{DeliveryRecord, DeliveryState, DestinationHealth, StoreError};

use crate::{NotificationRefusal, Notifications};

/// An event as EventBridge carries it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// EventBridge's id of the event.
    pub id: String,
    /// Its `detail-type`, such as `sortie.job.completed`.
    #[serde(rename = "detail-type")]
    pub detail_type: String,
    /// When it happened.
    pub time: DateTime<Utc>,
    /// Its detail.
    pub detail: Value,
}

/// One delivery between two attempts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingDelivery {
    /// The destination's group.
    pub group: GroupPath,
    /// The destination's name.
    pub destination: String,
    /// When the destination was made: a destination made again under the name is another.
    pub made: DateTime<Utc>,
    /// The delivery's place in the destination's sequence.
    pub seq: u64,
    /// The delivery's id (`X-Sortie-Delivery`), the same on every attempt.
    pub id: String,
    /// What kind of event it is.
    pub kind: EventKind,
    /// The event.
    pub event: Event,
    /// How many attempts were made.
    pub attempts: u32,
    /// When the first attempt was made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_at: Option<DateTime<Utc>>,
}

/// Sends one request of a delivery.
#[async_trait]
pub trait Sender: Send + Sync {
    /// POSTs `body` to `url` with `headers`.
    async fn post(
        &self,
        url: &str,
        headers: &[(&str, &str)],
        body: Vec<u8>,
    ) -> Result<Answer, Failure>;
}

#[async_trait]
impl Sender for GuardedClient {
    async fn post(
        &self,
        url: &str,
        headers: &[(&str, &str)],
        body: Vec<u8>,
    ) -> Result<Answer, Failure> {
        GuardedClient::post(self, url, headers, body).await
    }
}

/// What one attempt left: what follows, the delivery as the history now holds it, and the
/// delivery to carry to its next attempt.
#[derive(Debug, Clone)]
pub struct Attempted {
    /// Delivered, retried at a time, or given up.
    pub next: Next,
    /// The history's record of it.
    pub record: DeliveryRecord,
    /// The delivery with this attempt counted.
    pub pending: PendingDelivery,
}

/// The group an event belongs to: its environment's, else its `group` (configuration).
fn group_of(detail: &Value) -> Option<GroupPath> {
    if let Some(env) = detail.get("environment").and_then(Value::as_str) {
        return EnvPath::parse(env).ok().map(|e| e.group().clone());
    }
    detail
        .get("group")
        .and_then(Value::as_str)
        .and_then(|g| GroupPath::parse(g).ok())
}

/// The jitter's seed of a delivery's attempt (FNV-1a of its id and the attempt).
fn seed(id: &str, attempt: u32) -> u64 {
    sortie_core::backoff::jitter_seed(id, attempt)
}

impl Notifications {
    /// The deliveries `event` makes: one for each destination of its group and ancestors
    /// that wants it, numbered in that destination's sequence. None for an event no
    /// destination is sent.
    pub async fn fan_out(&self, event: &Event) -> Result<Vec<PendingDelivery>, StoreError> {
        let Some(kind) = kind_of(&event.detail_type, &event.detail) else {
            return Ok(Vec::new());
        };
        let Some(group) = group_of(&event.detail) else {
            return Ok(Vec::new());
        };
        let environment = event.detail.get("environment").and_then(Value::as_str);
        let mut out = Vec::new();
        for destination in self.destinations_for(&group, kind, environment).await? {
            let seq = self
                .store
                .next_delivery_seq(&destination.group, &destination.name)
                .await?;
            out.push(PendingDelivery {
                group: destination.group.clone(),
                destination: destination.name.clone(),
                made: destination.created_at,
                seq,
                id: format!("{}.{seq}", event.id),
                kind,
                event: event.clone(),
                attempts: 0,
                first_at: None,
            });
        }
        Ok(out)
    }

    /// One attempt of `pending` at `now` through `sender`: a webhook gets the event signed
    /// with its secret, Slack a message linking to the console at `console_url`. The answer
    /// goes into the destination's history; the destination turns unhealthy when a delivery
    /// is given up on (and `sortie.notification.failed` is published once), healthy again
    /// when one is delivered. `NotFound` when the destination is gone (the delivery is
    /// dropped).
    pub async fn attempt(
        &self,
        pending: &PendingDelivery,
        sender: &dyn Sender,
        console_url: &str,
        now: DateTime<Utc>,
    ) -> Result<Attempted, NotificationRefusal> {
        let destination = self
            .store
            .get_destination(&pending.group, &pending.destination)
            .await?
            .item;
        if destination.created_at != pending.made {
            return Err(StoreError::NotFound {
                kind: "notification destination",
                id: format!("{}:{}", pending.group.as_str(), pending.destination),
            }
            .into());
        }
        let arn = destination
            .secret_arn
            .as_deref()
            .ok_or_else(|| NotificationRefusal::Secret("the destination has no secret".into()))?;
        let secret = self
            .secrets
            .value(arn)
            .await
            .map_err(NotificationRefusal::Secret)?;
        let event = &pending.event;
        let timestamp = now.timestamp();
        let (url, body, headers) = match &destination.spec.target {
            Target::Webhook { url } => {
                let body = message::webhook_body(
                    &pending.id,
                    &event.detail_type,
                    &event.time.to_rfc3339(),
                    &event.detail,
                )
                .to_string()
                .into_bytes();
                let signature = d::signature(secret.as_bytes(), timestamp, &body);
                let headers = vec![
                    (SIGNATURE_HEADER, signature),
                    (TIMESTAMP_HEADER, timestamp.to_string()),
                    (DELIVERY_HEADER, pending.id.clone()),
                    (EVENT_HEADER, event.detail_type.clone()),
                ];
                (url.clone(), body, headers)
            }
            Target::Slack {} => {
                let body = message::slack_message(pending.kind, &event.detail, console_url)
                    .to_string()
                    .into_bytes();
                (secret.clone(), body, Vec::new())
            }
        };
        let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let answered = sender.post(&url, &headers, body).await;
        let (result, status, latency_ms, answer) = match &answered {
            Ok(a) => (
                Attempt::Answered {
                    status: a.status,
                    retry_after: a
                        .retry_after
                        .as_deref()
                        .and_then(|r| d::retry_after_seconds(r, now)),
                },
                Some(a.status),
                u64::try_from(a.latency.as_millis()).unwrap_or(u64::MAX),
                d::kept_answer(&a.body),
            ),
            Err(Failure::TimedOut) => (Attempt::TimedOut, None, 0, String::new()),
            Err(Failure::Unreachable(why)) => {
                (Attempt::Unreachable(why.clone()), None, 0, String::new())
            }
            Err(Failure::Refused(why)) => (Attempt::Refused(why.clone()), None, 0, String::new()),
        };
        let attempts = pending.attempts + 1;
        let first_at = pending.first_at.unwrap_or(now);
        let next = d::next(
            &result,
            attempts,
            first_at,
            now,
            seed(&pending.id, attempts),
        );
        let (state, reason) = match &next {
            Next::Delivered => (DeliveryState::Delivered, None),
            Next::RetryAt(at) => (
                DeliveryState::Retrying,
                Some(format!("{}; tried again at {at}", failure_text(&result))),
            ),
            Next::GaveUp(why) => (DeliveryState::GaveUp, Some(why.clone())),
        };
        let record = DeliveryRecord {
            seq: pending.seq,
            id: pending.id.clone(),
            event_type: event.detail_type.clone(),
            event_time: event.time,
            environment: event
                .detail
                .get("environment")
                .and_then(Value::as_str)
                .map(String::from),
            attempts,
            attempted_at: now,
            status,
            state,
            latency_ms,
            answer,
            reason,
        };
        self.store.put_delivery(&destination, &record).await?;
        match &next {
            Next::Delivered if !destination.health.healthy => {
                self.store
                    .set_destination_health(
                        &destination.group,
                        &destination.name,
                        &DestinationHealth::default(),
                    )
                    .await?;
            }
            Next::GaveUp(why) => {
                let health = DestinationHealth {
                    healthy: false,
                    failing_since: destination.health.failing_since.or(Some(now)),
                    last_failure: Some(why.clone()),
                };
                self.store
                    .set_destination_health(&destination.group, &destination.name, &health)
                    .await?;
                let detail = json!({
                    "group": destination.group.as_str(),
                    "destination": destination.name,
                    "delivery": pending.id,
                    "event_type": event.detail_type,
                    "environment": record.environment,
                    "attempts": attempts,
                    "reason": why,
                });
                let resource = format!(
                    "sortie:notification/{}:{}",
                    destination.group.as_str(),
                    destination.name
                );
                // Best effort: the destination's health already says it.
                if let Err(e) = self
                    .bus
                    .publish(NOTIFICATION_FAILED, &resource, detail)
                    .await
                {
                    tracing::warn!(error = %e, delivery = %pending.id, "could not publish the failed notification");
                }
            }
            _ => {}
        }
        let pending = PendingDelivery {
            attempts,
            first_at: Some(first_at),
            ..pending.clone()
        };
        Ok(Attempted {
            next,
            record,
            pending,
        })
    }
}

/// An attempt's failure in words (never a URL: a Slack URL is a secret).
fn failure_text(result: &Attempt) -> String {
    match result {
        Attempt::Answered { status, .. } => format!("the receiver answered {status}"),
        Attempt::TimedOut => format!("no answer within {} s", d::ATTEMPT_TIMEOUT_SECONDS),
        Attempt::Unreachable(why) => format!("unreachable: {why}"),
        Attempt::Refused(why) => format!("refused: {why}"),
    }
}

#[cfg(test)]
#[path = "deliveries_tests.rs"]
mod tests;
