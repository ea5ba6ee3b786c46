//! The audit trail through the route table: every audited route (`Route::audited`) is
//! called once, successfully, and must write exactly one entry (its action the route's
//! operation id, in the organisation it acted in, naming the request's path); a refused
//! request, and a route that is not audited, write none. The walk ends by checking that it
//! called every audited route, so a new one without a step here fails, naming it. It runs
//! on both tiers: the memory store (entries under the change's lock) and DynamoDB on moto
//! (entries in the change's transaction). Every answer is checked against the OpenAPI
//! document (`common::conforms`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use axum::body::Body;
use axum::http::Request;
use chrono::{Duration, Utc};
use serde_json::{json, Value};
use sortie_api::{Route, VerifiedClaims};
use sortie_core::audit::{body_digest, id_bound, AuditEntry, CredentialKind};
use sortie_core::{EnvPath, JobId, Role};
use sortie_launch::state_history::MemoryStateHistory;
use sortie_store::{AuditRange, LastApply, Store};
use sortie_testkit::world::{World, API_URL};
use tower::ServiceExt;

use crate::common::{conforms, local_runner, Api, Reply};
use sortie_client::{endpoints, Call};

/// The issuer of the test callers' claims.
const ISSUER: &str = "https://idp.example.com";

/// An API over `world` whose state versions are `history`'s and which takes pull-request
/// connections (kept in the world's secrets), with `admin` an owner of the root.
async fn audit_api(world: World, history: Arc<MemoryStateHistory>) -> Api {
    let mut state = world.api_state();
    state.agent_heartbeat_seconds = sortie_core::protocol::agent::HEARTBEAT_SECONDS;
    state.state_history = history;
    state.pulls = Some(sortie_api::PullParts::new(
        Arc::new(sortie_lifecycle::pull_requests::AnyHosts::new(
            world.plane.jobs.secrets.clone(),
        )),
        Arc::new(sortie_store::MemoryPullQueue::default()),
        API_URL,
    ));
    let api = Api {
        bucket: state.bucket.name.clone(),
        store: state.store.clone(),
        artifacts: state.artifacts.clone(),
        memberships: state.memberships.clone(),
        secrets: world.plane.jobs.secrets.clone(),
        app: sortie_api::router(state),
        world,
    };
    api.grant("", Role::Owner, "admin").await;
    api
}

/// Sends a request as `subject` (None: no verified claims), as `Api::call` does, and
/// answers the route the router tagged the answer with too.
async fn request(
    api: &Api,
    subject: Option<&str>,
    method: &str,
    path: &str,
    body: Option<&str>,
    headers: &[(&str, &str)],
) -> (Option<Route>, Reply) {
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
            ("iss".to_string(), json!(ISSUER)),
        ]);
        req.extensions_mut().insert(VerifiedClaims(claims));
    }
    let resp = api.app.clone().oneshot(req).await.unwrap();
    let route = resp.extensions().get::<Route>().copied();
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
    (
        route,
        Reply {
            status,
            body,
            etag,
            headers,
        },
    )
}

/// Every entry of every organisation, `(org, id)`: none is sealed in a test world.
async fn all_entries(store: &dyn Store) -> Vec<(String, String)> {
    let later = id_bound(Utc::now() + Duration::days(1));
    store.unsealed_audit(&later, 100_000).await.unwrap()
}

/// Entry `id` of `org`, as stored.
async fn read_entry(store: &dyn Store, org: &str, id: &str) -> AuditEntry {
    let range = AuditRange {
        since: Some(id.to_string()),
        limit: 1,
        ..AuditRange::default()
    };
    let page = store.audit_page(org, &range).await.unwrap();
    let record = page
        .records
        .first()
        .unwrap_or_else(|| panic!("entry {org}/{id} is listed but not read"));
    let entry: AuditEntry = serde_json::from_str(&record.body)
        .unwrap_or_else(|e| panic!("entry {org}/{id} is not an entry ({e}): {}", record.body));
    assert_eq!(entry.id, id, "the page of {org} from {id}");
    entry
}

