//! The route table and the router built from it.
//!
//! [`Route::ALL`] is the single source of truth: the router registers each route's
//! [`Route::spec`] template with its handler, the OpenAPI test checks the document
//! against it, and the SAM template test derives the routes that skip the JWT
//! authorizer from [`Route::uses_job_token`]. Paths that contain `/` end at the
//! `/-/` separator, which [`separator`] turns into one segment before routing.

mod agent_pools;
mod environments;
mod job_views;
mod jobs;
mod logs;
mod memberships;
mod meta;
mod rules;
mod runner_callbacks;
mod runners;
pub mod separator;
mod whoami;

use std::collections::BTreeMap;

use axum::extract::Extension;
use axum::http::{HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{on, MethodFilter, MethodRouter};
use serde::Serialize;
use sortie_core::{Action, GroupPath};
use tower::Layer;

use crate::error::ApiError;
use crate::AppState;
use separator::OriginalPath;

pub(crate) use agent_pools::*;
pub(crate) use environments::*;
pub(crate) use jobs::*;
pub(crate) use logs::*;
pub(crate) use memberships::*;
pub(crate) use meta::*;
pub(crate) use rules::*;
pub(crate) use runner_callbacks::*;
pub(crate) use runners::*;
pub(crate) use whoami::*;

/// Every operation of API v1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `GET /v1/health`
    Health,
    /// `GET /v1/openapi.json`
    OpenApi,
    /// `GET /v1/whoami`
    Whoami,
    /// `GET /v1/groups/{group}/-/runners`
    ListRunners,
    /// `POST /v1/groups/{group}/-/runners/{name}`
    CreateRunner,
    /// `GET /v1/groups/{group}/-/runners/{name}`
    GetRunner,
    /// `PUT /v1/groups/{group}/-/runners/{name}`
    UpdateRunner,
    /// `DELETE /v1/groups/{group}/-/runners/{name}`
    DeleteRunner,
    /// `POST /v1/groups/{group}/-/runners/{name}/check`
    CheckRunner,
    /// `GET /v1/groups/{group}/-/rules`
    ListRules,
    /// `POST /v1/groups/{group}/-/rules`
    CreateRule,
    /// `GET /v1/groups/{group}/-/rules/{id}`
    GetRule,
    /// `PUT /v1/groups/{group}/-/rules/{id}`
    UpdateRule,
    /// `DELETE /v1/groups/{group}/-/rules/{id}`
    DeleteRule,
    /// `GET /v1/groups/{group}/-/environments`
    ListEnvironments,
    /// `POST /v1/groups/{group}/-/environments`
    CreateEnvironment,
    /// `GET /v1/groups/{group}/-/memberships`
    ListMemberships,
    /// `POST /v1/groups/{group}/-/memberships`
    GrantMembership,
    /// `DELETE /v1/groups/{group}/-/memberships/{id}`
    RevokeMembership,
    /// `GET /v1/environments/{environment}`
    GetEnvironment,
    /// `PATCH /v1/environments/{environment}`
    UpdateEnvironment,
    /// `DELETE /v1/environments/{environment}`
    DeleteEnvironment,
    /// `POST /v1/environments/{environment}/-/refresh-runner`
    RefreshRunner,
    /// `GET /v1/environments/{environment}/-/jobs`
    ListJobs,
    /// `POST /v1/environments/{environment}/-/jobs`
    SubmitJob,
    /// `GET /v1/jobs/{id}`
    GetJob,
    /// `POST /v1/jobs/{id}/cancel`
    CancelJob,
    /// `GET /v1/jobs/{id}/logs`
    GetJobLogs,
    /// `GET /v1/jobs/{id}/spec` (job token)
    GetJobSpec,
    /// `GET /v1/jobs/{id}/sensitive-variables` (job token): the values, for the runner only
    GetJobSensitiveVariables,
    /// `PUT /v1/jobs/{id}/summary` (job token)
    PutJobSummary,
    /// `POST /v1/jobs/{id}/uploads` (job token)
    CreateUpload,
    /// `PUT /v1/jobs/{id}/upload-problems` (job token)
    PutUploadProblems,
    /// `POST /v1/jobs/{id}/events` (job token): the runner's final callback
    ReportJobExit,
    /// `PUT /v1/jobs/{id}/tool` (job token): the tool and version the runner picked
    PutJobTool,
    /// `POST /v1/jobs/{id}/approve`
    ApproveJob,
    /// `POST /v1/jobs/{id}/discard`
    DiscardJob,
    /// `GET /v1/jobs/{id}/outputs`
    GetJobOutputs,
    /// `GET /v1/environments/{environment}/-/outputs`
    GetEnvironmentOutputs,
    /// `POST /v1/agent-pools`
    CreateAgentPool,
    /// `GET /v1/groups/{group}/-/agent-pools`
    ListAgentPools,
    /// `GET /v1/agent-pools/{id}`
    GetAgentPool,
    /// `DELETE /v1/agent-pools/{id}`
    DeleteAgentPool,
    /// `POST /v1/agent-pools/{id}/tokens`
    CreatePoolToken,
    /// `DELETE /v1/agent-pools/{id}/tokens/{token}`
    RevokePoolToken,
    /// `POST /v1/agent-pools/{id}/claims` (agent credential)
    ClaimJob,
    /// `POST /v1/agent-pools/{id}/jobs/{job}/heartbeat` (agent credential)
    AgentHeartbeat,
    /// `POST /v1/agent-pools/{id}/jobs/{job}/exit` (agent credential)
    AgentExit,
}

