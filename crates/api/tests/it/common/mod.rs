//! Shared set-up for the API tests: the API over a test world of `sortie_testkit`, in
//! memory (the fast tier) unless a test asks for moto (the AWS tier).

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use chrono::Utc;
use serde_json::{json, Value};
use sortie_api::{router, VerifiedClaims};
use sortie_client::{endpoints, Call};
use sortie_core::{Grantee, GroupPath, Membership, Role};
use sortie_launch::JobSecrets;
use sortie_store::{Artifacts, DynamoStore, JobQueue, MembershipRecord, Store};
use sortie_testkit::world::World;
use sortie_testkit::Aws;
use tower::ServiceExt;

/// The OpenAPI document, once.
fn document() -> &'static Value {
    static DOC: OnceLock<Value> = OnceLock::new();
    DOC.get_or_init(sortie_api::openapi)
}

/// Checks an answer against the document: its status must be declared for the
/// operation that answered (the router tags each answer with its route), and its
/// body must validate against the schema declared for that status. Answers of no
/// operation (404 for an unknown path, 405 for a wrong method) must be the error body.
pub fn conforms(
    route: Option<sortie_api::Route>,
    method: &str,
    path: &str,
    status: StatusCode,
    body: &Value,
) {
    let doc = document();
    let at = format!("{method} {path} -> {status}");
    let schema = match route {
        None => {
            assert!(
                status == StatusCode::NOT_FOUND || status == StatusCode::METHOD_NOT_ALLOWED,
                "{at}: only 404 and 405 come from no operation"
            );
            json!({"$ref": "#/components/schemas/ErrorBody"})
        }
        Some(route) => {
            let (m, template) = route.method_and_path();
            let op = &doc["paths"][template][m.as_str().to_lowercase()];
            assert!(
                op.is_object(),
                "{at}: {m} {template} is not in the document"
            );
            let Some(response) = op["responses"].get(status.as_str()) else {
                panic!("{at}: status {status} is not declared for {m} {template}: {body}");
            };
            if method == "HEAD" {
                // HEAD answers a GET's status and headers, never a body.
                assert!(body.is_null(), "{at}: a HEAD answer with a body: {body}");
                return;
            }
            match response.get("content") {
                None => {
                    assert!(
                        body.is_null(),
                        "{at}: a body where none is declared: {body}"
                    );
                    return;
                }
                Some(content) => content["application/json"]["schema"].clone(),
            }
        }
    };
    let mut root = schema;
    root["components"] = doc["components"].clone();
    let validator = jsonschema::draft202012::options()
        .build(&root)
        .unwrap_or_else(|e| panic!("{at}: the declared schema does not compile: {e}"));
    let errors: Vec<String> = validator
        .iter_errors(body)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{at}: the body does not match its declared schema:\n{}\nbody: {body}",
        errors.join("\n")
    );
}

/// A running API over a fresh test world (`sortie_testkit::world`): in memory by default
/// (the fast tier), or on moto ([`Api::aws`], the AWS tier).
pub struct Api {
    pub app: axum::Router,
    /// The world the API runs in, put together by `sortie_wiring::assemble`.
    pub world: World,
    /// The artifacts bucket's name.
    pub bucket: String,
    pub store: Arc<dyn Store>,
    pub artifacts: Arc<dyn Artifacts>,
    /// The API's membership cache: grants written straight to the table forget it, as a
    /// grant through this instance's own routes does.
    pub memberships: sortie_api::MembershipCache,
    /// The secrets of sensitive variables (in memory, or Secrets Manager on moto).
    pub secrets: Arc<dyn JobSecrets>,
}

pub struct Reply {
    pub status: StatusCode,
    pub body: Value,
    pub etag: Option<String>,
    pub headers: axum::http::HeaderMap,
}

impl Api {
    /// An API in the fast tier: `MemoryStore` and in-memory fakes.
    pub async fn new() -> Self {
        Self::with_queue(None).await
    }

    /// A fast-tier API whose queue is `queue` (a failing one, say).
    pub async fn with_queue(queue: Option<Arc<dyn JobQueue>>) -> Self {
        Self::over(World::fast_with(|setup| {
            if let Some(queue) = queue {
                setup.parts.queue = queue;
            }
        }))
        .await
    }

    /// An API in the AWS tier: DynamoDB, SQS, S3 and Secrets Manager on moto.
    pub async fn aws(aws: &Aws) -> Self {
        Self::over(World::aws(aws).await).await
    }

    /// An AWS-tier API whose DynamoDB calls go to `endpoint` (a `FaultProxy` in front of moto).
    pub async fn with_dynamodb_endpoint(aws: &Aws, endpoint: &str) -> Self {
        let world = World::aws_with(aws, |setup, moto| {
            let config = aws_sdk_dynamodb::config::Builder::from(&moto.config)
                .endpoint_url(endpoint)
                .build();
            setup.parts.store = Arc::new(DynamoStore::new(
                aws_sdk_dynamodb::Client::from_conf(config),
                setup.resources.table.clone(),
            ));
        })
        .await;
        Self::over(world).await
    }

    /// An API over `world`.
    pub async fn over(world: World) -> Self {
        let mut state = world.api_state();
        state.agent_heartbeat_seconds = sortie_core::protocol::agent::HEARTBEAT_SECONDS;
        let api = Self {
            bucket: state.bucket.name.clone(),
            store: state.store.clone(),
            artifacts: state.artifacts.clone(),
            memberships: state.memberships.clone(),
            secrets: world.plane.jobs.secrets.clone(),
            app: router(state),
            world,
        };
        api.grant("", Role::Owner, "admin").await;
        api
    }

