//! The resolution answer: the winner, why and counts by default; every rule's fate only
//! with `?explain=full`, a page of at most 1,000 rules at a time. In memory, so a rule
//! set of 1,006 rules is quick to build; the moto-backed API suite covers the same
//! routes over DynamoDB.

use std::sync::Arc;

use axum::body::Body;
use axum::http::Request;
use serde_json::Value;
use sortie_api::{router, AppState, BucketConfig};
use sortie_core::{Criteria, GroupPath, Runner, RunnerId, RunnerRule, RunnerSpec};
use sortie_lifecycle::{Bus, JobService, LifecycleError};
use sortie_store::{
    Artifacts, JobMessage, JobQueue, JobRecord, MemoryStore, ObjectInfo, RuleStore, RunnerStore,
    StoreError,
};
use tower::ServiceExt;

struct NoQueue;

#[async_trait::async_trait]
impl JobQueue for NoQueue {
    async fn send_message(&self, _: &JobMessage, _: i32) -> Result<(), StoreError> {
        Ok(())
    }
}

struct NoBus;

#[async_trait::async_trait]
impl Bus for NoBus {
    async fn job_completed(&self, _: &JobRecord) -> Result<(), LifecycleError> {
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

async fn call(app: &axum::Router, method: &str, path: &str, body: &str) -> (u16, Value, usize) {
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    let status = resp.status().as_u16();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, serde_json::from_slice(&bytes).unwrap(), bytes.len())
}

#[tokio::test]
async fn counts_by_default_and_every_rule_only_on_request_a_page_at_a_time() {
    let store = Arc::new(MemoryStore::new());
    let spec = RunnerSpec::parse(
        "runner_configuration: {type: local}\nstate_storage_configuration: {type: local, directory: /x}",
    )
    .unwrap();
    let shared = RunnerId::parse("shared").unwrap();
    store
        .create_runner(&Runner {
            id: shared.clone(),
            spec,
        })
        .await
        .unwrap();
    let rule = |id: String, env_type: Option<&str>| RunnerRule {
        id,
        scope: GroupPath::root(),
        runner_id: shared.clone(),
        criteria: Criteria {
            env_type: env_type.map(str::to_string),
            ..Default::default()
        },
        priority: 0,
    };
    for i in 0..1005 {
        store
            .create_rule(&rule(format!("other-{i:04}"), Some("other")))
            .await
            .unwrap();
    }
    store
        .create_rule(&rule("default".into(), None))
        .await
        .unwrap();
    let app = router(AppState {
        store: store.clone(),
        jobs: JobService {
            store,
            queue: Arc::new(NoQueue),
            bus: Arc::new(NoBus),
            secrets: Arc::new(sortie_launch::MemoryJobSecrets::default()),
        },
        dev_identity: true,
        artifacts: Arc::new(NoArtifacts),
        bucket: BucketConfig {
            name: "b".into(),
            region: "us-east-1".into(),
        },
        memberships: Default::default(),
        admin_subjects: vec![],
        checker: std::sync::Arc::new(sortie_launch::StaticRunnerChecker(vec![])),
        rule_indexes: Default::default(),
        oidc: std::sync::Arc::new(sortie_api::oidc::NoOidc),
        public_url: None,
        agent_heartbeat_seconds: sortie_core::protocol::agent::HEARTBEAT_SECONDS,
    });

    let (status, created, size) = call(
        &app,
        "POST",
        "/v1/groups/acme/-/environments",
        r#"{"name":"prod","env_type":"production"}"#,
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let resolution = &created["resolution"];
    assert_eq!(resolution["rule"]["id"], "default");
    assert!(resolution["why"].as_str().unwrap().contains("`default`"));
    assert_eq!(resolution["counts"]["won"], 1);
    assert_eq!(resolution["counts"]["not_matched"]["env_type"], 1005);
    assert!(
        resolution.get("explanation").is_none(),
        "no per-rule list unless asked"
    );
    assert!(size < 4096, "the default answer stays small: {size} bytes");

    let path = "/v1/environments/acme/prod/-/refresh-runner?dry_run=true&explain=full";
    let (status, first, _) = call(&app, "POST", path, "").await;
    assert_eq!(status, 200, "{first}");
    let page = first["resolution"]["explanation"].as_array().unwrap();
    assert_eq!(page.len(), 1000);
    assert_eq!(page[0]["rule_id"], "default");
    assert_eq!(page[0]["outcome"], "won");
    assert_eq!(first["resolution"]["explanation_next"], 1000);

    let (status, second, _) = call(&app, "POST", &format!("{path}&explain_offset=1000"), "").await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(
        second["resolution"]["explanation"]
            .as_array()
            .unwrap()
            .len(),
        6
    );
    assert!(second["resolution"].get("explanation_next").is_none());

    let (status, bad, _) = call(
        &app,
        "POST",
        "/v1/environments/acme/prod/-/refresh-runner?explain=everything",
        "",
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(bad["error"]["fields"][0]["path"], "query.explain");
}
