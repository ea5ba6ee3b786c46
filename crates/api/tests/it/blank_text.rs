//! Free-text identifiers that are blank (empty or only spaces) are refused with 400
//! naming the field (issue 25, item 12), through the one shared check in core
//! (`sortie_core::problems::refuse_blank`).

use crate::common;

use common::{seed_org, Api};
use serde_json::{json, Value};
use sortie_client::endpoints;

/// Asserts a 400 whose fields name `path` as blank.
fn assert_blank(r: &common::Reply, path: &str) {
    assert_eq!(r.status, 400, "{path}: {}", r.body);
    let fields = r.body["error"]["fields"].as_array().expect("fields");
    assert!(
        fields.iter().any(
            |f| f["path"] == path && f["problem"].as_str().is_some_and(|p| p.contains("blank"))
        ),
        "{path} not named blank in {}",
        r.body
    );
}

async fn grant(api: &Api, grantee: Value) -> common::Reply {
    let body = json!({"role": "deployer", "grantee": grantee}).to_string();
    api.admin(endpoints::grant_membership("acme"), Some(&body))
        .await
}

#[tokio::test]
async fn a_membership_with_a_blank_subject_claim_pattern_or_issuer_is_refused() {
    let api = Api::new().await;
    seed_org(&api, "acme").await;
    for subject in [" ", "   \t", ""] {
        let r = grant(&api, json!({"kind": "subject", "subject": subject})).await;
        assert_blank(&r, "grantee.subject");
    }
    let r = grant(
        &api,
        json!({"kind": "subject", "subject": "alice", "issuer": "  "}),
    )
    .await;
    assert_blank(&r, "grantee.issuer");
    let r = grant(
        &api,
        json!({"kind": "claim_pattern", "claim": " ", "pattern": "repo:*"}),
    )
    .await;
    assert_blank(&r, "grantee.claim");
    let r = grant(
        &api,
        json!({"kind": "claim_pattern", "claim": "sub", "pattern": "  "}),
    )
    .await;
    assert_blank(&r, "grantee.pattern");
    // Nothing was granted; a real subject still is.
    let r = grant(&api, json!({"kind": "subject", "subject": "alice"})).await;
    assert_eq!(r.status, 201, "{}", r.body);
}

#[tokio::test]
async fn blank_label_keys_tags_and_criteria_are_refused() {
    let api = Api::new().await;
    seed_org(&api, "acme").await;
    let body = json!({"name": "prod", "env_type": "production", "labels": {"  ": "x"}});
    let r = api
        .admin(
            endpoints::create_environment("acme"),
            Some(&body.to_string()),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.body["error"]["fields"][0]["problem"]
            .as_str()
            .is_some_and(|p| p.contains("blank")),
        "{}",
        r.body
    );
    let body = json!({"name": "prod", "env_type": "production", "tags": [" "]});
    let r = api
        .admin(
            endpoints::create_environment("acme"),
            Some(&body.to_string()),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(
        r.body["error"]["fields"][0]["path"], "tags[0]",
        "{}",
        r.body
    );
    let body = json!({"name": "prod", "env_type": "   "});
    let r = api
        .admin(
            endpoints::create_environment("acme"),
            Some(&body.to_string()),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(
        r.body["error"]["fields"][0]["path"], "env_type",
        "{}",
        r.body
    );
    let rule = json!({"id": "blank", "runner_id": "acme/local", "criteria": {"env_type": " "}});
    let r = api
        .admin(endpoints::create_rule("acme"), Some(&rule.to_string()))
        .await;
    assert_blank(&r, "criteria.env_type");
}
