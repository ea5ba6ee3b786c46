//! The router against its own table: templates, the `/-/` separator, 404 and 405.

use std::sync::Arc;

use axum::body::Body;
use serde_json::Value;
use sortie_core::{Runner, RunnerId, RunnerSpec};
use sortie_store::{
    Artifacts, JobMessage, JobQueue, MemoryStore, ObjectInfo, RunnerStore, StoreError,
};
use tower::ServiceExt;

use axum::http::Method;

use super::router::build;
use super::{Auth, Route};
use crate::{AppState, BucketConfig};

struct NoQueue;

#[async_trait::async_trait]
impl JobQueue for NoQueue {
    async fn send_message(&self, _: &JobMessage, _: i32) -> Result<(), StoreError> {
        Ok(())
    }
}

struct NoBus;

#[async_trait::async_trait]
impl sortie_lifecycle::Bus for NoBus {
    async fn job_ended(
        &self,
        _: &sortie_store::JobRecord,
    ) -> Result<(), sortie_lifecycle::LifecycleError> {
        Ok(())
    }
}

struct NoArtifacts;

#[async_trait::async_trait]
impl Artifacts for NoArtifacts {
    async fn presign_put(
        &self,
        key: &str,
        _: &str,
        _: std::time::Duration,
    ) -> Result<sortie_store::PresignedPut, StoreError> {
        Err(StoreError::NotFound {
            kind: "bucket",
            id: key.to_string(),
        })
    }
    async fn list(&self, _: &str) -> Result<Vec<ObjectInfo>, StoreError> {
        Ok(vec![])
    }
    async fn get(&self, key: &str) -> Result<Vec<u8>, StoreError> {
        Err(StoreError::NotFound {
            kind: "object",
            id: key.to_string(),
        })
    }
}

async fn app() -> axum::Router {
    let store = Arc::new(MemoryStore::new());
    let spec = RunnerSpec::parse(
        "runner_configuration: {type: local}\nstate_storage_configuration: {type: local, directory: /x}",
    )
    .unwrap();
    for id in ["acme/payments/team", "shared"] {
        let id = RunnerId::parse(id).unwrap();
        let spec = spec.clone();
        store.create_runner(&Runner { id, spec }).await.unwrap();
    }
    build(AppState {
        store: store.clone(),
        jobs: sortie_lifecycle::JobService {
            store,
            queue: Arc::new(NoQueue),
            bus: Arc::new(NoBus),
            secrets: Arc::new(sortie_launch::MemoryJobSecrets::default()),
            gate: Default::default(),
        },
        dev_identity: true,
        artifacts: Arc::new(NoArtifacts),
        bucket: BucketConfig {
            name: "b".into(),
            region: "us-east-1".into(),
        },
        memberships: Default::default(),
        admin_subjects: vec![],
        checker: Arc::new(sortie_launch::StaticRunnerChecker(vec![])),
        rule_indexes: Default::default(),
        oidc: std::sync::Arc::new(crate::oidc::NoOidc),
        public_url: None,
        agent_heartbeat_seconds: sortie_core::protocol::agent::HEARTBEAT_SECONDS,
        state_history: Arc::new(sortie_launch::state_history::MemoryStateHistory::default()),
        console: Default::default(),
        pulls: None,
        issuer: None,
        notify: crate::NotifyParts::system(false, "https://console.example.com"),
    })
}