impl Route {
    /// Every route: the router, the OpenAPI check and the SAM template check read it.
    pub const ALL: &'static [Route] = &[
        Route::Health,
        Route::OpenApi,
        Route::Whoami,
        Route::ListRunners,
        Route::CreateRunner,
        Route::GetRunner,
        Route::UpdateRunner,
        Route::DeleteRunner,
        Route::CheckRunner,
        Route::ListRules,
        Route::CreateRule,
        Route::GetRule,
        Route::UpdateRule,
        Route::DeleteRule,
        Route::ListEnvironments,
        Route::CreateEnvironment,
        Route::ListMemberships,
        Route::GrantMembership,
        Route::RevokeMembership,
        Route::GetEnvironment,
        Route::UpdateEnvironment,
        Route::DeleteEnvironment,
        Route::RefreshRunner,
        Route::ListJobs,
        Route::SubmitJob,
        Route::GetJob,
        Route::CancelJob,
        Route::GetJobLogs,
        Route::GetJobSpec,
        Route::GetJobSensitiveVariables,
        Route::PutJobSummary,
        Route::CreateUpload,
        Route::PutUploadProblems,
        Route::ReportJobExit,
        Route::PutJobTool,
        Route::ApproveJob,
        Route::DiscardJob,
        Route::GetJobOutputs,
        Route::GetEnvironmentOutputs,
        Route::CreateAgentPool,
        Route::ListAgentPools,
        Route::GetAgentPool,
        Route::DeleteAgentPool,
        Route::CreatePoolToken,
        Route::RevokePoolToken,
        Route::ClaimJob,
        Route::AgentHeartbeat,
        Route::AgentExit,
    ];

    /// True for the routes a runner calls with its job token instead of a user's JWT.
    pub fn uses_job_token(self) -> bool {
        matches!(
            self,
            Route::GetJobSpec
                | Route::GetJobSensitiveVariables
                | Route::PutJobSummary
                | Route::CreateUpload
                | Route::PutUploadProblems
                | Route::ReportJobExit
                | Route::PutJobTool
        )
    }

    /// True for the routes an agent calls with its pool's credential (a pool token or an
    /// OIDC token the API verifies itself) instead of a user's JWT.
    pub fn uses_agent_credential(self) -> bool {
        matches!(
            self,
            Route::ClaimJob | Route::AgentHeartbeat | Route::AgentExit
        )
    }

    /// True for the routes API Gateway's JWT authorizer must not guard: the runner's (job
    /// token) and the agents' (pool credential). Each checks its own credential.
    pub fn skips_user_token(self) -> bool {
        self.uses_job_token() || self.uses_agent_credential()
    }

    /// True for the open routes that need no token at all.
    pub fn is_public(self) -> bool {
        matches!(self, Route::Health | Route::OpenApi)
    }

    /// The method and the path template (the router's and the OpenAPI document's).
    pub fn spec(self) -> (Method, &'static str) {
        use Route::*;
        match self {
            Health => (Method::GET, "/v1/health"),
            OpenApi => (Method::GET, "/v1/openapi.json"),
            Whoami => (Method::GET, "/v1/whoami"),
            ListRunners => (Method::GET, "/v1/groups/{group}/-/runners"),
            CreateRunner => (Method::POST, "/v1/groups/{group}/-/runners/{name}"),
            GetRunner => (Method::GET, "/v1/groups/{group}/-/runners/{name}"),
            UpdateRunner => (Method::PUT, "/v1/groups/{group}/-/runners/{name}"),
            DeleteRunner => (Method::DELETE, "/v1/groups/{group}/-/runners/{name}"),
            CheckRunner => (Method::POST, "/v1/groups/{group}/-/runners/{name}/check"),
            ListRules => (Method::GET, "/v1/groups/{group}/-/rules"),
            CreateRule => (Method::POST, "/v1/groups/{group}/-/rules"),
            GetRule => (Method::GET, "/v1/groups/{group}/-/rules/{id}"),
            UpdateRule => (Method::PUT, "/v1/groups/{group}/-/rules/{id}"),
            DeleteRule => (Method::DELETE, "/v1/groups/{group}/-/rules/{id}"),
            ListEnvironments => (Method::GET, "/v1/groups/{group}/-/environments"),
            CreateEnvironment => (Method::POST, "/v1/groups/{group}/-/environments"),
            ListMemberships => (Method::GET, "/v1/groups/{group}/-/memberships"),
            GrantMembership => (Method::POST, "/v1/groups/{group}/-/memberships"),
            RevokeMembership => (Method::DELETE, "/v1/groups/{group}/-/memberships/{id}"),
            GetEnvironment => (Method::GET, "/v1/environments/{environment}"),
            UpdateEnvironment => (Method::PATCH, "/v1/environments/{environment}"),
            DeleteEnvironment => (Method::DELETE, "/v1/environments/{environment}"),
            RefreshRunner => (
                Method::POST,
                "/v1/environments/{environment}/-/refresh-runner",
            ),
            ListJobs => (Method::GET, "/v1/environments/{environment}/-/jobs"),
            SubmitJob => (Method::POST, "/v1/environments/{environment}/-/jobs"),
            GetJob => (Method::GET, "/v1/jobs/{id}"),
            CancelJob => (Method::POST, "/v1/jobs/{id}/cancel"),
            GetJobLogs => (Method::GET, "/v1/jobs/{id}/logs"),
            GetJobSpec => (Method::GET, "/v1/jobs/{id}/spec"),
            GetJobSensitiveVariables => (Method::GET, "/v1/jobs/{id}/sensitive-variables"),
            PutJobSummary => (Method::PUT, "/v1/jobs/{id}/summary"),
            CreateUpload => (Method::POST, "/v1/jobs/{id}/uploads"),
            PutUploadProblems => (Method::PUT, "/v1/jobs/{id}/upload-problems"),
            ReportJobExit => (Method::POST, "/v1/jobs/{id}/events"),
            PutJobTool => (Method::PUT, "/v1/jobs/{id}/tool"),
            ApproveJob => (Method::POST, "/v1/jobs/{id}/approve"),
            DiscardJob => (Method::POST, "/v1/jobs/{id}/discard"),
            GetJobOutputs => (Method::GET, "/v1/jobs/{id}/outputs"),
            GetEnvironmentOutputs => (Method::GET, "/v1/environments/{environment}/-/outputs"),
            CreateAgentPool => (Method::POST, "/v1/agent-pools"),
            ListAgentPools => (Method::GET, "/v1/groups/{group}/-/agent-pools"),
            GetAgentPool => (Method::GET, "/v1/agent-pools/{id}"),
            DeleteAgentPool => (Method::DELETE, "/v1/agent-pools/{id}"),
            CreatePoolToken => (Method::POST, "/v1/agent-pools/{id}/tokens"),
            RevokePoolToken => (Method::DELETE, "/v1/agent-pools/{id}/tokens/{token}"),
            ClaimJob => (Method::POST, "/v1/agent-pools/{id}/claims"),
            AgentHeartbeat => (Method::POST, "/v1/agent-pools/{id}/jobs/{job}/heartbeat"),
            AgentExit => (Method::POST, "/v1/agent-pools/{id}/jobs/{job}/exit"),
        }
    }

    /// This route's handler, on its method.
    fn method_router(self) -> MethodRouter<AppState> {
        use Route::*;
        let filter = MethodFilter::try_from(self.spec().0).expect("a standard method");
        match self {
            Health => on(filter, health),
            OpenApi => on(filter, openapi_json),
            Whoami => on(filter, whoami),
            ListRunners => on(filter, list_runners),
            CreateRunner => on(filter, create_runner),
            GetRunner => on(filter, get_runner),
            UpdateRunner => on(filter, update_runner),
            DeleteRunner => on(filter, delete_runner),
            CheckRunner => on(filter, check_runner),
            ListRules => on(filter, list_rules),
            CreateRule => on(filter, create_rule),
            GetRule => on(filter, get_rule),
            UpdateRule => on(filter, update_rule),
            DeleteRule => on(filter, delete_rule),
            ListEnvironments => on(filter, list_environments),
            CreateEnvironment => on(filter, create_environment),
            ListMemberships => on(filter, list_memberships),
            GrantMembership => on(filter, grant_membership),
            RevokeMembership => on(filter, revoke_membership),
            GetEnvironment => on(filter, get_environment),
            UpdateEnvironment => on(filter, update_environment),
            DeleteEnvironment => on(filter, delete_environment),
            RefreshRunner => on(filter, refresh_runner),
            ListJobs => on(filter, list_jobs),
            SubmitJob => on(filter, submit_job),
            GetJob => on(filter, get_job),
            CancelJob => on(filter, cancel_job),
            GetJobLogs => on(filter, get_job_logs),
            GetJobSpec => on(filter, get_job_spec),
            GetJobSensitiveVariables => on(filter, get_job_sensitive_variables),
            PutJobSummary => on(filter, put_job_summary),
            CreateUpload => on(filter, create_upload),
            PutUploadProblems => on(filter, put_upload_problems),
            ReportJobExit => on(filter, report_job_exit),
            PutJobTool => on(filter, put_job_tool),
            ApproveJob => on(filter, approve_job),
            DiscardJob => on(filter, discard_job),
            GetJobOutputs => on(filter, get_job_outputs),
            GetEnvironmentOutputs => on(filter, get_environment_outputs),
            CreateAgentPool => on(filter, create_agent_pool),
            ListAgentPools => on(filter, list_agent_pools),
            GetAgentPool => on(filter, get_agent_pool),
            DeleteAgentPool => on(filter, delete_agent_pool),
            CreatePoolToken => on(filter, create_pool_token),
            RevokePoolToken => on(filter, revoke_pool_token),
            ClaimJob => on(filter, claim_job),
            AgentHeartbeat => on(filter, agent_heartbeat),
            AgentExit => on(filter, agent_exit),
        }
    }
}

