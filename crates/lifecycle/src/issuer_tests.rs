use std::collections::HashMap;

use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::json;
use sortie_core::identity::JobIdentityClaims;
use sortie_core::{EnvPath, JobPhase, JobRequest, Review, RunnerId, RunnerSpec};
use sortie_launch::kms::MemoryKms;

use super::*;

const SIGNING: &str = "alias/sortie-identity";
const STANDBY: &str = "alias/sortie-identity-standby";

fn runner(identity: bool) -> RunnerSpec {
    let block = if identity {
        "identity:
  audience: sts.amazonaws.com
  aws:
    plan_role_arn: arn:aws:iam::123456789012:role/web-read
    apply_role_arn: arn:aws:iam::123456789012:role/web-write
"
    } else {
        ""
    };
    RunnerSpec::parse(&format!(
        "runner_configuration: {{type: local}}
state_storage_configuration: {{type: local, directory: /tmp/state}}
{block}"
    ))
    .unwrap()
}

fn job(operation: &str, task_phase: Option<JobPhase>, identity: bool) -> Job {
    let request: JobRequest = serde_json::from_value(json!({
        "operation": operation,
        "source": {"type": "inline", "files": {"main.tf": ""}},
    }))
    .unwrap();
    let mut job = Job::new(
        "01jnx6v4k2m8q9r3s5t7w0y1za",
        EnvPath::parse("acme/web/dev").unwrap(),
        RunnerId::parse("acme/local").unwrap(),
        request,
        "alice".into(),
        Utc::now(),
    );
    job.runner_spec = Some(runner(identity));
    job.review = task_phase.map(|phase| Review {
        four_eyes: false,
        timeout_seconds: 3600,
        phase,
        awaiting_since: None,
        decision: None,
        policy_only: false,
    });
    job
}

fn issuer(kms: &MemoryKms, keys_ttl: Duration) -> Issuer {
    Issuer::new(
        Arc::new(kms.clone()),
        IssuerConfig {
            url: "https://api.sortie.example.com/".into(),
            signing_key: SIGNING.into(),
            standby_key: Some(STANDBY.into()),
            lifetime: chrono::Duration::minutes(15),
            keys_ttl,
        },
    )
}

/// Verifies `token` with the issuer's JWKS as a cloud would: by its header's `kid`.
async fn verify(issuer: &Issuer, token: &str) -> JobIdentityClaims {
    let header = jsonwebtoken::decode_header(token).unwrap();
    let jwks = issuer.jwks().await.unwrap();
    let by_kid: HashMap<&str, &Jwk> = jwks.keys.iter().map(|k| (k.kid.as_str(), k)).collect();
    let jwk = by_kid[header.kid.as_deref().unwrap()];
    let key = DecodingKey::from_ec_components(&jwk.x, &jwk.y).unwrap();
    let mut validation = Validation::new(Algorithm::ES256);
    validation.set_audience(&["sts.amazonaws.com"]);
    validation.set_issuer(&["https://api.sortie.example.com"]);
    validation.leeway = 0;
    jsonwebtoken::decode::<JobIdentityClaims>(token, &key, &validation)
        .unwrap()
        .claims
}

#[tokio::test]
async fn a_token_verifies_with_the_published_key_and_names_the_job_and_phase() {
    let kms = MemoryKms::default();
    kms.set_alias(SIGNING, &kms.create_key());
    let issuer = issuer(&kms, KEYS_TTL);
    let job = job("apply", None, true);
    for phase in [Phase::Plan, Phase::Apply] {
        let now = Utc::now();
        let token = issuer.mint(&job, phase, now).await.unwrap();
        let claims = verify(&issuer, &token.token).await;
        assert_eq!(
            claims.sub,
            format!("org:acme:env:acme/web/dev:op:apply:phase:{phase}")
        );
        assert_eq!(claims.job_id, "01jnx6v4k2m8q9r3s5t7w0y1za");
        assert_eq!(claims.requested_by, "alice");
        assert_eq!(claims.exp - claims.iat, 15 * 60);
        assert_eq!(token.expires_at.timestamp(), claims.exp);
        assert!(!format!("{token:?}").contains(&token.token));
    }
    let discovery = issuer.discovery();
    assert_eq!(discovery.issuer, "https://api.sortie.example.com");
    assert_eq!(
        discovery.jwks_uri,
        "https://api.sortie.example.com/.well-known/jwks.json"
    );
}

