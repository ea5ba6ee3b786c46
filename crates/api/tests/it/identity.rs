//! Sortie as an OIDC issuer through the HTTP API: the public discovery document and JWKS,
//! and job identity tokens minted for a job's own token only, for the phases its task may
//! run, verified with the published key as a cloud verifies them. In memory (a fake KMS)
//! and on moto's KMS. Every answer is checked against the OpenAPI document.

use crate::common;

use common::{seed_org, Api};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{json, Value};
use sortie_client::endpoints;
use sortie_testkit::world::{World, API_URL, IDENTITY_KEY};
use sortie_wiring::IdentityKeys;

fn keys(signing: &str) -> IdentityKeys {
    IdentityKeys {
        signing: signing.into(),
        standby: Some(format!("{signing}-standby")),
        token_seconds: 900,
        keys_ttl: std::time::Duration::from_secs(60),
    }
}

const IDENTITY_RUNNER: &str = "runner_configuration: {type: local}
state_storage_configuration: {type: local, directory: /tmp/sortie-state}
identity:
  audience: sts.amazonaws.com
  aws:
    plan_role_arn: arn:aws:iam::123456789012:role/acme-read
    apply_role_arn: arn:aws:iam::123456789012:role/acme-write
";

/// Org `acme` whose rule picks a runner with an identity block, and environment `acme/dev`.
async fn seeded(api: &Api) {
    seed_org(api, "acme").await;
    let r = api
        .admin(
            endpoints::update_runner("acme", "local"),
            Some(IDENTITY_RUNNER),
        )
        .await;
    assert!(r.status.is_success(), "{}", r.body);
    api.create_env("acme", "dev", "development").await;
}

/// Submits `operation` to `acme/dev` and launches it with `token`; its id.
async fn launched(api: &Api, operation: &str, token: &str) -> String {
    let body = json!({"operation": operation, "files": {"main.tf": ""}}).to_string();
    let r = api
        .admin(endpoints::submit_job("acme/dev"), Some(&body))
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let id = r.body["id"].as_str().unwrap().to_string();
    api.launch(&id, token).await;
    id
}

async fn mint(api: &Api, id: &str, token: &str, body: &str) -> common::Reply {
    api.send(
        None,
        endpoints::mint_identity_token(id),
        Some(body),
        &[
            ("authorization", &format!("Bearer {token}")),
            ("content-type", "application/json"),
        ],
    )
    .await
}