/// A walk through the routes: each request's new entries checked as it answers.
struct Trail<'a> {
    api: &'a Api,
    /// The entries seen so far, `(org, id)`.
    known: BTreeSet<(String, String)>,
    /// The entries seen, by organisation, in order.
    by_org: BTreeMap<String, Vec<AuditEntry>>,
    /// The audited routes called successfully.
    exercised: BTreeSet<Route>,
    /// What went wrong, one line each: reported together at the end.
    problems: Vec<String>,
}

impl<'a> Trail<'a> {
    async fn new(api: &'a Api) -> Self {
        let known: BTreeSet<_> = all_entries(api.store.as_ref()).await.into_iter().collect();
        assert!(known.is_empty(), "a fresh world has no entries: {known:?}");
        Self {
            api,
            known,
            by_org: BTreeMap::new(),
            exercised: BTreeSet::new(),
            problems: vec![],
        }
    }

    /// The entries written since the last look, oldest first.
    async fn fresh(&mut self) -> Vec<AuditEntry> {
        let store = self.api.store.as_ref();
        let mut out = vec![];
        for (org, id) in all_entries(store).await {
            if self.known.insert((org.clone(), id.clone())) {
                let entry = read_entry(store, &org, &id).await;
                assert_eq!(entry.org, org, "entry {id} is kept in the chain it names");
                self.by_org.entry(org).or_default().push(entry.clone());
                out.push(entry);
            }
        }
        out
    }

    /// Sends `route` at `path` as `who` and checks what it wrote: one entry of the route's
    /// action in `org`, for a success of an audited route; nothing otherwise.
    async fn send(
        &mut self,
        who: Option<&str>,
        route: Route,
        org: &str,
        call: Call,
        body: Option<&str>,
        headers: &[(&str, &str)],
    ) -> Reply {
        let (method, _) = route.method_and_path();
        assert_eq!(call.method, method, "{} is {method}", route.operation_id());
        let path = call.path.as_str();
        let (answered, reply) = request(self.api, who, method.as_str(), path, body, headers).await;
        assert_eq!(
            answered,
            Some(route),
            "{method} {path} was answered by another route ({}): {}",
            reply.status,
            reply.body
        );
        let fresh = self.fresh().await;
        let what = format!(
            "{} ({method} {path}) answered {}",
            route.operation_id(),
            reply.status.as_u16()
        );
        let listed = |entries: &[AuditEntry]| {
            entries
                .iter()
                .map(|e| format!("{} in `{}`", e.action, e.org))
                .collect::<Vec<_>>()
                .join(", ")
        };
        if route.audited() && reply.status.is_success() {
            self.exercised.insert(route);
            // The entry names the path readable: `acme%2Fteam` (one segment) is `acme/team`.
            let target = path.split('?').next().unwrap_or(path).replace("%2F", "/");
            match fresh.as_slice() {
                [] => self.problems.push(format!("{what}: wrote no audit entry")),
                [e] if e.action != route.operation_id() || e.org != org => {
                    self.problems.push(format!(
                        "{what}: wrote an entry of {}, not {} in `{org}`",
                        listed(&fresh),
                        route.operation_id()
                    ))
                }
                [e] if e.target != target || Some(e.actor.subject.as_str()) != who => {
                    self.problems.push(format!(
                        "{what}: its entry names target `{}` and actor `{}`, not `{target}` and {who:?}",
                        e.target, e.actor.subject
                    ))
                }
                [_] => {}
                more => self.problems.push(format!(
                    "{what}: wrote {} audit entries: {}",
                    more.len(),
                    listed(more)
                )),
            }
        } else if !fresh.is_empty() {
            let why = if route.audited() {
                "a refused request"
            } else {
                "a route that is not audited"
            };
            self.problems.push(format!(
                "{what}: {why} wrote {} audit entries: {}",
                fresh.len(),
                listed(&fresh)
            ));
        }
        reply
    }

