//! STS AssumeRoleWithWebIdentity on the project's moto is as strict as AWS (patch 16 of
//! `scripts/moto_server.py`): job identity tokens made by `sortie_core::identity`, signed
//! with a test P-256 key and published by an issuer on loopback (its discovery document
//! and JWKS), are exchanged for a role only as the role's trust policy allows, and refused
//! with AWS's error codes otherwise. Stock moto answers credentials for any token.

use aws_sdk_sts::error::ProvideErrorMetadata;
use axum::routing::get;
use axum::{Json, Router};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use chrono::{Duration, Utc};
use sortie_core::identity::{
    compact, discovery_document, jwk_from_spki, signing_input, JobFacts, JobIdentityClaims, Jwks,
    JwtHeader, Phase,
};
use sortie_core::job::Operation;
use sortie_core::names::EnvPath;
use sortie_testkit::{require_aws, unique};

/// A P-256 key for tests only (`openssl ecparam -name prime256v1 -genkey`): PKCS#8 and its
/// SubjectPublicKeyInfo, as KMS's GetPublicKey answers it.
const TEST_PKCS8: &str = "308187020100301306072a8648ce3d020106082a8648ce3d030107046d306b0201010420432cf66cbb7ff0e75d78ec5b512e6fc741a7feb007978361196b539c298c0c94a14403420004a4da2e0cc5af154d436daec86f7eb9d4874f38433bd56207bd740bee2081730f53a9802f49d7498894bd186b52b1873cca1c9c2cefcf5a279330796f2fdf94f8";
const TEST_SPKI: &str = "3059301306072a8648ce3d020106082a8648ce3d03010703420004a4da2e0cc5af154d436daec86f7eb9d4874f38433bd56207bd740bee2081730f53a9802f49d7498894bd186b52b1873cca1c9c2cefcf5a279330796f2fdf94f8";

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// An issuer on loopback serving its discovery document and JWKS; its URL.
async fn issuer() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let jwks = Jwks {
        keys: vec![jwk_from_spki(&hex(TEST_SPKI)).unwrap()],
    };
    let discovery = discovery_document(&url);
    let router = Router::new()
        .route(
            "/.well-known/openid-configuration",
            get(move || async move { Json(discovery) }),
        )
        .route(
            "/.well-known/jwks.json",
            get(move || async move { Json(jwks) }),
        );
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    url
}

/// A token for `env`'s `operation` in `phase`, issued `issued_ago` ago and living `life`.
fn token(
    issuer: &str,
    audience: &str,
    env: &str,
    operation: Operation,
    phase: Phase,
    issued_ago: Duration,
    life: Duration,
) -> String {
    let env = EnvPath::parse(env).unwrap();
    let claims = JobIdentityClaims::new(
        issuer,
        audience,
        &JobFacts {
            job_id: "01jnx6v4k2m8q9r3s5t7w0y1za",
            environment: &env,
            operation,
            requested_by: "alice",
        },
        phase,
        Utc::now() - issued_ago,
        life,
    )
    .unwrap();
    let kid = jwk_from_spki(&hex(TEST_SPKI)).unwrap().kid;
    let input = signing_input(&JwtHeader::es256(&kid), &claims);
    let key = jsonwebtoken::EncodingKey::from_ec_der(&hex(TEST_PKCS8));
    let signature =
        jsonwebtoken::crypto::sign(input.as_bytes(), &key, jsonwebtoken::Algorithm::ES256).unwrap();
    let signature: [u8; 64] = URL_SAFE_NO_PAD
        .decode(signature)
        .unwrap()
        .try_into()
        .unwrap();
    compact(&input, &signature)
}

/// A role that trusts the provider for tokens whose `sub` is like `sub`.
async fn role(iam: &aws_sdk_iam::Client, provider: &str, host: &str, sub: &str) -> String {
    let trust = serde_json::json!({
        "Version": "2012-10-17",
        "Statement": [{
            "Effect": "Allow",
            "Principal": {"Federated": provider},
            "Action": "sts:AssumeRoleWithWebIdentity",
            "Condition": {
                "StringEquals": {format!("{host}:aud"): "sts.amazonaws.com"},
                "StringLike": {format!("{host}:sub"): sub},
            },
        }],
    });
    iam.create_role()
        .role_name(unique("sortie-wif"))
        .assume_role_policy_document(trust.to_string())
        .send()
        .await
        .unwrap()
        .role
        .unwrap()
        .arn
}