/// The router of [`Route::ALL`], behind the `/-/` rewrite. Every answer of a route
/// carries that [`Route`] in its extensions.
pub(crate) fn build(state: AppState) -> axum::Router {
    let mut templates: BTreeMap<&'static str, (MethodRouter<AppState>, Vec<String>)> =
        BTreeMap::new();
    for route in Route::ALL {
        let (method, template) = route.spec();
        let entry = templates
            .entry(template)
            .or_insert_with(|| (MethodRouter::new(), vec![]));
        let route = *route;
        // Each answer carries its route, so tests can find the operation it belongs to.
        let tagged = route
            .method_router()
            .layer(tower::util::MapResponseLayer::new(
                move |mut response: Response| {
                    response.extensions_mut().insert(route);
                    response
                },
            ));
        entry.0 = std::mem::take(&mut entry.0).merge(tagged);
        entry.1.push(method.to_string());
    }
    let mut inner = axum::Router::new();
    for (template, (methods, allowed)) in templates {
        let allowed = allowed.join(", ");
        let methods = methods.fallback(
            move |method: Method, Extension(OriginalPath(path)): Extension<OriginalPath>| {
                let allowed = allowed.clone();
                async move { method_not_allowed(method, &path, &allowed) }
            },
        );
        inner = inner.route(template, methods);
    }
    let inner = inner.fallback(not_found).with_state(state);
    let rewritten = tower::util::MapRequestLayer::new(separator::rewrite).layer(inner);
    axum::Router::new().fallback_service(rewritten)
}

