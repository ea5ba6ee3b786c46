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
use sortie_store::{
    DeliveryRecord, DeliveryState, DestinationHealth, StoreError, KEPT_DETAIL_BYTES,
};

use crate::{NotificationRefusal, Notifications};

/// An event as EventBridge carries it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// EventBridge's id of the event.
    pub id: String,
    /// Its `detail-type`, such as `sortie.job.ended`.
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

/// The `detail-type` of a test delivery, sent when asked (`sortie notify test`).
pub const NOTIFICATION_TEST: &str = "sortie.notification.test";

/// The id of `event`'s delivery to a destination (`X-Sortie-Delivery`): the event's id and
/// a digest of the destination, so the same event fanned out again to the same
/// destination (a fan-out retried after a partial failure) keeps its id, and a receiver
/// that de-duplicates on it sees it once.
pub fn delivery_id(event_id: &str, group: &GroupPath, name: &str, made: DateTime<Utc>) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let key = format!("{}\n{name}\n{}", group.as_str(), made.timestamp_millis());
    for byte in key.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{event_id}.{hash:016x}")
}

/// The detail a delivery's history keeps: `null` when larger than [`KEPT_DETAIL_BYTES`].
fn kept_detail(detail: &Value) -> Value {
    if detail.to_string().len() <= KEPT_DETAIL_BYTES {
        detail.clone()
    } else {
        Value::Null
    }
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
                id: delivery_id(
                    &event.id,
                    &destination.group,
                    &destination.name,
                    destination.created_at,
                ),
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
        self.attempt_as(pending, sender, console_url, now, false)
            .await
    }

    /// One attempt of `pending` that is not retried: a redelivery or a test asked for by a
    /// person, who sees its answer. A failure is final and leaves the destination's health
    /// as it was (no `sortie.notification.failed`); a success makes it healthy again.
    pub async fn attempt_once(
        &self,
        pending: &PendingDelivery,
        sender: &dyn Sender,
        console_url: &str,
        now: DateTime<Utc>,
    ) -> Result<Attempted, NotificationRefusal> {
        self.attempt_as(pending, sender, console_url, now, true)
            .await
    }

    /// Sends the delivery `id` of destination `name` of `group` again, once, as a new entry
    /// of its history with the same `X-Sortie-Delivery` id (the newest entry of that id).
    pub async fn redeliver(
        &self,
        group: &GroupPath,
        name: &str,
        id: &str,
        sender: &dyn Sender,
        console_url: &str,
        now: DateTime<Utc>,
    ) -> Result<Attempted, NotificationRefusal> {
        let destination = self.store.get_destination(group, name).await?.item;
        let history = self.store.deliveries(&destination).await?;
        let Some(kept) = history.into_iter().find(|d| d.id == id) else {
            return Err(StoreError::NotFound {
                kind: "delivery",
                id: format!("{id} of notification destination `{name}`"),
            }
            .into());
        };
        let refused = |problem: &str| NotificationRefusal::Field {
            field: "delivery".into(),
            problem: problem.into(),
        };
        if kept.detail.is_null() {
            return Err(refused(
                "its event was larger than the history keeps (8 KiB): it cannot be sent again",
            ));
        }
        let kind = if kept.event_type == NOTIFICATION_TEST {
            EventKind::ConfigurationChanged
        } else {
            kind_of(&kept.event_type, &kept.detail)
                .ok_or_else(|| refused("its event is not one a destination is sent"))?
        };
        let seq = self.store.next_delivery_seq(group, name).await?;
        let pending = PendingDelivery {
            group: group.clone(),
            destination: name.to_string(),
            made: destination.created_at,
            seq,
            id: kept.id,
            kind,
            event: Event {
                id: kept.event_id,
                detail_type: kept.event_type,
                time: kept.event_time,
                detail: kept.detail,
            },
            attempts: 0,
            first_at: None,
        };
        self.attempt_once(&pending, sender, console_url, now).await
    }

    /// Sends destination `name` of `group` a test event (`sortie.notification.test`),
    /// once, on behalf of `by`; kept in its history as any delivery.
    pub async fn test_send(
        &self,
        group: &GroupPath,
        name: &str,
        by: &str,
        sender: &dyn Sender,
        console_url: &str,
        now: DateTime<Utc>,
    ) -> Result<Attempted, NotificationRefusal> {
        let destination = self.store.get_destination(group, name).await?.item;
        let seq = self.store.next_delivery_seq(group, name).await?;
        let event_id = format!("test-{}", sortie_core::tokens::random_hex(8));
        let pending = PendingDelivery {
            group: group.clone(),
            destination: name.to_string(),
            made: destination.created_at,
            seq,
            id: delivery_id(&event_id, group, name, destination.created_at),
            // A Slack message words it as a change: "sent a test to … by …".
            kind: EventKind::ConfigurationChanged,
            event: Event {
                id: event_id,
                detail_type: NOTIFICATION_TEST.into(),
                time: now,
                detail: json!({
                    "group": group.as_str(),
                    "destination": name,
                    "action": "test sent to",
                    "target": format!("notification destination `{name}`"),
                    "by": by,
                }),
            },
            attempts: 0,
            first_at: None,
        };
        self.attempt_once(&pending, sender, console_url, now).await
    }

    async fn attempt_as(
        &self,
        pending: &PendingDelivery,
        sender: &dyn Sender,
        console_url: &str,
        now: DateTime<Utc>,
        once: bool,
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
        let next = match d::next(
            &result,
            attempts,
            first_at,
            now,
            seed(&pending.id, attempts),
        ) {
            Next::RetryAt(_) if once => Next::GaveUp(format!(
                "{} (a redelivery or a test is tried once)",
                failure_text(&result)
            )),
            next => next,
        };
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
            event_id: event.id.clone(),
            detail: kept_detail(&event.detail),
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
            Next::GaveUp(why) if !once => {
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