/// Verifies `token` as a cloud does: the key its header names, from the public JWKS.
async fn verify(api: &Api, token: &str) -> Value {
    let jwks = api
        .call(None, "GET", "/.well-known/jwks.json", None, &[])
        .await;
    assert_eq!(jwks.status, 200, "{}", jwks.body);
    let kid = jsonwebtoken::decode_header(token).unwrap().kid.unwrap();
    let key = jwks.body["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["kid"] == kid.as_str())
        .expect("the token's key is published");
    let key =
        DecodingKey::from_ec_components(key["x"].as_str().unwrap(), key["y"].as_str().unwrap())
            .unwrap();
    let mut validation = Validation::new(Algorithm::ES256);
    validation.set_audience(&["sts.amazonaws.com"]);
    validation.set_issuer(&[API_URL.trim_end_matches('/')]);
    validation.leeway = 0;
    jsonwebtoken::decode::<Value>(token, &key, &validation)
        .unwrap()
        .claims
}

#[tokio::test]
async fn the_discovery_document_and_keys_are_public_and_cacheable() {
    let api = Api::over(World::fast_with(|s| {
        s.resources.identity = Some(keys(IDENTITY_KEY))
    }))
    .await;
    let discovery = api
        .call(None, "GET", "/.well-known/openid-configuration", None, &[])
        .await;
    assert_eq!(discovery.status, 200, "{}", discovery.body);
    let issuer = API_URL.trim_end_matches('/');
    assert_eq!(discovery.body["issuer"], issuer);
    assert_eq!(
        discovery.body["jwks_uri"],
        format!("{issuer}/.well-known/jwks.json")
    );
    assert_eq!(
        discovery.headers["cache-control"], "public, max-age=300",
        "a cloud may cache the keys"
    );
    let jwks = api
        .call(None, "GET", "/.well-known/jwks.json", None, &[])
        .await;
    assert_eq!(jwks.status, 200);
    let listed = jwks.body["keys"].as_array().unwrap();
    assert_eq!(listed.len(), 1, "no standby key: {}", jwks.body);
    assert_eq!(listed[0]["alg"], "ES256");
    assert_eq!(listed[0]["crv"], "P-256");
    // Every other answer stays uncacheable.
    let health = api.send(None, endpoints::health(), None, &[]).await;
    assert_eq!(health.headers["cache-control"], "no-store");

    // A deployment without a signing key has no issuer.
    let none = Api::new().await;
    for path in [
        "/.well-known/openid-configuration",
        "/.well-known/jwks.json",
    ] {
        let r = none.call(None, "GET", path, None, &[]).await;
        assert_eq!(r.status, 404, "{path}: {}", r.body);
        assert!(
            r.body.to_string().contains("no job identity tokens"),
            "{}",
            r.body
        );
    }
}

#[tokio::test]
async fn a_job_gets_a_token_per_phase_its_task_may_run_and_nothing_keeps_it() {
    let api = Api::over(World::fast_with(|s| {
        s.resources.identity = Some(keys(IDENTITY_KEY))
    }))
    .await;
    seeded(&api).await;
    let id = launched(&api, "apply", "t-apply").await;
    for phase in ["plan", "apply"] {
        let r = mint(&api, &id, "t-apply", &json!({ "phase": phase }).to_string()).await;
        assert_eq!(r.status, 200, "{phase}: {}", r.body);
        let token = r.body["token"].as_str().unwrap().to_string();
        let claims = verify(&api, &token).await;
        assert_eq!(
            claims["sub"],
            format!("org:acme:env:acme/dev:op:apply:phase:{phase}")
        );
        assert_eq!(claims["job_id"], id.as_str());
        assert_eq!(claims["requested_by"], "admin");
        assert_eq!(
            claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap(),
            900
        );
        // Neither the job's record nor any event holds the token.
        let record = api
            .store
            .get_job(&sortie_core::JobId::from(id.as_str()))
            .await
            .unwrap();
        assert!(!serde_json::to_string(&record.job).unwrap().contains(&token));
        let view = api.admin(endpoints::get_job(&id), None).await;
        assert!(!view.body.to_string().contains(&token));
        let events = format!("{:?}", api.world.fakes().bus.published());
        assert!(!events.contains(&token), "an event holds the token");
    }

    // A plan job has no apply phase.
    let plan = launched(&api, "plan", "t-plan").await;
    let r = mint(&api, &plan, "t-plan", r#"{"phase":"apply"}"#).await;
    assert_eq!(r.status, 409, "{}", r.body);
    assert_eq!(r.body["error"]["code"], "identity_refused");
    assert!(r.body.to_string().contains("no apply phase"), "{}", r.body);
    assert_eq!(
        mint(&api, &plan, "t-plan", r#"{"phase":"plan"}"#)
            .await
            .status,
        200
    );

    // Another job's token, or none, gets nothing (and learns nothing).
    let r = mint(&api, &id, "t-plan", r#"{"phase":"plan"}"#).await;
    assert_eq!(r.status, 401, "{}", r.body);
    let r = api
        .send(
            Some("admin"),
            endpoints::mint_identity_token(&id),
            Some(r#"{"phase":"plan"}"#),
            &[("content-type", "application/json")],
        )
        .await;
    assert_eq!(
        r.status, 401,
        "a user's JWT is not the job's token: {}",
        r.body
    );

    // Bad bodies are named by field.
    for (body, field) in [
        (r#"{"phase":"write"}"#, "phase"),
        (r#"{}"#, "phase"),
        (r#"{"phase":"plan","role":"admin"}"#, "role"),
        (r#"["plan"]"#, "body"),
    ] {
        let r = mint(&api, &id, "t-apply", body).await;
        assert_eq!(r.status, 400, "{body}: {}", r.body);
        assert_eq!(
            r.body["error"]["fields"][0]["path"], field,
            "{body}: {}",
            r.body
        );
    }
}

#[tokio::test]
async fn a_runner_without_identity_or_a_deployment_without_keys_gets_no_token() {
    // The runner has no identity block.
    let api = Api::over(World::fast_with(|s| {
        s.resources.identity = Some(keys(IDENTITY_KEY))
    }))
    .await;
    seed_org(&api, "acme").await;
    api.create_env("acme", "dev", "development").await;
    let id = launched(&api, "apply", "t-1").await;
    let r = mint(&api, &id, "t-1", r#"{"phase":"plan"}"#).await;
    assert_eq!(r.status, 409, "{}", r.body);
    assert!(
        r.body.to_string().contains("no identity block"),
        "{}",
        r.body
    );

    // The deployment has no signing key.
    let api = Api::new().await;
    seeded(&api).await;
    let id = launched(&api, "apply", "t-1").await;
    let r = mint(&api, &id, "t-1", r#"{"phase":"plan"}"#).await;
    assert_eq!(r.status, 404, "{}", r.body);

    // The signing key's alias names nothing: KMS's answer, quoted, as 502.
    let api = Api::over(World::fast_with(|s| {
        s.resources.identity = Some(keys("alias/nothing"))
    }))
    .await;
    seeded(&api).await;
    let id = launched(&api, "apply", "t-1").await;
    let r = mint(&api, &id, "t-1", r#"{"phase":"plan"}"#).await;
    assert_eq!(r.status, 502, "{}", r.body);
    assert_eq!(r.body["error"]["code"], "identity_unavailable");
    assert!(r.body.to_string().contains("alias/nothing"), "{}", r.body);
}

#[tokio::test]
async fn on_moto_kms_the_token_verifies_with_the_published_key() {
    let aws = sortie_testkit::require_aws!();
    let config = aws.sdk_config().await;
    let kms = aws_sdk_kms::Client::new(&config);
    let key = kms
        .create_key()
        .key_spec(aws_sdk_kms::types::KeySpec::EccNistP256)
        .key_usage(aws_sdk_kms::types::KeyUsageType::SignVerify)
        .send()
        .await
        .unwrap();
    let alias = format!("alias/{}", sortie_testkit::unique("identity"));
    kms.create_alias()
        .alias_name(&alias)
        .target_key_id(key.key_metadata().unwrap().key_id())
        .send()
        .await
        .unwrap();
    let world = World::aws_with(&aws, |s, _| s.resources.identity = Some(keys(&alias))).await;
    let api = Api::over(world).await;
    seeded(&api).await;
    let id = launched(&api, "destroy", "t-1").await;
    let r = mint(&api, &id, "t-1", r#"{"phase":"apply"}"#).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let claims = verify(&api, r.body["token"].as_str().unwrap()).await;
    assert_eq!(
        claims["sub"],
        "org:acme:env:acme/dev:op:destroy:phase:apply"
    );
}
