//! The OIDC verifier against a loopback issuer: a tiny axum server on 127.0.0.1 serving
//! a discovery document and a JWKS (counting requests), and tokens signed with the test
//! keys of `tests/fixtures/oidc` (made with openssl for these tests only; each `.jwk.json`
//! is the public half of the `.pem` beside it).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use base64::Engine as _;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{json, Value};
use sortie_api::oidc::{JwksVerifier, NoOidc, OidcError, OidcVerifier};

const AUDIENCE: &str = "sortie";
const RSA_1_PEM: &str = include_str!("../fixtures/oidc/rsa-1.pem");
const RSA_1_JWK: &str = include_str!("../fixtures/oidc/rsa-1.jwk.json");
const RSA_2_PEM: &str = include_str!("../fixtures/oidc/rsa-2.pem");
const RSA_2_JWK: &str = include_str!("../fixtures/oidc/rsa-2.jwk.json");
const EC_1_PEM: &str = include_str!("../fixtures/oidc/ec-1.pem");
const EC_1_JWK: &str = include_str!("../fixtures/oidc/ec-1.jwk.json");

/// The issuer double: what it serves and how often it was asked.
struct Issuer {
    url: String,
    /// The `issuer` its discovery document announces.
    announced: Mutex<String>,
    keys: Mutex<Vec<Value>>,
    discovery_hits: AtomicUsize,
    jwks_hits: AtomicUsize,
}

impl Issuer {
    /// Serves `keys` at `http://127.0.0.1:{port}/id/TEST` (an EKS-like issuer path).
    async fn start(keys: Vec<Value>) -> Arc<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/id/TEST", listener.local_addr().unwrap());
        let issuer = Arc::new(Issuer {
            announced: Mutex::new(url.clone()),
            url,
            keys: Mutex::new(keys),
            discovery_hits: AtomicUsize::new(0),
            jwks_hits: AtomicUsize::new(0),
        });
        let app = Router::new()
            .route(
                "/id/TEST/.well-known/openid-configuration",
                get(|State(issuer): State<Arc<Issuer>>| async move {
                    issuer.discovery_hits.fetch_add(1, Ordering::SeqCst);
                    Json(json!({
                        "issuer": *issuer.announced.lock().unwrap(),
                        "jwks_uri": format!("{}/keys", issuer.url),
                        "response_types_supported": ["id_token"],
                        "subject_types_supported": ["public"],
                        "id_token_signing_alg_values_supported": ["RS256"],
                    }))
                }),
            )
            .route(
                "/id/TEST/keys",
                get(|State(issuer): State<Arc<Issuer>>| async move {
                    issuer.jwks_hits.fetch_add(1, Ordering::SeqCst);
                    Json(json!({ "keys": *issuer.keys.lock().unwrap() }))
                }),
            )
            .with_state(Arc::clone(&issuer));
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        issuer
    }

    fn fetches(&self) -> (usize, usize) {
        (
            self.discovery_hits.load(Ordering::SeqCst),
            self.jwks_hits.load(Ordering::SeqCst),
        )
    }
}

fn jwk(text: &str) -> Value {
    serde_json::from_str(text).unwrap()
}

/// The DER inside a PEM file.
fn der(pem: &str) -> Vec<u8> {
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    base64::engine::general_purpose::STANDARD
        .decode(body)
        .unwrap()
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// Claims as EKS puts them in a projected service-account token.
fn claims(issuer: &str) -> Value {
    let now = now();
    json!({
        "iss": issuer,
        "aud": [AUDIENCE],
        "sub": "system:serviceaccount:agents:sortie-agent",
        "iat": now,
        "nbf": now,
        "exp": now + 3600,
        "kubernetes.io": { "namespace": "agents", "serviceaccount": { "name": "sortie-agent" } },
    })
}

fn sign_rs256(pem: &str, kid: Option<&str>, claims: &Value) -> String {
    let mut header = Header::new(Algorithm::RS256);
    header.kid = kid.map(str::to_string);
    jsonwebtoken::encode(&header, claims, &EncodingKey::from_rsa_der(&der(pem))).unwrap()
}

fn sign_es256(kid: Option<&str>, claims: &Value) -> String {
    let mut header = Header::new(Algorithm::ES256);
    header.kid = kid.map(str::to_string);
    jsonwebtoken::encode(&header, claims, &EncodingKey::from_ec_der(&der(EC_1_PEM))).unwrap()
}

fn b64(value: &Value) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(serde_json::to_vec(value).unwrap())
}