    /// `route` as the admin in organisation `acme`, which must succeed.
    async fn ok(&mut self, route: Route, call: Call, body: Option<&str>) -> Reply {
        self.ok_in("acme", route, call, body, &[]).await
    }

    /// `route` as the admin, acting in `org`, which must succeed.
    async fn ok_in(
        &mut self,
        org: &str,
        route: Route,
        call: Call,
        body: Option<&str>,
        headers: &[(&str, &str)],
    ) -> Reply {
        let path = call.path.clone();
        let r = self
            .send(Some("admin"), route, org, call, body, headers)
            .await;
        assert!(
            r.status.is_success(),
            "{} ({path}) must succeed for the walk to go on: {} {}",
            route.operation_id(),
            r.status,
            r.body
        );
        r
    }

    /// `route` as `who`, which must be refused with `status` (and write nothing).
    async fn refused(
        &mut self,
        who: &str,
        route: Route,
        call: Call,
        body: Option<&str>,
        headers: &[(&str, &str)],
        status: u16,
    ) {
        let path = call.path.clone();
        let r = self
            .send(Some(who), route, "acme", call, body, headers)
            .await;
        assert_eq!(
            r.status.as_u16(),
            status,
            "{} ({path}) must be refused: {}",
            route.operation_id(),
            r.body
        );
    }

    /// Creates environment `acme/<group>/<name>` from `body` (JSON, its name included).
    async fn environment(&mut self, group: &str, body: Value) -> Reply {
        let call = endpoints::create_environment(group);
        self.ok(Route::CreateEnvironment, call, Some(&body.to_string()))
            .await
    }

    /// Submits `operation` to environment `env` as the admin; the job's id.
    async fn submit(&mut self, env: &str, operation: &str) -> String {
        let body = json!({"operation": operation, "files": {"main.tf": ""}}).to_string();
        let r = self
            .ok(Route::SubmitJob, endpoints::submit_job(env), Some(&body))
            .await;
        r.body["id"].as_str().unwrap().to_string()
    }

