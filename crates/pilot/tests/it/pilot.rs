//! End-to-end: the real `sortie-pilot` binary against a fake API on loopback,
//! a local AWS (moto) for state, logs, artifacts and DynamoDB state locks, and the real
//! Terraform 0.11.11 and 1.0.3. The fake API presigns uploads (and the saved plan's
//! download) with the API's own code (`sortie_store::S3Artifacts`, the real SDK), so every
//! log chunk and artifact reaches moto's S3 through a presigned URL.
//!
//! Run with `scripts/with-moto.sh cargo test -p sortie-pilot`.
//!
//! A job whose spec sets `report_exit` ends with `POST /v1/jobs/{id}/events`; the fake
//! API records each body with what it had been told before it. It also records every
//! `PUT /v1/jobs/{id}/tool` (the tool and version the runner chose).

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use serde_json::{json, Value};
use sortie_core::protocol::pilot::{artifact_prefix, log_chunk_offset, log_prefix, upload_key};
use sortie_core::protocol::pilot::{JobSpec, PilotExit, UploadKind};
use sortie_core::runner::{KubernetesStorage, LocalStorage, S3Storage};
use sortie_core::state_version::StateStamp;
use sortie_core::tool::ToolName;
use sortie_core::{
    ChangeSummary, EnvPath, JobPhase, Operation, Source, StateStorageConfiguration, ToolUsed,
};
use sortie_store::{Artifacts, S3Artifacts};
use sortie_testkit::{s3_client, sdk_config, unique, REGION};

pub(crate) const TOKEN: &str = "job-token-for-tests";

/// What the fake API serves and what it was told.
#[derive(Clone, Default)]
struct ApiState {
    specs: Arc<Mutex<HashMap<String, JobSpec>>>,
    summaries: Arc<Mutex<HashMap<String, ChangeSummary>>>,
    /// Spec requests still to answer with 503 Service Unavailable.
    unavailable: Arc<Mutex<u32>>,
    /// Presigns into the logs bucket, as the API does.
    artifacts: Option<Arc<S3Artifacts>>,
    /// Kinds whose URLs point at a bucket that does not exist, so S3 refuses them.
    refused: Arc<Mutex<Vec<UploadKind>>>,
    /// Upload problems reported, by job.
    problems: Arc<Mutex<HashMap<String, Vec<String>>>>,
    /// Exit reports (`POST /v1/jobs/{id}/events`), by job, in arrival order.
    exits: Arc<Mutex<HashMap<String, Vec<ExitSeen>>>>,
    /// What to answer an exit report with (204 unless set).
    exit_status: Arc<Mutex<Option<StatusCode>>>,
    /// Tool reports (`PUT /v1/jobs/{id}/tool`), by job, in arrival order.
    tools: Arc<Mutex<HashMap<String, Vec<ToolUsed>>>>,
    /// What to answer a tool report with (204 unless set).
    tool_status: Arc<Mutex<Option<StatusCode>>>,
    /// State reports (`PUT /v1/jobs/{id}/state`), by job, in arrival order.
    states: Arc<Mutex<HashMap<String, Vec<StateStamp>>>>,
}

/// One exit report and what the fake API knew when it arrived.
#[derive(Debug, Clone)]
pub(crate) struct ExitSeen {
    /// The body, decoded as the API does (unknown fields refused).
    pub(crate) exit: PilotExit,
    /// The summary had been reported before it.
    after_summary: bool,
    /// The job's log chunks in the bucket when it arrived.
    log_chunks: usize,
}

fn authorized(headers: &HeaderMap) -> bool {
    headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == format!("Bearer {TOKEN}"))
}

async fn get_spec(
    State(state): State<ApiState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Json<JobSpec>, (StatusCode, Json<Value>)> {
    if !authorized(&headers) {
        return Err((
            StatusCode::UNAUTHORIZED,
            Json(json!({"error": "unauthorized", "message": "invalid job token"})),
        ));
    }
    {
        let mut unavailable = state.unavailable.lock().unwrap();
        if *unavailable > 0 {
            *unavailable -= 1;
            return Err((
                StatusCode::SERVICE_UNAVAILABLE,
                Json(json!({"error": "unavailable"})),
            ));
        }
    }
    let spec = state.specs.lock().unwrap().get(&id).cloned();
    spec.map(Json)
        .ok_or((StatusCode::NOT_FOUND, Json(json!({"error": "not_found"}))))
}

async fn put_summary(
    State(state): State<ApiState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Json(summary): Json<ChangeSummary>,
) -> StatusCode {
    if !authorized(&headers) {
        return StatusCode::UNAUTHORIZED;
    }
    state.summaries.lock().unwrap().insert(id, summary);
    StatusCode::NO_CONTENT
}

#[derive(serde::Deserialize)]
struct UploadBody {
    kind: UploadKind,
    name: Option<String>,
}

async fn create_upload(
    State(state): State<ApiState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Json(body): Json<UploadBody>,
) -> Result<Json<Value>, StatusCode> {
    if !authorized(&headers) {
        return Err(StatusCode::UNAUTHORIZED);
    }
    let key = upload_key(&id.clone().into(), body.kind, body.name.as_deref())
        .map_err(|_| StatusCode::BAD_REQUEST)?;
    let artifacts = state.artifacts.clone().unwrap();
    let refused = state.refused.lock().unwrap().contains(&body.kind);
    let signer = if refused {
        Arc::new(S3Artifacts::new(
            artifacts.client().clone(),
            "no-such-bucket-sortie",
        ))
    } else {
        artifacts
    };
    let signed = signer
        .presign_put(
            &key,
            body.kind.content_type(),
            std::time::Duration::from_secs(600),
        )
        .await
        .map_err(|_| StatusCode::BAD_GATEWAY)?;
    Ok(Json(json!({
        "url": signed.url, "method": signed.method, "headers": signed.headers,
        "expires_at": signed.expires_at, "key": key,
    })))
}

async fn put_problems(
    State(state): State<ApiState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> StatusCode {
    if !authorized(&headers) {
        return StatusCode::UNAUTHORIZED;
    }
    let problems = serde_json::from_value(body["problems"].clone()).unwrap();
    state.problems.lock().unwrap().insert(id, problems);
    StatusCode::NO_CONTENT
}

async fn post_event(
    State(state): State<ApiState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: String,
) -> StatusCode {
    if !authorized(&headers) {
        return StatusCode::UNAUTHORIZED;
    }
    let Ok(exit) = serde_json::from_str::<PilotExit>(&body) else {
        return StatusCode::BAD_REQUEST;
    };
    let after_summary = state.summaries.lock().unwrap().contains_key(&id);
    let log_chunks = match &state.artifacts {
        Some(artifacts) => artifacts
            .client()
            .list_objects_v2()
            .bucket(artifacts.bucket())
            .prefix(log_prefix(&id.clone().into()))
            .send()
            .await
            .map(|l| l.contents().len())
            .unwrap_or(0),
        None => 0,
    };
    state
        .exits
        .lock()
        .unwrap()
        .entry(id)
        .or_default()
        .push(ExitSeen {
            exit,
            after_summary,
            log_chunks,
        });
    state
        .exit_status
        .lock()
        .unwrap()
        .unwrap_or(StatusCode::NO_CONTENT)
}

async fn put_tool(
    State(state): State<ApiState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: String,
) -> StatusCode {
    if !authorized(&headers) {
        return StatusCode::UNAUTHORIZED;
    }
    // Decoded and checked as the API does: unknown fields refused, an exact version.
    let Ok(used) = serde_json::from_str::<ToolUsed>(&body) else {
        return StatusCode::BAD_REQUEST;
    };
    if used.check().is_err() {
        return StatusCode::UNPROCESSABLE_ENTITY;
    }
    state
        .tools
        .lock()
        .unwrap()
        .entry(id)
        .or_default()
        .push(used);
    state
        .tool_status
        .lock()
        .unwrap()
        .unwrap_or(StatusCode::NO_CONTENT)
}

async fn put_state(
    State(state): State<ApiState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: String,
) -> StatusCode {
    if !authorized(&headers) {
        return StatusCode::UNAUTHORIZED;
    }
    // Decoded and checked as the API does: unknown fields refused, a plain lineage.
    let Ok(stamp) = serde_json::from_str::<StateStamp>(&body) else {
        return StatusCode::BAD_REQUEST;
    };
    if stamp.problem().is_some() {
        return StatusCode::BAD_REQUEST;
    }
    state
        .states
        .lock()
        .unwrap()
        .entry(id)
        .or_default()
        .push(stamp);
    StatusCode::NO_CONTENT
}

pub(crate) struct FakeApi {
    url: String,
    state: ApiState,
}

impl FakeApi {
    async fn start(artifacts: S3Artifacts) -> Self {
        let state = ApiState {
            artifacts: Some(Arc::new(artifacts)),
            ..Default::default()
        };
        let app = Router::new()
            .route("/v1/jobs/{id}/spec", get(get_spec))
            .route("/v1/jobs/{id}/summary", put(put_summary))
            .route("/v1/jobs/{id}/uploads", post(create_upload))
            .route("/v1/jobs/{id}/upload-problems", put(put_problems))
            .route("/v1/jobs/{id}/events", post(post_event))
            .route("/v1/jobs/{id}/tool", put(put_tool))
            .route("/v1/jobs/{id}/state", put(put_state))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { url, state }
    }

    pub(crate) fn add(&self, spec: &JobSpec) {
        self.state
            .specs
            .lock()
            .unwrap()
            .insert(spec.job_id.to_string(), spec.clone());
    }

    pub(crate) fn summary(&self, job_id: &str) -> Option<ChangeSummary> {
        self.state.summaries.lock().unwrap().get(job_id).copied()
    }

    fn problems(&self, job_id: &str) -> Option<Vec<String>> {
        self.state.problems.lock().unwrap().get(job_id).cloned()
    }

    fn states(&self, job_id: &str) -> Vec<StateStamp> {
        self.state
            .states
            .lock()
            .unwrap()
            .get(job_id)
            .cloned()
            .unwrap_or_default()
    }

    fn tools(&self, job_id: &str) -> Vec<ToolUsed> {
        self.state
            .tools
            .lock()
            .unwrap()
            .get(job_id)
            .cloned()
            .unwrap_or_default()
    }

    /// A presigned GET of one of the job's artifacts, as the API gives a second phase.
    async fn presign_get(&self, key: &str) -> String {
        self.state
            .artifacts
            .as_ref()
            .unwrap()
            .presign_get(key, std::time::Duration::from_secs(600))
            .await
            .unwrap()
    }

    pub(crate) fn exits(&self, job_id: &str) -> Vec<ExitSeen> {
        self.state
            .exits
            .lock()
            .unwrap()
            .get(job_id)
            .cloned()
            .unwrap_or_default()
    }
}

/// Buckets and a fake API for one test.
pub(crate) struct World {
    pub(crate) api: FakeApi,
    s3: aws_sdk_s3::Client,
    state_bucket: String,
    logs_bucket: String,
}

impl World {
    pub(crate) async fn new() -> Self {
        let s3 = s3_client(&sdk_config().await);
        let state_bucket = unique("runner-state");
        let logs_bucket = unique("runner-logs");
        for bucket in [&state_bucket, &logs_bucket] {
            s3.create_bucket().bucket(bucket).send().await.unwrap();
        }
        Self {
            api: FakeApi::start(S3Artifacts::new(s3.clone(), logs_bucket.clone())).await,
            s3,
            state_bucket,
            logs_bucket,
        }
    }

    /// A job of `operation` on `acme/payments/dev` with s3 state storage.
    pub(crate) fn spec(
        &self,
        operation: Operation,
        source: Source,
        files: BTreeMap<String, String>,
    ) -> JobSpec {
        let job_id = unique("job");
        let environment = EnvPath::parse("acme/payments/dev").unwrap();
        let storage = S3Storage {
            bucket: self.state_bucket.clone(),
            key_prefix: "tf/".into(),
            region: REGION.into(),
            kms_key_id: None,
            use_lockfile: false,
            dynamodb_table: None,
            endpoint: None,
        };
        JobSpec {
            state_key: Some(storage.state_key(&environment)),
            job_id: job_id.clone().into(),
            environment,
            operation,
            source,
            variables: BTreeMap::new(),
            files,
            secret_refs: BTreeMap::new(),
            sensitive_variables: Vec::new(),
            runner_secret_env: Vec::new(),
            state_storage: StateStorageConfiguration::S3(storage),
            report_exit: false,
            phase: None,
            saved_plan_url: None,
            restore_state_url: None,
            detailed_exitcode: false,
            source_access: None,
            speculative: false,
            tool: None,
            version: None,
            log_offset: 0,
            identity: None,
        }
    }

    /// Runs the runner binary for `spec` (registered with the fake API) with `token`.
    async fn run(&self, spec: &JobSpec, token: &str) -> Output {
        self.run_as(&spec.job_id, spec, token).await
    }

    /// Runs the runner binary as job `job_id`, the API answering `spec` for it.
    async fn run_as(&self, job_id: &str, spec: &JobSpec, token: &str) -> Output {
        self.run_configured(job_id, spec, token, |_| {}).await
    }

    /// Runs the runner binary for `spec` with Terraform 1.0.3 as `SORTIE_TERRAFORM`.
    async fn run_tf1(&self, spec: &JobSpec) -> Output {
        self.run_configured(&spec.job_id, spec, TOKEN, |command| {
            command.env("SORTIE_TERRAFORM", sortie_testkit::terraform1_bin());
        })
        .await
    }

    /// [`Self::run_as`], with `configure` given the command last (to change its environment).
    pub(crate) async fn run_configured(
        &self,
        job_id: &str,
        spec: &JobSpec,
        token: &str,
        configure: impl FnOnce(&mut Command),
    ) -> Output {
        self.api
            .state
            .specs
            .lock()
            .unwrap()
            .insert(job_id.to_string(), spec.clone());
        let work = sortie_testkit::scratch_dir("runner").unwrap();
        let mut command = Command::new(env!("CARGO_BIN_EXE_sortie-pilot"));
        command
            .env("SORTIE_API_URL", &self.api.url)
            .env("SORTIE_JOB_ID", job_id)
            .env("SORTIE_JOB_TOKEN", token)
            .env("SORTIE_TERRAFORM", sortie_testkit::terraform_bin())
            .env("SORTIE_WORK_DIR", &work)
            .env_remove("SORTIE_SECRET_REFS")
            .env_remove("SORTIE_GIT_CREDENTIALS")
            .env_remove("SORTIE_TOOLS_DIR");
        configure(&mut command);
        let output = tokio::task::spawn_blocking(move || command.output())
            .await
            .unwrap()
            .expect("the runner binary starts");
        // Everything the runner did is in its log (S3 and stdout); the files can go.
        let _ = std::fs::remove_dir_all(&work);
        output
    }

    /// How many log chunks the job has in the bucket.
    async fn log_chunks(&self, spec: &JobSpec) -> usize {
        self.s3
            .list_objects_v2()
            .bucket(&self.logs_bucket)
            .prefix(log_prefix(&spec.job_id))
            .send()
            .await
            .unwrap()
            .contents()
            .len()
    }

    async fn object(&self, key: &str) -> Option<Vec<u8>> {
        self.object_in(&self.logs_bucket, key).await
    }

    pub(crate) async fn object_in(&self, bucket: &str, key: &str) -> Option<Vec<u8>> {
        let out = self
            .s3
            .get_object()
            .bucket(bucket)
            .key(key)
            .send()
            .await
            .ok()?;
        Some(out.body.collect().await.ok()?.into_bytes().to_vec())
    }

    /// The job's log: its chunks in key order, checked to tile the log exactly.
    pub(crate) async fn log(&self, spec: &JobSpec) -> String {
        self.log_from(spec, 0).await
    }

    /// The job's log from byte `start` on: the chunks whose offsets are `start` or more,
    /// in key order, checked to tile it exactly from `start`.
    async fn log_from(&self, spec: &JobSpec, start: u64) -> String {
        let prefix = &log_prefix(&spec.job_id);
        let listed = self
            .s3
            .list_objects_v2()
            .bucket(&self.logs_bucket)
            .prefix(prefix)
            .send()
            .await
            .unwrap();
        let mut keys: Vec<String> = listed
            .contents()
            .iter()
            .filter_map(|o| o.key().map(str::to_string))
            .collect();
        keys.sort();
        keys.retain(|key| log_chunk_offset(prefix, key).is_none_or(|offset| offset >= start));
        assert!(
            !keys.is_empty(),
            "no log chunks under {prefix} from {start}"
        );
        let mut log = Vec::new();
        for key in keys {
            let offset =
                log_chunk_offset(prefix, &key).unwrap_or_else(|| panic!("bad chunk key {key}"));
            assert_eq!(
                offset,
                start + log.len() as u64,
                "chunk {key} starts where the previous one ended"
            );
            log.extend(self.object(&key).await.unwrap());
        }
        String::from_utf8(log).unwrap()
    }
}

pub(crate) fn hello_files() -> BTreeMap<String, String> {
    let dir = sortie_testkit::example_dir("hello");
    std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "tf"))
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read_to_string(&p).unwrap(),
            )
        })
        .collect()
}

