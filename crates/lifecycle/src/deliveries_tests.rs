use std::sync::{Arc, Mutex};
use std::time::Duration as StdDuration;

use chrono::{Duration, TimeZone};
use serde_json::json;
use sortie_core::notify::delivery::{verify, RETRY_WINDOW};
use sortie_launch::MemoryJobSecrets;
use sortie_store::{MemoryStore, NotificationStore};

use super::*;
use crate::{Bus, LifecycleError};

/// Records every event published.
#[derive(Default)]
struct Recorded(Mutex<Vec<(String, Value)>>);

#[async_trait]
impl Bus for Recorded {
    async fn job_ended(&self, _: &sortie_store::JobRecord) -> Result<(), LifecycleError> {
        Ok(())
    }
    async fn publish(&self, kind: &str, _: &str, detail: Value) -> Result<(), LifecycleError> {
        self.0.lock().unwrap().push((kind.to_string(), detail));
        Ok(())
    }
}

/// A request as the sender got it: the URL, the headers, the body.
type Request = (String, Vec<(String, String)>, Vec<u8>);

/// Answers with the scripted answers in turn, and keeps every request.
#[derive(Default)]
struct Scripted {
    answers: Mutex<Vec<Result<Answer, Failure>>>,
    seen: Mutex<Vec<Request>>,
}

impl Scripted {
    fn answering(answers: Vec<Result<Answer, Failure>>) -> Self {
        Self {
            answers: Mutex::new(answers.into_iter().rev().collect()),
            ..Default::default()
        }
    }
}

fn status(code: u16) -> Result<Answer, Failure> {
    Ok(Answer {
        status: code,
        retry_after: None,
        body: format!("answer {code}").into_bytes(),
        latency: StdDuration::from_millis(7),
    })
}

#[async_trait]
impl Sender for Scripted {
    async fn post(
        &self,
        url: &str,
        headers: &[(&str, &str)],
        body: Vec<u8>,
    ) -> Result<Answer, Failure> {
        self.seen.lock().unwrap().push((
            url.to_string(),
            headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            body,
        ));
        self.answers
            .lock()
            .unwrap()
            .pop()
            .unwrap_or_else(|| status(200))
    }
}

struct World {
    svc: Notifications,
    store: Arc<MemoryStore>,
    bus: Arc<Recorded>,
}

fn world() -> World {
    let store = Arc::new(MemoryStore::new());
    let bus = Arc::new(Recorded::default());
    World {
        svc: Notifications {
            store: store.clone(),
            secrets: Arc::new(MemoryJobSecrets::default()),
            local: false,
            bus: bus.clone(),
        },
        store,
        bus,
    }
}

fn at(seconds: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 30, 0, 0, 0).unwrap() + Duration::seconds(seconds)
}

fn failed_job(env: &str) -> Event {
    Event {
        id: "ev-1".into(),
        detail_type: "sortie.job.ended".into(),
        time: at(0),
        detail: json!({"job_id": "01jnx6v4k2m8q9r3s5t7w0y1za", "environment": env,
            "operation": "apply", "state": "failed", "reason": "boom", "requested_by": "alice"}),
    }
}

#[tokio::test]
async fn an_event_becomes_one_signed_delivery_per_destination_that_wants_it() {
    let w = world();
    let group = GroupPath::parse("acme").unwrap();
    let made = w
        .svc
        .create(
            &group,
            "ops",
            &json!({"type": "webhook", "url": "https://hooks.example.com/x", "events": ["job_failed"]}),
            "alice",
            at(0),
        )
        .await
        .unwrap();
    let secret = made.signing_secret.unwrap();
    w.svc
        .create(
            &group,
            "drift-only",
            &json!({"type": "webhook", "url": "https://hooks.example.com/y", "events": ["drift_detected"]}),
            "alice",
            at(0),
        )
        .await
        .unwrap();
    let pending = w.svc.fan_out(&failed_job("acme/web/prod")).await.unwrap();
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert_eq!(
        (pending[0].destination.as_str(), pending[0].seq),
        ("ops", 1)
    );
    // Nothing for an event no destination is sent.
    let dispatched = Event {
        detail_type: "sortie.job.dispatched".into(),
        ..failed_job("acme/web/prod")
    };
    assert!(w.svc.fan_out(&dispatched).await.unwrap().is_empty());

    let sender = Scripted::answering(vec![status(204)]);
    let done = w
        .svc
        .attempt(&pending[0], &sender, "https://console", at(5))
        .await
        .unwrap();
    assert_eq!(done.next, Next::Delivered);
    let (url, headers, body) = sender.seen.lock().unwrap()[0].clone();
    assert_eq!(url, "https://hooks.example.com/x");
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    // The receiver verifies it with the secret it was shown.
    assert_eq!(
        verify(
            secret.as_bytes(),
            header(TIMESTAMP_HEADER),
            header(SIGNATURE_HEADER),
            &body,
            at(5).timestamp(),
            300
        ),
        Ok(())
    );
    assert_eq!(header(DELIVERY_HEADER), Some(pending[0].id.as_str()));
    let sent: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(sent["detail"]["state"], "failed");
    let ops = w.store.get_destination(&group, "ops").await.unwrap().item;
    let history = w.store.deliveries(&ops).await.unwrap();
    assert_eq!(history[0].state, DeliveryState::Delivered);
    assert_eq!(history[0].status, Some(204));
}

