//! One meaning for a JWT claim (issue 25, item 7). API Gateway's HTTP API JWT authorizer
//! hands an array claim to the function as one bracketed, space-separated string
//! (`"[admins devs]"`), while a token the API verifies itself (an agent's OIDC token) keeps
//! the JSON array. A claim pattern must match the same principals on both paths.
//!
//! The same token's claims go in both ways: as the API Gateway payload v2 sample
//! `events/apigw-whoami-array-claim.json` (through the `api` function's adapter), and as
//! the JSON claims an OIDC verifier returns (through an agent pool's OIDC trust, and a
//! membership's check on a principal made from them).

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Body;
use axum::http::Request;
use chrono::Utc;
use serde_json::{json, Value};
use sortie_api::oidc::{Claims, OidcError, OidcVerifier};
use sortie_api::{router, VerifiedClaims};
use sortie_core::{Grantee, GroupPath, Membership, Principal, Role};
use sortie_store::{MembershipRecord, MembershipStore, MemoryStore};
use sortie_testkit::world::World;
use tower::ServiceExt;

/// An OIDC verifier that accepts any token as the one whose claims it holds.
struct TheToken(Claims);

#[async_trait::async_trait]
impl OidcVerifier for TheToken {
    async fn verify(&self, _: &str, _: &str, _: &str) -> Result<Claims, OidcError> {
        Ok(self.0.clone())
    }
}

/// The sample API Gateway event: the claims as the authorizer hands them, every one a string.
fn gateway_event() -> Value {
    let path = sortie_testkit::repo_root().join("events/apigw-whoami-array-claim.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The same token's claims as the token holds them (and an OIDC verifier returns them):
/// `groups` is the JSON array the authorizer wrote as `"[admins devs]"`.
fn token_claims() -> Claims {
    let event = gateway_event();
    let gateway = event["requestContext"]["authorizer"]["jwt"]["claims"]
        .as_object()
        .unwrap();
    assert_eq!(
        gateway["groups"], "[admins devs]",
        "the sample carries the bracketed form"
    );
    let mut claims: Claims = gateway
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    claims.insert("groups".into(), json!(["admins", "devs"]));
    claims
}

/// Deployer on `acme` for every principal one of whose `groups` matches `dev*`.
fn devs_deploy() -> Membership {
    Membership {
        group: GroupPath::parse("acme").unwrap(),
        role: Role::Deployer,
        grantee: Grantee::ClaimPattern {
            claim: "groups".into(),
            pattern: "dev*".into(),
            issuer: Some("https://idp.example.com".into()),
        },
    }
}

async fn app(store: Arc<MemoryStore>, oidc: Arc<dyn OidcVerifier>) -> axum::Router {
    store
        .put_membership(&MembershipRecord {
            id: sortie_core::tokens::new_id(),
            membership: devs_deploy(),
            granted_by: "test".into(),
            granted_at: Utc::now(),
        })
        .await
        .unwrap();
    let world = World::fast_with(|setup| {
        setup.parts.store = store;
        setup.parts.oidc = Some(oidc);
    });
    let mut state = world.api_state();
    state.admin_subjects = vec!["admin".into()];
    router(state)
}

async fn body(resp: axum::response::Response) -> (u16, Value) {
    let status = resp.status().as_u16();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

#[tokio::test]
async fn the_bracketed_gateway_claim_and_the_json_array_match_the_same_membership() {
    let store = Arc::new(MemoryStore::new());
    let app = app(store.clone(), Arc::new(TheToken(token_claims()))).await;

    // API Gateway's path: the real payload v2 event through the `api` function's adapter.
    let request = lambda_http::request::from_str(&gateway_event().to_string()).unwrap();
    let verified = sortie_lambda_adapters::verified_claims(&request);
    assert_eq!(verified.0["groups"], "[admins devs]");
    let (status, whoami) = body(
        sortie_lambda_adapters::api_request(app.clone(), request)
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200, "{whoami}");
    assert_eq!(whoami["subject"], "ci-bot");
    assert_eq!(
        whoami["memberships"],
        json!([{"group": "acme", "role": "deployer"}]),
        "the bracketed claim's element `devs` matches `dev*`"
    );

    // The token the API verifies itself: the same claims, `groups` a JSON array.
    let oidc = Principal::from_claims(token_claims()).with_memberships([devs_deploy()]);
    let gateway = Principal::from_claims(verified.0).with_memberships([devs_deploy()]);
    assert_eq!(oidc.memberships, gateway.memberships);
    assert_eq!(oidc.memberships, vec![devs_deploy()]);

    // And through the API with those JSON claims as the verified caller.
    let mut req = Request::builder()
        .uri("/v1/whoami?org=acme")
        .body(Body::empty())
        .unwrap();
    req.extensions_mut().insert(VerifiedClaims(token_claims()));
    let (status, direct) = body(app.clone().oneshot(req).await.unwrap()).await;
    assert_eq!(status, 200, "{direct}");
    assert_eq!(direct["memberships"], whoami["memberships"]);

    // A pattern that matches no element matches on neither path.
    let admins_only = Membership {
        grantee: Grantee::ClaimPattern {
            claim: "groups".into(),
            pattern: "[admins devs]".into(),
            issuer: None,
        },
        ..devs_deploy()
    };
    for claims in [
        token_claims(),
        sortie_lambda_adapters::verified_claims(
            &lambda_http::request::from_str(&gateway_event().to_string()).unwrap(),
        )
        .0,
    ] {
        let p = Principal::from_claims(claims).with_memberships([admins_only.clone()]);
        assert!(p.memberships.is_empty(), "{:?}", p.memberships);
    }
}

#[tokio::test]
async fn an_agent_pools_oidc_pattern_on_an_array_claim_matches_its_elements() {
    let store = Arc::new(MemoryStore::new());
    for (claims, expected) in [
        (token_claims(), 204),
        // The bracketed form, should a verifier ever hand it over, means the same.
        (
            {
                let mut c = token_claims();
                c.insert("groups".into(), json!("[admins devs]"));
                c
            },
            204,
        ),
        (
            {
                let mut c = token_claims();
                c.insert("groups".into(), json!(["admins", "ops"]));
                c
            },
            401,
        ),
    ] {
        let app = app(store.clone(), Arc::new(TheToken(claims.clone()))).await;
        let mut req = Request::builder()
            .method("POST")
            .uri("/v1/agent-pools")
            .header("content-type", "application/json")
            .body(Body::from(
                json!({"group": "acme", "name": "eks", "oidc": {
                    "issuer": "https://idp.example.com", "audience": "sortie",
                    "claim": "groups", "pattern": "dev*"}})
                .to_string(),
            ))
            .unwrap();
        req.extensions_mut().insert(VerifiedClaims(BTreeMap::from([(
            "sub".to_string(),
            json!("admin"),
        )])));
        let (status, pool) = body(app.clone().oneshot(req).await.unwrap()).await;
        assert_eq!(status, 201, "{pool}");
        let id = pool["id"].as_str().unwrap();
        let req = Request::builder()
            .method("POST")
            .uri(format!("/v1/agent-pools/{id}/claims"))
            .header("content-type", "application/json")
            .header("authorization", "Bearer an.oidc.token")
            .body(Body::from(r#"{"agent":"a1","wait_seconds":0}"#))
            .unwrap();
        let (status, answer) = body(app.oneshot(req).await.unwrap()).await;
        assert_eq!(status, expected, "groups {}: {answer}", claims["groups"]);
    }
}
