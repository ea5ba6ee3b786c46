//! Notification destinations: create, read, list by group, update and delete with versions;
//! health apart from the version; the history, a ring of a hundred slots in which a newer
//! delivery wins over an old one's retry.

use std::sync::Arc;

use chrono::{Duration, TimeZone, Utc};
use sortie_core::notify::{DestinationSpec, EventKind, Filters, Target};
use sortie_core::GroupPath;
use sortie_store::{
    DeliveryRecord, DeliveryState, DestinationHealth, DestinationRecord, Store, StoreError,
    HISTORY_LENGTH,
};

fn destination(group: &str, name: &str, url: &str) -> DestinationRecord {
    DestinationRecord {
        group: GroupPath::parse(group).unwrap(),
        name: name.into(),
        spec: DestinationSpec {
            description: "ops".into(),
            target: Target::Webhook { url: url.into() },
            filters: Filters {
                events: vec![EventKind::JobFailed],
                environments: "acme/**".into(),
            },
        },
        secret_arn: Some(format!(
            "arn:aws:secretsmanager:us-east-1:123456789012:secret:sortie/notify/{name}-AbCdEf"
        )),
        health: DestinationHealth::default(),
        created_by: "alice".into(),
        created_at: Utc.with_ymd_and_hms(2026, 11, 30, 0, 0, 0).unwrap(),
    }
}

fn delivery(seq: u64, id: &str, state: DeliveryState) -> DeliveryRecord {
    DeliveryRecord {
        seq,
        id: id.into(),
        event_type: "sortie.job.ended".into(),
        event_time: Utc.with_ymd_and_hms(2026, 11, 30, 0, 0, 0).unwrap()
            + Duration::seconds(seq as i64),
        environment: Some("acme/web/prod".into()),
        attempts: 1,
        attempted_at: Utc.with_ymd_and_hms(2026, 11, 30, 0, 0, 0).unwrap()
            + Duration::seconds(seq as i64),
        status: Some(503),
        state,
        latency_ms: 12,
        answer: "busy".into(),
        reason: None,
        event_id: format!("ev-{seq}"),
        detail: serde_json::json!({"environment": "acme/web/prod", "state": "failed"}),
    }
}

/// CRUD with versions; health changes keep the version; another group lists nothing.
pub async fn notification_destinations_are_created_listed_updated_and_deleted_with_versions<
    S: Store + 'static,
>(
    s: Arc<S>,
) {
    let ops = destination("acme/web", "ops", "https://hooks.example.com/a");
    let created = s.create_destination(&ops).await.unwrap();
    assert_eq!((created.version, &created.item), (1, &ops));
    assert!(matches!(
        s.create_destination(&ops).await,
        Err(StoreError::AlreadyExists { .. })
    ));
    s.create_destination(&destination(
        "acme/web",
        "audit",
        "https://hooks.example.com/b",
    ))
    .await
    .unwrap();
    let group = GroupPath::parse("acme/web").unwrap();
    let names: Vec<String> = s
        .list_destinations(&group)
        .await
        .unwrap()
        .into_iter()
        .map(|d| d.item.name)
        .collect();
    assert_eq!(names, ["audit", "ops"]);
    assert!(s
        .list_destinations(&GroupPath::parse("acme").unwrap())
        .await
        .unwrap()
        .is_empty());

    // Health is not configuration: the version stays.
    let failing = DestinationHealth {
        healthy: false,
        failing_since: Some(Utc.with_ymd_and_hms(2026, 11, 30, 1, 0, 0).unwrap()),
        last_failure: Some("the receiver answered 404".into()),
    };
    s.set_destination_health(&group, "ops", &failing)
        .await
        .unwrap();
    let read = s.get_destination(&group, "ops").await.unwrap();
    assert_eq!((read.version, &read.item.health), (1, &failing));

    // An update replaces the specification, checks the version, and keeps the health.
    let mut changed = ops.clone();
    changed.spec.target = Target::Webhook {
        url: "https://hooks.example.com/c".into(),
    };
    let updated = s.update_destination(&changed, Some(1)).await.unwrap();
    assert_eq!(updated.version, 2);
    assert_eq!(updated.item.health, failing);
    assert_eq!(
        s.get_destination(&group, "ops").await.unwrap().item.spec,
        changed.spec
    );
    assert!(matches!(
        s.update_destination(&changed, Some(1)).await,
        Err(StoreError::VersionMismatch {
            expected: 1,
            actual: 2,
            ..
        })
    ));
    assert!(matches!(
        s.delete_destination(&group, "ops", Some(1)).await,
        Err(StoreError::VersionMismatch { .. })
    ));
    s.delete_destination(&group, "ops", Some(2)).await.unwrap();
    assert!(matches!(
        s.get_destination(&group, "ops").await,
        Err(StoreError::NotFound { .. })
    ));
    assert!(matches!(
        s.set_destination_health(&group, "ops", &failing).await,
        Err(StoreError::NotFound { .. })
    ));
    assert!(matches!(
        s.next_delivery_seq(&group, "ops").await,
        Err(StoreError::NotFound { .. })
    ));
}

/// The history keeps the newest hundred deliveries, newest first; a retry of a delivery
/// whose slot a newer one took is not written; a destination made again starts anew.
pub async fn a_destinations_history_is_a_ring_of_a_hundred_slots<S: Store + 'static>(s: Arc<S>) {
    let ops = destination("acme", "ops", "https://hooks.example.com/a");
    s.create_destination(&ops).await.unwrap();
    let group = GroupPath::parse("acme").unwrap();
    let mut seqs = Vec::new();
    for _ in 0..HISTORY_LENGTH + 5 {
        seqs.push(s.next_delivery_seq(&group, "ops").await.unwrap());
    }
    assert_eq!(seqs, (1..=HISTORY_LENGTH as u64 + 5).collect::<Vec<_>>());
    for seq in &seqs {
        let written = s
            .put_delivery(
                &ops,
                &delivery(*seq, &format!("d-{seq}"), DeliveryState::Retrying),
            )
            .await
            .unwrap();
        assert!(written, "delivery {seq}");
    }
    let history = s.deliveries(&ops).await.unwrap();
    assert_eq!(history.len(), HISTORY_LENGTH);
    assert_eq!(history[0].seq, HISTORY_LENGTH as u64 + 5, "newest first");
    assert_eq!(history.last().unwrap().seq, 6, "the oldest five went");

    // Delivery 3's slot is delivery 103's now: 3's retry is not written.
    let late = delivery(3, "d-3", DeliveryState::Delivered);
    assert!(!s.put_delivery(&ops, &late).await.unwrap());
    // Delivery 104's own retry updates its slot.
    let mut retried = delivery(104, "d-104", DeliveryState::Delivered);
    retried.attempts = 2;
    retried.status = Some(200);
    assert!(s.put_delivery(&ops, &retried).await.unwrap());
    let history = s.deliveries(&ops).await.unwrap();
    let found = history.iter().find(|d| d.id == "d-104").unwrap();
    assert_eq!((found.attempts, found.state), (2, DeliveryState::Delivered));
    assert_eq!(history.len(), HISTORY_LENGTH);

    // Deleted and made again: an empty history, and the sequence starts again.
    s.delete_destination(&group, "ops", None).await.unwrap();
    let mut again = ops.clone();
    again.created_at += Duration::seconds(1);
    s.create_destination(&again).await.unwrap();
    assert!(s.deliveries(&again).await.unwrap().is_empty());
    assert_eq!(s.next_delivery_seq(&group, "ops").await.unwrap(), 1);
}