async fn not_found(Extension(OriginalPath(path)): Extension<OriginalPath>) -> ApiError {
    let path = path
        .strip_suffix('/')
        .filter(|p| !p.is_empty())
        .unwrap_or(&path);
    ApiError::not_found(format!("route {path}"))
}

fn method_not_allowed(method: Method, path: &str, allowed: &str) -> ApiError {
    let path = path
        .strip_suffix('/')
        .filter(|p| !p.is_empty())
        .unwrap_or(path);
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!("{method} is not allowed on {path}; allowed: {allowed}"),
    )
}

/// Writes to the root group (shared runners, root rules) need a system administrator.
pub(crate) fn manage_action(group: &GroupPath) -> Action {
    if group.is_root() {
        Action::Administer
    } else {
        Action::Manage
    }
}

/// A JSON answer with its status and, for versioned resources, its ETag.
pub(crate) struct Reply<T> {
    status: StatusCode,
    etag: Option<u64>,
    body: T,
}

impl<T> Reply<T> {
    /// 200 with `body`.
    pub(crate) fn ok(body: T) -> Self {
        Self::new(StatusCode::OK, body)
    }

    /// `status` with `body`.
    pub(crate) fn new(status: StatusCode, body: T) -> Self {
        Self {
            status,
            etag: None,
            body,
        }
    }