    pub async fn grant(&self, group: &str, role: Role, subject: &str) {
        self.store
            .put_membership(&MembershipRecord {
                id: sortie_core::tokens::new_id(),
                membership: Membership {
                    group: GroupPath::parse(group).unwrap(),
                    role,
                    grantee: Grantee::Subject {
                        subject: subject.into(),
                        issuer: None,
                    },
                },
                granted_by: "test".into(),
                granted_at: Utc::now(),
            })
            .await
            .unwrap();
        self.memberships
            .invalidate(GroupPath::parse(group).unwrap().org());
    }

    /// Launches a job as dispatch would: claimed, running, with a token.
    pub async fn launch(&self, job_id: &str, token: &str) {
        use sortie_core::JobState;
        let job_id = &sortie_core::JobId::from(job_id);
        let now = chrono::Utc::now();
        self.store
            .transition_job(
                job_id,
                JobState::Queued,
                JobState::Dispatching,
                now,
                "claimed",
                Default::default(),
            )
            .await
            .unwrap();
        let update = sortie_store::JobUpdate {
            task: Some("arn:aws:ecs:us-east-1:123456789012:task/c/t".into()),
            token_hash: Some(sortie_core::tokens::sha256_hex(token.as_bytes())),
            ..Default::default()
        };
        self.store
            .transition_job(
                job_id,
                JobState::Dispatching,
                JobState::Running,
                now,
                "launched",
                update,
            )
            .await
            .unwrap();
    }

    /// Sends a request as `subject` (None: no verified claims).
    pub async fn call(
        &self,
        subject: Option<&str>,
        method: &str,
        path: &str,
        body: Option<&str>,
        headers: &[(&str, &str)],
    ) -> Reply {
        let mut req = Request::builder().method(method).uri(path);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let mut req = req
            .body(
                body.map(|b| Body::from(b.to_string()))
                    .unwrap_or_else(Body::empty),
            )
            .unwrap();
        if let Some(sub) = subject {
            let claims = BTreeMap::from([
                ("sub".to_string(), json!(sub)),
                ("iss".to_string(), json!("https://idp.example.com")),
            ]);
            req.extensions_mut().insert(VerifiedClaims(claims));
        }
        let resp = self.app.clone().oneshot(req).await.unwrap();
        let route = resp.extensions().get::<sortie_api::Route>().copied();
        let status = resp.status();
        let headers = resp.headers().clone();
        let etag = headers.get("etag").map(|v| v.to_str().unwrap().to_string());
        let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .unwrap();
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| panic!("not JSON: {}", String::from_utf8_lossy(&bytes)))
        };
        conforms(route, method, path, status, &body);
        Reply {
            status,
            body,
            etag,
            headers,
        }
    }

    /// Sends `call` (an operation of `sortie_client::endpoints`) as `subject`: a test names
    /// the operation it calls, not a path. Tests of the router itself (odd, raw or hostile
    /// paths) use [`Api::call`] with a literal path.
    pub async fn send(
        &self,
        subject: Option<&str>,
        call: Call,
        body: Option<&str>,
        headers: &[(&str, &str)],
    ) -> Reply {
        self.call(subject, call.method.as_str(), &call.path, body, headers)
            .await
    }

    /// Sends `call` as the admin.
    pub async fn admin(&self, call: Call, body: Option<&str>) -> Reply {
        self.send(Some("admin"), call, body, &[]).await
    }

    /// Creates environment `<group>/<name>` as the admin, and checks it was created.
    pub async fn create_env(&self, group: &str, name: &str, env_type: &str) -> Reply {
        let body = json!({"name": name, "env_type": env_type}).to_string();
        let r = self
            .admin(endpoints::create_environment(group), Some(&body))
            .await;
        assert_eq!(r.status, 201, "creating {group}/{name}: {}", r.body);
        r
    }

    pub async fn as_admin(&self, method: &str, path: &str, body: Option<&str>) -> Reply {
        self.call(Some("admin"), method, path, body, &[]).await
    }

    /// Messages currently in the jobs queue (job ids), drained.
    pub async fn drain_queue(&self) -> Vec<String> {
        self.world
            .drain_queue()
            .await
            .into_iter()
            .map(|m| m.job_id.to_string())
            .collect()
    }
}

/// `id` with its last character changed: one edit away, for did-you-mean.
pub fn typo(id: &str) -> String {
    let mut s = id.to_string();
    let last = s.pop().unwrap();
    s.push(if last == '0' { '1' } else { '0' });
    s
}

pub fn local_runner() -> &'static str {
    "description: local runner\nrunner_configuration:\n  type: local\nstate_storage_configuration:\n  type: local\n  directory: /tmp/sortie-state\n"
}

/// Sets up org `org`: a runner `<org>/local`, a rule at the org using it, and an owner `<org>-owner`.
pub async fn seed_org(api: &Api, org: &str) {
    assert_eq!(
        api.admin(endpoints::create_runner(org, "local"), Some(local_runner()))
            .await
            .status,
        201
    );
    let rule = json!({"id": "default", "runner_id": format!("{org}/local")}).to_string();
    assert_eq!(
        api.admin(endpoints::create_rule(org), Some(&rule))
            .await
            .status,
        201
    );
    api.grant(org, Role::Owner, &format!("{org}-owner")).await;
}
