//! Hostile input, found from outside (issue 25, item 13), in memory:
//! - a URL is judged by its parsed host and scheme: plain http only to a real loopback
//!   host, never to `http://127.0.0.1.evil.com`, `http://localhost@evil.com` and the like;
//! - control characters are refused in every field that is not a free-form body;
//! - an agent asking about another pool's job gets exactly the answer for a missing job.
//!
//! Each class is generated (proptest), not only the three examples of the issue.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Body;
use axum::http::Request;
use proptest::prelude::*;
use serde_json::{json, Value};
use sortie_api::{router, VerifiedClaims};
use sortie_core::{JobId, JobState};
use sortie_store::{JobStore, JobUpdate, MemoryStore};
use sortie_testkit::world::World;
use tower::ServiceExt;

/// An API over a fresh in-memory store, whose administrator is the subject `admin`.
struct Api {
    app: axum::Router,
    store: Arc<MemoryStore>,
}

/// A status, the body as text (byte for byte) and parsed.
struct Reply {
    status: u16,
    text: String,
    body: Value,
}

impl Api {
    fn new() -> Self {
        let world = World::fast();
        let store = world.fakes().store.clone();
        // The fast world's API, whose administrator is `admin`.
        let mut state = world.api_state();
        state.admin_subjects = vec!["admin".into()];
        let app = router(state);
        Self { app, store }
    }

    /// Sends a request as the administrator (`admin: true`) or with `bearer` only.
    async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&str>,
        admin: bool,
        bearer: Option<&str>,
    ) -> Reply {
        let kind = match body {
            Some(b) if !b.starts_with('{') => "application/yaml",
            _ => "application/json",
        };
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", kind);
        if let Some(token) = bearer {
            req = req.header("authorization", format!("Bearer {token}"));
        }
        let mut req = req
            .body(body.map(|b| Body::from(b.to_string())).unwrap_or_default())
            .unwrap();
        if admin {
            req.extensions_mut().insert(VerifiedClaims(BTreeMap::from([
                ("sub".to_string(), json!("admin")),
                ("iss".to_string(), json!("https://idp.example.com")),
            ])));
        }
        let resp = self.app.clone().oneshot(req).await.unwrap();
        let status = resp.status().as_u16();
        let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .unwrap();
        let text = String::from_utf8(bytes.to_vec()).unwrap();
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        Reply { status, text, body }
    }

    async fn admin(&self, method: &str, path: &str, body: &Value) -> Reply {
        self.call(method, path, Some(&body.to_string()), true, None)
            .await
    }

    /// Creates agent pool `name` in `acme`: its id and token.
    async fn pool(&self, name: &str) -> (String, String) {
        let r = self
            .admin(
                "POST",
                "/v1/agent-pools",
                &json!({"group": "acme", "name": name}),
            )
            .await;
        assert_eq!(r.status, 201, "{}", r.text);
        (
            r.body["id"].as_str().unwrap().to_string(),
            r.body["token"].as_str().unwrap().to_string(),
        )
    }
}

/// Asserts a 400 whose fields name `path`.
fn assert_names(r: &Reply, path: &str, what: &str) {
    assert_eq!(r.status, 400, "{what}: {}", r.text);
    let fields = r.body["error"]["fields"].as_array().expect("fields");
    assert!(
        fields.iter().any(|f| f["path"] == path),
        "{what}: {path} not named in {}",
        r.text
    );
}

// ---------------------------------------------------------------------------------------
// Another pool's job is a missing job
// ---------------------------------------------------------------------------------------