#[tokio::test]
async fn a_failing_receiver_is_retried_then_given_up_on_once_and_its_destination_turns_unhealthy() {
    let w = world();
    let group = GroupPath::parse("acme/web").unwrap();
    w.svc
        .create(
            &group,
            "ops",
            &json!({"type": "webhook", "url": "https://hooks.example.com/x"}),
            "alice",
            at(0),
        )
        .await
        .unwrap();
    let mut pending = w
        .svc
        .fan_out(&failed_job("acme/web/prod"))
        .await
        .unwrap()
        .remove(0);
    // A 503 is retried, with the same delivery id, in the same history slot.
    let sender = Scripted::answering(vec![status(503), status(404)]);
    let first = w
        .svc
        .attempt(&pending, &sender, "https://console", at(10))
        .await
        .unwrap();
    assert!(matches!(first.next, Next::RetryAt(when) if when > at(10)));
    assert_eq!(first.record.state, DeliveryState::Retrying);
    pending = first.pending;
    assert_eq!((pending.attempts, pending.first_at), (1, Some(at(10))));
    // A 404 is final: one failure event, the destination unhealthy.
    let second = w
        .svc
        .attempt(&pending, &sender, "https://console", at(60))
        .await
        .unwrap();
    assert!(matches!(second.next, Next::GaveUp(ref why) if why.contains("404")));
    let ops = w.store.get_destination(&group, "ops").await.unwrap().item;
    assert!(!ops.health.healthy);
    assert_eq!(ops.health.failing_since, Some(at(60)));
    let history = w.store.deliveries(&ops).await.unwrap();
    assert_eq!(history.len(), 1, "one delivery, two attempts: {history:?}");
    assert_eq!(
        (history[0].attempts, history[0].state),
        (2, DeliveryState::GaveUp)
    );
    let published = w.bus.0.lock().unwrap().clone();
    assert_eq!(published.len(), 1);
    assert_eq!(published[0].0, NOTIFICATION_FAILED);
    assert_eq!(published[0].1["destination"], "ops");
    // The next delivery that succeeds makes it healthy again.
    let next = w
        .svc
        .fan_out(&failed_job("acme/web/prod"))
        .await
        .unwrap()
        .remove(0);
    w.svc
        .attempt(&next, &Scripted::default(), "https://console", at(120))
        .await
        .unwrap();
    let ops = w.store.get_destination(&group, "ops").await.unwrap().item;
    assert!(ops.health.healthy);
    // A delivery is never retried past the window.
    let late = PendingDelivery {
        attempts: 30,
        first_at: Some(at(0)),
        ..next
    };
    let gave_up = w
        .svc
        .attempt(
            &late,
            &Scripted::answering(vec![status(500)]),
            "https://console",
            at(0) + RETRY_WINDOW - Duration::seconds(1),
        )
        .await
        .unwrap();
    assert!(matches!(gave_up.next, Next::GaveUp(_)));
}

#[tokio::test]
async fn slack_gets_a_message_at_its_secret_url_and_a_gone_destination_drops_its_deliveries() {
    let w = world();
    let group = GroupPath::parse("acme").unwrap();
    let url = "https://hooks.slack.com/services/T0/B0/secret";
    w.svc
        .create(
            &group,
            "chat",
            &json!({"type": "slack", "slack_webhook_url": url}),
            "alice",
            at(0),
        )
        .await
        .unwrap();
    let pending = w
        .svc
        .fan_out(&failed_job("acme/web/prod"))
        .await
        .unwrap()
        .remove(0);
    let sender = Scripted::answering(vec![Err(Failure::Unreachable(
        "could not connect to hooks.slack.com".into(),
    ))]);
    let attempted = w
        .svc
        .attempt(&pending, &sender, "https://console", at(1))
        .await
        .unwrap();
    let (sent_to, headers, body) = sender.seen.lock().unwrap()[0].clone();
    assert_eq!(sent_to, url);
    assert!(headers.is_empty(), "Slack gets no signature");
    let text: Value = serde_json::from_slice(&body).unwrap();
    assert!(
        text["text"].as_str().unwrap().contains("failed: boom"),
        "{text}"
    );
    // The history never holds the URL.
    let record = serde_json::to_string(&attempted.record).unwrap();
    assert!(!record.contains("services/T0"), "{record}");

    // Deleted and made again: the old delivery is dropped, not sent to the new one.
    w.svc.delete(&group, "chat", None).await.unwrap();
    w.svc
        .create(
            &group,
            "chat",
            &json!({"type": "slack", "slack_webhook_url": url}),
            "alice",
            at(2),
        )
        .await
        .unwrap();
    let dropped = w
        .svc
        .attempt(
            &attempted.pending,
            &Scripted::default(),
            "https://console",
            at(3),
        )
        .await;
    assert!(matches!(
        dropped,
        Err(NotificationRefusal::Store(StoreError::NotFound { .. }))
    ));
}