    /// The runner's side of one task of job `id`: launched with `token`, its summary and
    /// its exit 0, through the job-token routes (which are not audited).
    async fn run_task(&mut self, id: &str, token: &str) {
        self.api.launch(id, token).await;
        let auth = format!("Bearer {token}");
        let headers = [
            ("authorization", auth.as_str()),
            ("content-type", "application/json"),
        ];
        let body = r#"{"add":1,"change":0,"destroy":0}"#;
        let r = self
            .send(
                None,
                Route::PutJobSummary,
                "acme",
                endpoints::put_job_summary(id),
                Some(body),
                &headers,
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.body);
        let r = self
            .send(
                None,
                Route::ReportJobExit,
                "acme",
                endpoints::report_job_exit(id),
                Some(r#"{"exit_code":0}"#),
                &headers,
            )
            .await;
        assert!(r.status.is_success(), "{}", r.body);
    }

    /// The organisation's entries as `GET /v1/orgs/{org}/-/audit` lists them must be those
    /// the walk saw, newest first.
    async fn listed_as_seen(&mut self, org: &str) {
        let call = endpoints::list_audit(org).query([("limit", Some("1000"))]);
        let path = call.path.clone();
        let r = self.ok_in(org, Route::ListAudit, call, None, &[]).await;
        let listed: Vec<String> = r.body["entries"]
            .as_array()
            .unwrap_or_else(|| panic!("{path}: {}", r.body))
            .iter()
            .map(|e| e["entry"]["id"].as_str().unwrap_or_default().to_string())
            .collect();
        let mut seen: Vec<String> = self
            .by_org
            .get(org)
            .map(|es| es.iter().map(|e| e.id.clone()).collect())
            .unwrap_or_default();
        seen.sort();
        seen.reverse();
        assert_eq!(listed, seen, "{path} lists the entries the walk saw");
    }

    /// The walk's verdict: every audited route called, and nothing wrong on the way.
    fn finish(self) {
        let audited: BTreeSet<Route> = Route::ALL.iter().copied().filter(|r| r.audited()).collect();
        let missing: Vec<&str> = audited
            .difference(&self.exercised)
            .map(|r| r.operation_id())
            .collect();
        let mut problems = self.problems;
        if !missing.is_empty() {
            problems.push(format!(
                "audited routes this walk never called successfully (give each a step in tests/it/audit.rs): {}",
                missing.join(", ")
            ));
        }
        assert!(
            problems.is_empty(),
            "the audit trail is not one entry per audited change:\n  {}",
            problems.join("\n  ")
        );
    }
}

/// A state file of serial `serial`.
fn state_file(serial: u64) -> Vec<u8> {
    json!({
        "version": 4, "serial": serial, "lineage": "lin", "terraform_version": "1.11.4",
        "outputs": {}, "resources": []
    })
    .to_string()
    .into_bytes()
}

const REGO: &str = "package deletes\n\ndeny contains msg if {\n  some rc in input.plan.resource_changes\n  \"delete\" in rc.change.actions\n  msg := sprintf(\"%s would be deleted\", [rc.address])\n}\n";

fn policy_set(enforcement: &str) -> String {
    json!({
        "description": "no deletes in production",
        "enforcement": enforcement,
        "criteria": {"env_types": ["production"]},
        "modules": [{"name": "deletes.rego", "rego": REGO}],
    })
    .to_string()
}

/// Walks every audited route once over `api`, whose state versions are `history`'s.
async fn walk(api: &Api, history: &MemoryStateHistory) {
    let mut t = Trail::new(api).await;
    api.grant("acme", Role::Viewer, "vera").await;
    let as_json = [("content-type", "application/json")];

    // Runners: the organisation's, one at the root (its chain is `-`), and one to change.
    t.ok(
        Route::CreateRunner,
        endpoints::create_runner("acme", "local"),
        Some(local_runner()),
    )
    .await;
    t.refused(
        "admin",
        Route::CreateRunner,
        endpoints::create_runner("acme", "local"),
        Some(local_runner()),
        &[],
        409,
    )
    .await;
    t.ok_in(
        "-",
        Route::CreateRunner,
        endpoints::create_runner("-", "shared"),
        Some(local_runner()),
        &[],
    )
    .await;
    t.ok(
        Route::CreateRunner,
        endpoints::create_runner("acme", "spare"),
        Some(local_runner()),
    )
    .await;
    let changed = local_runner().replace("local runner", "changed");
    t.refused(
        "admin",
        Route::UpdateRunner,
        endpoints::update_runner("acme", "spare"),
        Some(&changed),
        &[("if-match", "\"9\"")],
        412,
    )
    .await;
    t.refused(
        "vera",
        Route::UpdateRunner,
        endpoints::update_runner("acme", "spare"),
        Some(&changed),
        &[],
        403,
    )
    .await;
    t.ok_in(
        "acme",
        Route::UpdateRunner,
        endpoints::update_runner("acme", "spare"),
        Some(&changed),
        &[("if-match", "\"1\"")],
    )
    .await;

    // Rules.
    let rule = json!({"id": "default", "runner_id": "acme/local"}).to_string();
    t.ok(
        Route::CreateRule,
        endpoints::create_rule("acme"),
        Some(&rule),
    )
    .await;
    let rule = json!({"id": "team", "runner_id": "acme/spare"}).to_string();
    t.ok(
        Route::CreateRule,
        endpoints::create_rule("acme/team"),
        Some(&rule),
    )
    .await;
    let put = json!({"runner_id": "acme/spare", "priority": 5}).to_string();
    t.ok_in(
        "acme",
        Route::UpdateRule,
        endpoints::update_rule("acme/team", "team"),
        Some(&put),
        &[("if-match", "\"1\"")],
    )
    .await;
    t.refused(
        "vera",
        Route::DeleteRule,
        endpoints::delete_rule("acme/team", "team"),
        None,
        &[],
        403,
    )
    .await;
    t.ok(
        Route::DeleteRule,
        endpoints::delete_rule("acme/team", "team"),
        None,
    )
    .await;
    t.ok(
        Route::DeleteRunner,
        endpoints::delete_runner("acme", "spare"),
        None,
    )
    .await;

    // Policy sets.
    let made = t
        .ok(
            Route::CreatePolicySet,
            endpoints::create_policy_set("acme", "no-deletes"),
            Some(&policy_set("mandatory")),
        )
        .await;
    let etag = made.etag.clone().unwrap();
    t.ok_in(
        "acme",
        Route::UpdatePolicySet,
        endpoints::update_policy_set("acme", "no-deletes"),
        Some(&policy_set("review")),
        &[("if-match", etag.as_str())],
    )
    .await;
    t.ok(
        Route::DeletePolicySet,
        endpoints::delete_policy_set("acme", "no-deletes"),
        None,
    )
    .await;

    // Notification destinations.
    let body = json!({"type": "webhook", "url": "https://hooks.example.com/sortie"}).to_string();
    t.refused(
        "vera",
        Route::CreateNotification,
        endpoints::create_notification("acme", "ops"),
        Some(&body),
        &as_json,
        403,
    )
    .await;
    let made = t
        .ok_in(
            "acme",
            Route::CreateNotification,
            endpoints::create_notification("acme", "ops"),
            Some(&body),
            &as_json,
        )
        .await;
    let etag = made.etag.clone().unwrap();
    let body = json!({"type": "webhook", "url": "https://hooks.example.com/sortie", "description": "on call"})
        .to_string();
    t.ok_in(
        "acme",
        Route::UpdateNotification,
        endpoints::update_notification("acme", "ops"),
        Some(&body),
        &[("if-match", etag.as_str()), as_json[0]],
    )
    .await;
    t.ok(
        Route::RotateNotificationSecret,
        endpoints::rotate_notification_secret("acme", "ops"),
        None,
    )
    .await;
    t.ok(
        Route::DeleteNotification,
        endpoints::delete_notification("acme", "ops"),
        None,
    )
    .await;

    // Memberships.
    t.refused(
        "admin",
        Route::GrantMembership,
        endpoints::grant_membership("acme"),
        Some(r#"{"role":"emperor","grantee":{"kind":"subject","subject":"dana"}}"#),
        &[],
        400,
    )
    .await;
    let granted = t
        .ok(
            Route::GrantMembership,
            endpoints::grant_membership("acme"),
            Some(r#"{"role":"viewer","grantee":{"kind":"subject","subject":"dana"}}"#),
        )
        .await;
    let id = granted.body["id"].as_str().unwrap().to_string();
    t.ok(
        Route::RevokeMembership,
        endpoints::revoke_membership("acme", &id),
        None,
    )
    .await;

    // Environments: made, changed, relinked and deleted.
    t.environment(
        "acme",
        json!({"name": "scratch", "env_type": "development"}),
    )
    .await;
    t.ok(
        Route::UpdateEnvironment,
        endpoints::update_environment("acme/scratch"),
        Some(r#"{"labels":{"tier":"gold"}}"#),
    )
    .await;
    t.ok(
        Route::RefreshRunner,
        endpoints::refresh_runner("acme/scratch"),
        None,
    )
    .await;
    t.ok(
        Route::DeleteEnvironment,
        endpoints::delete_environment("acme/scratch"),
        None,
    )
    .await;

    // Locks and freezes; a locked environment refuses a job, and writes no entry for it.
    t.environment("acme", json!({"name": "dev", "env_type": "development"}))
        .await;
    let reason = Some(r#"{"reason":"incident 42"}"#);
    t.ok(
        Route::LockEnvironment,
        endpoints::lock_environment("acme/dev"),
        reason,
    )
    .await;
    t.refused(
        "admin",
        Route::SubmitJob,
        endpoints::submit_job("acme/dev"),
        Some(r#"{"operation":"plan","files":{"main.tf":""}}"#),
        &[],
        409,
    )
    .await;
    t.ok(
        Route::UnlockEnvironment,
        endpoints::unlock_environment("acme/dev"),
        None,
    )
    .await;
    t.ok(
        Route::FreezeGroup,
        endpoints::freeze_group("acme/frozen"),
        reason,
    )
    .await;
    t.ok(
        Route::UnfreezeGroup,
        endpoints::unfreeze_group("acme/frozen"),
        None,
    )
    .await;

    // Expiry.
    t.environment(
        "acme",
        json!({"name": "short", "env_type": "development", "ttl": "72h"}),
    )
    .await;
    t.ok(
        Route::ExtendEnvironment,
        endpoints::extend_environment("acme/short"),
        Some(r#"{"by":"24h"}"#),
    )
    .await;
    t.ok(
        Route::SetGroupExpiry,
        endpoints::set_group_expiry("acme/team"),
        Some(r#"{"max_ttl":"7d"}"#),
    )
    .await;

    // Jobs: one submitted and canceled.
    let id = t.submit("acme/dev", "plan").await;
    t.ok(Route::CancelJob, endpoints::cancel_job(&id), None)
        .await;
    // A job waiting behind another's lock, and a running one (whose cancel is a message to
    // its queue, its entry written on its own first): one entry each.
    let holder = t.submit("acme/dev", "plan").await;
    let waiting = t.submit("acme/dev", "plan").await;
    t.ok(Route::CancelJob, endpoints::cancel_job(&waiting), None)
        .await;
    t.api.launch(&holder, "holder-token").await;
    let stopping = t
        .ok(Route::CancelJob, endpoints::cancel_job(&holder), None)
        .await;
    assert_eq!(stopping.status, 202, "{}", stopping.body);

    // Reviews: two applies awaiting approval, one approved and one discarded.
    let reviewed =
        |name: &str| json!({"name": name, "env_type": "production", "approval": "required"});
    t.environment("acme", reviewed("reviewed")).await;
    t.environment("acme", reviewed("reviewed-2")).await;
    let approved = t.submit("acme/reviewed", "apply").await;
    t.run_task(&approved, "plan-token-1").await;
    let discarded = t.submit("acme/reviewed-2", "apply").await;
    t.run_task(&discarded, "plan-token-2").await;
    t.ok_in(
        "acme",
        Route::ApproveJob,
        endpoints::approve_job(&approved),
        Some(r#"{"comment":"looks right"}"#),
        &as_json,
    )
    .await;
    t.refused(
        "admin",
        Route::ApproveJob,
        endpoints::approve_job(&approved),
        None,
        &as_json,
        409,
    )
    .await;
    t.ok_in(
        "acme",
        Route::DiscardJob,
        endpoints::discard_job(&discarded),
        None,
        &as_json,
    )
    .await;

    // Agent pools and their tokens.
    let pool = t
        .ok(
            Route::CreateAgentPool,
            endpoints::create_agent_pool(),
            Some(r#"{"group":"acme","name":"builders"}"#),
        )
        .await;
    let pool = pool.body["id"].as_str().unwrap().to_string();
    let token = t
        .ok(
            Route::CreatePoolToken,
            endpoints::create_pool_token(&pool),
            None,
        )
        .await;
    let token = token.body["token_id"].as_str().unwrap().to_string();
    t.ok(
        Route::RevokePoolToken,
        endpoints::revoke_pool_token(&pool, &token),
        None,
    )
    .await;
    t.ok(
        Route::DeleteAgentPool,
        endpoints::delete_agent_pool(&pool),
        None,
    )
    .await;

    // A state version restored: an `s3` runner's environment with an apply recorded.
    let s3 = "runner_configuration:\n  type: local\nstate_storage_configuration:\n  type: s3\n  bucket: acme-state\n  region: us-east-1\n";
    t.ok(
        Route::CreateRunner,
        endpoints::create_runner("acme", "s3"),
        Some(s3),
    )
    .await;
    let rule = json!({"id": "s3", "runner_id": "acme/s3"}).to_string();
    t.ok(
        Route::CreateRule,
        endpoints::create_rule("acme/app"),
        Some(&rule),
    )
    .await;
    t.environment("acme/app", json!({"name": "b", "env_type": "development"}))
        .await;
    let env = EnvPath::parse("acme/app/b").unwrap();
    let version = history.put(&env, Utc::now(), state_file(1));
    history.put(&env, Utc::now(), state_file(2));
    let applied = t.submit("acme/app/b", "apply").await;
    api.store
        .record_last_apply(
            &env,
            &LastApply {
                job_id: JobId::from(applied.as_str()),
                at: Utc::now(),
            },
        )
        .await
        .unwrap();
    t.ok_in(
        "acme",
        Route::RestoreStateVersion,
        endpoints::restore_state_version("acme/app/b", &version),
        Some(r#"{"reason":"roll back"}"#),
        &as_json,
    )
    .await;

    // The organisation's GitHub connection.
    let connection = json!({
        "app_id": 12345,
        "private_key": include_str!("../fixtures/oidc/rsa-1.pem"),
        "webhook_secret": "a-webhook-secret-long-enough",
    })
    .to_string();
    t.ok_in(
        "acme",
        Route::ConnectGithub,
        endpoints::connect_github("acme"),
        Some(&connection),
        &as_json,
    )
    .await;
    t.ok(
        Route::DeleteGithubConnection,
        endpoints::delete_github_connection("acme"),
        None,
    )
    .await;

    // Its GitLab connection.
    let connection = json!({
        "instance_url": "https://gitlab.example.com",
        "token": "glpat-0123456789abcdefghij",
        "webhook_secret": "a-webhook-secret-long-enough",
    })
    .to_string();
    t.ok_in(
        "acme",
        Route::ConnectGitlab,
        endpoints::connect_gitlab("acme"),
        Some(&connection),
        &as_json,
    )
    .await;
    t.ok(
        Route::DeleteGitlabConnection,
        endpoints::delete_gitlab_connection("acme"),
        None,
    )
    .await;

    // The listing route reads back what the walk saw, in each chain it wrote to.
    t.listed_as_seen("acme").await;
    t.listed_as_seen("-").await;
    t.finish();
}

#[tokio::test]
async fn every_audited_route_writes_one_entry_and_a_refused_request_none() {
    let history = Arc::new(MemoryStateHistory::default());
    let api = audit_api(World::fast(), history.clone()).await;
    walk(&api, &history).await;
}

#[tokio::test]
async fn every_audited_route_writes_one_entry_in_its_transaction_on_dynamodb() {
    let aws = sortie_testkit::require_aws!();
    let history = Arc::new(MemoryStateHistory::default());
    let api = audit_api(World::aws(&aws).await, history.clone()).await;
    walk(&api, &history).await;
}

#[tokio::test]
async fn an_entry_names_the_actor_the_target_the_user_agent_and_the_bodys_digest() {
    let history = Arc::new(MemoryStateHistory::default());
    let api = audit_api(World::fast(), history).await;
    let create = endpoints::create_runner("acme", "local");
    let path = create.path.clone();
    let r = api
        .send(
            Some("admin"),
            create,
            Some(local_runner()),
            &[
                ("user-agent", "sortie-cli/1.2.3"),
                ("content-type", "application/yaml"),
            ],
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let changed = local_runner().replace("local runner", "changed");
    let r = api
        .send(
            Some("admin"),
            endpoints::update_runner("acme", "local"),
            Some(&changed),
            &[("if-match", "\"1\"")],
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);

    let listed = api
        .admin(
            endpoints::list_audit("acme").query([("order", Some("oldest"))]),
            None,
        )
        .await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    let entries: Vec<AuditEntry> = listed.body["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| serde_json::from_value(e["entry"].clone()).unwrap())
        .collect();
    let [created, updated] = entries.as_slice() else {
        panic!("two entries, a create and an update: {}", listed.body);
    };

    assert_eq!(
        (created.org.as_str(), created.action.as_str()),
        ("acme", "create_runner")
    );
    assert_eq!(created.actor.subject, "admin");
    assert_eq!(created.actor.issuer.as_deref(), Some(ISSUER));
    assert_eq!(created.actor.credential, CredentialKind::User);
    assert_eq!(created.target, path);
    assert_eq!(created.user_agent.as_deref(), Some("sortie-cli/1.2.3"));
    assert_eq!(
        created.after.as_deref(),
        Some(body_digest(local_runner().as_bytes()).as_str()),
        "`after` is the SHA-256 of the body sent"
    );
    assert_eq!(created.before, None, "a create replaces nothing");
    assert!(!created.request_id.is_empty());
    // The stored bytes are the entry's own serialisation.
    assert_eq!(
        listed.body["entries"][0]["stored"].as_str(),
        Some(sortie_core::audit::entry_json(created).as_str())
    );

    assert_eq!(updated.action, "update_runner");
    assert_eq!(
        updated.user_agent, None,
        "no User-Agent sent, none recorded"
    );
    assert_eq!(
        updated.before.as_deref(),
        Some("\"1\""),
        "`before` is the If-Match"
    );
    assert_eq!(
        updated.after.as_deref(),
        Some(body_digest(changed.as_bytes()).as_str())
    );
    assert!(updated.id > created.id, "ids sort by time");
}

/// A change to configuration publishes `sortie.configuration.changed` for the group it was
/// authorised on, naming the action, the target, who and the entry; a refused change and
/// a decision (a lock, a submit) publish none.
#[tokio::test]
async fn a_configuration_change_is_published_and_a_refusal_or_a_lock_is_not() {
    let api = Api::new().await;
    let changed = || {
        api.world
            .fakes()
            .bus
            .published()
            .into_iter()
            .filter(|e| e.detail_type == sortie_core::notify::CONFIGURATION_CHANGED)
            .collect::<Vec<_>>()
    };
    let runner = local_runner();
    let r = api
        .admin(
            endpoints::create_runner("acme/payments", "local"),
            Some(runner),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let events = changed();
    assert_eq!(events.len(), 1, "{events:?}");
    let detail = &events[0].detail;
    assert_eq!(detail["group"], "acme/payments");
    assert_eq!(detail["org"], "acme");
    assert_eq!(detail["action"], "create_runner");
    assert_eq!(detail["target"], "/v1/groups/acme/payments/-/runners/local");
    assert_eq!(detail["by"], "admin");
    let entry = detail["entry"].as_str().unwrap();
    assert_eq!(events[0].resource, format!("sortie:audit/acme/{entry}"));

    // Refused (it exists): nothing.
    let r = api
        .admin(
            endpoints::create_runner("acme/payments", "local"),
            Some(runner),
        )
        .await;
    assert_eq!(r.status, 409);
    assert_eq!(changed().len(), 1);

    // A lock has its own event.
    crate::common::seed_org(&api, "acme").await;
    let before = changed().len();
    api.create_env("acme", "web", "development").await;
    assert_eq!(
        changed().len(),
        before + 1,
        "an environment's creation is configuration"
    );
    let r = api
        .admin(
            endpoints::lock_environment("acme/web"),
            Some(r#"{"reason":"freeze"}"#),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(changed().len(), before + 1, "a lock is not");
}