pub(crate) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

pub(crate) fn last_line(text: &str) -> &str {
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
}

pub(crate) fn describe(output: &Output) -> String {
    format!(
        "status {}\n--- stdout\n{}\n--- stderr\n{}",
        output.status,
        text(&output.stdout),
        text(&output.stderr)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_then_apply_of_hello_keeps_state_in_s3_and_streams_the_log() {
    sortie_testkit::require_aws!();
    let world = World::new().await;

    // Plan: exits 0, uploads the plan and a zero summary (hello has only outputs).
    let plan = world.spec(Operation::Plan, Source::inline(), hello_files());
    let output = world.run(&plan, TOKEN).await;
    assert!(output.status.success(), "{}", describe(&output));
    let plan_file = world
        .object(&format!("{}plan.tfplan", artifact_prefix(&plan.job_id)))
        .await;
    assert!(
        plan_file.is_some_and(|b| !b.is_empty()),
        "plan.tfplan uploaded"
    );
    let summary: ChangeSummary = serde_json::from_slice(
        &world
            .object(&format!("{}summary.json", artifact_prefix(&plan.job_id)))
            .await
            .expect("summary.json uploaded"),
    )
    .unwrap();
    assert_eq!(summary, ChangeSummary::default());
    assert_eq!(
        world.api.summary(&plan.job_id),
        Some(ChangeSummary::default())
    );
    let log = world.log(&plan).await;
    assert!(
        last_line(&log).starts_with("sortie-pilot: plan succeeded"),
        "{log}"
    );

    // Apply, with a variable: the state lands at the environment's key.
    let mut apply = world.spec(Operation::Apply, Source::inline(), hello_files());
    apply
        .variables
        .insert("greeting".into(), Value::from("hello from the runner test"));
    let output = world.run(&apply, TOKEN).await;
    assert!(output.status.success(), "{}", describe(&output));
    let key = apply.state_key.clone().unwrap();
    assert_eq!(key, "tf/acme/payments/dev/terraform.tfstate");
    let state: Value = serde_json::from_slice(
        &world
            .object_in(&world.state_bucket, &key)
            .await
            .expect("the state object exists"),
    )
    .unwrap();
    assert_eq!(
        state["modules"][0]["outputs"]["message"]["value"], "hello from the runner test!",
        "{state:#}"
    );
    assert!(world.api.summary(&apply.job_id).is_some());

    // The log: terraform's output in order, on S3 and on stdout alike.
    let log = world.log(&apply).await;
    let init = log
        .find("Initializing the backend...")
        .expect("init output in the log");
    let done = log
        .find("Apply complete!")
        .expect("apply output in the log");
    assert!(init < done, "{log}");
    assert!(
        last_line(&log).starts_with("sortie-pilot: apply succeeded: 0 added"),
        "{log}"
    );
    assert_eq!(text(&output.stdout), log, "stdout carries exactly the log");
    let outputs: Value = serde_json::from_slice(
        &world
            .object(&format!("{}outputs.json", artifact_prefix(&apply.job_id)))
            .await
            .expect("outputs.json uploaded"),
    )
    .unwrap();
    assert_eq!(
        outputs["message"]["value"], "hello from the runner test!",
        "{outputs:#}"
    );
    assert_eq!(world.api.problems(&apply.job_id), None, "nothing failed");
    assert!(
        !log.contains(TOKEN) && !text(&output.stderr).contains(TOKEN),
        "the token is never logged"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_syntax_error_fails_with_terraforms_error_as_the_last_line() {
    sortie_testkit::require_aws!();
    let world = World::new().await;
    let files = BTreeMap::from([(
        "main.tf".to_string(),
        "output \"broken\" {\n  value = \"unterminated\n".to_string(),
    )]);
    let spec = world.spec(Operation::Apply, Source::inline(), files);
    let output = world.run(&spec, TOKEN).await;
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let log = world.log(&spec).await;
    let last = last_line(&log);
    assert!(
        last.starts_with(
            "sortie-pilot: terraform init failed with exit code 1: Error: Error parsing main.tf"
        ),
        "{log}"
    );
    assert_eq!(last, last_line(&text(&output.stdout)));
    assert_eq!(
        world.api.summary(&spec.job_id),
        None,
        "no summary for a failed job"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_token_is_refused_with_a_clear_line() {
    sortie_testkit::require_aws!();
    let world = World::new().await;
    let spec = world.spec(Operation::Plan, Source::inline(), hello_files());
    let output = world.run(&spec, "not-the-token").await;
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let stdout = text(&output.stdout);
    let last = last_line(&stdout);
    assert!(
        last.starts_with("sortie-pilot: the API refused the job token"),
        "{stdout}"
    );
    assert!(last.contains("401"), "{last}");
    assert!(!stdout.contains("not-the-token") && !text(&output.stderr).contains("not-the-token"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_s3_archive_source_is_checked_then_planned() {
    sortie_testkit::require_aws!();
    let world = World::new().await;
    let entries: Vec<(String, String)> = hello_files()
        .into_iter()
        .map(|(name, body)| (format!("configs/hello/{name}"), body))
        .collect();
    let archive = crate::github_fake::tar_gz(
        &entries
            .iter()
            .map(|(path, body)| (path.as_str(), body.as_str()))
            .collect::<Vec<_>>(),
    );
    let key = "sources/hello.tar.gz";
    world
        .s3
        .put_object()
        .bucket(&world.state_bucket)
        .key(key)
        .body(archive.clone().into())
        .send()
        .await
        .unwrap();
    let source = |sha256: String| Source::S3 {
        bucket: world.state_bucket.clone(),
        key: key.into(),
        sha256,
        path: "configs/hello".into(),
    };

    // The wrong checksum: refused before anything runs.
    let wrong = world.spec(Operation::Plan, source("ab".repeat(32)), BTreeMap::new());
    let output = world.run(&wrong, TOKEN).await;
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let log = world.log(&wrong).await;
    let last = last_line(&log);
    assert!(last.starts_with("sortie-pilot: checksum mismatch"), "{log}");
    assert!(last.contains(key), "{last}");
    assert!(!log.contains("Initializing"), "terraform never ran: {log}");

    // The right one: the archive's directory is planned.
    let right = world.spec(
        Operation::Plan,
        source(sortie_pilot::source::sha256_hex(&archive)),
        BTreeMap::new(),
    );
    let output = world.run(&right, TOKEN).await;
    assert!(output.status.success(), "{}", describe(&output));
    assert!(world
        .object(&format!("{}plan.tfplan", artifact_prefix(&right.job_id)))
        .await
        .is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_state_storage_keeps_one_state_file_per_environment() {
    sortie_testkit::require_aws!();
    let world = World::new().await;
    let dir: PathBuf = sortie_testkit::scratch_dir("runner-local-state").unwrap();
    let mut spec = world.spec(Operation::Apply, Source::inline(), hello_files());
    spec.state_storage = StateStorageConfiguration::Local(LocalStorage {
        directory: dir.to_string_lossy().into_owned(),
    });
    spec.state_key = None;
    let output = world.run(&spec, TOKEN).await;
    assert!(output.status.success(), "{}", describe(&output));
    let state_file = dir.join("acme/payments/dev/terraform.tfstate");
    let state: Value = serde_json::from_slice(&std::fs::read(&state_file).unwrap()).unwrap();
    assert_eq!(
        state["modules"][0]["outputs"]["message"]["value"],
        "hello from sortie!"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `script` as an executable `terraform` in `dir`.
pub(crate) fn fake_terraform(dir: &std::path::Path, script: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let tool = dir.join("terraform");
    std::fs::write(&tool, script).unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    tool
}

/// A stand-in for Terraform 1.9 that records its arguments and environment,
/// takes its time in `init` and answers `show -json` with a plan of its own.
const FAKE_TERRAFORM_1_9: &str = r#"#!/bin/sh
echo "$* token=${SORTIE_JOB_TOKEN:-absent}" >> "$FAKE_TF_RECORD"
case "$1" in
  version) echo "Terraform v1.9.8"; echo "on linux_amd64" ;;
  init) echo "Initializing the backend..."; sleep 2.5; echo "Terraform has been successfully initialized!" ;;
  plan) echo "Plan: 1 to add, 0 to change, 0 to destroy."; echo "fake plan" > plan.tfplan ;;
  show) echo '{"resource_changes":[{"change":{"actions":["create"]}},{"change":{"actions":["delete","create"]}}]}' ;;
  *) echo "Error: unexpected command $1" >&2; exit 1 ;;
esac
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_current_terraform_gets_the_new_backend_options_and_show_json_counts() {
    sortie_testkit::require_aws!();
    let world = World::new().await;
    let dir = sortie_testkit::scratch_dir("runner-fake-tf").unwrap();
    let tool = fake_terraform(&dir, FAKE_TERRAFORM_1_9);
    let record = dir.join("record.txt");

    let spec = world.spec(Operation::Plan, Source::inline(), hello_files());
    world.api.add(&spec);
    let work = dir.join("work");
    let mut command = Command::new(env!("CARGO_BIN_EXE_sortie-pilot"));
    command
        .env("SORTIE_API_URL", &world.api.url)
        .env("SORTIE_JOB_ID", &spec.job_id)
        .env("SORTIE_JOB_TOKEN", TOKEN)
        .env("SORTIE_TERRAFORM", &tool)
        .env("SORTIE_WORK_DIR", &work)
        .env("FAKE_TF_RECORD", &record);
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .unwrap()
        .unwrap();
    assert!(output.status.success(), "{}", describe(&output));

    // Terraform 1.6+ options, and never the job token in terraform's environment.
    let recorded = std::fs::read_to_string(&record).unwrap();
    let endpoint = sortie_testkit::endpoint();
    assert!(
        recorded.contains(&format!("-backend-config=endpoints={{s3=\"{endpoint}\"}}")),
        "{recorded}"
    );
    assert!(
        recorded.contains("-backend-config=use_path_style=true"),
        "{recorded}"
    );
    assert!(!recorded.contains("force_path_style"), "{recorded}");
    assert!(
        recorded.contains("show -no-color -json plan.tfplan"),
        "{recorded}"
    );
    assert!(
        !recorded.contains(TOKEN) && recorded.contains("token=absent"),
        "{recorded}"
    );

    // The counts come from show -json (2 to add, 1 to destroy), not from the text.
    let expected = ChangeSummary {
        add: 2,
        change: 0,
        destroy: 1,
        has_changes: None,
    };
    assert_eq!(world.api.summary(&spec.job_id), Some(expected));

    // init took longer than a flush interval: the log came in several chunks
    // (World::log checks that they tile it), the first before init finished.
    let listed = world
        .s3
        .list_objects_v2()
        .bucket(&world.logs_bucket)
        .prefix(log_prefix(&spec.job_id))
        .send()
        .await
        .unwrap();
    assert!(listed.contents().len() >= 2, "{:?}", listed.contents());
    let log = world.log(&spec).await;
    assert!(
        log.contains("Initializing the backend...\nTerraform has been successfully initialized!"),
        "{log}"
    );
    assert!(
        last_line(&log)
            .starts_with("sortie-pilot: plan succeeded: 2 to add, 0 to change, 1 to destroy"),
        "{log}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs git in `dir` for a fixture repository (outside the project's work tree).
fn git(dir: &std::path::Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .args([
            "-c",
            "user.name=sortie-testkit",
            "-c",
            "user.email=tests@sortie.invalid",
        ])
        .args(["-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false"])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git runs");
    assert!(
        output.status.success(),
        "git {args:?}: {}",
        describe(&output)
    );
    text(&output.stdout).trim().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_git_source_is_cloned_at_a_branch_or_a_commit() {
    sortie_testkit::require_aws!();
    let world = World::new().await;
    let repo = std::env::temp_dir().join(unique("sortie-pilot-git"));
    let config = repo.join("infra/hello");
    std::fs::create_dir_all(&config).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    let main_tf = hello_files().remove("main.tf").unwrap();
    std::fs::write(
        config.join("main.tf"),
        main_tf.replace("hello from sortie", "first"),
    )
    .unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "first"]);
    let first = git(&repo, &["rev-parse", "HEAD"]);
    std::fs::write(
        config.join("main.tf"),
        main_tf.replace("hello from sortie", "second"),
    )
    .unwrap();
    git(&repo, &["commit", "-q", "-am", "second"]);
    let url = format!("file://{}", repo.display());
    let source = |git_ref: &str| Source::Git {
        url: url.clone(),
        git_ref: Some(git_ref.to_string()),
        path: "infra/hello".into(),
        credentials_secret: None,
    };

    // A commit: full clone and checkout; the state holds that commit's output.
    let at_commit = world.spec(Operation::Apply, source(&first), BTreeMap::new());
    let output = world.run(&at_commit, TOKEN).await;
    assert!(output.status.success(), "{}", describe(&output));
    let state: Value = serde_json::from_slice(
        &world
            .object_in(&world.state_bucket, at_commit.state_key.as_deref().unwrap())
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(state["modules"][0]["outputs"]["message"]["value"], "first!");

    // A branch: a shallow clone of its tip.
    let at_branch = world.spec(Operation::Apply, source("main"), BTreeMap::new());
    let output = world.run(&at_branch, TOKEN).await;
    assert!(output.status.success(), "{}", describe(&output));
    let log = world.log(&at_branch).await;
    assert!(log.contains("$ git clone --depth 1 --branch main"), "{log}");
    assert!(log.contains("message = second!"), "{log}");

    // A ref that does not exist: git's own error is the reason.
    let missing = world.spec(Operation::Plan, source("no-such-branch"), BTreeMap::new());
    let output = world.run(&missing, TOKEN).await;
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let log = world.log(&missing).await;
    assert!(
        last_line(&log).starts_with("sortie-pilot: git clone of file://"),
        "{log}"
    );
    let _ = std::fs::remove_dir_all(&repo);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_briefly_unavailable_api_is_retried() {
    sortie_testkit::require_aws!();
    let world = World::new().await;
    *world.api.state.unavailable.lock().unwrap() = 2;
    let spec = world.spec(Operation::Plan, Source::inline(), hello_files());
    let output = world.run(&spec, TOKEN).await;
    assert!(output.status.success(), "{}", describe(&output));
    assert_eq!(*world.api.state.unavailable.lock().unwrap(), 0);
    assert!(
        text(&output.stderr).contains("retrying"),
        "{}",
        describe(&output)
    );
}

/// Deliver 3: S3 refuses the summary and outputs uploads (their URLs name a bucket that
/// does not exist); the apply still succeeds, and the pilot reports what did not arrive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_upload_leaves_a_successful_apply_successful_and_is_reported() {
    sortie_testkit::require_aws!();
    let world = World::new().await;
    *world.api.state.refused.lock().unwrap() = vec![UploadKind::Summary, UploadKind::Outputs];
    let spec = world.spec(Operation::Apply, Source::inline(), hello_files());
    let output = world.run(&spec, TOKEN).await;
    assert!(output.status.success(), "{}", describe(&output));
    let log = world.log(&spec).await;
    assert!(
        last_line(&log).starts_with("sortie-pilot: apply succeeded"),
        "{log}"
    );
    assert!(
        log.contains("warning: could not upload the summary"),
        "{log}"
    );
    let problems = world.api.problems(&spec.job_id).expect("problems reported");
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(
        problems[0].contains("summary") && problems[0].contains("NoSuchBucket"),
        "{problems:?}"
    );
    assert!(problems[1].contains("outputs"), "{problems:?}");
    assert!(
        !problems.iter().any(|p| p.contains("X-Amz-Signature")),
        "a presigned URL is never printed: {problems:?}"
    );
    assert!(
        world.api.summary(&spec.job_id).is_some(),
        "the summary still reached the API"
    );
    assert!(world
        .object(&format!("{}summary.json", artifact_prefix(&spec.job_id)))
        .await
        .is_none());
}

/// The one exit report of a job, checked to be its only one.
fn only_exit(world: &World, job_id: &str) -> ExitSeen {
    let exits = world.api.exits(job_id);
    assert_eq!(exits.len(), 1, "exactly one exit report: {exits:?}");
    exits.into_iter().next().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_successful_job_reports_exit_code_0_last_and_only_when_its_spec_asks() {
    sortie_testkit::require_aws!();
    let world = World::new().await;

    let mut asked = world.spec(Operation::Plan, Source::inline(), hello_files());
    asked.report_exit = true;
    let output = world.run(&asked, TOKEN).await;
    assert!(output.status.success(), "{}", describe(&output));
    let seen = only_exit(&world, &asked.job_id);
    assert_eq!(
        seen.exit,
        PilotExit {
            exit_code: 0,
            reason: None
        }
    );
    // The last act: the summary was reported and the whole log shipped before it.
    assert!(seen.after_summary, "{seen:?}");
    assert_eq!(seen.log_chunks, world.log_chunks(&asked).await, "{seen:?}");
    assert!(
        last_line(&world.log(&asked).await).starts_with("sortie-pilot: plan succeeded"),
        "{}",
        describe(&output)
    );
    let stderr = text(&output.stderr);
    assert!(stderr.contains("exit reported to the API"), "{stderr}");
    assert!(!stderr.contains(TOKEN), "the token is never logged");

    // report_exit false (ECS, local): the task's own event ends the job; no callback.
    let not_asked = world.spec(Operation::Plan, Source::inline(), hello_files());
    let output = world.run(&not_asked, TOKEN).await;
    assert!(output.status.success(), "{}", describe(&output));
    assert!(world.api.summary(&not_asked.job_id).is_some());
    assert!(world.api.exits(&not_asked.job_id).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_job_reports_its_exit_code_and_reason() {
    sortie_testkit::require_aws!();
    let world = World::new().await;
    let files = BTreeMap::from([(
        "main.tf".to_string(),
        "output \"broken\" {\n  value = \"unterminated\n".to_string(),
    )]);
    let mut spec = world.spec(Operation::Apply, Source::inline(), files);
    spec.report_exit = true;
    let output = world.run(&spec, TOKEN).await;
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let seen = only_exit(&world, &spec.job_id);
    assert_eq!(seen.exit.exit_code, 1);
    let log = world.log(&spec).await;
    let reason = last_line(&log).strip_prefix("sortie-pilot: ").unwrap();
    assert!(
        reason.starts_with("terraform init failed with exit code 1: Error: Error parsing main.tf"),
        "{log}"
    );
    assert_eq!(seen.exit.reason.as_deref(), Some(reason));
    assert_eq!(seen.log_chunks, world.log_chunks(&spec).await, "{seen:?}");
}

/// No Kubernetes cluster exists here, so a real `kubernetes` backend `init` cannot run:
/// this shows the runner's half of it with the real Terraform 0.11.11, which has no such
/// backend. The job fails before anything is fetched or run, names both versions, and
/// reports its exit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubernetes_state_storage_on_terraform_0_11_fails_at_once_and_reports_it() {
    sortie_testkit::require_aws!();
    let world = World::new().await;
    let mut spec = world.spec(Operation::Plan, Source::inline(), hello_files());
    spec.state_storage = StateStorageConfiguration::Kubernetes(KubernetesStorage {
        namespace: Some("sortie-runners".into()),
    });
    spec.state_key = None;
    spec.report_exit = true;
    let output = world.run(&spec, TOKEN).await;
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let log = world.log(&spec).await;
    let expected = "Terraform v0.11.11 has no kubernetes backend: kubernetes state storage needs Terraform 0.13 or later, or OpenTofu";
    assert_eq!(
        last_line(&log),
        format!("sortie-pilot: {expected}"),
        "{log}"
    );
    assert_eq!(last_line(&log), last_line(&text(&output.stdout)));
    assert!(
        !log.contains("inline source") && !log.contains("Initializing"),
        "nothing was laid out or run: {log}"
    );
    let seen = only_exit(&world, &spec.job_id);
    assert_eq!(
        seen.exit,
        PilotExit {
            exit_code: 1,
            reason: Some(expected.into())
        }
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spec_for_another_job_fails_early_and_still_reports_the_exit() {
    sortie_testkit::require_aws!();
    let world = World::new().await;
    let mut spec = world.spec(Operation::Plan, Source::inline(), hello_files());
    spec.report_exit = true;
    let asked_for = unique("job");
    let output = world.run_as(&asked_for, &spec, TOKEN).await;
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let expected = format!(
        "the API answered the spec of job {} when asked for job {asked_for}",
        spec.job_id
    );
    assert_eq!(
        last_line(&text(&output.stdout)),
        format!("sortie-pilot: {expected}")
    );
    let seen = only_exit(&world, &asked_for);
    assert_eq!(
        seen.exit,
        PilotExit {
            exit_code: 1,
            reason: Some(expected)
        }
    );
    assert!(world.api.exits(&spec.job_id).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exit_report_answered_409_or_refused_never_changes_the_exit_code() {
    sortie_testkit::require_aws!();
    let world = World::new().await;

    // 409: the job had already ended (a stop, the sweeper). Success, and said so.
    *world.api.state.exit_status.lock().unwrap() = Some(StatusCode::CONFLICT);
    let mut late = world.spec(Operation::Plan, Source::inline(), hello_files());
    late.report_exit = true;
    let output = world.run(&late, TOKEN).await;
    assert!(output.status.success(), "{}", describe(&output));
    assert_eq!(only_exit(&world, &late.job_id).exit.exit_code, 0);
    let stderr = text(&output.stderr);
    assert!(stderr.contains("409 Conflict"), "{stderr}");
    assert!(!stderr.contains("could not report the exit"), "{stderr}");

    // A refusal (final, not retried): logged as JSON on stderr, the exit code unchanged.
    *world.api.state.exit_status.lock().unwrap() = Some(StatusCode::UNPROCESSABLE_ENTITY);
    let mut refused = world.spec(Operation::Plan, Source::inline(), hello_files());
    refused.report_exit = true;
    let output = world.run(&refused, TOKEN).await;
    assert!(output.status.success(), "{}", describe(&output));
    assert_eq!(only_exit(&world, &refused.job_id).exit.exit_code, 0);
    let stderr = text(&output.stderr);
    let line = stderr
        .lines()
        .find(|l| l.contains("could not report the exit"))
        .unwrap_or_else(|| panic!("{stderr}"));
    let logged: Value = serde_json::from_str(line).unwrap();
    assert!(
        logged["error"].as_str().unwrap().contains("422"),
        "{logged}"
    );
    assert!(!stderr.contains(TOKEN), "the token is never logged");
    assert!(
        last_line(&text(&output.stdout)).starts_with("sortie-pilot: plan succeeded"),
        "{}",
        describe(&output)
    );
}

// ---------------------------------------------------------------------------------------
// Terraform 1.0.3, reviewed applies (two phases), drift checks, DynamoDB locks and the
// choice of tool and version.

/// The environment's state object, as JSON.
async fn state_of(world: &World, spec: &JobSpec) -> Value {
    let key = spec.state_key.as_deref().expect("s3 storage");
    let bytes = world
        .object_in(&world.state_bucket, key)
        .await
        .unwrap_or_else(|| panic!("no state object at {key}"));
    serde_json::from_slice(&bytes).unwrap()
}

/// The `message` output in a Terraform 0.12+ state (`outputs` at the top).
fn v4_message(state: &Value) -> &Value {
    &state["outputs"]["message"]["value"]
}

/// The job's artifact `name` (`plan.tfplan`, `summary.json`, `outputs.json`), if uploaded.
async fn artifact(world: &World, spec: &JobSpec, name: &str) -> Option<Vec<u8>> {
    world
        .object(&format!("{}{name}", artifact_prefix(&spec.job_id)))
        .await
}

/// The lines the runner wrote for the commands it ran (`$ terraform ...`), in order.
pub(crate) fn commands(log: &str) -> Vec<&str> {
    log.lines()
        .filter_map(|l| l.strip_prefix("sortie-pilot: $ "))
        .collect()
}

fn used(tool: ToolName, version: &str) -> ToolUsed {
    ToolUsed {
        tool,
        version: version.into(),
    }
}

/// A job of `operation` whose `greeting` variable is `greeting`.
fn greeting_spec(world: &World, operation: Operation, greeting: &str) -> JobSpec {
    let mut spec = world.spec(operation, Source::inline(), hello_files());
    spec.variables
        .insert("greeting".into(), Value::from(greeting));
    spec
}

/// The second phase of `plan_phase`'s job: the same job, its saved plan presigned for
/// download, its log continued from where the first phase's ended.
async fn apply_phase_of(world: &World, plan_phase: &JobSpec) -> JobSpec {
    let mut spec = plan_phase.clone();
    spec.phase = Some(JobPhase::Apply);
    spec.saved_plan_url = Some(
        world
            .api
            .presign_get(&format!("{}plan.tfplan", artifact_prefix(&spec.job_id)))
            .await,
    );
    spec.log_offset = world.log(plan_phase).await.len() as u64;
    spec
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terraform_1_0_3_auto_apply_plans_to_a_file_and_applies_exactly_that_file() {
    sortie_testkit::require_aws!();
    let world = World::new().await;
    let spec = greeting_spec(&world, Operation::Apply, "hello from 1.0.3");
    let output = world.run_tf1(&spec).await;
    assert!(output.status.success(), "{}", describe(&output));

    let log = world.log(&spec).await;
    assert!(
        log.lines().next().unwrap().ends_with(&format!(
            "apply of acme/payments/dev with Terraform v1.0.3 ({})",
            sortie_testkit::terraform1_bin().display()
        )),
        "{log}"
    );
    assert_eq!(
        commands(&log),
        [
            "terraform init -input=false -no-color -backend-config=bucket=".to_string()
                + &world.state_bucket
                + " -backend-config=key=tf/acme/payments/dev/terraform.tfstate -backend-config=region=us-east-1 -backend-config=encrypt=true -backend-config=endpoint="
                + &sortie_testkit::endpoint()
                + " -backend-config=force_path_style=true -backend-config=skip_credentials_validation=true -backend-config=skip_metadata_api_check=true -backend-config=skip_region_validation=true",
            "terraform plan -input=false -no-color -out=plan.tfplan".to_string(),
            "terraform apply -input=false -no-color plan.tfplan".to_string(),
        ],
        "{log}"
    );
    assert!(!log.contains("-auto-approve"), "{log}");
    assert!(log.contains("Changes to Outputs:"), "{log}");
    assert!(
        last_line(&log)
            .starts_with("sortie-pilot: apply succeeded: 0 added, 0 changed, 0 destroyed"),
        "{log}"
    );

    // The state (format 4) holds the output; outputs.json too; no plan artifact for an
    // auto apply.
    let state = state_of(&world, &spec).await;
    assert_eq!(state["terraform_version"], "1.0.3", "{state:#}");
    assert_eq!(v4_message(&state), "hello from 1.0.3!", "{state:#}");
    // The pilot reported the serial and lineage of the state it wrote.
    assert_eq!(
        world.api.states(&spec.job_id),
        [StateStamp {
            serial: state["serial"].as_u64().unwrap(),
            lineage: state["lineage"].as_str().unwrap().into(),
        }],
        "{state:#}"
    );
    let outputs: Value =
        serde_json::from_slice(&artifact(&world, &spec, "outputs.json").await.unwrap()).unwrap();
    assert_eq!(
        outputs["message"]["value"], "hello from 1.0.3!",
        "{outputs:#}"
    );
    assert!(artifact(&world, &spec, "plan.tfplan").await.is_none());
    assert_eq!(
        world.api.summary(&spec.job_id),
        Some(ChangeSummary::default()),
        "an apply's summary has no has_changes"
    );
    assert_eq!(
        world.api.tools(&spec.job_id),
        [used(ToolName::Terraform, "1.0.3")]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terraform_1_0_3_reviewed_apply_plans_in_phase_one_and_applies_the_saved_plan_in_phase_two()
{
    sortie_testkit::require_aws!();
    let world = World::new().await;
    let before = greeting_spec(&world, Operation::Apply, "before");
    let output = world.run_tf1(&before).await;
    assert!(output.status.success(), "{}", describe(&output));

    // Phase one: plan only. The plan is uploaded, the state is untouched.
    let mut plan_phase = greeting_spec(&world, Operation::Apply, "reviewed");
    plan_phase.phase = Some(JobPhase::Plan);
    let output = world.run_tf1(&plan_phase).await;
    assert!(output.status.success(), "{}", describe(&output));
    let phase_one_log = world.log(&plan_phase).await;
    assert_eq!(
        commands(&phase_one_log)[1..],
        ["terraform plan -input=false -no-color -out=plan.tfplan"],
        "{phase_one_log}"
    );
    assert!(
        phase_one_log
            .lines()
            .next()
            .unwrap()
            .contains("apply (plan phase) of acme/payments/dev with Terraform v1.0.3"),
        "{phase_one_log}"
    );
    assert_eq!(
        last_line(&phase_one_log),
        "sortie-pilot: apply (plan phase) succeeded: 0 to add, 0 to change, 0 to destroy",
        "{phase_one_log}"
    );
    let saved = artifact(&world, &plan_phase, "plan.tfplan")
        .await
        .expect("plan.tfplan uploaded");
    assert!(
        saved.starts_with(b"PK"),
        "a Terraform 1.x plan is a zip file"
    );
    assert_eq!(v4_message(&state_of(&world, &plan_phase).await), "before!");
    assert!(artifact(&world, &plan_phase, "outputs.json")
        .await
        .is_none());

    // Phase two: the saved plan, downloaded and applied as it is. The spec's variables now
    // say something else, which the saved plan ignores.
    let mut apply_phase = apply_phase_of(&world, &plan_phase).await;
    apply_phase
        .variables
        .insert("greeting".into(), Value::from("not what was reviewed"));
    let offset = apply_phase.log_offset;
    assert_eq!(offset, phase_one_log.len() as u64);
    let output = world.run_tf1(&apply_phase).await;
    assert!(output.status.success(), "{}", describe(&output));
    assert_eq!(
        v4_message(&state_of(&world, &apply_phase).await),
        "reviewed!"
    );
    let outputs: Value = serde_json::from_slice(
        &artifact(&world, &apply_phase, "outputs.json")
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(outputs["message"]["value"], "reviewed!");

    // Its log starts at the offset, and the job's log is both phases, tiled exactly.
    let phase_two_log = world.log_from(&apply_phase, offset).await;
    assert_eq!(
        text(&output.stdout),
        phase_two_log,
        "stdout is this phase's log"
    );
    let first_chunk = world
        .s3
        .list_objects_v2()
        .bucket(&world.logs_bucket)
        .prefix(log_prefix(&apply_phase.job_id))
        .send()
        .await
        .unwrap()
        .contents()
        .iter()
        .filter_map(|o| o.key())
        .filter_map(|k| log_chunk_offset(&log_prefix(&apply_phase.job_id), k))
        .find(|o| *o >= offset);
    assert_eq!(first_chunk, Some(offset));
    assert_eq!(
        world.log(&apply_phase).await,
        format!("{phase_one_log}{phase_two_log}"),
        "phase two's chunks never replace phase one's"
    );
    assert_eq!(
        commands(&phase_two_log)[1..],
        ["terraform apply -input=false -no-color plan.tfplan"],
        "no second plan: {phase_two_log}"
    );
    let url_line = phase_two_log
        .lines()
        .find(|l| l.starts_with("sortie-pilot: downloading the saved plan "))
        .unwrap_or_else(|| panic!("{phase_two_log}"));
    assert!(
        url_line.ends_with(&format!(
            "/{}plan.tfplan",
            artifact_prefix(&apply_phase.job_id)
        )),
        "{url_line}"
    );
    assert!(
        !phase_two_log.contains("X-Amz-Signature"),
        "{phase_two_log}"
    );
    assert!(
        phase_two_log.contains(&format!(
            "saved plan: {} bytes, sha256 {}",
            saved.len(),
            sortie_pilot::source::sha256_hex(&saved)
        )),
        "{phase_two_log}"
    );
    assert!(
        last_line(&phase_two_log).starts_with(
            "sortie-pilot: apply (apply phase) succeeded: 0 added, 0 changed, 0 destroyed"
        ),
        "{phase_two_log}"
    );
    assert_eq!(
        world.api.tools(&apply_phase.job_id),
        [
            used(ToolName::Terraform, "1.0.3"),
            used(ToolName::Terraform, "1.0.3")
        ],
        "each phase reports its tool"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saved_plan_made_stale_by_another_apply_fails_with_terraforms_words() {
    sortie_testkit::require_aws!();
    let world = World::new().await;
    let first = greeting_spec(&world, Operation::Apply, "first");
    assert!(world.run_tf1(&first).await.status.success());

    let mut plan_phase = greeting_spec(&world, Operation::Apply, "reviewed");
    plan_phase.phase = Some(JobPhase::Plan);
    plan_phase.report_exit = true;
    let output = world.run_tf1(&plan_phase).await;
    assert!(output.status.success(), "{}", describe(&output));

    // Another apply changes the state while the plan awaits approval.
    let meanwhile = greeting_spec(&world, Operation::Apply, "meanwhile");
    assert!(world.run_tf1(&meanwhile).await.status.success());

    let apply_phase = apply_phase_of(&world, &plan_phase).await;
    let output = world.run_tf1(&apply_phase).await;
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let log = world.log_from(&apply_phase, apply_phase.log_offset).await;
    // Terraform's whole first error, its detail included, not only its first line.
    let expected = "terraform apply failed with exit code 1: Error: Saved plan is stale The given plan file can no longer be applied because the state was changed by another operation after the plan was created.";
    assert_eq!(
        last_line(&log),
        format!("sortie-pilot: {expected}"),
        "{log}"
    );
    let exits = world.api.exits(&apply_phase.job_id);
    assert_eq!(exits.len(), 2, "one exit report per phase: {exits:?}");
    assert_eq!(
        exits[1].exit,
        PilotExit {
            exit_code: 1,
            reason: Some(expected.into())
        }
    );
    assert_eq!(
        v4_message(&state_of(&world, &apply_phase).await),
        "meanwhile!"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apply_phase_without_a_saved_plan_url_fails_at_once() {
    sortie_testkit::require_aws!();
    let world = World::new().await;
    let mut spec = world.spec(Operation::Apply, Source::inline(), hello_files());
    spec.phase = Some(JobPhase::Apply);
    spec.report_exit = true;
    let output = world.run_tf1(&spec).await;
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let expected = format!(
        "the apply phase of job {} has no saved_plan_url: there is no saved plan to apply",
        spec.job_id
    );
    let log = world.log(&spec).await;
    assert_eq!(
        log,
        format!("sortie-pilot: {expected}\n"),
        "nothing else ran"
    );
    assert_eq!(
        only_exit(&world, &spec.job_id).exit.reason.as_deref(),
        Some(expected.as_str())
    );
    assert!(world.api.tools(&spec.job_id).is_empty());
}

/// Replaces the `message` output's value inside the state object, keeping its serial and
/// lineage: the state now disagrees with the configuration, as after a change made outside.
async fn tamper_message(world: &World, spec: &JobSpec, value: &str) {
    let mut state = state_of(world, spec).await;
    state["outputs"]["message"]["value"] = Value::from(value);
    world
        .s3
        .put_object()
        .bucket(&world.state_bucket)
        .key(spec.state_key.as_deref().unwrap())
        .body(serde_json::to_vec_pretty(&state).unwrap().into())
        .send()
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drift_check_with_terraform_1_0_3_reports_whether_the_state_has_drifted() {
    sortie_testkit::require_aws!();
    let world = World::new().await;
    let apply = world.spec(Operation::Apply, Source::inline(), hello_files());
    assert!(world.run_tf1(&apply).await.status.success());

    let drift_check = |world: &World| {
        let mut spec = world.spec(Operation::Plan, Source::inline(), hello_files());
        spec.detailed_exitcode = true;
        spec
    };

    // In step: exit code 0, no changes.
    let clean = drift_check(&world);
    let output = world.run_tf1(&clean).await;
    assert!(output.status.success(), "{}", describe(&output));
    let no_changes = ChangeSummary {
        has_changes: Some(false),
        ..ChangeSummary::default()
    };
    assert_eq!(world.api.summary(&clean.job_id), Some(no_changes));
    let log = world.log(&clean).await;
    assert_eq!(
        commands(&log)[1..],
        ["terraform plan -input=false -no-color -detailed-exitcode -out=plan.tfplan"],
        "{log}"
    );
    assert_eq!(
        last_line(&log),
        "sortie-pilot: plan (drift check) succeeded: 0 to add, 0 to change, 0 to destroy; no changes",
        "{log}"
    );

    // Drifted: terraform exits 2, which is a success with changes present.
    tamper_message(&world, &apply, "changed outside terraform").await;
    let drifted = drift_check(&world);
    let output = world.run_tf1(&drifted).await;
    assert!(output.status.success(), "{}", describe(&output));
    let changes = ChangeSummary {
        has_changes: Some(true),
        ..ChangeSummary::default()
    };
    assert_eq!(world.api.summary(&drifted.job_id), Some(changes));
    let summary: ChangeSummary =
        serde_json::from_slice(&artifact(&world, &drifted, "summary.json").await.unwrap()).unwrap();
    assert_eq!(summary, changes);
    let log = world.log(&drifted).await;
    assert!(
        log.contains("~ message = \"changed outside terraform\" -> \"hello from sortie!\""),
        "{log}"
    );
    assert_eq!(
        last_line(&log),
        "sortie-pilot: plan (drift check) succeeded: 0 to add, 0 to change, 0 to destroy; changes present",
        "{log}"
    );
    assert_eq!(
        v4_message(&state_of(&world, &apply).await),
        "changed outside terraform",
        "a drift check changes nothing"
    );

    // An ordinary plan of the same drift: no has_changes at all.
    let plain = world.spec(Operation::Plan, Source::inline(), hello_files());
    assert!(world.run_tf1(&plain).await.status.success());
    assert_eq!(
        world.api.summary(&plain.job_id),
        Some(ChangeSummary::default())
    );
}

/// A terraform process that holds the state lock until its stdin closes.
pub(crate) struct LockHolder {
    child: std::process::Child,
    /// Its stdout and stderr as they come.
    output: Arc<Mutex<String>>,
}

impl LockHolder {
    /// Starts `terraform apply` (no -auto-approve) of `bin` in `dir`, and waits until it
    /// prompts for approval, holding the lock.
    pub(crate) fn start(bin: &std::path::Path, dir: &std::path::Path) -> Self {
        use std::io::Read;
        use std::process::Stdio;
        let mut child = Command::new(bin)
            .args(["apply", "-no-color"])
            .current_dir(dir)
            .env("CHECKPOINT_DISABLE", "1")
            .env_remove("TF_INPUT")
            .env_remove("TF_IN_AUTOMATION")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let output = Arc::new(Mutex::new(String::new()));
        let readers: [Box<dyn Read + Send>; 2] = [
            Box::new(child.stdout.take().unwrap()),
            Box::new(child.stderr.take().unwrap()),
        ];
        for mut reader in readers {
            let sink = output.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = reader.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    sink.lock()
                        .unwrap()
                        .push_str(&String::from_utf8_lossy(&buf[..n]));
                }
            });
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
        while !output.lock().unwrap().contains("Enter a value:") {
            assert!(
                std::time::Instant::now() < deadline,
                "terraform apply never prompted: {}",
                output.lock().unwrap()
            );
            if let Some(status) = child.try_wait().unwrap() {
                panic!(
                    "terraform apply exited {status} before prompting: {}",
                    output.lock().unwrap()
                );
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        Self { child, output }
    }

    /// Closes its stdin (no answer: the apply is cancelled and the lock released), reaps
    /// it, and returns its exit status and output.
    pub(crate) fn release(mut self) -> (std::process::ExitStatus, String) {
        drop(self.child.stdin.take());
        let status = self.child.wait().unwrap();
        // Let the readers drain what the process wrote last.
        std::thread::sleep(std::time::Duration::from_millis(200));
        let output = self.output.lock().unwrap().clone();
        (status, output)
    }
}

/// Another terraform (`bin`, at `version`) with the pilot's own backend set-up for `spec`'s
/// environment and state storage, applying `files` (which must plan changes) and waiting
/// at its approval prompt, holding the state lock. Its directory is returned to be
/// removed.
pub(crate) async fn hold_lock(
    bin: PathBuf,
    version: sortie_pilot::version::ToolVersion,
    spec: &JobSpec,
    files: BTreeMap<String, String>,
) -> (LockHolder, PathBuf) {
    let dir = sortie_testkit::scratch_dir("runner-lock-holder").unwrap();
    for (name, body) in files {
        std::fs::write(dir.join(name), body).unwrap();
    }
    let setup = sortie_pilot::backend::backend_setup(
        &version,
        &spec.state_storage,
        &spec.environment,
        spec.state_key.as_deref(),
        Some(&sortie_testkit::endpoint()),
    )
    .unwrap();
    if let StateStorageConfiguration::S3(S3Storage {
        dynamodb_table: Some(table),
        ..
    }) = &spec.state_storage
    {
        assert!(
            setup
                .init_args
                .iter()
                .any(|a| a == &format!("-backend-config=dynamodb_table={table}")),
            "{:?}",
            setup.init_args
        );
    }
    std::fs::write(dir.join(sortie_pilot::backend::BACKEND_FILE), &setup.file).unwrap();
    let init = Command::new(&bin)
        .args(["init", "-input=false", "-no-color"])
        .args(&setup.init_args)
        .current_dir(&dir)
        .env("CHECKPOINT_DISABLE", "1")
        .output()
        .unwrap();
    assert!(init.status.success(), "{}", describe(&init));
    let holder = {
        let dir = dir.clone();
        tokio::task::spawn_blocking(move || LockHolder::start(&bin, &dir))
            .await
            .unwrap()
    };
    (holder, dir)
}

/// A new DynamoDB table for Terraform's S3 state locks (key `LockID`), on moto.
pub(crate) async fn create_lock_table() -> String {
    use aws_sdk_dynamodb::types::{
        AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType,
    };
    let table = unique("runner-locks");
    sortie_testkit::dynamodb_client(&sdk_config().await)
        .create_table()
        .table_name(&table)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name("LockID")
                .attribute_type(ScalarAttributeType::S)
                .build()
                .unwrap(),
        )
        .key_schema(
            KeySchemaElement::builder()
                .attribute_name("LockID")
                .key_type(KeyType::Hash)
                .build()
                .unwrap(),
        )
        .send()
        .await
        .unwrap();
    table
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_locked_in_dynamodb_by_another_terraform_fails_the_job_with_the_lock_error() {
    sortie_testkit::require_aws!();
    let world = World::new().await;
    let table = create_lock_table().await;
    let mut spec = world.spec(Operation::Apply, Source::inline(), hello_files());
    if let StateStorageConfiguration::S3(s3) = &mut spec.state_storage {
        s3.dynamodb_table = Some(table.clone());
    }

    // Another terraform, with the runner's own backend set-up for the same environment,
    // waits at its approval prompt holding the lock.
    let (holder, dir) = hold_lock(
        sortie_testkit::terraform1_bin(),
        sortie_pilot::version::ToolVersion::terraform(1, 0, 3),
        &spec,
        hello_files(),
    )
    .await;

    let output = world.run_tf1(&spec).await;
    let (held_status, held) = holder.release();
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let log = world.log(&spec).await;
    let last = last_line(&log);
    assert!(
        last.starts_with(
            "sortie-pilot: terraform plan failed with exit code 1: Error: Error acquiring the state lock"
        ),
        "{log}\n--- the lock holder\n{held}"
    );
    assert!(log.contains("Lock Info:"), "{log}");
    assert!(
        !held_status.success() && !held.contains("Apply complete!"),
        "the holder ended without applying: {held_status}\n{held}"
    );

    // Released: the same job runs through.
    let again = {
        let mut again = spec.clone();
        again.job_id = unique("job").into();
        again
    };
    let output = world.run_tf1(&again).await;
    assert!(output.status.success(), "{}", describe(&output));
    assert_eq!(
        v4_message(&state_of(&world, &again).await),
        "hello from sortie!"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A tools directory with `terraform-0.11.11` and `terraform-1.0.3` (links to the real
/// binaries), and a `PATH` directory holding only `sh`.
fn tools_and_path() -> (PathBuf, PathBuf) {
    let dir = sortie_testkit::scratch_dir("runner-tools").unwrap();
    let (tools, path) = (dir.join("tools"), dir.join("path"));
    std::fs::create_dir_all(&tools).unwrap();
    std::fs::create_dir_all(&path).unwrap();
    std::os::unix::fs::symlink(
        sortie_testkit::terraform_bin(),
        tools.join("terraform-0.11.11"),
    )
    .unwrap();
    std::os::unix::fs::symlink(
        sortie_testkit::terraform1_bin(),
        tools.join("terraform-1.0.3"),
    )
    .unwrap();
    std::os::unix::fs::symlink("/bin/sh", path.join("sh")).unwrap();
    (tools, path)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tool_and_version_a_job_asks_for_choose_the_binary_or_fail_naming_every_version() {
    sortie_testkit::require_aws!();
    let world = World::new().await;
    let (tools, path) = tools_and_path();
    let searched = format!("SORTIE_TOOLS_DIR={} and PATH searched", tools.display());
    let run = |spec: JobSpec, explicit: Option<PathBuf>| {
        let (tools, path) = (tools.clone(), path.clone());
        let world = &world;
        async move {
            let output = world
                .run_configured(&spec.job_id, &spec, TOKEN, move |command| {
                    command.env("SORTIE_TOOLS_DIR", &tools).env("PATH", &path);
                    match explicit {
                        Some(bin) => command.env("SORTIE_TERRAFORM", bin),
                        None => command.env_remove("SORTIE_TERRAFORM"),
                    };
                })
                .await;
            (spec, output)
        }
    };
    let ask = |tool: Option<ToolName>, version: Option<&str>| {
        let mut spec = world.spec(Operation::Plan, Source::inline(), hello_files());
        spec.tool = tool;
        spec.version = version.map(str::to_string);
        spec.report_exit = true;
        spec
    };
    let first_line = |log: &str| log.lines().next().unwrap_or("").to_string();

    // "~> 1.0": Terraform 1.0.3 from the tools directory, reported as such.
    let (spec, output) = run(ask(None, Some("~> 1.0")), None).await;
    assert!(output.status.success(), "{}", describe(&output));
    let log = world.log(&spec).await;
    assert!(
        first_line(&log).ends_with(&format!(
            "plan of acme/payments/dev with Terraform v1.0.3 ({})",
            tools.join("terraform-1.0.3").display()
        )),
        "{log}"
    );
    assert_eq!(
        world.api.tools(&spec.job_id),
        [used(ToolName::Terraform, "1.0.3")]
    );

    // Exactly "0.11.11".
    let (spec, output) = run(ask(Some(ToolName::Terraform), Some("0.11.11")), None).await;
    assert!(output.status.success(), "{}", describe(&output));
    assert!(
        first_line(&world.log(&spec).await).contains("with Terraform v0.11.11"),
        "{}",
        describe(&output)
    );
    assert_eq!(
        world.api.tools(&spec.job_id),
        [used(ToolName::Terraform, "0.11.11")]
    );

    // The tool alone: its highest version.
    let (spec, output) = run(ask(Some(ToolName::Terraform), None), None).await;
    assert!(output.status.success(), "{}", describe(&output));
    assert_eq!(
        world.api.tools(&spec.job_id),
        [used(ToolName::Terraform, "1.0.3")]
    );

    // SORTIE_TERRAFORM is one candidate among the others when a version is asked for...
    let (spec, output) = run(
        ask(None, Some(">= 0.12")),
        Some(sortie_testkit::terraform_bin()),
    )
    .await;
    assert!(output.status.success(), "{}", describe(&output));
    assert_eq!(
        world.api.tools(&spec.job_id),
        [used(ToolName::Terraform, "1.0.3")]
    );
    // ... and the binary, the operator's pin, when nothing is asked for.
    let (spec, output) = run(ask(None, None), Some(sortie_testkit::terraform_bin())).await;
    assert!(output.status.success(), "{}", describe(&output));
    assert_eq!(
        world.api.tools(&spec.job_id),
        [used(ToolName::Terraform, "0.11.11")]
    );
    // With no pin and nothing asked, the newest there (1.0.3 over 0.11.11), and the log
    // says which and among which (issue 47 item 12: local mode ran 0.11.11).
    let (spec, output) = run(ask(None, None), None).await;
    assert!(output.status.success(), "{}", describe(&output));
    assert_eq!(
        world.api.tools(&spec.job_id),
        [used(ToolName::Terraform, "1.0.3")]
    );
    let log = world.log(&spec).await;
    assert!(
        log.contains(&format!(
            "note: the job names no tool or version: terraform 1.0.3 ({}), the newest of \
             terraform 0.11.11, terraform 1.0.3",
            tools.join("terraform-1.0.3").display()
        )),
        "{log}"
    );

    // No match: the job fails before anything is fetched, naming what it asked for and
    // every version there is; nothing was chosen, so nothing is reported.
    for (tool, version, asked) in [
        (
            Some(ToolName::Terraform),
            Some("~> 1.5"),
            "no terraform binary satisfies version \"~> 1.5\"",
        ),
        (
            Some(ToolName::Opentofu),
            None,
            "no opentofu binary is available",
        ),
    ] {
        let (spec, output) = run(ask(tool, version), None).await;
        assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
        let expected =
            format!("{asked}; this runner has terraform 0.11.11, terraform 1.0.3 ({searched})");
        let log = world.log(&spec).await;
        assert_eq!(
            log,
            format!("sortie-pilot: {expected}\n"),
            "nothing else ran"
        );
        assert_eq!(only_exit(&world, &spec.job_id).exit.reason, Some(expected));
        assert!(world.api.tools(&spec.job_id).is_empty());
    }
    let _ = std::fs::remove_dir_all(tools.parent().unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_tool_report_is_a_warning_and_never_fails_the_job() {
    sortie_testkit::require_aws!();
    let world = World::new().await;
    *world.api.state.tool_status.lock().unwrap() = Some(StatusCode::UNPROCESSABLE_ENTITY);
    let spec = world.spec(Operation::Plan, Source::inline(), hello_files());
    let output = world.run(&spec, TOKEN).await;
    assert!(output.status.success(), "{}", describe(&output));
    let log = world.log(&spec).await;
    let warning = log
        .lines()
        .find(|l| l.starts_with("sortie-pilot: warning: could not report the tool and version (terraform 0.11.11) to the API: "))
        .unwrap_or_else(|| panic!("{log}"));
    assert!(warning.contains("422"), "{warning}");
    assert!(
        last_line(&log).starts_with("sortie-pilot: plan succeeded"),
        "{log}"
    );
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("could not report the tool and version"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terraform_0_11_11_applies_and_destroys_through_plan_files_and_runs_both_phases() {
    sortie_testkit::require_aws!();
    let world = World::new().await;

    // Auto apply: plan -out, then apply of that file.
    let apply = greeting_spec(&world, Operation::Apply, "old");
    let output = world.run(&apply, TOKEN).await;
    assert!(output.status.success(), "{}", describe(&output));
    let log = world.log(&apply).await;
    assert_eq!(
        commands(&log)[1..],
        [
            "terraform plan -input=false -no-color -out=plan.tfplan",
            "terraform apply -input=false -no-color plan.tfplan"
        ],
        "{log}"
    );
    let state = state_of(&world, &apply).await;
    assert_eq!(state["modules"][0]["outputs"]["message"]["value"], "old!");
    assert_eq!(
        world.api.tools(&apply.job_id),
        [used(ToolName::Terraform, "0.11.11")]
    );

    // Two phases.
    let mut plan_phase = greeting_spec(&world, Operation::Apply, "phased");
    plan_phase.phase = Some(JobPhase::Plan);
    let output = world.run(&plan_phase, TOKEN).await;
    assert!(output.status.success(), "{}", describe(&output));
    assert!(artifact(&world, &plan_phase, "plan.tfplan").await.is_some());
    let state = state_of(&world, &plan_phase).await;
    assert_eq!(state["modules"][0]["outputs"]["message"]["value"], "old!");
    let apply_phase = apply_phase_of(&world, &plan_phase).await;
    let output = world.run(&apply_phase, TOKEN).await;
    assert!(output.status.success(), "{}", describe(&output));
    let log = world.log_from(&apply_phase, apply_phase.log_offset).await;
    assert_eq!(
        commands(&log)[1..],
        ["terraform apply -input=false -no-color plan.tfplan"],
        "{log}"
    );
    let state = state_of(&world, &apply_phase).await;
    assert_eq!(
        state["modules"][0]["outputs"]["message"]["value"],
        "phased!"
    );

    // A saved plan made stale by another apply: 0.11's own words are the reason.
    let mut stale_plan = greeting_spec(&world, Operation::Apply, "stale");
    stale_plan.phase = Some(JobPhase::Plan);
    assert!(world.run(&stale_plan, TOKEN).await.status.success());
    let meanwhile = greeting_spec(&world, Operation::Apply, "meanwhile");
    assert!(world.run(&meanwhile, TOKEN).await.status.success());
    let stale_apply = apply_phase_of(&world, &stale_plan).await;
    let output = world.run(&stale_apply, TOKEN).await;
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let log = world.log_from(&stale_apply, stale_apply.log_offset).await;
    assert_eq!(
        last_line(&log),
        "sortie-pilot: terraform apply failed with exit code 1: Failed to load backend: This plan was created against an older state than is current. Please create a new plan file against the latest state and try again.",
        "{log}"
    );
    let state = state_of(&world, &stale_apply).await;
    assert_eq!(
        state["modules"][0]["outputs"]["message"]["value"],
        "meanwhile!"
    );

    // Destroy: plan -destroy -out, then apply of that file.
    let destroy = world.spec(Operation::Destroy, Source::inline(), hello_files());
    let output = world.run(&destroy, TOKEN).await;
    assert!(output.status.success(), "{}", describe(&output));
    let log = world.log(&destroy).await;
    assert_eq!(
        commands(&log)[1..],
        [
            "terraform plan -input=false -no-color -destroy -out=plan.tfplan",
            "terraform apply -input=false -no-color plan.tfplan"
        ],
        "{log}"
    );
    assert!(
        !log.contains("-force") && !log.contains("-auto-approve"),
        "{log}"
    );
    assert!(
        last_line(&log)
            .starts_with("sortie-pilot: destroy succeeded: 0 added, 0 changed, 0 destroyed"),
        "{log}"
    );
    let state = state_of(&world, &destroy).await;
    assert_eq!(
        state["modules"][0]["outputs"],
        json!({}),
        "the outputs are gone: {state:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terraform_1_0_3_destroy_plans_the_destruction_and_applies_it() {
    sortie_testkit::require_aws!();
    let world = World::new().await;
    let apply = world.spec(Operation::Apply, Source::inline(), hello_files());
    assert!(world.run_tf1(&apply).await.status.success());

    // A reviewed destroy: phase one plans with -destroy; phase two applies it.
    let mut plan_phase = world.spec(Operation::Destroy, Source::inline(), hello_files());
    plan_phase.phase = Some(JobPhase::Plan);
    let output = world.run_tf1(&plan_phase).await;
    assert!(output.status.success(), "{}", describe(&output));
    let log = world.log(&plan_phase).await;
    assert_eq!(
        commands(&log)[1..],
        ["terraform plan -input=false -no-color -destroy -out=plan.tfplan"],
        "{log}"
    );
    assert_eq!(
        v4_message(&state_of(&world, &apply).await),
        "hello from sortie!"
    );
    let apply_phase = apply_phase_of(&world, &plan_phase).await;
    let output = world.run_tf1(&apply_phase).await;
    assert!(output.status.success(), "{}", describe(&output));
    let state = state_of(&world, &apply).await;
    assert_eq!(state["outputs"], json!({}), "{state:#}");
    let log = world.log_from(&apply_phase, apply_phase.log_offset).await;
    assert!(
        last_line(&log).starts_with(
            "sortie-pilot: destroy (apply phase) succeeded: 0 added, 0 changed, 0 destroyed"
        ),
        "{log}"
    );
}

/// A configuration with one resource that needs no provider plugin: Terraform 0.11 still
/// has the old managed `terraform_remote_state` (a shim of the data source), which reads a
/// local state that need not exist. `count` makes it 0 or 1.
fn marker_files(count: u32) -> BTreeMap<String, String> {
    BTreeMap::from([(
        "main.tf".to_string(),
        format!(
            "resource \"terraform_remote_state\" \"marker\" {{\n  count   = {count}\n  backend = \"local\"\n  config {{\n    path = \"/nonexistent/sortie-marker.tfstate\"\n  }}\n}}\n"
        ),
    )])
}

/// The managed resources of a Terraform 0.11 state, by address.
fn resources_in(state: &Value) -> Vec<String> {
    state["modules"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|m| m["resources"].as_object().into_iter().flatten())
        .map(|(address, _)| address.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_job_empties_a_state_by_accident_but_an_explicit_one_may() {
    sortie_testkit::require_aws!();
    let world = World::new().await;
    let apply = world.spec(Operation::Apply, Source::inline(), marker_files(1));
    let output = world.run(&apply, TOKEN).await;
    assert!(output.status.success(), "{}", describe(&output));
    let state = state_of(&world, &apply).await;
    assert_eq!(resources_in(&state), ["terraform_remote_state.marker"]);

    let refused = |spec: JobSpec, words: &'static str| {
        let world = &world;
        async move {
            let output = world.run(&spec, TOKEN).await;
            assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
            let log = world.log(&spec).await;
            let last = last_line(&log);
            assert!(
                last.starts_with("sortie-pilot: refused: ") && last.contains(words),
                "{words:?} in the last line:\n{log}"
            );
            let state = state_of(world, &spec).await;
            assert_eq!(
                resources_in(&state),
                ["terraform_remote_state.marker"],
                "the state still holds the resource after: {last}"
            );
            assert_eq!(world.api.summary(&spec.job_id), None);
            log
        }
    };

    // Files only in a subfolder: no .tf of its own at the root, refused before terraform.
    let nested = BTreeMap::from([(
        "modules/app/main.tf".to_string(),
        marker_files(1)["main.tf"].clone(),
    )]);
    let log = refused(
        world.spec(Operation::Apply, Source::inline(), nested),
        "no .tf file in the source's root",
    )
    .await;
    assert!(commands(&log).is_empty(), "no command ran:\n{log}");

    // An empty configuration (variables only) whose plan destroys: refused after the plan,
    // explicit source or not.
    let variables_only = BTreeMap::from([(
        "variables.tf".to_string(),
        "variable \"region\" { default = \"us-east-1\" }\n".to_string(),
    )]);
    let log = refused(
        world.spec(Operation::Apply, Source::inline(), variables_only),
        "declares no resource",
    )
    .await;
    assert!(
        log.contains("Plan: 0 to add, 0 to change, 1 to destroy."),
        "{log}"
    );
    assert!(
        !commands(&log)
            .iter()
            .any(|c| c.starts_with("terraform apply")),
        "nothing applied:\n{log}"
    );

    // From an implicit source: a destroy is refused at once, and an apply whose plan
    // destroys every resource and creates none after its plan.
    let implicit = Source::Inline { implicit: true };
    let log = refused(
        world.spec(Operation::Destroy, implicit.clone(), marker_files(1)),
        "a destroy needs an explicit source",
    )
    .await;
    assert!(commands(&log).is_empty(), "no command ran:\n{log}");
    refused(
        world.spec(Operation::Apply, implicit.clone(), marker_files(0)),
        "destroys every resource of the state (1) and creates none",
    )
    .await;

    // An implicit source that keeps the resource applies as always; an explicit one may
    // remove every resource.
    let kept = world.spec(Operation::Apply, implicit, marker_files(1));
    let output = world.run(&kept, TOKEN).await;
    assert!(output.status.success(), "{}", describe(&output));
    let explicit = world.spec(Operation::Apply, Source::inline(), marker_files(0));
    let output = world.run(&explicit, TOKEN).await;
    assert!(output.status.success(), "{}", describe(&output));
    let log = world.log(&explicit).await;
    assert!(log.contains("0 added, 0 changed, 1 destroyed"), "{log}");
    assert!(resources_in(&state_of(&world, &explicit).await).is_empty());
}

// ---- The plan as data (issue 28): `plan.json`, redacted, for every plan. ----

/// A configuration with a sensitive variable, a resource that takes it, a resource with a
/// replacement trigger (`rev`) and a sensitive output: for Terraform 1.4+ (`terraform_data`,
/// built in, no provider download).
fn terraform_data_files() -> BTreeMap<String, String> {
    let main = r#"
variable "token" {
  type      = string
  sensitive = true
}
variable "rev" {
  type    = string
  default = "1"
}
resource "terraform_data" "secret" {
  input = { password = var.token, user = "deploy-bot" }
}
resource "terraform_data" "plain" {
  input            = "visible-value-${var.rev}"
  triggers_replace = [var.rev]
}
output "token" {
  value     = var.token
  sensitive = true
}
output "greeting" {
  value = "hello-${var.rev}"
}
"#;
    BTreeMap::from([("main.tf".to_string(), main.to_string())])
}

/// The same without resources, for Terraform 1.0.3 (no `terraform_data` there).
fn sensitive_output_files() -> BTreeMap<String, String> {
    let main = r#"
variable "token" {
  type      = string
  sensitive = true
}
output "token" {
  value     = var.token
  sensitive = true
}
output "greeting" {
  value = "hello"
}
"#;
    BTreeMap::from([("main.tf".to_string(), main.to_string())])
}

/// A job whose `token` variable is `secret` (declared sensitive by the configuration) and
/// whose `rev` is `rev`.
fn secret_spec(
    world: &World,
    operation: Operation,
    files: BTreeMap<String, String>,
    secret: &str,
    rev: Option<&str>,
) -> JobSpec {
    let mut spec = world.spec(operation, Source::inline(), files);
    spec.variables.insert("token".into(), Value::from(secret));
    if let Some(rev) = rev {
        spec.variables.insert("rev".into(), Value::from(rev));
    }
    spec
}

/// The job's `plan.json`, read as the control plane reads it.
async fn plan_data(world: &World, spec: &JobSpec) -> (Vec<u8>, sortie_core::plan::PlanData) {
    let bytes = artifact(world, spec, "plan.json")
        .await
        .unwrap_or_else(|| panic!("job {} uploaded no plan.json", spec.job_id));
    let data = sortie_core::plan::PlanData::from_artifact(Some(&bytes));
    (bytes, data)
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

async fn run_with(world: &World, spec: &JobSpec, terraform: PathBuf) -> Output {
    world
        .run_configured(&spec.job_id, spec, TOKEN, |command| {
            command.env("SORTIE_TERRAFORM", terraform);
        })
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terraform_1_11_plan_json_is_redacted_and_shows_real_creates_and_replacements() {
    sortie_testkit::require_aws!();
    use sortie_core::plan::{ChangeAction, PlanView, MARKER};
    let tf = sortie_testkit::terraform111_bin();
    let world = World::new().await;
    let secret = unique("s3cr3t-token");

    // A plan job: two creates, the secret only as the marker.
    let plan = secret_spec(
        &world,
        Operation::Plan,
        terraform_data_files(),
        &secret,
        None,
    );
    let output = run_with(&world, &plan, tf.clone()).await;
    assert!(output.status.success(), "{}", describe(&output));
    let (bytes, data) = plan_data(&world, &plan).await;
    assert!(!contains(&bytes, &secret), "the secret is in plan.json");
    let log = world.log(&plan).await;
    assert!(!log.contains(&secret), "the secret is in the log: {log}");
    assert!(log.contains("uploaded plan.json"), "{log}");
    let doc = data.document().expect("plan data is available");
    let view = PlanView::from_document(doc);
    assert_eq!(view.counts.create, 2, "{view:?}");
    let secret_change = view
        .resource_changes
        .iter()
        .find(|r| r.address == "terraform_data.secret")
        .unwrap();
    let input = |r: &sortie_core::plan::ResourceChange, path: &str| {
        r.changes
            .iter()
            .find(|c| c.path == path)
            .unwrap_or_else(|| panic!("no change of {path} in {r:?}"))
            .clone()
    };
    // Terraform marks the object attribute holding the sensitive value.
    let shown = serde_json::to_string(&secret_change.changes).unwrap();
    assert!(shown.contains(MARKER), "{shown}");
    let token = view
        .output_changes
        .iter()
        .find(|o| o.name == "token")
        .unwrap();
    assert_eq!(token.after, Value::from(MARKER));
    let greeting = view
        .output_changes
        .iter()
        .find(|o| o.name == "greeting")
        .unwrap();
    assert_eq!(greeting.after, Value::from("hello-1"));

    // An apply, then a plan with a new `rev`: a real replacement forced by the trigger.
    let apply = secret_spec(
        &world,
        Operation::Apply,
        terraform_data_files(),
        &secret,
        None,
    );
    let output = run_with(&world, &apply, tf.clone()).await;
    assert!(output.status.success(), "{}", describe(&output));
    let (bytes, data) = plan_data(&world, &apply).await;
    assert!(
        !contains(&bytes, &secret),
        "the secret is in the apply's plan.json"
    );
    assert!(
        data.document().is_some(),
        "an auto apply's plan step uploads plan.json"
    );
    let replan = secret_spec(
        &world,
        Operation::Plan,
        terraform_data_files(),
        &secret,
        Some("2"),
    );
    let output = run_with(&world, &replan, tf).await;
    assert!(output.status.success(), "{}", describe(&output));
    let (bytes, data) = plan_data(&world, &replan).await;
    assert!(
        !contains(&bytes, &secret),
        "the secret is in the second plan.json"
    );
    let view = PlanView::from_document(data.document().unwrap());
    let plain = view
        .resource_changes
        .iter()
        .find(|r| r.address == "terraform_data.plain")
        .unwrap();
    assert_eq!(plain.action, ChangeAction::Replace, "{plain:?}");
    assert_eq!(plain.replace_paths, ["triggers_replace"]);
    let changed = input(plain, "input");
    assert_eq!(
        (changed.before, changed.after),
        (
            Value::from("visible-value-1"),
            Value::from("visible-value-2")
        )
    );
    assert!(input(plain, "triggers_replace.0").forces_replacement);
    let unchanged = view
        .resource_changes
        .iter()
        .find(|r| r.address == "terraform_data.secret")
        .unwrap();
    assert_eq!(unchanged.action, ChangeAction::NoOp);
    assert_eq!((view.counts.replace, view.counts.no_op), (1, 1));
    assert!(!world.log(&replan).await.contains(&secret));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terraform_1_0_3_plan_json_redacts_sensitive_variables_and_outputs() {
    sortie_testkit::require_aws!();
    let world = World::new().await;
    let secret = unique("s3cr3t-token");
    let mut spec = secret_spec(
        &world,
        Operation::Apply,
        sensitive_output_files(),
        &secret,
        None,
    );
    // The plan phase of a reviewed apply uploads plan.json too.
    spec.phase = Some(JobPhase::Plan);
    let output = world.run_tf1(&spec).await;
    assert!(output.status.success(), "{}", describe(&output));
    let (bytes, data) = plan_data(&world, &spec).await;
    assert!(!contains(&bytes, &secret), "the secret is in plan.json");
    assert!(!world.log(&spec).await.contains(&secret));
    let doc = data.document().expect("plan data is available on 1.0.3");
    assert_eq!(
        doc["variables"]["token"]["value"],
        sortie_core::plan::MARKER
    );
    assert_eq!(
        doc["output_changes"]["token"]["after"],
        sortie_core::plan::MARKER
    );
    assert_eq!(doc["output_changes"]["greeting"]["after"], "hello");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terraform_0_11_plan_json_says_plan_data_is_unavailable() {
    sortie_testkit::require_aws!();
    let world = World::new().await;
    let spec = greeting_spec(&world, Operation::Plan, "old");
    let output = world.run(&spec, TOKEN).await;
    assert!(output.status.success(), "{}", describe(&output));
    let (_, data) = plan_data(&world, &spec).await;
    assert_eq!(
        data.unavailable(),
        Some("plan data unavailable for Terraform 0.11")
    );
}

// ---- A runner's own secrets (issue 41, gap 1): injected by the platform, named by the spec. ----

/// `spec` with `runner_secret_env` set to `names`, through its JSON: the names of the
/// variables the job's runner injects as secrets (an ECS container's `secrets`, an eks
/// runner's `secretKeyRef` variables), which the platform puts in the pilot's environment.
fn with_runner_secret_env(spec: &JobSpec, names: &[&str]) -> JobSpec {
    let mut doc = serde_json::to_value(spec).unwrap();
    doc["runner_secret_env"] = json!(names);
    serde_json::from_value(doc).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runner_injected_secret_never_reaches_the_log_outputs_or_failure_reason() {
    sortie_testkit::require_aws!();
    let world = World::new().await;
    // The runner's task definition injects `TF_VAR_greeting` (terraform reads it as
    // `var.greeting`, and hello echoes it in an output) and `RUNNER_API_KEY`, and names
    // `RUNNER_ABSENT`, which this container did not get.
    let secret = unique("runner-s3cret");
    let names = ["TF_VAR_greeting", "RUNNER_API_KEY", "RUNNER_ABSENT"];
    let apply = with_runner_secret_env(
        &world.spec(Operation::Apply, Source::inline(), hello_files()),
        &names,
    );
    let output = world
        .run_configured(&apply.job_id, &apply, TOKEN, |command| {
            command
                .env("TF_VAR_greeting", &secret)
                .env("RUNNER_API_KEY", "k9")
                .env_remove("RUNNER_ABSENT");
        })
        .await;
    assert!(output.status.success(), "{}", describe(&output));
    let log = world.log(&apply).await;
    assert!(!log.contains(&secret), "the secret is in the log: {log}");
    assert!(!text(&output.stdout).contains(&secret), "in stdout");
    assert!(!text(&output.stderr).contains(&secret), "in stderr");
    let outputs = artifact(&world, &apply, "outputs.json")
        .await
        .expect("outputs.json uploaded");
    assert!(
        !contains(&outputs, &secret),
        "the secret is in outputs.json: {}",
        text(&outputs)
    );
    // The names, never the values; the absent one noted, not an error.
    assert!(
        log.contains("RUNNER_ABSENT") && log.contains("RUNNER_API_KEY"),
        "{log}"
    );
    assert!(
        log.contains("warning: the value of RUNNER_API_KEY is shorter than"),
        "a short value is scrubbed, with a warning by name: {log}"
    );

    // A failure whose reason quotes the value: the reason is scrubbed too.
    let files = BTreeMap::from([(
        "main.tf".to_string(),
        "variable \"greeting\" {}\noutput \"x\" {\n  value = \"${file(var.greeting)}\"\n}\n"
            .to_string(),
    )]);
    let mut failing = world.spec(Operation::Plan, Source::inline(), files);
    failing.report_exit = true;
    let failing = with_runner_secret_env(&failing, &names);
    let output = world
        .run_configured(&failing.job_id, &failing, TOKEN, |command| {
            command.env("TF_VAR_greeting", &secret);
        })
        .await;
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let seen = only_exit(&world, &failing.job_id);
    let reason = seen.exit.reason.clone().unwrap_or_default();
    assert!(!reason.is_empty(), "{seen:?}");
    assert!(
        !reason.contains(&secret),
        "the secret is in the reason: {reason}"
    );
    let log = world.log(&failing).await;
    assert!(!log.contains(&secret), "the secret is in the log: {log}");
    assert!(!text(&output.stderr).contains(&secret), "in stderr");
}