/// A job submitted to `acme/prod`, whose runner pulls from `pool`, taken by dispatch and
/// offered to the pool, then claimed by agent `a1` of that pool: the job id and the attempt.
async fn claimed_job(api: &Api, pool: &str, token: &str) -> (String, u64) {
    let runner = format!(
        "runner_configuration:\n  type: agent\n  pool: {pool}\nstate_storage_configuration:\n  type: local\n  directory: /tmp/s\n"
    );
    let r = api
        .call(
            "POST",
            "/v1/groups/acme/-/runners/agents",
            Some(&runner),
            true,
            None,
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let r = api
        .admin(
            "POST",
            "/v1/groups/acme/-/rules",
            &json!({"id": "default", "runner_id": "acme/agents"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let r = api
        .admin(
            "POST",
            "/v1/groups/acme/-/environments",
            &json!({"name": "prod", "env_type": "production"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let r = api
        .admin(
            "POST",
            "/v1/environments/acme/prod/-/jobs",
            &json!({"operation": "plan", "source": {"type": "git", "url": "https://git.example.com/acme/infra.git"}}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let id = JobId::from(r.body["id"].as_str().expect("job id"));
    // Dispatch's part: taken, then offered to the pool.
    let now = chrono::Utc::now();
    api.store
        .transition_job(
            &id,
            JobState::Queued,
            JobState::Dispatching,
            now,
            "claimed by dispatch",
            JobUpdate {
                next_attempt: true,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    api.store
        .mark_job(
            &id,
            now,
            JobUpdate {
                offer_to: Some(pool.to_string()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let r = api
        .call(
            "POST",
            &format!("/v1/agent-pools/{pool}/claims"),
            Some(r#"{"agent":"a1","wait_seconds":0}"#),
            false,
            Some(token),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["job_id"], id.to_string(), "{}", r.text);
    (id.to_string(), r.body["attempt"].as_u64().unwrap())
}

#[tokio::test]
async fn another_pools_job_is_answered_exactly_as_a_missing_job_on_every_agent_route() {
    let api = Api::new();
    let (pool_a, token_a) = api.pool("a").await;
    let (pool_b, token_b) = api.pool("b").await;
    let (job, attempt) = claimed_job(&api, &pool_a, &token_a).await;
    let missing = "01jnx6v4k2m8q9r3s5t7w0y1za";
    let bodies = [
        (
            "heartbeat",
            json!({"agent": "b1", "attempt": attempt}).to_string(),
        ),
        (
            "exit",
            json!({"agent": "b1", "attempt": attempt, "exit_code": 0}).to_string(),
        ),
    ];
    for (route, body) in &bodies {
        let ask = |job: String| {
            let (api, pool_b, token_b, body) = (&api, &pool_b, &token_b, body.clone());
            async move {
                api.call(
                    "POST",
                    &format!("/v1/agent-pools/{pool_b}/jobs/{job}/{route}"),
                    Some(&body),
                    false,
                    Some(token_b),
                )
                .await
            }
        };
        let theirs = ask(job.clone()).await;
        let nobodys = ask(missing.to_string()).await;
        assert_eq!(nobodys.status, 404, "{route}: {}", nobodys.text);
        assert_eq!(
            (theirs.status, theirs.text.replace(&job, missing)),
            (nobodys.status, nobodys.text.clone()),
            "{route}: another pool's job must be answered as a missing one"
        );
        assert!(
            !theirs.text.contains("running") && !theirs.text.contains("not_held"),
            "{route}: the answer tells the job's state: {}",
            theirs.text
        );
    }
    // Within its own pool, an agent that does not hold the job still hears why (409).
    let r = api
        .call(
            "POST",
            &format!("/v1/agent-pools/{pool_a}/jobs/{job}/heartbeat"),
            Some(&json!({"agent": "a2", "attempt": attempt}).to_string()),
            false,
            Some(&token_a),
        )
        .await;
    assert_eq!(r.status, 409, "{}", r.text);
    // And its holder heartbeats on.
    let r = api
        .call(
            "POST",
            &format!("/v1/agent-pools/{pool_a}/jobs/{job}/heartbeat"),
            Some(&json!({"agent": "a1", "attempt": attempt}).to_string()),
            false,
            Some(&token_a),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
}

// ---------------------------------------------------------------------------------------
// URLs judged by their real host
// ---------------------------------------------------------------------------------------

fn pool_with_issuer(issuer: &str) -> Value {
    json!({"group": "acme", "name": "p", "oidc": {
        "issuer": issuer, "audience": "sortie", "claim": "sub", "pattern": "system:serviceaccount:*"
    }})
}

/// A host part that only looks like loopback: a loopback name followed by a trick that
/// moves the real host elsewhere (a subdomain, userinfo, a trailing label).
fn lookalike_loopback() -> impl Strategy<Value = String> {
    let loopback = prop::sample::select(vec![
        "127.0.0.1",
        "localhost",
        "127.1",
        "[::1]",
        "127.0.0.1:8080",
        "localhost:80",
    ]);
    let trick = prop::sample::select(vec![".", "@", ":x@", ".x.", "%2e", "-"]);
    let domain = "[a-z]{1,12}\\.(com|net|io|example)";
    (loopback, trick, domain).prop_map(|(l, t, d)| {
        if l.starts_with('[') && t.starts_with('.') {
            // `[::1].evil.com` does not parse at all; make it a userinfo trick instead.
            format!("http://{l}@{d}")
        } else {
            format!("http://{l}{t}{d}")
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

    /// Every issuer that only looks loopback is a 400 naming `oidc.issuer`.
    #[test]
    fn a_lookalike_loopback_issuer_is_refused(issuer in lookalike_loopback()) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let api = Api::new();
            let r = api.admin("POST", "/v1/agent-pools", &pool_with_issuer(&issuer)).await;
            assert_names(&r, "oidc.issuer", &issuer);
        });
    }

    /// So is a backend endpoint over plain http to a host that is not loopback.
    #[test]
    fn a_lookalike_loopback_backend_endpoint_is_refused(endpoint in lookalike_loopback()) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let api = Api::new();
            let runner = format!(
                "runner_configuration:\n  type: local\nstate_storage_configuration:\n  type: s3\n  bucket: state\n  region: us-east-1\n  endpoint: \"{endpoint}\"\n"
            );
            let r = api.call("POST", "/v1/groups/acme/-/runners/r", Some(&runner), true, None).await;
            assert_names(&r, "state_storage_configuration.endpoint", &endpoint);
        });
    }
}

#[tokio::test]
async fn the_issues_examples_are_refused_and_real_loopback_and_https_are_accepted() {
    let api = Api::new();
    for issuer in [
        "http://127.0.0.1.evil.com",
        "http://localhost@evil.com",
        "http://localhost.evil.com",
        "http://evil.com#@127.0.0.1",
        "http://127.0.0.1@evil.com/id",
        "https://user:pass@idp.example.com",
        "https://idp.example.com/?x=1",
    ] {
        let r = api
            .admin("POST", "/v1/agent-pools", &pool_with_issuer(issuer))
            .await;
        assert_names(&r, "oidc.issuer", issuer);
    }
    for issuer in [
        "https://oidc.eks.eu-west-1.amazonaws.com/id/ABC",
        "http://127.0.0.1:9000/id/TEST",
        "http://localhost:9000",
        "http://[::1]:9000",
    ] {
        let r = api
            .admin("POST", "/v1/agent-pools", &pool_with_issuer(issuer))
            .await;
        assert_eq!(r.status, 201, "{issuer}: {}", r.text);
    }
}

// ---------------------------------------------------------------------------------------
// Control characters and blank text
// ---------------------------------------------------------------------------------------

/// `valid` with one control character (C0, DEL or C1) put in at a generated place.
fn with_control(valid: &'static str) -> impl Strategy<Value = String> {
    let control = prop_oneof![
        (0u32..0x20).prop_map(|c| char::from_u32(c).unwrap()),
        Just('\u{7f}'),
        (0x80u32..0xa0).prop_map(|c| char::from_u32(c).unwrap()),
    ];
    (control, 0..=valid.len()).prop_map(move |(c, at)| {
        let at = (0..=at).rev().find(|i| valid.is_char_boundary(*i)).unwrap();
        let mut s = valid.to_string();
        s.insert(at, c);
        s
    })
}

/// Strings of only whitespace (none included).
fn blank() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop::sample::select(vec![' ', '\t', '\u{a0}', '\u{2003}', '\u{3000}']),
        0..6,
    )
    .prop_map(|v| v.into_iter().collect())
}

/// One request per field that is not a free-form body: (method, path, body, field named).
fn requests(bad: &str) -> Vec<(&'static str, &'static str, Value, &'static str)> {
    let grantee = |g: Value| json!({"role": "deployer", "grantee": g});
    vec![
        (
            "POST",
            "/v1/groups/acme/-/memberships",
            grantee(json!({"kind": "subject", "subject": bad})),
            "grantee.subject",
        ),
        (
            "POST",
            "/v1/groups/acme/-/memberships",
            grantee(json!({"kind": "subject", "subject": "alice", "issuer": bad})),
            "grantee.issuer",
        ),
        (
            "POST",
            "/v1/groups/acme/-/memberships",
            grantee(json!({"kind": "claim_pattern", "claim": bad, "pattern": "x*"})),
            "grantee.claim",
        ),
        (
            "POST",
            "/v1/groups/acme/-/memberships",
            grantee(json!({"kind": "claim_pattern", "claim": "sub", "pattern": bad})),
            "grantee.pattern",
        ),
        (
            "POST",
            "/v1/groups/acme/-/environments",
            json!({"name": "prod", "env_type": bad}),
            "env_type",
        ),
        (
            "POST",
            "/v1/groups/acme/-/rules",
            json!({"id": "r", "runner_id": "acme/local", "criteria": {"env_type": bad}}),
            "criteria.env_type",
        ),
        (
            "POST",
            "/v1/agent-pools",
            json!({"group": "acme", "name": "p", "oidc": {
                "issuer": "https://idp.example.com", "audience": bad, "claim": "sub", "pattern": "x*"}}),
            "oidc.audience",
        ),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]

    /// A control character anywhere in an identifier, a claim, a pattern or a type is a
    /// 400 naming the field.
    #[test]
    fn a_control_character_in_a_field_is_refused_naming_it(bad in with_control("repo:acme/infra")) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let api = Api::new();
            for (method, path, body, field) in requests(&bad) {
                let r = api.admin(method, path, &body).await;
                assert_names(&r, field, &format!("{bad:?} in {field}"));
            }
        });
    }

    /// A drift schedule with a control character inside (a newline passes the cron
    /// parser) is refused naming `drift_schedule`, and so is a tool version or label.
    #[test]
    fn a_control_character_in_a_schedule_version_or_label_is_refused(
        schedule in with_control("0 3 * * *"),
        version in with_control("1.9.8"),
        label in with_control("tier"),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let api = Api::new();
            let env = |extra: Value| {
                let mut body = json!({"name": "prod", "env_type": "production"});
                body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
                body
            };
            let r = api.admin("POST", "/v1/groups/acme/-/environments", &env(json!({"drift_schedule": schedule}))).await;
            assert_names(&r, "drift_schedule", &schedule);
            let r = api.admin("POST", "/v1/groups/acme/-/environments", &env(json!({"tool_version": version}))).await;
            assert_names(&r, "tool_version", &version);
            let r = api.admin("POST", "/v1/groups/acme/-/environments", &env(json!({"labels": {"tier": label}}))).await;
            assert_eq!(r.status, 400, "{label:?}: {}", r.text);
        });
    }

    /// Blank text (empty or only whitespace, Unicode's included) is a 400 naming the field.
    #[test]
    fn blank_text_in_a_field_is_refused_naming_it(bad in blank()) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let api = Api::new();
            for (method, path, body, field) in requests(&bad) {
                let r = api.admin(method, path, &body).await;
                assert_names(&r, field, &format!("{bad:?} in {field}"));
            }
        });
    }
}

#[tokio::test]
async fn a_drift_schedule_with_a_newline_inside_is_refused_and_a_clean_one_is_stored() {
    let api = Api::new();
    let r = api
        .admin(
            "POST",
            "/v1/groups/acme/-/environments",
            &json!({"name": "prod", "env_type": "production", "drift_schedule": "0 3\n* * *"}),
        )
        .await;
    assert_names(&r, "drift_schedule", "a newline");
    let runner = "runner_configuration:\n  type: local\nstate_storage_configuration:\n  type: local\n  directory: /tmp/s\n";
    let r = api
        .call(
            "POST",
            "/v1/groups/acme/-/runners/local",
            Some(runner),
            true,
            None,
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let r = api
        .admin(
            "POST",
            "/v1/groups/acme/-/rules",
            &json!({"id": "default", "runner_id": "acme/local"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let r = api
        .admin(
            "POST",
            "/v1/groups/acme/-/environments",
            &json!({"name": "prod", "env_type": "production", "drift_schedule": "0 3 * * *"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
}