/// The route that answered (None for 404/405), the status and the body.
async fn call(app: &axum::Router, method: Method, path: &str) -> (Option<Route>, u16, Value) {
    let req = axum::http::Request::builder()
        .method(method)
        .uri(path)
        .body(Body::empty())
        .unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    let route = resp.extensions().get::<Route>().copied();
    let status = resp.status().as_u16();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    (
        route,
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

#[tokio::test]
async fn group_paths_end_at_the_dash_separator() {
    let app = app().await;
    let (r, _, body) = call(&app, Method::GET, "/v1/groups/acme/payments/-/runners").await;
    assert_eq!(r, Some(Route::ListRunners));
    assert_eq!(body["runners"][0]["group"], "acme/payments");
    assert_eq!(body["runners"][0]["inherited"], false);
    let (r, _, body) = call(&app, Method::GET, "/v1/groups/-/runners").await;
    assert_eq!(r, Some(Route::ListRunners));
    assert_eq!(
        (
            body["runners"][0]["group"].as_str(),
            body["runners"][0]["inherited"].as_bool()
        ),
        (Some(""), Some(false)),
        "the root group is the empty path"
    );
    let (r, status, body) = call(&app, Method::DELETE, "/v1/groups/acme/-/rules/prod").await;
    assert_eq!((r, status), (Some(Route::DeleteRule), 404));
    assert!(
        body["error"]["message"].as_str().unwrap().contains("prod"),
        "{body}"
    );
    let (r, _, _) = call(
        &app,
        Method::POST,
        "/v1/environments/acme/payments/prod/-/jobs",
    )
    .await;
    assert_eq!(r, Some(Route::SubmitJob));
    let (r, status, body) = call(&app, Method::GET, "/v1/environments/acme/payments/prod").await;
    assert_eq!((r, status), (Some(Route::GetEnvironment), 404));
    assert!(body.to_string().contains("acme/payments/prod"), "{body}");
    let (r, _, _) = call(&app, Method::PATCH, "/v1/environments/acme/payments/prod").await;
    assert_eq!(r, Some(Route::UpdateEnvironment));
}

#[tokio::test]
async fn unknown_paths_are_404_wrong_methods_405_bad_groups_400() {
    let app = app().await;
    assert_eq!(
        call(&app, Method::GET, "/v1/groups/acme/runners").await.1,
        404
    );
    assert_eq!(call(&app, Method::GET, "/v2/health").await.1, 404);
    let (r, status, body) = call(&app, Method::DELETE, "/v1/groups/acme/-/runners").await;
    assert_eq!((r, status), (None, 405));
    assert_eq!(body["error"]["code"], "method_not_allowed");
    let (_, status, body) = call(&app, Method::GET, "/v1/groups/ACME/-/runners").await;
    assert_eq!(
        (status, body["error"]["fields"][0]["path"].as_str()),
        (400, Some("group"))
    );
    let (_, status, body) = call(&app, Method::GET, "/v1/environments/prod").await;
    assert_eq!(
        (status, body["error"]["fields"][0]["path"].as_str()),
        (400, Some("environment"))
    );
}

#[tokio::test]
async fn a_wrong_method_names_the_allowed_ones_in_the_body_and_in_allow() {
    let app = app().await;
    let req = axum::http::Request::builder()
        .method(Method::PATCH)
        .uri("/v1/groups/acme/-/rules/x")
        .body(Body::empty())
        .unwrap();
    let resp = app.oneshot(req).await.unwrap();
    assert_eq!(resp.status(), 405);
    let allow = resp.headers()["allow"].to_str().unwrap().to_string();
    assert!(
        allow.contains("GET") && allow.contains("PUT") && allow.contains("DELETE"),
        "{allow}"
    );
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    let body: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(
        body["error"]["message"],
        "PATCH is not allowed on /v1/groups/acme/-/rules/x; allowed: GET, PUT, DELETE"
    );
}

#[tokio::test]
async fn every_route_matches_its_own_template() {
    let app = app().await;
    let mut seen = std::collections::BTreeSet::new();
    for route in Route::ALL {
        let (method, template) = route.method_and_path();
        assert!(
            seen.insert((method.to_string(), template)),
            "{template} twice"
        );
        let path = template
            .replace("{group}", "acme/payments")
            .replace("{org}", "acme")
            .replace("{environment}", "acme/payments/prod")
            .replace("{name}", "r1")
            .replace("{id}", "x1");
        let (got, status, body) = call(&app, method, &path).await;
        assert_eq!(got, Some(*route), "{template}: {status} {body}");
    }
}

#[test]
fn each_route_reads_its_credential_and_name_from_its_one_declaration() {
    use Route::*;
    let of = |auth: Auth| -> Vec<Route> {
        Route::ALL
            .iter()
            .copied()
            .filter(|r| r.auth() == auth)
            .collect()
    };
    assert_eq!(
        of(Auth::Public),
        [
            Health,
            OpenApi,
            GithubWebhook,
            GitlabWebhook,
            GetOpenidConfiguration,
            GetJwks
        ]
    );
    assert_eq!(
        of(Auth::JobToken),
        [
            GetJobSpec,
            GetJobSensitiveVariables,
            MintIdentityToken,
            PutJobSummary,
            CreateUpload,
            CreateLogUploads,
            PutUploadProblems,
            ReportJobExit,
            PutJobTool,
            PutJobState
        ]
    );
    assert_eq!(of(Auth::Agent), [ClaimJob, AgentHeartbeat, AgentExit]);
    assert_eq!(of(Auth::User).len(), Route::ALL.len() - 19);
    assert!(Route::ALL
        .iter()
        .all(|r| r.skips_user_token() == matches!(r.auth(), Auth::JobToken | Auth::Agent)));
    assert_eq!(
        (GetJobSpec.operation_id(), GetJobSpec.method_and_path()),
        ("get_job_spec", (Method::GET, "/v1/jobs/{id}/spec"))
    );
}

/// Every answer under `/v1/` (each route of the OpenAPI document's table, whatever its
/// status, and the 404, 405 and 400 answers of the router) says `nosniff` and `no-store`;
/// the console's page keeps its own `Cache-Control`.
#[tokio::test]
async fn every_api_answer_is_nosniff_and_no_store() {
    let app = app().await;
    let headers = |method: Method, path: String| {
        let app = app.clone();
        async move {
            let req = axum::http::Request::builder()
                .method(method)
                .uri(&path)
                .body(Body::empty())
                .unwrap();
            let resp = app.oneshot(req).await.unwrap();
            let get = |name: &str| {
                resp.headers()
                    .get(name)
                    .map(|v| v.to_str().unwrap().to_string())
            };
            (
                path.clone(),
                resp.status().as_u16(),
                get("x-content-type-options"),
                get("cache-control"),
            )
        }
    };
    let mut answers = Vec::new();
    for route in Route::ALL {
        let (method, template) = route.method_and_path();
        let path = template
            .replace("{group}", "acme/payments")
            .replace("{org}", "acme")
            .replace("{environment}", "acme/payments/prod")
            .replace("{name}", "r1")
            .replace("{id}", "x1");
        answers.push(headers(method, path).await);
    }
    answers.push(headers(Method::GET, "/v1/no/such/route".into()).await);
    answers.push(headers(Method::DELETE, "/v1/groups/acme/-/runners".into()).await);
    answers.push(headers(Method::GET, "/v1/groups/ACME/-/runners".into()).await);
    answers.push(headers(Method::GET, "/v2/health".into()).await);
    let statuses: std::collections::BTreeSet<u16> = answers.iter().map(|a| a.1).collect();
    assert!(
        [200, 400, 401, 404, 405]
            .iter()
            .all(|s| statuses.contains(s)),
        "the answers cover successes and errors: {statuses:?}"
    );
    for (path, status, nosniff, cache) in &answers {
        assert_eq!(
            (nosniff.as_deref(), cache.as_deref()),
            (Some("nosniff"), Some("no-store")),
            "{path} ({status})"
        );
    }
    let (_, _, _, cache) = headers(Method::GET, "/".into()).await;
    assert_eq!(
        cache.as_deref(),
        Some("no-cache"),
        "the console's page keeps its own"
    );
}

/// How many times `text` reaches a field named `store` or `artifacts` (`state.store`,
/// `state.jobs.store`, ...; whitespace between the parts allowed, as a method chain spans
/// lines): whole words, and not a method of that name (an atomic's `.store(`).
fn direct_calls(text: &str) -> usize {
    let compact: Vec<char> = text.chars().filter(|c| !c.is_whitespace()).collect();
    let word = |c: Option<&char>| c.is_some_and(|c| c.is_alphanumeric() || *c == '_');
    let mut calls = 0;
    for needle in [".store", ".artifacts"] {
        let n: Vec<char> = needle.chars().collect();
        for i in 0..compact.len().saturating_sub(n.len() - 1) {
            let after = compact.get(i + n.len());
            if compact[i..i + n.len()] == n[..] && !word(after) && after != Some(&'(') {
                calls += 1;
            }
        }
    }
    calls
}

#[test]
fn the_scan_finds_a_call_across_lines_and_only_whole_words() {
    assert_eq!(direct_calls("state\n    .store\n    .get_job(&id)"), 1);
    assert_eq!(direct_calls("state.artifacts.get(&k); state.store.x()"), 2);
    assert_eq!(direct_calls("state.jobs\n  .store\n  .get_job(&id)"), 1);
    assert_eq!(
        direct_calls("state.stores; state.storefront; n.store(1, SeqCst); sortie_store::X"),
        0
    );
}

#[test]
fn route_modules_reach_the_store_and_the_artifacts_only_through_services() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/routes");
    let mut found = std::collections::BTreeMap::new();
    let mut read = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if !name.ends_with(".rs") || name == "tests.rs" {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        read += 1;
        let calls = direct_calls(&text);
        if calls > 0 {
            found.insert(name, calls);
        }
    }
    assert!(read >= 20, "the route modules were read ({read})");
    assert!(
        found.is_empty(),
        "route modules reach the store or the artifacts directly (a field named `store` or \
         `artifacts`): {found:?}. A route module authorises, reads the request and shapes \
         the answer; put what the request does in a service (sortie_lifecycle) and call that"
    );
}

/// The committed `crates/client/openapi.json` (what `sortie-client`'s endpoints are
/// generated from) is the document the API serves at `GET /v1/openapi.json`, byte for
/// byte once pretty-printed. `SORTIE_BLESS_OPENAPI=1` rewrites it after an API change.
#[tokio::test]
async fn the_committed_document_is_the_served_one() {
    let app = app().await;
    let (r, status, served) = call(&app, Method::GET, "/v1/openapi.json").await;
    assert_eq!((r, status), (Some(Route::OpenApi), 200));
    let text = format!("{}\n", serde_json::to_string_pretty(&served).unwrap());
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/../client/openapi.json");
    if std::env::var_os("SORTIE_BLESS_OPENAPI").is_some() {
        std::fs::write(file, &text).unwrap();
    }
    let committed = std::fs::read_to_string(file).unwrap_or_default();
    assert!(
        committed == text,
        "crates/client/openapi.json is not the document the API serves: run `SORTIE_BLESS_OPENAPI=1 cargo test -p sortie-api --lib the_committed_document` and commit it"
    );
}