#[tokio::test]
async fn a_redelivery_sends_the_same_event_with_the_same_id_once_and_a_test_send_is_kept_in_history(
) {
    let w = world();
    let group = GroupPath::parse("acme").unwrap();
    let made = w
        .svc
        .create(
            &group,
            "ops",
            &json!({"type": "webhook", "url": "https://hooks.example.com/x"}),
            "alice",
            at(0),
        )
        .await
        .unwrap();
    let secret = made.signing_secret.unwrap();
    let pending = w.svc.fan_out(&failed_job("acme/web/prod")).await.unwrap();
    // The same event fanned out again keeps its delivery id (a receiver de-duplicates).
    let again = w.svc.fan_out(&failed_job("acme/web/prod")).await.unwrap();
    assert_eq!(pending[0].id, again[0].id);
    assert_ne!(pending[0].seq, again[0].seq);
    let down = Scripted::answering(vec![status(404)]);
    let first = w
        .svc
        .attempt(&pending[0], &down, "https://console", at(1))
        .await
        .unwrap();
    assert!(matches!(first.next, Next::GaveUp(_)));
    assert_eq!(w.bus.0.lock().unwrap().len(), 1, "given up: published once");

    // Redelivered once: a 503 is not retried, and the destination's health is unchanged.
    let busy = Scripted::answering(vec![status(503)]);
    let redone = w
        .svc
        .redeliver(
            &group,
            "ops",
            &pending[0].id,
            &busy,
            "https://console",
            at(10),
        )
        .await
        .unwrap();
    assert!(
        matches!(&redone.next, Next::GaveUp(why) if why.contains("tried once")),
        "{:?}",
        redone.next
    );
    assert_eq!(
        w.bus.0.lock().unwrap().len(),
        1,
        "a redelivery publishes nothing"
    );
    // Then it gets through: the same body and id, signed again; the destination healthy.
    let ok = Scripted::answering(vec![status(200)]);
    let delivered = w
        .svc
        .redeliver(
            &group,
            "ops",
            &pending[0].id,
            &ok,
            "https://console",
            at(20),
        )
        .await
        .unwrap();
    assert_eq!(delivered.next, Next::Delivered);
    let (_, headers, body) = ok.seen.lock().unwrap()[0].clone();
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(header(DELIVERY_HEADER), Some(pending[0].id.as_str()));
    assert_eq!(
        verify(
            secret.as_bytes(),
            header(TIMESTAMP_HEADER),
            header(SIGNATURE_HEADER),
            &body,
            at(20).timestamp(),
            300
        ),
        Ok(())
    );
    let sent: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(sent["detail"]["reason"], "boom");
    let ops = w.store.get_destination(&group, "ops").await.unwrap().item;
    assert!(ops.health.healthy);
    // An unknown delivery is not found.
    let missing = w
        .svc
        .redeliver(&group, "ops", "nope", &ok, "https://console", at(21))
        .await
        .unwrap_err();
    assert!(
        matches!(
            missing,
            NotificationRefusal::Store(StoreError::NotFound { .. })
        ),
        "{missing:?}"
    );

    // A test: its own event type, in the history, and never retried.
    let test = Scripted::answering(vec![status(500)]);
    let tried = w
        .svc
        .test_send(&group, "ops", "alice", &test, "https://console", at(30))
        .await
        .unwrap();
    assert!(matches!(tried.next, Next::GaveUp(_)));
    let (_, headers, _) = test.seen.lock().unwrap()[0].clone();
    assert!(headers
        .iter()
        .any(|(k, v)| k == EVENT_HEADER && v == NOTIFICATION_TEST));
    let history = w.store.deliveries(&ops).await.unwrap();
    assert_eq!(history[0].event_type, NOTIFICATION_TEST);
    assert_eq!(history[0].status, Some(500));
    assert_eq!(w.bus.0.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn an_event_too_large_to_keep_cannot_be_redelivered() {
    let w = world();
    let group = GroupPath::parse("acme").unwrap();
    w.svc
        .create(
            &group,
            "ops",
            &json!({"type": "webhook", "url": "https://hooks.example.com/x"}),
            "alice",
            at(0),
        )
        .await
        .unwrap();
    let mut event = failed_job("acme/web/prod");
    event.detail["reason"] = json!("x".repeat(KEPT_DETAIL_BYTES));
    let pending = w.svc.fan_out(&event).await.unwrap();
    let ok = Scripted::answering(vec![status(200)]);
    w.svc
        .attempt(&pending[0], &ok, "https://console", at(1))
        .await
        .unwrap();
    let refused = w
        .svc
        .redeliver(&group, "ops", &pending[0].id, &ok, "https://console", at(2))
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, NotificationRefusal::Field { field, .. } if field == "delivery"),
        "{refused:?}"
    );
}