#[tokio::test]
async fn a_job_token_takes_only_the_roles_its_environment_and_phase_are_trusted_with() {
    let aws = require_aws!();
    let config = aws.sdk_config().await;
    let (iam, sts) = (
        aws_sdk_iam::Client::new(&config),
        aws_sdk_sts::Client::new(&config),
    );
    let iss = issuer().await;
    let host = iss.trim_start_matches("http://").to_string();
    let provider = iam
        .create_open_id_connect_provider()
        .url(&iss)
        .client_id_list("sts.amazonaws.com")
        .thumbprint_list("0".repeat(40))
        .send()
        .await
        .unwrap()
        .open_id_connect_provider_arn
        .unwrap();
    let read_a = role(
        &iam,
        &provider,
        &host,
        "org:acme:env:acme/web/a:op:*:phase:plan",
    )
    .await;
    let write_a = role(
        &iam,
        &provider,
        &host,
        "org:acme:env:acme/web/a:op:*:phase:apply",
    )
    .await;

    let exchange = |role: String, token: String| {
        let sts = sts.clone();
        async move {
            match sts
                .assume_role_with_web_identity()
                .role_arn(role)
                .role_session_name("01jnx6v4k2m8q9r3s5t7w0y1za")
                .web_identity_token(token)
                .send()
                .await
            {
                Ok(out) => Ok(out.credentials.unwrap().access_key_id),
                Err(e) => Err(e.code().unwrap_or("none").to_string()),
            }
        }
    };
    let make = |issuer: &str, audience: &str, env: &str, phase, issued_ago| {
        let life = Duration::minutes(10);
        token(
            issuer,
            audience,
            env,
            Operation::Apply,
            phase,
            issued_ago,
            life,
        )
    };
    let now = Duration::zero();
    let sts_aud = "sts.amazonaws.com";
    let apply_a = make(&iss, sts_aud, "acme/web/a", Phase::Apply, now);
    // One character of the signature changed (not its last, whose low bits are padding).
    let mut forged: Vec<char> = apply_a.chars().collect();
    let at = forged.len() - 10;
    forged[at] = if forged[at] == 'A' { 'B' } else { 'A' };
    let forged: String = forged.into_iter().collect();
    let plan_a = make(&iss, sts_aud, "acme/web/a", Phase::Plan, now);
    let denied = || Err::<(), String>("AccessDenied".into());
    let invalid = || Err::<(), String>("InvalidIdentityToken".into());
    let cases = [
        (
            "A's plan takes A's read role",
            &read_a,
            plan_a.clone(),
            Ok(()),
        ),
        (
            "A's plan is refused A's write role",
            &write_a,
            plan_a,
            denied(),
        ),
        ("A's apply takes A's write role", &write_a, apply_a, Ok(())),
        (
            "B's apply is refused A's write role",
            &write_a,
            make(&iss, sts_aud, "acme/web/b", Phase::Apply, now),
            denied(),
        ),
        (
            "another audience",
            &write_a,
            make(&iss, "another", "acme/web/a", Phase::Apply, now),
            invalid(),
        ),
        (
            "an expired token",
            &write_a,
            make(
                &iss,
                sts_aud,
                "acme/web/a",
                Phase::Apply,
                Duration::minutes(20),
            ),
            Err("ExpiredTokenException".into()),
        ),
        ("a changed signature", &write_a, forged, invalid()),
        (
            "an issuer with no provider in the account",
            &write_a,
            make(
                "https://issuer.example.com",
                sts_aud,
                "acme/web/a",
                Phase::Apply,
                now,
            ),
            invalid(),
        ),
    ];
    for (why, role, token, expected) in cases {
        let got = exchange(role.clone(), token).await.map(|_| ());
        assert_eq!(got, expected, "{why}");
    }
}