/// Asserts `result` is `Invalid` with a message containing `expected`, and that neither
/// the message nor the error's debug form holds the token or any long part of it.
fn assert_invalid(result: Result<impl std::fmt::Debug, OidcError>, token: &str, expected: &str) {
    let error = result.expect_err("the token must be refused");
    let OidcError::Invalid(message) = &error else {
        panic!("expected Invalid, got {error:?}");
    };
    assert!(
        message.contains(expected),
        "`{message}` should say `{expected}`"
    );
    for text in [error.to_string(), format!("{error:?}")] {
        assert!(!text.contains(token), "the message holds the token: {text}");
        for part in token.split('.').filter(|p| p.len() >= 8) {
            assert!(
                !text.contains(part),
                "the message holds part of the token: {text}"
            );
        }
    }
}

#[tokio::test]
async fn a_good_rs256_token_verifies_and_returns_every_claim() {
    let issuer = Issuer::start(vec![jwk(RSA_1_JWK)]).await;
    let verifier = JwksVerifier::new();
    let claims = claims(&issuer.url);
    let token = sign_rs256(RSA_1_PEM, Some("rsa-1"), &claims);

    let verified = verifier
        .verify(&token, &issuer.url, AUDIENCE)
        .await
        .unwrap();

    let expected: std::collections::BTreeMap<String, Value> =
        serde_json::from_value(claims).unwrap();
    assert_eq!(verified, expected);
    assert_eq!(
        verified["kubernetes.io"]["serviceaccount"]["name"],
        "sortie-agent"
    );
}

#[tokio::test]
async fn a_good_es256_token_verifies() {
    let issuer = Issuer::start(vec![jwk(RSA_1_JWK), jwk(EC_1_JWK)]).await;
    let verifier = JwksVerifier::new();
    let mut claims = claims(&issuer.url);
    claims["aud"] = json!(AUDIENCE); // a single string is an audience too
    let token = sign_es256(Some("ec-1"), &claims);

    let verified = verifier
        .verify(&token, &issuer.url, AUDIENCE)
        .await
        .unwrap();
    assert_eq!(verified["aud"], AUDIENCE);
}

#[tokio::test]
async fn a_token_without_kid_verifies_with_a_key_of_its_algorithm() {
    let issuer = Issuer::start(vec![jwk(RSA_2_JWK), jwk(RSA_1_JWK)]).await;
    let verifier = JwksVerifier::new();
    let token = sign_rs256(RSA_1_PEM, None, &claims(&issuer.url));
    verifier
        .verify(&token, &issuer.url, AUDIENCE)
        .await
        .unwrap();
}

#[tokio::test]
async fn the_cache_serves_the_second_verify_without_a_second_fetch() {
    let issuer = Issuer::start(vec![jwk(RSA_1_JWK)]).await;
    let verifier = JwksVerifier::new();
    let token = sign_rs256(RSA_1_PEM, Some("rsa-1"), &claims(&issuer.url));

    verifier
        .verify(&token, &issuer.url, AUDIENCE)
        .await
        .unwrap();
    assert_eq!(issuer.fetches(), (1, 1));
    verifier
        .verify(&token, &issuer.url, AUDIENCE)
        .await
        .unwrap();
    let other = sign_rs256(RSA_1_PEM, Some("rsa-1"), &claims(&issuer.url));
    verifier
        .verify(&other, &issuer.url, AUDIENCE)
        .await
        .unwrap();
    assert_eq!(
        issuer.fetches(),
        (1, 1),
        "the cached keys serve later tokens"
    );
}

