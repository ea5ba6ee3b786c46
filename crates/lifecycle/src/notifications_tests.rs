use serde_json::json;
use sortie_launch::MemoryJobSecrets;
use sortie_store::MemoryStore;

use super::*;

fn service() -> (Notifications, Arc<MemoryJobSecrets>) {
    let secrets = Arc::new(MemoryJobSecrets::default());
    (
        Notifications {
            store: Arc::new(MemoryStore::new()),
            secrets: secrets.clone(),
            local: false,
            bus: Arc::new(crate::testing::NoBus),
        },
        secrets,
    )
}

fn g(path: &str) -> GroupPath {
    GroupPath::parse(path).unwrap()
}

fn secret_values(secrets: &MemoryJobSecrets) -> Vec<String> {
    secrets
        .secrets
        .lock()
        .unwrap()
        .values()
        .map(|s| s.value.clone())
        .collect()
}

#[tokio::test]
async fn a_webhooks_signing_secret_is_made_kept_as_a_secret_and_shown_once() {
    let (svc, secrets) = service();
    let made = svc
        .create(
            &g("acme"),
            "ops",
            &json!({"type": "webhook", "url": "https://hooks.example.com/x"}),
            "alice",
            Utc::now(),
        )
        .await
        .unwrap();
    assert!(
        !format!("{made:?}").contains(SIGNING_SECRET_PREFIX),
        "Debug shows the secret"
    );
    let secret = made.signing_secret.unwrap();
    assert!(secret.starts_with(SIGNING_SECRET_PREFIX) && secret.len() == 6 + 64);
    // The table holds its ARN; Secrets Manager holds the value.
    let stored = svc.get(&g("acme"), "ops").await.unwrap().item;
    let arn = stored.secret_arn.clone().unwrap();
    assert!(arn.contains(":secret:sortie/notify/acme/ops/"), "{arn}");
    assert!(!serde_json::to_string(&stored).unwrap().contains(&secret));
    assert_eq!(secret_values(&secrets), std::slice::from_ref(&secret));

    // Rotating makes a new one, answered once, and deletes the old.
    let rotated = svc.rotate_secret(&g("acme"), "ops").await.unwrap();
    let new = rotated.signing_secret.unwrap();
    assert_ne!(new, secret);
    assert_eq!(secret_values(&secrets), [new]);
    assert_eq!(rotated.destination.version, 2);
    assert_eq!(*secrets.deleted.lock().unwrap(), [arn]);

    // Deleting the destination deletes its secret.
    svc.delete(&g("acme"), "ops", None).await.unwrap();
    assert!(secret_values(&secrets).is_empty());
}

#[tokio::test]
async fn a_slack_url_is_kept_as_a_secret_replaced_by_an_update_and_never_stored() {
    let (svc, secrets) = service();
    let url = "https://hooks.slack.com/services/T0/B0/first";
    let made = svc
        .create(
            &g("acme/web"),
            "chat",
            &json!({"type": "slack", "slack_webhook_url": url, "events": ["job_failed"]}),
            "alice",
            Utc::now(),
        )
        .await
        .unwrap();
    assert_eq!(made.signing_secret, None);
    let stored = serde_json::to_string(&made.destination.item).unwrap();
    assert!(!stored.contains("hooks.slack.com"), "{stored}");
    assert_eq!(secret_values(&secrets), [url]);

    // Without a URL, an update keeps the secret; with one, it replaces it.
    let kept = svc
        .update(
            &g("acme/web"),
            "chat",
            &json!({"type": "slack", "events": ["job_failed", "drift_detected"]}),
            None,
        )
        .await
        .unwrap();
    assert_eq!(kept.item.secret_arn, made.destination.item.secret_arn);
    assert_eq!(kept.item.spec.filters.events.len(), 2);
    let second = "https://hooks.slack.com/services/T0/B0/second";
    let replaced = svc
        .update(
            &g("acme/web"),
            "chat",
            &json!({"type": "slack", "slack_webhook_url": second}),
            Some(kept.version),
        )
        .await
        .unwrap();
    assert_ne!(replaced.item.secret_arn, kept.item.secret_arn);
    assert_eq!(secret_values(&secrets), [second]);

    // A Slack destination stays one; one without its URL is not made.
    let refused = svc
        .update(
            &g("acme/web"),
            "chat",
            &json!({"type": "webhook", "url": "https://hooks.example.com/x"}),
            None,
        )
        .await
        .unwrap_err();
    assert!(matches!(refused, NotificationRefusal::Field { ref field, .. } if field == "type"));
    let refused = svc
        .create(
            &g("acme"),
            "nourl",
            &json!({"type": "slack"}),
            "alice",
            Utc::now(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(refused, NotificationRefusal::Field { ref field, .. } if field == "slack_webhook_url")
    );
}

#[tokio::test]
async fn nothing_is_left_behind_when_a_destination_is_not_made() {
    let (svc, secrets) = service();
    let body = json!({"type": "webhook", "url": "https://hooks.example.com/x"});
    svc.create(&g("acme"), "ops", &body, "alice", Utc::now())
        .await
        .unwrap();
    // The name is taken: the secret made for the second is deleted.
    let taken = svc
        .create(&g("acme"), "ops", &body, "bob", Utc::now())
        .await
        .unwrap_err();
    assert!(matches!(
        taken,
        NotificationRefusal::Store(StoreError::AlreadyExists { .. })
    ));
    assert_eq!(secret_values(&secrets).len(), 1);
    // A bad name or body makes no secret at all.
    for (name, body) in [
        ("bad/name", body.clone()),
        ("ok", json!({"type": "webhook", "url": "https://10.0.0.1/"})),
    ] {
        assert!(svc
            .create(&g("acme"), name, &body, "alice", Utc::now())
            .await
            .is_err());
    }
    assert_eq!(secret_values(&secrets).len(), 1);
}

#[tokio::test]
async fn an_event_reaches_the_destinations_of_its_group_and_ancestors_that_want_it() {
    let (svc, _) = service();
    let make = |group: &'static str, name: &'static str, body: serde_json::Value| {
        let svc = svc.clone();
        async move {
            svc.create(&g(group), name, &body, "alice", Utc::now())
                .await
                .unwrap()
        }
    };
    let hook = |extra: serde_json::Value| {
        let mut body = json!({"type": "webhook", "url": "https://hooks.example.com/x"});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        body
    };
    make("acme", "everything", hook(json!({}))).await;
    make(
        "acme",
        "prod-failures",
        hook(json!({"events": ["job_failed"], "environments": "acme/**/prod"})),
    )
    .await;
    make(
        "acme/web",
        "web",
        hook(json!({"events": ["job_failed", "job_completed"]})),
    )
    .await;
    make("acme/api", "api", hook(json!({}))).await;
    make("other", "other", hook(json!({}))).await;
    let names = |found: Vec<DestinationRecord>| -> Vec<String> {
        found.into_iter().map(|d| d.name).collect()
    };
    assert_eq!(
        names(
            svc.destinations_for(&g("acme/web"), EventKind::JobFailed, Some("acme/web/prod"))
                .await
                .unwrap()
        ),
        ["web", "everything", "prod-failures"]
    );
    assert_eq!(
        names(
            svc.destinations_for(
                &g("acme/web"),
                EventKind::DriftDetected,
                Some("acme/web/dev")
            )
            .await
            .unwrap()
        ),
        ["everything"]
    );
}
