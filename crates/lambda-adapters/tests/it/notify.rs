//! The notify adapter on moto: an event from the bus's rule fans out to one delivery
//! message on the real SQS queue; that message is attempted with its destination's secret
//! from Secrets Manager, a 503 makes it a batch item failure hidden until its retry is due,
//! and its second receive is its second attempt, delivered; a record that is neither an
//! event nor a delivery is the only failure of its batch.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use aws_sdk_sqs::types::MessageSystemAttributeName;
use serde_json::{json, Value};
use sortie_core::GroupPath;
use sortie_http::deliver::{Answer, Failure};
use sortie_lifecycle::{Bus, LifecycleError, Notifications, Sender};
use sortie_store::{DeliveryState, NotificationStore, SqsDeliveryQueue};

use crate::batch::common::World;

/// Publishes nothing.
struct Quiet;

#[async_trait]
impl Bus for Quiet {
    async fn job_ended(&self, _: &sortie_store::JobRecord) -> Result<(), LifecycleError> {
        Ok(())
    }
}

/// Answers the scripted statuses in turn, then 200; keeps each request's headers.
struct Scripted {
    statuses: Mutex<Vec<u16>>,
    seen: Mutex<Vec<Vec<(String, String)>>>,
}

#[async_trait]
impl Sender for Scripted {
    async fn post(
        &self,
        _url: &str,
        headers: &[(&str, &str)],
        _body: Vec<u8>,
    ) -> Result<Answer, Failure> {
        self.seen.lock().unwrap().push(
            headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        let status = self.statuses.lock().unwrap().pop().unwrap_or(200);
        Ok(Answer {
            status,
            retry_after: None,
            body: b"ok".to_vec(),
            latency: Duration::from_millis(3),
        })
    }
}

/// Receives what is visible on `url` as a Lambda batch.
async fn receive(sqs: &aws_sdk_sqs::Client, url: &str) -> SqsEvent {
    let got = sqs
        .receive_message()
        .queue_url(url)
        .max_number_of_messages(10)
        .message_system_attribute_names(MessageSystemAttributeName::All)
        .send()
        .await
        .unwrap();
    let mut event = SqsEvent::default();
    for m in got.messages.unwrap_or_default() {
        let mut r = SqsMessage::default();
        r.message_id = m.message_id.clone();
        r.receipt_handle = m.receipt_handle.clone();
        r.body = m.body.clone();
        for (k, v) in m.attributes.unwrap_or_default() {
            r.attributes.insert(k.as_str().to_string(), v);
        }
        event.records.push(r);
    }
    event
}

#[tokio::test]
async fn an_event_fans_out_to_a_delivery_message_retried_by_visibility_until_delivered() {
    sortie_testkit::require_aws!();
    let w = World::new().await;
    let sqs = aws_sdk_sqs::Client::new(&w.direct);
    let url = sortie_testkit::standard_queue(&sqs, "notify").await;
    let notifications = Notifications {
        store: w.store.clone(),
        secrets: Arc::new(sortie_launch::AwsJobSecrets::new(&w.direct)),
        local: false,
        bus: Arc::new(Quiet),
    };
    let group = GroupPath::parse("acme").unwrap();
    notifications
        .create(
            &group,
            "ops",
            &json!({"type": "webhook", "url": "https://hooks.example.com/x", "events": ["job_failed"]}),
            "alice",
            chrono::Utc::now(),
        )
        .await
        .unwrap();
    let sender = Arc::new(Scripted {
        statuses: Mutex::new(vec![503]),
        seen: Mutex::default(),
    });
    let parts = sortie_lambda_adapters::NotifyParts {
        notifications,
        queue: SqsDeliveryQueue::new(sqs.clone(), url.clone()),
        sender: sender.clone(),
        console_url: "https://sortie.example.com".into(),
    };

    // The rule's SQS target gets the whole event; a junk record rides beside it.
    let event: Value = json!({
        "version": "0", "id": "ev-1", "detail-type": "sortie.job.ended", "source": "sortie",
        "account": "123456789012", "time": "2026-11-30T00:00:00Z", "region": "us-east-1",
        "resources": [], "detail": {"environment": "acme/web", "state": "failed",
            "job_id": "01jnx6v4k2m8q9r3s5t7w0y1za", "operation": "apply"}
    });
    let mut batch = SqsEvent::default();
    for (id, body) in [
        ("from-rule", event.to_string()),
        ("junk", "not json".into()),
    ] {
        let mut r = SqsMessage::default();
        r.message_id = Some(id.into());
        r.body = Some(body);
        batch.records.push(r);
    }
    let response = sortie_lambda_adapters::notify_batch(&parts, batch).await;
    let failed: Vec<&str> = response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.as_str())
        .collect();
    assert_eq!(failed, ["junk"]);

    // One delivery message; its first attempt meets a 503 and is hidden until its retry.
    let first = receive(&sqs, &url).await;
    assert_eq!(first.records.len(), 1, "{first:?}");
    let response = sortie_lambda_adapters::notify_batch(&parts, first.clone()).await;
    assert_eq!(response.batch_item_failures.len(), 1);
    assert!(
        receive(&sqs, &url).await.records.is_empty(),
        "hidden until the retry is due"
    );
    let ops = w.store.get_destination(&group, "ops").await.unwrap().item;
    let history = w.store.deliveries(&ops).await.unwrap();
    assert_eq!(
        (history[0].state, history[0].status, history[0].attempts),
        (DeliveryState::Retrying, Some(503), 1)
    );

    // Time passes: the message shows again, and its second receive is the second attempt.
    sqs.change_message_visibility()
        .queue_url(&url)
        .receipt_handle(first.records[0].receipt_handle.clone().unwrap())
        .visibility_timeout(0)
        .send()
        .await
        .unwrap();
    let second = receive(&sqs, &url).await;
    assert_eq!(second.records.len(), 1);
    assert_eq!(
        second.records[0]
            .attributes
            .get("ApproximateReceiveCount")
            .map(String::as_str),
        Some("2")
    );
    let response = sortie_lambda_adapters::notify_batch(&parts, second).await;
    assert!(response.batch_item_failures.is_empty());
    let history = w.store.deliveries(&ops).await.unwrap();
    assert_eq!(
        (history[0].state, history[0].status, history[0].attempts),
        (DeliveryState::Delivered, Some(200), 2)
    );
    // The same delivery id both times.
    let seen = sender.seen.lock().unwrap();
    let ids: Vec<&str> = seen
        .iter()
        .filter_map(|h| h.iter().find(|(k, _)| k == "x-sortie-delivery"))
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(ids.len(), 2);
    assert_eq!(ids[0], ids[1]);
}