    /// Sends `version` as the ETag.
    pub(crate) fn etag(mut self, version: u64) -> Self {
        self.etag = Some(version);
        self
    }
}

impl<T: Serialize> IntoResponse for Reply<T> {
    fn into_response(self) -> Response {
        let mut r = (self.status, axum::Json(self.body)).into_response();
        if let Some(v) = self
            .etag
            .and_then(|v| HeaderValue::from_str(&format!("\"{v}\"")).ok())
        {
            r.headers_mut().insert("etag", v);
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use axum::body::Body;
    use serde_json::Value;
    use sortie_core::{Runner, RunnerId, RunnerSpec};
    use sortie_store::{
        Artifacts, JobMessage, JobQueue, MemoryStore, ObjectInfo, RunnerStore, StoreError,
    };
    use tower::ServiceExt;

    use super::*;
    use crate::BucketConfig;

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
        async fn job_completed(
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
            agent_heartbeat_seconds: sortie_core::agent::HEARTBEAT_SECONDS,
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
        let (r, status, body) =
            call(&app, Method::GET, "/v1/environments/acme/payments/prod").await;
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
            let (method, template) = route.spec();
            assert!(
                seen.insert((method.to_string(), template)),
                "{template} twice"
            );
            let path = template
                .replace("{group}", "acme/payments")
                .replace("{environment}", "acme/payments/prod")
                .replace("{name}", "r1")
                .replace("{id}", "x1");
            let (got, status, body) = call(&app, method, &path).await;
            assert_eq!(got, Some(*route), "{template}: {status} {body}");
        }
    }
}
