//! Notifications on AWS: the notify queue carries two kinds of message, told apart here.
//! - An event, as an EventBridge rule delivers it to SQS (the whole event, `detail-type` and
//!   all): fanned out, one message per delivery ([`Notifications::fan_out_to`]).
//! - A delivery between two attempts ([`PendingDelivery`]): attempted; its next attempt is
//!   the same message made visible again when the retry rule says, so its attempt count is
//!   the message's receive count and its first attempt the message's sent time.

use serde_json::Value;
use sortie_store::{DeliveryQueue, StoreError};

use crate::deliveries::{Event, PendingDelivery};
use crate::Notifications;

/// A message of the notify queue.
#[derive(Debug, Clone, PartialEq)]
pub enum NotifyMessage {
    /// An event of the bus, to fan out.
    Event(Event),
    /// One delivery, to attempt.
    Delivery(PendingDelivery),
}

/// The message `body` holds, or `None` when it is neither an event nor a delivery.
pub fn message_of(body: &str) -> Option<NotifyMessage> {
    let value: Value = serde_json::from_str(body).ok()?;
    if value.get("detail-type").is_some() {
        serde_json::from_value(value).ok().map(NotifyMessage::Event)
    } else {
        serde_json::from_value(value)
            .ok()
            .map(NotifyMessage::Delivery)
    }
}

impl Notifications {
    /// Fans `event` out onto `queue`: one message per delivery, in its destination's
    /// organisation's message group. How many were queued. An event fanned out again (after
    /// a failure part way) queues its deliveries again with the same ids, which receivers
    /// de-duplicate.
    pub async fn fan_out_to(
        &self,
        event: &Event,
        queue: &dyn DeliveryQueue,
    ) -> Result<usize, StoreError> {
        let deliveries = self.fan_out(event).await?;
        for pending in &deliveries {
            let body = serde_json::to_string(pending).expect("a delivery serialises");
            queue
                .send_delivery(&body, pending.group.org().unwrap_or_default())
                .await?;
        }
        Ok(deliveries.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn an_eventbridge_event_and_a_delivery_are_told_apart_and_anything_else_is_neither() {
        // An event as an EventBridge rule's SQS target receives it.
        let event = serde_json::json!({
            "version": "0", "id": "6a7e8feb", "detail-type": "sortie.job.ended",
            "source": "sortie", "account": "123456789012", "time": "2026-11-30T00:00:00Z",
            "region": "us-east-1", "resources": ["sortie:job/01"],
            "detail": {"environment": "acme/web", "state": "failed"}
        });
        let Some(NotifyMessage::Event(read)) = message_of(&event.to_string()) else {
            panic!("an event");
        };
        assert_eq!(read.id, "6a7e8feb");
        assert_eq!(read.detail["state"], "failed");
        let pending = PendingDelivery {
            group: sortie_core::GroupPath::parse("acme").unwrap(),
            destination: "ops".into(),
            made: chrono::Utc.with_ymd_and_hms(2026, 11, 30, 0, 0, 0).unwrap(),
            seq: 3,
            id: "6a7e8feb.0011".into(),
            kind: sortie_core::notify::EventKind::JobFailed,
            event: read,
            attempts: 0,
            first_at: None,
        };
        let body = serde_json::to_string(&pending).unwrap();
        assert_eq!(
            message_of(&body),
            Some(NotifyMessage::Delivery(pending.clone()))
        );
        for junk in ["", "{}", "[1]", "not json", r#"{"detail-type": 3}"#] {
            assert_eq!(message_of(junk), None, "{junk}");
        }
    }
}