#[tokio::test]
async fn no_token_for_a_runner_without_identity_or_a_phase_the_task_does_not_run() {
    let kms = MemoryKms::default();
    kms.set_alias(SIGNING, &kms.create_key());
    let issuer = issuer(&kms, KEYS_TTL);
    let refused = |r: Result<IdentityToken, IssuerError>| match r {
        Err(IssuerError::Refused(reason)) => reason,
        other => panic!("expected a refusal, got {other:?}"),
    };
    let reason = refused(
        issuer
            .mint(&job("apply", None, false), Phase::Plan, Utc::now())
            .await,
    );
    assert!(reason.contains("no identity block"), "{reason}");
    let reason = refused(
        issuer
            .mint(&job("plan", None, true), Phase::Apply, Utc::now())
            .await,
    );
    assert!(reason.contains("no apply phase"), "{reason}");
    let reviewed = job("apply", Some(JobPhase::Plan), true);
    let reason = refused(issuer.mint(&reviewed, Phase::Apply, Utc::now()).await);
    assert!(reason.contains("approved plan"), "{reason}");
    issuer
        .mint(&reviewed, Phase::Plan, Utc::now())
        .await
        .unwrap();
    let applying = job("apply", Some(JobPhase::Apply), true);
    issuer
        .mint(&applying, Phase::Apply, Utc::now())
        .await
        .unwrap();
    assert_eq!(kms.signatures(), 2, "a refusal signs nothing");
}

#[tokio::test]
async fn a_key_rolls_in_without_a_token_it_signed_failing() {
    let kms = MemoryKms::default();
    let (old, new) = (kms.create_key(), kms.create_key());
    kms.set_alias(SIGNING, &old);
    // Keys are read again on every use, as once their cache has expired.
    let issuer = issuer(&kms, Duration::ZERO);
    let job = job("apply", None, true);
    let before = issuer.mint(&job, Phase::Apply, Utc::now()).await.unwrap();
    assert_eq!(issuer.jwks().await.unwrap().keys.len(), 1);
    // 1. The new key is published as the standby key.
    kms.set_alias(STANDBY, &new);
    assert_eq!(issuer.jwks().await.unwrap().keys.len(), 2);
    // 2. The aliases swap: the new key signs, the old one is still published.
    kms.set_alias(SIGNING, &new);
    kms.set_alias(STANDBY, &old);
    let after = issuer.mint(&job, Phase::Apply, Utc::now()).await.unwrap();
    let kid = |t: &str| jsonwebtoken::decode_header(t).unwrap().kid.unwrap();
    assert_ne!(kid(&before.token), kid(&after.token));
    verify(&issuer, &before.token).await;
    verify(&issuer, &after.token).await;
    let jwks = issuer.jwks().await.unwrap();
    assert_eq!(jwks.keys[0].kid, kid(&after.token), "the signing key first");
}

#[tokio::test]
async fn keys_are_read_from_kms_once_per_ttl_and_a_missing_signing_key_is_named() {
    let kms = MemoryKms::default();
    let issuer = issuer(&kms, KEYS_TTL);
    let job = job("plan", None, true);
    match issuer.mint(&job, Phase::Plan, Utc::now()).await {
        Err(IssuerError::Unavailable(reason)) => {
            assert!(reason.contains("alias/sortie-identity"), "{reason}")
        }
        other => panic!("expected unavailable, got {other:?}"),
    }
    let (first, second) = (kms.create_key(), kms.create_key());
    kms.set_alias(SIGNING, &first);
    let one = issuer.mint(&job, Phase::Plan, Utc::now()).await.unwrap();
    // Within the TTL the cached key still signs, though the alias moved.
    kms.set_alias(SIGNING, &second);
    let two = issuer.mint(&job, Phase::Plan, Utc::now()).await.unwrap();
    let kid = |t: &str| jsonwebtoken::decode_header(t).unwrap().kid.unwrap();
    assert_eq!(kid(&one.token), kid(&two.token));
    // The signature is the cached key's, which the cached JWKS lists.
    verify(&issuer, &two.token).await;
}