#[tokio::test]
async fn concurrent_first_verifies_share_one_fetch() {
    let issuer = Issuer::start(vec![jwk(RSA_1_JWK)]).await;
    let verifier = Arc::new(JwksVerifier::new());
    let token = sign_rs256(RSA_1_PEM, Some("rsa-1"), &claims(&issuer.url));
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (verifier, token, url) = (Arc::clone(&verifier), token.clone(), issuer.url.clone());
            tokio::spawn(async move { verifier.verify(&token, &url, AUDIENCE).await })
        })
        .collect();
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    assert_eq!(issuer.fetches(), (1, 1));
}

#[tokio::test]
async fn a_rotated_key_verifies_after_one_refetch() {
    let issuer = Issuer::start(vec![jwk(RSA_1_JWK)]).await;
    let verifier = JwksVerifier::new();
    let old = sign_rs256(RSA_1_PEM, Some("rsa-1"), &claims(&issuer.url));
    verifier.verify(&old, &issuer.url, AUDIENCE).await.unwrap();
    assert_eq!(issuer.fetches(), (1, 1));

    // The issuer rotates: a new key appears beside the old one.
    issuer.keys.lock().unwrap().push(jwk(RSA_2_JWK));
    let new = sign_rs256(RSA_2_PEM, Some("rsa-2"), &claims(&issuer.url));
    verifier.verify(&new, &issuer.url, AUDIENCE).await.unwrap();
    assert_eq!(
        issuer.fetches(),
        (2, 2),
        "one refetch for the unknown key id"
    );

    // Both keys are cached now.
    verifier.verify(&new, &issuer.url, AUDIENCE).await.unwrap();
    verifier.verify(&old, &issuer.url, AUDIENCE).await.unwrap();
    assert_eq!(issuer.fetches(), (2, 2));
}

#[tokio::test]
async fn an_unknown_kid_is_refused_and_refetches_at_most_once_per_interval() {
    let issuer = Issuer::start(vec![jwk(RSA_1_JWK)]).await;
    let verifier = JwksVerifier::new();
    let good = sign_rs256(RSA_1_PEM, Some("rsa-1"), &claims(&issuer.url));
    verifier.verify(&good, &issuer.url, AUDIENCE).await.unwrap();

    let unknown = sign_rs256(RSA_1_PEM, Some("nobody"), &claims(&issuer.url));
    assert_invalid(
        verifier.verify(&unknown, &issuer.url, AUDIENCE).await,
        &unknown,
        "no key `nobody`",
    );
    assert_eq!(
        issuer.fetches(),
        (2, 2),
        "the unknown key id made one refetch"
    );

    // Made-up key ids within the interval do not reach the issuer again.
    for kid in ["nobody", "somebody-else", "a-third"] {
        let token = sign_rs256(RSA_1_PEM, Some(kid), &claims(&issuer.url));
        assert_invalid(
            verifier.verify(&token, &issuer.url, AUDIENCE).await,
            &token,
            "no key",
        );
    }
    assert_eq!(issuer.fetches(), (2, 2));
    verifier.verify(&good, &issuer.url, AUDIENCE).await.unwrap();
}

#[tokio::test]
async fn a_wrong_audience_is_refused() {
    let issuer = Issuer::start(vec![jwk(RSA_1_JWK)]).await;
    let mut claims = claims(&issuer.url);
    claims["aud"] = json!(["sts.amazonaws.com", "someone-else"]);
    let token = sign_rs256(RSA_1_PEM, Some("rsa-1"), &claims);
    assert_invalid(
        JwksVerifier::new()
            .verify(&token, &issuer.url, AUDIENCE)
            .await,
        &token,
        "audience",
    );
}

