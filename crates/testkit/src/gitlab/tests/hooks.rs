//! Webhook deliveries: GitLab's headers, a retry's idempotency key, and payloads from the
//! double's state.

use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::super::webhook::{self, MERGE_REQUEST_HOOK, NOTE_HOOK, PUSH_HOOK};
use super::super::*;
use super::PROJECT;

type Seen = Arc<Mutex<Vec<(axum::http::HeaderMap, Value)>>>;

/// A receiver on 127.0.0.1 that keeps every delivery's headers and body.
async fn receiver() -> (String, Seen) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let seen: Seen = Arc::new(Mutex::new(Vec::new()));
    let keep = seen.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(
            move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                let keep = keep.clone();
                async move {
                    let value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    keep.lock().unwrap().push((headers, value));
                    "ok"
                }
            },
        ),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, seen)
}

fn header(headers: &axum::http::HeaderMap, name: &str) -> String {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

#[tokio::test]
async fn webhooks_carry_gitlabs_headers_and_keep_the_key_on_retry() {
    let (url, seen) = receiver().await;
    let double = GitlabDouble::start().await;
    double.add_project(PROJECT);
    double.add_merge_request(PROJECT, MergeRequestSpec::new("alice", "h1"));
    let hook = double.hook(&url, "s3cret");
    let open = hook.delivery(
        MERGE_REQUEST_HOOK,
        double.payloads().merge_request(PROJECT, 1, "open"),
    );
    assert_eq!(open.send().await, (200, "ok".to_string()));
    assert_eq!(open.send().await.0, 200, "a retry");
    let push = hook.delivery(
        PUSH_HOOK,
        double
            .payloads()
            .push(PROJECT, "refs/heads/topic", "h1", "h2", "alice"),
    );
    push.send().await;
    assert_eq!(
        webhook::send_webhook(&url, "", NOTE_HOOK, &Value::Null)
            .await
            .0,
        200
    );
    let seen = seen.lock().unwrap();
    let (first, body) = &seen[0];
    assert_eq!(header(first, "x-gitlab-event"), "Merge Request Hook");
    assert_eq!(
        header(first, "x-gitlab-token"),
        "s3cret",
        "the secret token, as-is"
    );
    assert_eq!(header(first, "content-type"), "application/json");
    assert_eq!(header(first, "x-gitlab-instance"), double.url());
    assert!(header(first, "user-agent").starts_with("GitLab/"));
    assert_eq!(body["object_kind"], "merge_request");
    assert_eq!(body["object_attributes"]["action"], "open");
    let (retry, _) = &seen[1];
    assert_eq!(
        header(retry, "idempotency-key"),
        header(first, "idempotency-key")
    );
    assert_eq!(
        header(retry, "x-gitlab-event-uuid"),
        header(first, "x-gitlab-event-uuid")
    );
    let (other, push_body) = &seen[2];
    assert_ne!(
        header(other, "idempotency-key"),
        header(first, "idempotency-key")
    );
    assert_eq!(
        header(other, "x-gitlab-webhook-uuid"),
        header(first, "x-gitlab-webhook-uuid")
    );
    assert_eq!(
        (
            push_body["object_kind"].clone(),
            push_body["checkout_sha"].clone()
        ),
        (serde_json::json!("push"), serde_json::json!("h2"))
    );
    assert!(
        header(&seen[3].0, "x-gitlab-token").is_empty(),
        "no secret token, no header"
    );
}

#[tokio::test]
async fn payloads_follow_the_documented_shapes() {
    let double = GitlabDouble::start().await;
    double.add_project(PROJECT);
    double.add_merge_request(
        PROJECT,
        MergeRequestSpec::new("alice", "h1").from_fork("alice/infra"),
    );
    let payloads = double.payloads();
    let update = payloads.merge_request(PROJECT, 1, "update");
    assert!(
        update["object_attributes"].get("oldrev").is_none(),
        "no new commits, no oldrev"
    );
    double.push(PROJECT, 1, "h2", None);
    let pushed = double.payloads().merge_request_push(PROJECT, 1);
    assert_eq!(pushed["object_attributes"]["oldrev"], "h1");
    assert_eq!(pushed["object_attributes"]["last_commit"]["id"], "h2");
    assert_ne!(
        pushed["object_attributes"]["source_project_id"],
        pushed["object_attributes"]["target_project_id"]
    );
    assert_eq!(pushed["project"]["path_with_namespace"], PROJECT);
    let approved = double
        .payloads()
        .merge_request_by(PROJECT, 1, "approved", "dana");
    assert_eq!(approved["user"]["username"], "dana");
    let note = double.add_user_note(PROJECT, 1, "bob", "sortie plan");
    let hook = double.payloads().note(PROJECT, 1, note);
    assert_eq!(hook["object_kind"], "note");
    assert_eq!(hook["object_attributes"]["noteable_type"], "MergeRequest");
    assert_eq!(hook["object_attributes"]["note"], "sortie plan");
    assert_eq!(hook["merge_request"]["iid"], 1);
    assert_eq!(hook["user"]["username"], "bob");
}
