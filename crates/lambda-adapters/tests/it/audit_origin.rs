//! The audit trail's request context (issue 44): a change made through the `api`
//! function's adapter, from API Gateway's payload v2 sample (`events/apigw-create-runner.json`),
//! is recorded with the request id, the caller's address and its user agent as API Gateway
//! saw them, and the actor its JWT authorizer verified.

use sortie_api::router;
use sortie_core::audit::{AuditEntry, CredentialKind};
use sortie_store::{AuditRange, AuditStore};
use sortie_testkit::world::World;

#[tokio::test]
async fn an_entry_carries_api_gateways_request_id_source_address_and_user_agent() {
    let world = World::fast();
    let mut state = world.api_state();
    state.admin_subjects = vec!["admin".into()];
    let app = router(state);
    let path = sortie_testkit::repo_root().join("events/apigw-create-runner.json");
    let event = std::fs::read_to_string(path).unwrap();
    let request = lambda_http::request::from_str(&event).unwrap();
    let response = sortie_lambda_adapters::api_request(app, request)
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 201);
    let page = world
        .fakes()
        .store
        .audit_page(
            "acme",
            &AuditRange {
                limit: 10,
                ..AuditRange::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(page.records.len(), 1);
    let entry: AuditEntry = serde_json::from_str(&page.records[0].body).unwrap();
    assert_eq!(entry.action, "create_runner");
    assert_eq!(entry.target, "/v1/groups/acme/-/runners/local");
    assert_eq!(entry.request_id, "Hk3xBjP0IAMEK2B=");
    assert_eq!(entry.source_ip.as_deref(), Some("203.0.113.10"));
    assert_eq!(entry.user_agent.as_deref(), Some("sortie-cli/0.1.0"));
    assert_eq!(entry.actor.subject, "admin");
    assert_eq!(
        entry.actor.issuer.as_deref(),
        Some("https://idp.example.com")
    );
    assert_eq!(entry.actor.credential, CredentialKind::User);
    assert_eq!(
        entry.after.as_deref().map(str::len),
        Some(64),
        "the body's digest"
    );
}