#[tokio::test]
async fn a_missing_audience_is_refused() {
    let issuer = Issuer::start(vec![jwk(RSA_1_JWK)]).await;
    let mut claims = claims(&issuer.url);
    claims.as_object_mut().unwrap().remove("aud");
    let token = sign_rs256(RSA_1_PEM, Some("rsa-1"), &claims);
    assert_invalid(
        JwksVerifier::new()
            .verify(&token, &issuer.url, AUDIENCE)
            .await,
        &token,
        "`aud`",
    );
}

#[tokio::test]
async fn a_wrong_issuer_is_refused() {
    let issuer = Issuer::start(vec![jwk(RSA_1_JWK)]).await;
    // Signed by the issuer's own key, but claiming another issuer.
    let claims = claims("https://oidc.eks.eu-west-1.amazonaws.com/id/SOMEONE-ELSE");
    let token = sign_rs256(RSA_1_PEM, Some("rsa-1"), &claims);
    assert_invalid(
        JwksVerifier::new()
            .verify(&token, &issuer.url, AUDIENCE)
            .await,
        &token,
        "issuer (iss)",
    );
}

#[tokio::test]
async fn an_expired_token_is_refused_past_the_leeway() {
    let issuer = Issuer::start(vec![jwk(RSA_1_JWK)]).await;
    let verifier = JwksVerifier::new();
    let mut claims = claims(&issuer.url);
    claims["iat"] = json!(now() - 7200);
    claims["nbf"] = json!(now() - 7200);
    claims["exp"] = json!(now() - 120);
    let token = sign_rs256(RSA_1_PEM, Some("rsa-1"), &claims);
    assert_invalid(
        verifier.verify(&token, &issuer.url, AUDIENCE).await,
        &token,
        "expired",
    );

    // Within the 60 s leeway it still verifies.
    claims["exp"] = json!(now() - 20);
    let token = sign_rs256(RSA_1_PEM, Some("rsa-1"), &claims);
    verifier
        .verify(&token, &issuer.url, AUDIENCE)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_token_without_exp_is_refused() {
    let issuer = Issuer::start(vec![jwk(RSA_1_JWK)]).await;
    let mut claims = claims(&issuer.url);
    claims.as_object_mut().unwrap().remove("exp");
    let token = sign_rs256(RSA_1_PEM, Some("rsa-1"), &claims);
    assert_invalid(
        JwksVerifier::new()
            .verify(&token, &issuer.url, AUDIENCE)
            .await,
        &token,
        "`exp`",
    );
}

#[tokio::test]
async fn a_token_from_the_future_is_refused() {
    let issuer = Issuer::start(vec![jwk(RSA_1_JWK)]).await;
    let verifier = JwksVerifier::new();

    let mut not_yet = claims(&issuer.url);
    not_yet["nbf"] = json!(now() + 600);
    let token = sign_rs256(RSA_1_PEM, Some("rsa-1"), &not_yet);
    assert_invalid(
        verifier.verify(&token, &issuer.url, AUDIENCE).await,
        &token,
        "not valid yet",
    );

    let mut issued_later = claims(&issuer.url);
    issued_later["iat"] = json!(now() + 600);
    let token = sign_rs256(RSA_1_PEM, Some("rsa-1"), &issued_later);
    assert_invalid(
        verifier.verify(&token, &issuer.url, AUDIENCE).await,
        &token,
        "issued in the future",
    );

    // A clock 30 s ahead is within the leeway.
    let mut skewed = claims(&issuer.url);
    skewed["iat"] = json!(now() + 30);
    skewed["nbf"] = json!(now() + 30);
    let token = sign_rs256(RSA_1_PEM, Some("rsa-1"), &skewed);
    verifier
        .verify(&token, &issuer.url, AUDIENCE)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_signature_by_another_key_is_refused() {
    let issuer = Issuer::start(vec![jwk(RSA_1_JWK)]).await;
    // rsa-2 signs, but the header names rsa-1.
    let token = sign_rs256(RSA_2_PEM, Some("rsa-1"), &claims(&issuer.url));
    assert_invalid(
        JwksVerifier::new()
            .verify(&token, &issuer.url, AUDIENCE)
            .await,
        &token,
        "signature",
    );
}

#[tokio::test]
async fn a_tampered_payload_is_refused() {
    let issuer = Issuer::start(vec![jwk(RSA_1_JWK)]).await;
    let token = sign_rs256(RSA_1_PEM, Some("rsa-1"), &claims(&issuer.url));
    let mut parts: Vec<String> = token.split('.').map(str::to_string).collect();
    let mut forged = claims(&issuer.url);
    forged["sub"] = json!("system:serviceaccount:kube-system:admin");
    parts[1] = b64(&forged);
    let tampered = parts.join(".");
    assert_invalid(
        JwksVerifier::new()
            .verify(&tampered, &issuer.url, AUDIENCE)
            .await,
        &tampered,
        "signature",
    );
}

#[tokio::test]
async fn alg_none_is_refused() {
    let issuer = Issuer::start(vec![jwk(RSA_1_JWK)]).await;
    let verifier = JwksVerifier::new();
    for alg in ["none", "None", "NONE"] {
        let header = json!({ "alg": alg, "typ": "JWT", "kid": "rsa-1" });
        let token = format!("{}.{}.", b64(&header), b64(&claims(&issuer.url)));
        assert_invalid(
            verifier.verify(&token, &issuer.url, AUDIENCE).await,
            &token,
            "is not accepted",
        );
    }
    assert_eq!(issuer.fetches(), (0, 0), "refused before any fetch");
}

#[tokio::test]
async fn hs256_with_the_public_key_as_secret_is_refused() {
    let issuer = Issuer::start(vec![jwk(RSA_1_JWK)]).await;
    let verifier = JwksVerifier::new();
    let public = jwk(RSA_1_JWK);
    for secret in [
        RSA_1_JWK.as_bytes().to_vec(),
        public["n"].as_str().unwrap().as_bytes().to_vec(),
    ] {
        for alg in [Algorithm::HS256, Algorithm::HS384, Algorithm::HS512] {
            let mut header = Header::new(alg);
            header.kid = Some("rsa-1".into());
            let token = jsonwebtoken::encode(
                &header,
                &claims(&issuer.url),
                &EncodingKey::from_secret(&secret),
            )
            .unwrap();
            assert_invalid(
                verifier.verify(&token, &issuer.url, AUDIENCE).await,
                &token,
                "RS256 or ES256 only",
            );
        }
    }
}

#[tokio::test]
async fn an_algorithm_other_than_the_keys_is_refused() {
    // ES256 in the header, naming an RSA key.
    let issuer = Issuer::start(vec![jwk(RSA_1_JWK)]).await;
    let token = sign_es256(Some("rsa-1"), &claims(&issuer.url));
    assert_invalid(
        JwksVerifier::new()
            .verify(&token, &issuer.url, AUDIENCE)
            .await,
        &token,
        "not an ES256 key",
    );
}

#[tokio::test]
async fn garbage_is_refused_without_a_fetch() {
    let issuer = Issuer::start(vec![jwk(RSA_1_JWK)]).await;
    let verifier = JwksVerifier::new();
    let long = "a".repeat(20_000);
    for token in [
        "",
        "not-a-jwt",
        "a.b",
        "a.b.c.d",
        "!!!!.e30.sig",
        long.as_str(),
    ] {
        let result = verifier.verify(token, &issuer.url, AUDIENCE).await;
        assert!(
            matches!(result, Err(OidcError::Invalid(_))),
            "{token:.20}: {result:?}"
        );
    }
    assert_eq!(issuer.fetches(), (0, 0));
}

#[tokio::test]
async fn an_unreachable_issuer_is_unavailable() {
    // A port that was just free: nothing listens on it.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/id/GONE", listener.local_addr().unwrap());
    drop(listener);
    let token = sign_rs256(RSA_1_PEM, Some("rsa-1"), &claims(&url));
    let result = JwksVerifier::new().verify(&token, &url, AUDIENCE).await;
    let Err(OidcError::Unavailable(message)) = &result else {
        panic!("expected Unavailable, got {result:?}");
    };
    assert!(message.contains("could not fetch"), "{message}");
    assert!(!message.contains(&token));
}

#[tokio::test]
async fn an_issuer_without_discovery_is_unavailable() {
    let issuer = Issuer::start(vec![jwk(RSA_1_JWK)]).await;
    let elsewhere = format!("{}-ELSEWHERE", issuer.url); // answers 404
    let token = sign_rs256(RSA_1_PEM, Some("rsa-1"), &claims(&elsewhere));
    let result = JwksVerifier::new()
        .verify(&token, &elsewhere, AUDIENCE)
        .await;
    assert!(
        matches!(&result, Err(OidcError::Unavailable(m)) if m.contains("404")),
        "{result:?}"
    );
}

#[tokio::test]
async fn a_discovery_document_for_another_issuer_is_unavailable() {
    let issuer = Issuer::start(vec![jwk(RSA_1_JWK)]).await;
    *issuer.announced.lock().unwrap() = "https://attacker.example".into();
    let token = sign_rs256(RSA_1_PEM, Some("rsa-1"), &claims(&issuer.url));
    let result = JwksVerifier::new()
        .verify(&token, &issuer.url, AUDIENCE)
        .await;
    assert!(
        matches!(&result, Err(OidcError::Unavailable(m)) if m.contains("announces the issuer")),
        "{result:?}"
    );
    assert_eq!(issuer.fetches(), (1, 0));
}

#[tokio::test]
async fn a_jwks_without_usable_keys_is_unavailable() {
    let issuer = Issuer::start(vec![
        json!({ "kty": "oct", "kid": "hmac", "k": "c2VjcmV0" }),
    ])
    .await;
    let token = sign_rs256(RSA_1_PEM, Some("rsa-1"), &claims(&issuer.url));
    let result = JwksVerifier::new()
        .verify(&token, &issuer.url, AUDIENCE)
        .await;
    assert!(
        matches!(&result, Err(OidcError::Unavailable(m)) if m.contains("no RS256 or ES256")),
        "{result:?}"
    );
}

#[tokio::test]
async fn plain_http_is_only_for_loopback() {
    for issuer in [
        "http://oidc.example.com/id/ABC",
        "http://localhost.evil.example/id/ABC",
        "http://127.0.0.1.evil.example/id/ABC",
        "http://localhost@evil.example/id/ABC",
        "ftp://oidc.example.com",
        "not a url",
    ] {
        let token = sign_rs256(RSA_1_PEM, Some("rsa-1"), &claims(issuer));
        let result = JwksVerifier::new().verify(&token, issuer, AUDIENCE).await;
        assert!(
            matches!(&result, Err(OidcError::Unavailable(m)) if m.contains("https://")),
            "{issuer}: {result:?}"
        );
    }
}

#[tokio::test]
async fn no_oidc_refuses_every_token() {
    let issuer = Issuer::start(vec![jwk(RSA_1_JWK)]).await;
    let token = sign_rs256(RSA_1_PEM, Some("rsa-1"), &claims(&issuer.url));
    let verifier: Arc<dyn OidcVerifier> = Arc::new(NoOidc);
    assert_invalid(
        verifier.verify(&token, &issuer.url, AUDIENCE).await,
        &token,
        "verifies no OIDC tokens",
    );
    assert_eq!(issuer.fetches(), (0, 0));
}
