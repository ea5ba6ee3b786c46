//! The HTTP API against DynamoDB and SQS on moto, through the real SDK.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use async_trait::async_trait;
use axum::http::Method;
use common::{local_runner, seed_org, Api};
use serde_json::json;
use sortie_api::Route;
use sortie_client::{endpoints, Call};
use sortie_core::Role;
use sortie_store::{JobQueue, StoreError};

#[tokio::test]
async fn runner_crud_with_etags_inherited_and_shared_marks() {
    let api = Api::new().await;
    let r = api
        .admin(
            endpoints::create_runner("-", "shared"),
            Some(local_runner()),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let r = api
        .admin(
            endpoints::create_runner("acme", "org-runner"),
            Some(local_runner()),
        )
        .await;
    assert_eq!((r.status.as_u16(), r.etag.as_deref()), (201, Some("\"1\"")));
    let json_body = json!({"runner_configuration": {"type": "local"}, "state_storage_configuration": {"type": "local", "directory": "/tmp/x"}}).to_string();
    let r = api
        .send(
            Some("admin"),
            endpoints::create_runner("acme/payments", "team"),
            Some(&json_body),
            &[("content-type", "application/json")],
        )
        .await;
    assert_eq!(r.status, 201);
    assert_eq!(
        api.admin(
            endpoints::create_runner("acme", "org-runner"),
            Some(local_runner())
        )
        .await
        .status,
        409
    );

    let list = api
        .admin(endpoints::list_runners("acme/payments"), None)
        .await;
    let rows: Vec<(String, bool, bool)> = list.body["runners"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["id"].as_str().unwrap().to_string(),
                r["inherited"].as_bool().unwrap(),
                r["shared"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        vec![
            ("acme/payments/team".into(), false, false),
            ("acme/org-runner".into(), true, false),
            ("shared".into(), true, true)
        ]
    );

    let got = api
        .admin(endpoints::get_runner("acme", "org-runner"), None)
        .await;
    assert_eq!(got.body["runner_configuration"]["type"], "local");
    let changed = local_runner().replace("local runner", "changed");
    let stale = api
        .send(
            Some("admin"),
            endpoints::update_runner("acme", "org-runner"),
            Some(&changed),
            &[("if-match", "\"9\"")],
        )
        .await;
    assert_eq!(
        (stale.status.as_u16(), stale.body["error"]["code"].as_str()),
        (412, Some("version_mismatch"))
    );
    let upd = api
        .send(
            Some("admin"),
            endpoints::update_runner("acme", "org-runner"),
            Some(&changed),
            &[("if-match", "\"1\"")],
        )
        .await;
    assert_eq!(
        (upd.status.as_u16(), upd.etag.as_deref()),
        (200, Some("\"2\""))
    );
    assert_eq!(
        api.admin(endpoints::get_runner("acme", "org-runner"), None)
            .await
            .body["description"],
        "changed"
    );
    assert_eq!(
        api.admin(endpoints::delete_runner("acme", "org-runner"), None)
            .await
            .status,
        204
    );
    assert_eq!(
        api.admin(endpoints::get_runner("acme", "org-runner"), None)
            .await
            .status,
        404
    );
}

#[tokio::test]
async fn rules_environments_memberships_and_jobs_full_crud() {
    let api = Api::new().await;
    seed_org(&api, "acme").await;
    // Rules.
    let rules = api.admin(endpoints::list_rules("acme"), None).await;
    assert_eq!(rules.body["rules"].as_array().unwrap().len(), 1);
    assert_eq!(
        api.admin(endpoints::get_rule("acme", "default"), None)
            .await
            .body["runner_id"],
        "acme/local"
    );
    // Environments.
    let env = api
        .admin(
            endpoints::create_environment("acme/payments").query([("explain", Some("full"))]),
            Some(r#"{"name":"prod","env_type":"production","labels":{"tier":"gold"}}"#),
        )
        .await;
    assert_eq!(env.status, 201, "{}", env.body);
    assert_eq!(env.body["runner"]["runner_id"], "acme/local");
    assert_eq!(env.body["resolution"]["rule"]["id"], "default");
    assert_eq!(env.body["resolution"]["explanation"][0]["outcome"], "won");
    assert_eq!(env.body["resolution"]["counts"]["won"], 1);
    let listed = api
        .admin(endpoints::list_environments("acme/payments"), None)
        .await;
    assert_eq!(listed.body["environments"][0]["path"], "acme/payments/prod");
    let patched = api
        .send(
            Some("admin"),
            endpoints::update_environment("acme/payments/prod"),
            Some(r#"{"labels":{"tier":"silver"}}"#),
            &[("if-match", "\"1\"")],
        )
        .await;
    assert_eq!(patched.status, 200, "{}", patched.body);
    assert_eq!(patched.body["labels"]["tier"], "silver");
    assert_eq!(patched.body["env_type"], "production");
    // Jobs.
    let job = api.admin(endpoints::submit_job("acme/payments/prod"), Some(r#"{"operation":"plan","source":{"type":"git","url":"https://git.example.com/acme/infra.git","ref":"main"}}"#)).await;
    assert_eq!(job.status, 201, "{}", job.body);
    let id = job.body["id"].as_str().unwrap().to_string();
    assert_eq!(job.body["state"], "queued");
    assert!(job.body.get("token_hash").is_none());
    assert_eq!(
        api.drain_queue().await,
        vec![id.clone()],
        "the lock holder is sent to the queue"
    );
    let got = api.admin(endpoints::get_job(&id), None).await;
    assert_eq!(got.body["transitions"][0]["to"], "queued");
    assert!(got.body["transitions"][0]["at"].is_string());
    let page = api
        .admin(
            endpoints::list_jobs("acme/payments/prod").query([("limit", Some("10"))]),
            None,
        )
        .await;
    assert_eq!(page.body["jobs"][0]["id"], id.as_str());
    assert_eq!(
        api.admin(endpoints::delete_environment("acme/payments/prod"), None)
            .await
            .status,
        409,
        "refused while a job is active"
    );
    let canceled = api.admin(endpoints::cancel_job(&id), None).await;
    assert_eq!(
        (canceled.status.as_u16(), canceled.body["state"].as_str()),
        (200, Some("canceled"))
    );
    assert_eq!(
        canceled.body["transitions"][1]["reason"],
        "sortie: canceled by admin"
    );
    assert_eq!(
        api.admin(endpoints::cancel_job(&id), None).await.status,
        409
    );
    // Memberships.
    let m = api.admin(endpoints::grant_membership("acme/payments"), Some(r#"{"role":"deployer","grantee":{"kind":"claim_pattern","claim":"sub","pattern":"repo:acme/infra:ref:refs/heads/*"}}"#)).await;
    assert_eq!(m.status, 201, "{}", m.body);
    let mid = m.body["id"].as_str().unwrap().to_string();
    let ci = api
        .send(
            Some("repo:acme/infra:ref:refs/heads/main"),
            endpoints::submit_job("acme/payments/prod"),
            Some(r#"{"operation":"plan","files":{"main.tf":""}}"#),
            &[],
        )
        .await;
    assert_eq!(
        ci.status, 201,
        "a CI token matching the claim pattern may deploy: {}",
        ci.body
    );
    assert_eq!(
        api.admin(endpoints::list_memberships("acme/payments"), None)
            .await
            .body["memberships"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        api.admin(endpoints::revoke_membership("acme/payments", &mid), None)
            .await
            .status,
        204
    );
    let ci = api
        .send(
            Some("repo:acme/infra:ref:refs/heads/main"),
            endpoints::get_environment("acme/payments/prod"),
            None,
            &[],
        )
        .await;
    assert_eq!(ci.status, 404, "revoked");
    // Rule delete, environment delete once idle.
    let ci_job = api
        .admin(endpoints::list_jobs("acme/payments/prod"), None)
        .await
        .body["jobs"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    api.admin(endpoints::cancel_job(&ci_job), None).await;
    assert_eq!(
        api.admin(endpoints::delete_environment("acme/payments/prod"), None)
            .await
            .status,
        204
    );
    assert_eq!(
        api.admin(endpoints::delete_rule("acme", "default"), None)
            .await
            .status,
        204
    );
    assert_eq!(
        api.admin(endpoints::get_rule("acme", "default"), None)
            .await
            .status,
        404
    );
}

#[tokio::test]
async fn tenant_isolation_org_a_sees_and_changes_nothing_of_org_b_on_any_route() {
    let api = Api::new().await;
    seed_org(&api, "acme").await;
    seed_org(&api, "globex").await;
    assert_eq!(
        api.admin(
            endpoints::create_environment("globex"),
            Some(r#"{"name":"prod","env_type":"production"}"#)
        )
        .await
        .status,
        201
    );
    let job = api
        .admin(
            endpoints::submit_job("globex/prod"),
            Some(r#"{"operation":"plan","files":{"main.tf":""}}"#),
        )
        .await;
    let job_id = job.body["id"].as_str().unwrap().to_string();
    let membership = api
        .admin(endpoints::list_memberships("globex"), None)
        .await
        .body["memberships"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let body_for = |route: Route| -> Option<String> {
        match route {
            Route::CreateRunner | Route::UpdateRunner => Some(local_runner().to_string()),
            Route::CreateRule => {
                Some(json!({"id": "steal", "runner_id": "globex/local"}).to_string())
            }
            Route::CreateEnvironment => Some(r#"{"name":"x","env_type":"dev"}"#.into()),
            Route::UpdateEnvironment => Some(r#"{"env_type":"dev"}"#.into()),
            Route::SubmitJob => Some(r#"{"operation":"destroy","files":{"main.tf":""}}"#.into()),
            Route::GrantMembership => Some(
                r#"{"role":"owner","grantee":{"kind":"subject","subject":"acme-owner"}}"#.into(),
            ),
            Route::CreateAgentPool => Some(r#"{"group":"globex","name":"steal"}"#.into()),
            _ => None,
        }
    };
    let mut checked = 0;
    for route in Route::ALL {
        // The open routes, and whoami, which answers every caller about itself only. The
        // GitHub and GitLab webhooks are open too: an organisation's deliveries are told
        // apart by its own webhook secret (a delivery for another organisation is never
        // verified).
        if matches!(
            route,
            Route::Health
                | Route::OpenApi
                | Route::Whoami
                | Route::GithubWebhook
                | Route::GitlabWebhook
        ) {
            continue;
        }
        let (method, template) = route.method_and_path();
        let id = match route {
            Route::GetJob
            | Route::CancelJob
            | Route::GetJobLogs
            | Route::GetJobSpec
            | Route::PutJobSummary => job_id.clone(),
            Route::RevokeMembership => membership.clone(),
            Route::GetRule | Route::DeleteRule => "default".into(),
            _ => "local".into(),
        };
        let path = template
            .replace("{group}", "globex")
            .replace("{org}", "globex")
            .replace("{environment}", "globex/prod")
            .replace("{name}", "local")
            .replace("{id}", &id);
        let r = api
            .call(
                Some("acme-owner"),
                method.as_str(),
                &path,
                body_for(*route).as_deref(),
                &[],
            )
            .await;
        if route.skips_user_token() {
            // A user's token is never a job token nor an agent credential: refused, with
            // nothing about the job or the pool.
            assert_eq!(
                (r.status.as_u16(), r.body["error"]["code"].as_str()),
                (401, Some("invalid_token")),
                "{method} {path}: {}",
                r.body
            );
        } else {
            assert_eq!(
                r.status, 404,
                "{method} {path} must be 404 for another tenant, got {}: {}",
                r.status, r.body
            );
            assert_eq!(r.body["error"]["code"], "not_found");
        }
        assert!(
            !r.body.to_string().contains("acme"),
            "no leak of the caller's own names either"
        );
        checked += 1;
    }
    assert_eq!(checked, Route::ALL.len() - 5);
    // Nothing of globex changed.
    assert_eq!(
        api.admin(endpoints::get_job(&job_id), None).await.body["state"],
        "queued"
    );
    assert_eq!(
        api.admin(endpoints::get_runner("globex", "local"), None)
            .await
            .status,
        200
    );
    assert_eq!(
        api.admin(endpoints::list_memberships("globex"), None)
            .await
            .body["memberships"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        api.admin(endpoints::list_rules("globex"), None).await.body["rules"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    // And acme-owner still runs its own org.
    assert_eq!(
        api.send(
            Some("acme-owner"),
            endpoints::list_runners("acme"),
            None,
            &[]
        )
        .await
        .status,
        200
    );
    // A viewer sees but may not act: 403, not 404.
    api.grant("globex", Role::Viewer, "auditor").await;
    assert_eq!(
        api.send(
            Some("auditor"),
            endpoints::get_environment("globex/prod"),
            None,
            &[]
        )
        .await
        .status,
        200
    );
    assert_eq!(
        api.send(
            Some("auditor"),
            endpoints::submit_job("globex/prod"),
            Some(r#"{"operation":"plan","files":{"main.tf":""}}"#),
            &[]
        )
        .await
        .status,
        403
    );
}

#[tokio::test]
async fn precedence_through_the_api_group_beats_ancestor_beats_shared() {
    let api = Api::new().await;
    api.admin(
        endpoints::create_runner("-", "shared"),
        Some(local_runner()),
    )
    .await;
    api.admin(
        endpoints::create_rule("-"),
        Some(r#"{"id":"shared","runner_id":"shared"}"#),
    )
    .await;
    let env = api
        .admin(
            endpoints::create_environment("acme/payments"),
            Some(r#"{"name":"a","env_type":"dev"}"#),
        )
        .await;
    assert_eq!(env.body["runner"]["runner_id"], "shared");
    api.admin(
        endpoints::create_runner("acme", "org"),
        Some(local_runner()),
    )
    .await;
    api.admin(
        endpoints::create_rule("acme"),
        Some(r#"{"id":"org","runner_id":"acme/org"}"#),
    )
    .await;
    let env = api
        .admin(
            endpoints::create_environment("acme/payments"),
            Some(r#"{"name":"b","env_type":"dev"}"#),
        )
        .await;
    assert_eq!(env.body["runner"]["runner_id"], "acme/org");
    api.admin(
        endpoints::create_runner("acme/payments", "team"),
        Some(local_runner()),
    )
    .await;
    api.admin(
        endpoints::create_rule("acme/payments"),
        Some(r#"{"id":"team","runner_id":"acme/payments/team"}"#),
    )
    .await;
    let env = api
        .admin(
            endpoints::create_environment("acme/payments").query([("explain", Some("full"))]),
            Some(r#"{"name":"c","env_type":"dev"}"#),
        )
        .await;
    assert_eq!(env.body["runner"]["runner_id"], "acme/payments/team");
    let explanation = env.body["resolution"]["explanation"].as_array().unwrap();
    let outcome = |id: &str| {
        explanation.iter().find(|c| c["rule_id"] == id).unwrap()["outcome"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(
        (outcome("team"), outcome("org"), outcome("shared")),
        ("won".into(), "lost".into(), "lost".into())
    );
    // No rule for another org: the error names the environment and the scopes searched.
    api.admin(endpoints::delete_rule("-", "shared"), None).await;
    let none = api
        .admin(
            endpoints::create_environment("globex"),
            Some(r#"{"name":"prod","env_type":"dev"}"#),
        )
        .await;
    assert_eq!(
        (none.status.as_u16(), none.body["error"]["code"].as_str()),
        (409, Some("no_runner_matched"))
    );
    let msg = none.body["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("globex/prod") && msg.contains("globex, (root)"),
        "{msg}"
    );
}

#[tokio::test]
async fn a_sticky_link_survives_a_rule_change_until_a_refresh() {
    let api = Api::new().await;
    seed_org(&api, "acme").await;
    api.create_env("acme/payments", "prod", "production").await;
    api.admin(
        endpoints::create_runner("acme/payments", "new"),
        Some(local_runner()),
    )
    .await;
    api.admin(
        endpoints::create_rule("acme/payments"),
        Some(r#"{"id":"team","runner_id":"acme/payments/new"}"#),
    )
    .await;
    let env = api
        .admin(endpoints::get_environment("acme/payments/prod"), None)
        .await;
    assert_eq!(
        env.body["runner"]["runner_id"], "acme/local",
        "a rule change does not relink"
    );
    let dry = api
        .admin(
            endpoints::refresh_runner("acme/payments/prod").query([("dry_run", Some("true"))]),
            None,
        )
        .await;
    assert_eq!(dry.status, 200, "{}", dry.body);
    assert_eq!(
        (
            dry.body["runner_id"].as_str(),
            dry.body["changed"].as_bool()
        ),
        (Some("acme/payments/new"), Some(true))
    );
    assert_eq!(dry.body["resolution"]["rule"]["id"], "team");
    let after_dry = api
        .admin(endpoints::get_environment("acme/payments/prod"), None)
        .await;
    assert_eq!(
        (
            after_dry.body["runner"]["runner_id"].as_str(),
            after_dry.etag.as_deref()
        ),
        (Some("acme/local"), env.etag.as_deref()),
        "a dry run changes nothing"
    );
    let real = api
        .send(
            Some("acme-owner"),
            endpoints::refresh_runner("acme/payments/prod"),
            None,
            &[],
        )
        .await;
    assert_eq!(real.status, 200, "{}", real.body);
    let env = api
        .admin(endpoints::get_environment("acme/payments/prod"), None)
        .await;
    assert_eq!(env.body["runner"]["runner_id"], "acme/payments/new");
    assert_eq!(
        env.body["runner"]["linked_by"], "acme-owner",
        "who refreshed is recorded"
    );
    assert_eq!(env.body["runner"]["rule_id"], "team");
    // The old runner is free to delete now; the new one is not, and the answer names the environment.
    assert_eq!(
        api.admin(endpoints::delete_runner("acme", "local"), None)
            .await
            .status,
        204
    );
    let refused = api
        .admin(endpoints::delete_runner("acme/payments", "new"), None)
        .await;
    assert_eq!(
        (
            refused.status.as_u16(),
            refused.body["error"]["fields"][0]["path"].as_str()
        ),
        (409, Some("acme/payments/prod"))
    );
}

#[tokio::test]
async fn idempotent_submit_returns_the_same_job() {
    let api = Api::new().await;
    seed_org(&api, "acme").await;
    api.create_env("acme", "prod", "production").await;
    let body = r#"{"operation":"apply","files":{"main.tf":""}}"#;
    let first = api
        .send(
            Some("admin"),
            endpoints::submit_job("acme/prod"),
            Some(body),
            &[("idempotency-key", "ci-run-77")],
        )
        .await;
    let again = api
        .send(
            Some("admin"),
            endpoints::submit_job("acme/prod"),
            Some(body),
            &[("idempotency-key", "ci-run-77")],
        )
        .await;
    assert_eq!((first.status.as_u16(), again.status.as_u16()), (201, 200));
    assert_eq!(first.body["id"], again.body["id"]);
    assert_eq!(again.headers.get("idempotent-replayed").unwrap(), "true");
    assert_eq!(api.drain_queue().await.len(), 1, "sent once");
    let other = api
        .send(
            Some("admin"),
            endpoints::submit_job("acme/prod"),
            Some(r#"{"operation":"destroy","files":{"main.tf":""}}"#),
            &[("idempotency-key", "ci-run-77")],
        )
        .await;
    assert_eq!(
        (other.status.as_u16(), other.body["error"]["code"].as_str()),
        (409, Some("idempotency_key_reused"))
    );
}

#[tokio::test]
async fn two_concurrent_submits_to_an_idle_environment_one_takes_the_lock() {
    let api = Arc::new(Api::new().await);
    seed_org(&api, "acme").await;
    api.create_env("acme", "prod", "production").await;
    let body = r#"{"operation":"apply","files":{"main.tf":""}}"#;
    let (a, b) = tokio::join!(
        api.admin(endpoints::submit_job("acme/prod"), Some(body)),
        api.admin(endpoints::submit_job("acme/prod"), Some(body))
    );
    assert_eq!((a.status.as_u16(), b.status.as_u16()), (201, 201));
    let env = api
        .admin(endpoints::get_environment("acme/prod"), None)
        .await;
    let holder = env.body["active_job"].as_str().unwrap().to_string();
    assert!(holder == a.body["id"] || holder == b.body["id"]);
    assert_eq!(env.body["queued_count"], 1, "the other one waits");
    assert_eq!(api.drain_queue().await, vec![holder], "exactly one is sent");
}

struct FailingQueue;

#[async_trait]
impl JobQueue for FailingQueue {
    async fn send_message(&self, _: &sortie_store::JobMessage, _: i32) -> Result<(), StoreError> {
        Err(StoreError::Aws {
            service: "sqs",
            message: "ServiceUnavailable: injected".into(),
            retryable: true,
        })
    }
}

#[tokio::test]
async fn a_failed_send_leaves_a_durable_pending_marker_for_the_sweeper() {
    let api = Api::with_queue(Some(Arc::new(FailingQueue))).await;
    seed_org(&api, "acme").await;
    api.create_env("acme", "prod", "production").await;
    let job = api
        .admin(
            endpoints::submit_job("acme/prod"),
            Some(r#"{"operation":"plan","files":{"main.tf":""}}"#),
        )
        .await;
    assert_eq!(
        job.status, 201,
        "the submit itself succeeds: the job is durable"
    );
    let pending = api
        .store
        .pending_sends(chrono::Utc::now() + chrono::Duration::seconds(1), 10)
        .await
        .unwrap();
    assert_eq!(
        pending.iter().map(|j| j.id.as_str()).collect::<Vec<_>>(),
        vec![job.body["id"].as_str().unwrap()]
    );
}

#[tokio::test]
async fn authentication_is_required_and_the_dev_identity_is_off_by_default() {
    let api = Api::new().await;
    let r = api
        .send(None, endpoints::list_runners("acme"), None, &[])
        .await;
    assert_eq!(
        (r.status.as_u16(), r.body["error"]["code"].as_str()),
        (401, Some("unauthenticated"))
    );
    assert_eq!(
        api.send(None, endpoints::health(), None, &[]).await.status,
        200
    );
    // The same world's API state, with the development identity on.
    let mut state = api.world.api_state();
    state.dev_identity = true;
    state.admin_subjects = vec![];
    let dev = sortie_api::router(state);
    let req = axum::http::Request::get(endpoints::list_runners("acme").path)
        .body(axum::body::Body::empty())
        .unwrap();
    assert_eq!(
        tower::ServiceExt::oneshot(dev, req).await.unwrap().status(),
        200,
        "only when explicitly enabled"
    );
}

#[tokio::test]
async fn the_openapi_document_lists_exactly_the_routes() {
    let api = Api::new().await;
    let doc = api
        .send(None, endpoints::openapi_json(), None, &[])
        .await
        .body;
    let mut documented = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            if ["get", "post", "put", "patch", "delete"].contains(&method.as_str()) {
                documented.insert((method.to_uppercase(), path.clone()));
            }
        }
    }
    let routed: BTreeSet<(String, String)> = Route::ALL
        .iter()
        .map(|r| {
            (
                r.method_and_path().0.to_string(),
                r.method_and_path().1.to_string(),
            )
        })
        .collect();
    assert_eq!(documented, routed);
}

/// (call, body, headers, expected status, expected code)
type Bad = (
    Call,
    Option<String>,
    Vec<(&'static str, &'static str)>,
    u16,
    &'static str,
);

#[tokio::test]
async fn a_table_of_bad_requests_gets_clear_errors_never_500() {
    let api = Api::new().await;
    seed_org(&api, "acme").await;
    api.create_env("acme", "prod", "production").await;
    let s = |x: &str| Some(x.to_string());
    let big = "x".repeat(300 * 1024);
    let cases: Vec<Bad> = vec![
        (Call::new(Method::GET, "/v1/nope".into()), None, vec![], 404, "not_found"),
        (Call::new(Method::GET, "/v1/groups/acme/runners".into()), None, vec![], 404, "not_found"),
        (Call::new(Method::PATCH, "/v1/groups/acme/-/runners".into()), None, vec![], 405, "method_not_allowed"),
        (endpoints::list_runners("Acme"), None, vec![], 400, "invalid_request"),
        (endpoints::list_runners("a/b/c/d/e/f/g/h/i"), None, vec![], 400, "invalid_request"),
        (endpoints::get_environment("prod"), None, vec![], 400, "invalid_request"),
        (endpoints::create_runner("acme", "Bad_Name"), s(local_runner()), vec![], 400, "invalid_request"),
        (endpoints::create_runner("acme", "r2"), s("runner_configuration: [oops"), vec![], 400, "invalid_request"),
        (endpoints::create_runner("acme", "r2"), s("{\"runner_configuration\": "), vec![], 400, "invalid_request"),
        (endpoints::create_runner("acme", "r2"), s(""), vec![], 400, "invalid_request"),
        (endpoints::create_runner("acme", "r2"), s("runner_configuration: {type: gke}\nstate_storage_configuration: {type: local, directory: /x}"), vec![], 400, "invalid_request"),
        (endpoints::create_runner("acme", "r2"), s("runner_configuration: {type: local}\nstate_storage_configuration: {type: kubernetes, namespace: x}"), vec![], 400, "invalid_request"),
        (endpoints::create_runner("acme", "r2"), s("runner_configuration: {type: local, colour: red}\nstate_storage_configuration: {type: local, directory: /x}"), vec![], 400, "invalid_request"),
        (endpoints::create_runner("acme", "r2"), s("runner_configuration: {type: local, timeout_seconds: soon}\nstate_storage_configuration: {type: local, directory: /x}"), vec![], 400, "invalid_request"),
        (endpoints::create_runner("acme", "local"), s(local_runner()), vec![], 409, "already_exists"),
        (endpoints::create_runner("acme", "big"), Some(big), vec![], 413, "payload_too_large"),
        (endpoints::update_runner("acme", "local"), s(local_runner()), vec![("if-match", "\"42\"")], 412, "version_mismatch"),
        (endpoints::update_runner("acme", "local"), s(local_runner()), vec![("if-match", "banana")], 400, "invalid_request"),
        (endpoints::update_runner("acme", "ghost"), s(local_runner()), vec![], 404, "not_found"),
        (endpoints::get_runner("acme", "ghost"), None, vec![], 404, "not_found"),
        (endpoints::create_rule("acme"), s(r#"{"id":"x","runner_id":"globex/r"}"#), vec![], 400, "invalid_request"),
        (endpoints::create_rule("acme"), s(r#"{"id":"x","runner_id":"acme/ghost"}"#), vec![], 400, "invalid_request"),
        (endpoints::create_rule("acme"), s(r#"{"id":"x","runner_id":"acme/local","priority":"high"}"#), vec![], 400, "invalid_request"),
        (endpoints::create_rule("acme"), s(r#"{"id":"x","scope":"globex","runner_id":"acme/local"}"#), vec![], 400, "invalid_request"),
        (endpoints::create_rule("acme"), s(r#"{"id":"default","runner_id":"acme/local"}"#), vec![], 409, "already_exists"),
        (endpoints::create_environment("acme"), s(r#"{"env_type":"production"}"#), vec![], 400, "invalid_request"),
        (endpoints::create_environment("acme"), s(r#"{"name":"UPPER","env_type":"production"}"#), vec![], 400, "invalid_request"),
        (endpoints::create_environment("acme"), s(r#"{"name":"prod","env_type":"production"}"#), vec![], 409, "already_exists"),
        (endpoints::create_environment("acme"), s(r#"{"name":"x","env_type":"dev","labels":["a"]}"#), vec![], 400, "invalid_request"),
        (endpoints::update_environment("acme/prod"), s(r#"{"runner":"acme/other"}"#), vec![], 400, "invalid_request"),
        (endpoints::get_environment("acme/ghost"), None, vec![], 404, "not_found"),
        (endpoints::refresh_runner("acme/prod").query([("dry_run", Some("maybe"))]), None, vec![], 400, "invalid_request"),
        (endpoints::submit_job("acme/prod"), s(r#"{"operation":"yolo","files":{"main.tf":""}}"#), vec![], 400, "invalid_request"),
        (endpoints::submit_job("acme/prod"), s(r#"{"operation":"plan"}"#), vec![], 400, "invalid_request"),
        (endpoints::submit_job("acme/prod"), s(r#"{"operation":"plan","files":{"../x":""}}"#), vec![], 400, "invalid_request"),
        (endpoints::submit_job("acme/prod"), s(r#"{"operation":"plan","files":{"a.tf":""},"secret_refs":{"TOKEN":"hunter2"}}"#), vec![], 400, "invalid_request"),
        (endpoints::submit_job("acme/prod"), s(r#"{"operation":"plan","files":{"a.tf":""}}"#), vec![("idempotency-key", "has space")], 400, "invalid_request"),
        (endpoints::submit_job("acme/ghost"), s(r#"{"operation":"plan","files":{"a.tf":""}}"#), vec![], 404, "not_found"),
        (endpoints::list_jobs("acme/prod").query([("limit", Some("0"))]), None, vec![], 400, "invalid_request"),
        (Call::new(Method::GET, "/v1/environments/acme/prod/-/jobs?cursor=%zz".into()), None, vec![], 400, "invalid_request"),
        (endpoints::list_jobs("acme/prod").query([("cursor", Some("deadbeef"))]), None, vec![], 400, "invalid_request"),
        (endpoints::get_job("ghost"), None, vec![], 404, "not_found"),
        (endpoints::cancel_job("ghost"), None, vec![], 404, "not_found"),
        (endpoints::grant_membership("acme"), s(r#"{"role":"emperor","grantee":{"kind":"subject","subject":"x"}}"#), vec![], 400, "invalid_request"),
        (endpoints::grant_membership("acme"), s(r#"{"role":"viewer","grantee":{"kind":"subject","subject":""}}"#), vec![], 400, "invalid_request"),
        (endpoints::revoke_membership("acme", "ghost"), None, vec![], 404, "not_found"),
        (endpoints::create_runner("acme", "r3"), s("\u{0}\u{1}binary"), vec![], 400, "invalid_request"),
    ];
    assert!(cases.len() >= 30);
    for (call, body, headers, status, code) in cases {
        let (method, path) = (call.method.clone(), call.path.clone());
        let r = api
            .send(Some("admin"), call, body.as_deref(), &headers)
            .await;
        assert_eq!(r.status.as_u16(), status, "{method} {path}: {}", r.body);
        assert_eq!(r.body["error"]["code"], code, "{method} {path}: {}", r.body);
        assert!(!r.body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .is_empty());
        if status == 400 && !path.contains("Bad_Name") {
            assert!(
                !r.body["error"]["fields"].as_array().unwrap().is_empty(),
                "400 names the field: {method} {path}: {}",
                r.body
            );
        }
    }
}

#[tokio::test]
async fn a_job_token_opens_only_its_own_jobs_spec_and_only_while_it_runs() {
    let api = Api::new().await;
    seed_org(&api, "acme").await;
    api.create_env("acme", "prod", "production").await;
    api.create_env("acme", "dev", "development").await;
    let a = api
        .admin(
            endpoints::submit_job("acme/prod"),
            Some(r#"{"operation":"apply","files":{"main.tf":""},"variables":{"n":1}}"#),
        )
        .await
        .body["id"]
        .as_str()
        .unwrap()
        .to_string();
    let b = api
        .admin(
            endpoints::submit_job("acme/dev"),
            Some(r#"{"operation":"plan","files":{"main.tf":""}}"#),
        )
        .await
        .body["id"]
        .as_str()
        .unwrap()
        .to_string();
    api.launch(&a, "token-a").await;
    api.launch(&b, "token-b").await;
    let spec = api
        .send(
            None,
            endpoints::get_job_spec(&a),
            None,
            &[("authorization", "Bearer token-a")],
        )
        .await;
    assert_eq!(spec.status, 200, "{}", spec.body);
    assert_eq!(spec.body["job_id"], a.as_str());
    assert_eq!(spec.body["operation"], "apply");
    assert_eq!(spec.body["variables"]["n"], 1);
    assert!(
        spec.body.get("logs").is_none() && spec.body.get("artifacts").is_none(),
        "the spec names no bucket: uploads go through presigned URLs"
    );
    assert_eq!(spec.body["state_storage"]["type"], "local");
    // Job A's token on job B: refused, on every runner route and on the log.
    for call in [
        endpoints::get_job_spec(&b),
        endpoints::put_job_summary(&b),
        endpoints::get_job_logs(&b),
        endpoints::create_upload(&b),
        endpoints::put_upload_problems(&b),
    ] {
        let (method, path) = (call.method.clone(), call.path.clone());
        let r = api
            .send(
                None,
                call,
                Some(r#"{"add":1,"change":0,"destroy":0}"#),
                &[("authorization", "Bearer token-a")],
            )
            .await;
        assert_eq!(r.status, 401, "{method} {path}: {}", r.body);
    }
    for bad in ["", "Bearer ", "Bearer wrong", "Basic dG9rZW4tYQ=="] {
        let r = api
            .send(
                None,
                endpoints::get_job_spec(&a),
                None,
                &[("authorization", bad)],
            )
            .await;
        assert_eq!(
            (r.status.as_u16(), r.body["error"]["code"].as_str()),
            (401, Some("invalid_token")),
            "{bad:?}"
        );
    }
    let r = api
        .send(
            None,
            endpoints::get_job_spec("nosuchjob"),
            None,
            &[("authorization", "Bearer token-a")],
        )
        .await;
    assert_eq!(r.status, 401, "no hint whether a job exists");
    // The summary is recorded on the job.
    let r = api
        .send(
            None,
            endpoints::put_job_summary(&a),
            Some(r#"{"add":2,"change":1,"destroy":0}"#),
            &[("authorization", "Bearer token-a")],
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        api.admin(endpoints::get_job(&a), None).await.body["summary"]["add"],
        2
    );
    // Once the job ends, its token is dead.
    api.store
        .transition_job(
            &sortie_core::JobId::from(a.as_str()),
            sortie_core::JobState::Running,
            sortie_core::JobState::Succeeded,
            chrono::Utc::now(),
            "exit 0",
            Default::default(),
        )
        .await
        .unwrap();
    let r = api
        .send(
            None,
            endpoints::get_job_spec(&a),
            None,
            &[("authorization", "Bearer token-a")],
        )
        .await;
    assert_eq!(r.status, 401, "expired with the job");
}

#[tokio::test]
async fn logs_are_followed_live_by_offset_from_s3_chunks() {
    let aws = sortie_testkit::require_aws!();
    let api = Api::aws(&aws).await;
    seed_org(&api, "acme").await;
    api.create_env("acme", "prod", "production").await;
    let id = api
        .admin(
            endpoints::submit_job("acme/prod"),
            Some(r#"{"operation":"apply","files":{"main.tf":""}}"#),
        )
        .await
        .body["id"]
        .as_str()
        .unwrap()
        .to_string();
    api.launch(&id, "t").await;
    let s3 = sortie_testkit::s3_client(&aws.sdk_config().await);
    let bucket = api.bucket.clone();
    let put = |offset: u64, text: &'static str| {
        let (s3, bucket, key) = (
            s3.clone(),
            bucket.clone(),
            sortie_core::protocol::pilot::log_chunk_key(&format!("logs/{id}/"), offset),
        );
        async move {
            s3.put_object()
                .bucket(bucket)
                .key(key)
                .body(text.as_bytes().to_vec().into())
                .send()
                .await
                .unwrap()
        }
    };
    let r = api.admin(endpoints::get_job_logs(&id), None).await;
    assert_eq!(
        (
            r.body["data"].as_str(),
            r.body["next_offset"].as_u64(),
            r.body["more"].as_bool()
        ),
        (Some(""), Some(0), Some(true))
    );
    put(0, "Initializing the backend...\n").await;
    put(28, "Plan: 0 to add").await;
    let r = api
        .admin(
            endpoints::get_job_logs(&id).query([("offset", Some("0"))]),
            None,
        )
        .await;
    assert_eq!(
        r.body["data"],
        "Initializing the backend...\nPlan: 0 to add"
    );
    let next = r.body["next_offset"].as_u64().unwrap();
    assert_eq!(next, 42);
    let r = api
        .admin(
            endpoints::get_job_logs(&id).query([("offset", Some("30"))]),
            None,
        )
        .await;
    assert_eq!(r.body["data"], "an: 0 to add", "reads from inside a chunk");
    put(42, ", 0 to change.\n").await;
    let r = api
        .admin(
            endpoints::get_job_logs(&id).query([("offset", Some(next.to_string().as_str()))]),
            None,
        )
        .await;
    assert_eq!(
        (r.body["data"].as_str(), r.body["more"].as_bool()),
        (Some(", 0 to change.\n"), Some(true))
    );
    api.store
        .transition_job(
            &sortie_core::JobId::from(id.as_str()),
            sortie_core::JobState::Running,
            sortie_core::JobState::Succeeded,
            chrono::Utc::now(),
            "exit 0",
            Default::default(),
        )
        .await
        .unwrap();
    let r = api
        .admin(
            endpoints::get_job_logs(&id).query([("offset", Some("57"))]),
            None,
        )
        .await;
    assert_eq!(
        (r.body["data"].as_str(), r.body["more"].as_bool()),
        (Some(""), Some(false)),
        "no more once the job ended"
    );
    // Any reader of the job may read its log; another tenant may not.
    api.grant("acme", Role::Viewer, "viewer").await;
    assert_eq!(
        api.send(Some("viewer"), endpoints::get_job_logs(&id), None, &[])
            .await
            .status,
        200
    );
    assert_eq!(
        api.send(
            Some("globex-owner"),
            endpoints::get_job_logs(&id),
            None,
            &[]
        )
        .await
        .status,
        404
    );
    assert_eq!(
        api.admin(
            endpoints::get_job_logs(&id).query([("offset", Some("x"))]),
            None
        )
        .await
        .status,
        400
    );
}

#[tokio::test]
async fn configured_admin_subjects_are_system_administrators_and_no_one_else_is() {
    let api = Api::new().await;
    // `bootstrap-admin` is in the API's configured admin subjects (see common::Api).
    let r = api
        .send(
            Some("bootstrap-admin"),
            endpoints::create_runner("-", "shared"),
            Some(local_runner()),
            &[],
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let r = api
        .send(
            Some("someone-else"),
            endpoints::create_runner("-", "other"),
            Some(local_runner()),
            &[],
        )
        .await;
    assert_eq!(r.status, 404, "{}", r.body);
    api.grant("acme", Role::Owner, "acme-owner").await;
    let r = api
        .send(
            Some("acme-owner"),
            endpoints::create_runner("-", "other"),
            Some(local_runner()),
            &[],
        )
        .await;
    assert_eq!(r.status, 404, "an org owner is not a system administrator");
}

#[tokio::test]
async fn put_rule_replaces_it_under_if_match_like_delete() {
    let api = Api::new().await;
    seed_org(&api, "acme").await;
    seed_org(&api, "globex").await;
    api.admin(
        endpoints::create_runner("acme", "other"),
        Some(local_runner()),
    )
    .await;
    let got = api
        .admin(endpoints::get_rule("acme", "default"), None)
        .await;
    assert_eq!(got.etag.as_deref(), Some("\"1\""));
    let body = r#"{"runner_id":"acme/other","criteria":{"env_type":"production"},"priority":5}"#;
    let stale = api
        .send(
            Some("admin"),
            endpoints::update_rule("acme", "default"),
            Some(body),
            &[("if-match", "\"7\"")],
        )
        .await;
    assert_eq!(
        (stale.status.as_u16(), stale.body["error"]["code"].as_str()),
        (412, Some("version_mismatch"))
    );
    let put = api
        .send(
            Some("acme-owner"),
            endpoints::update_rule("acme", "default"),
            Some(body),
            &[("if-match", "\"1\"")],
        )
        .await;
    assert_eq!(
        (put.status.as_u16(), put.etag.as_deref()),
        (200, Some("\"2\"")),
        "{}",
        put.body
    );
    assert_eq!(
        (
            put.body["id"].as_str(),
            put.body["scope"].as_str(),
            put.body["runner_id"].as_str(),
            put.body["priority"].as_i64()
        ),
        (Some("default"), Some("acme"), Some("acme/other"), Some(5))
    );
    let again = api
        .admin(endpoints::get_rule("acme", "default"), None)
        .await;
    assert_eq!(again.etag.as_deref(), Some("\"2\""));
    assert_eq!(again.body["criteria"]["env_type"], "production");
    // The old ETag is stale now.
    let r = api
        .send(
            Some("admin"),
            endpoints::update_rule("acme", "default"),
            Some(body),
            &[("if-match", "\"1\"")],
        )
        .await;
    assert_eq!(r.status, 412);
    // Missing rule, wrong id in the body, invisible runner.
    let r = api
        .admin(endpoints::update_rule("acme", "ghost"), Some(body))
        .await;
    assert_eq!(
        (r.status.as_u16(), r.body["error"]["code"].as_str()),
        (404, Some("not_found"))
    );
    let r = api
        .admin(
            endpoints::update_rule("acme", "default"),
            Some(r#"{"id":"other","runner_id":"acme/local"}"#),
        )
        .await;
    assert_eq!(
        (
            r.status.as_u16(),
            r.body["error"]["fields"][0]["path"].as_str()
        ),
        (400, Some("id"))
    );
    let r = api
        .admin(
            endpoints::update_rule("acme", "default"),
            Some(r#"{"id":"default","runner_id":"globex/local"}"#),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    // Another tenant: 404, and nothing changes.
    let r = api
        .send(
            Some("globex-owner"),
            endpoints::update_rule("acme", "default"),
            Some(r#"{"runner_id":"acme/local"}"#),
            &[],
        )
        .await;
    assert_eq!(
        (r.status.as_u16(), r.body["error"]["code"].as_str()),
        (404, Some("not_found"))
    );
    assert!(!r.body.to_string().contains("globex"));
    // A viewer may read but not update.
    api.grant("acme", Role::Viewer, "auditor").await;
    let r = api
        .send(
            Some("auditor"),
            endpoints::update_rule("acme", "default"),
            Some(r#"{"runner_id":"acme/local"}"#),
            &[],
        )
        .await;
    assert_eq!(r.status, 403);
    assert_eq!(
        api.admin(endpoints::get_rule("acme", "default"), None)
            .await
            .body["runner_id"],
        "acme/other"
    );
}

#[test]
fn the_conformance_check_rejects_undeclared_statuses_and_wrong_bodies() {
    use axum::http::StatusCode;
    let fails = |route, status: u16, body: serde_json::Value| {
        std::panic::catch_unwind(|| {
            common::conforms(
                route,
                "GET",
                "/x",
                StatusCode::from_u16(status).unwrap(),
                &body,
            )
        })
        .is_err()
    };
    let job = Some(Route::GetJob);
    // A body that is not a job view, or a status GET /v1/jobs/{id} never answers.
    assert!(fails(job, 200, json!({"id": "x"})));
    assert!(fails(
        job,
        200,
        json!({"error": {"code": "x", "message": "m", "fields": []}})
    ));
    assert!(fails(
        job,
        418,
        json!({"error": {"code": "x", "message": "m", "fields": []}})
    ));
    assert!(fails(
        job,
        409,
        json!({"error": {"code": "x", "message": "m", "fields": []}})
    ));
    // An error whose shape drifted.
    assert!(fails(
        job,
        404,
        json!({"error": {"code": "x", "message": "m"}})
    ));
    assert!(fails(job, 404, json!({"code": "x"})));
    assert!(fails(None, 404, json!({"oops": true})));
    assert!(fails(
        None,
        500,
        json!({"error": {"code": "x", "message": "m", "fields": []}})
    ));
    // And the right ones pass.
    assert!(!fails(
        job,
        404,
        json!({"error": {"code": "not_found", "message": "m", "fields": []}})
    ));
    assert!(!fails(Some(Route::Health), 200, json!({"status": "ok"})));
    assert!(!fails(
        Some(Route::DeleteRule),
        204,
        serde_json::Value::Null
    ));
    assert!(fails(
        Some(Route::DeleteRule),
        204,
        json!({"deleted": true})
    ));
}

/// A 400 whose first problem is at `field`.
fn refused_at(status: u16, answer: &serde_json::Value, sent: &str, field: &str) {
    assert_eq!(status, 400, "{sent}: {answer}");
    assert_eq!(
        answer["error"]["fields"][0]["path"], field,
        "{sent}: {answer}"
    );
}

/// Deliver 3: a job token gets presigned URLs for its own job's objects only, each
/// keyed under the job's prefix; the bytes go straight to S3 (moto, real SDK signing),
/// and the API reads them back. Bad requests are 400 naming the field.
#[tokio::test]
async fn a_job_token_gets_presigned_urls_for_its_own_objects_only() {
    let aws = sortie_testkit::require_aws!();
    let api = Api::aws(&aws).await;
    seed_org(&api, "acme").await;
    api.create_env("acme", "prod", "production").await;
    let submit = |env: &'static str| {
        let api = &api;
        async move {
            api.admin(
                endpoints::submit_job(&format!("acme/{env}")),
                Some(r#"{"operation":"plan","files":{"main.tf":""}}"#),
            )
            .await
            .body["id"]
                .as_str()
                .unwrap()
                .to_string()
        }
    };
    api.create_env("acme", "dev", "development").await;
    let a = submit("prod").await;
    let b = submit("dev").await;
    api.launch(&a, "token-a").await;
    api.launch(&b, "token-b").await;
    let auth = [("authorization", "Bearer token-a")];
    let grant = |body: &'static str| {
        let (api, call) = (&api, endpoints::create_upload(&a));
        async move { api.send(None, call, Some(body), &auth).await }
    };

    // A log chunk: its key is the job's own; the bytes go to S3 by the URL alone.
    let r = grant(r#"{"kind":"log","name":"000000000000"}"#).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["key"], format!("logs/{a}/000000000000.log"));
    assert_eq!(r.body["method"], "PUT");
    let url = r.body["url"].as_str().unwrap().to_string();
    assert!(url.contains("X-Amz-Signature"), "{url}");
    assert!(url.contains(&format!("logs/{a}/000000000000.log")), "{url}");
    let headers: Vec<(String, String)> = r.body["headers"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
        .collect();
    let (base, path) = {
        let rest = url.strip_prefix("http://").expect("moto is plain HTTP");
        let (host, path) = rest.split_once('/').unwrap();
        (format!("http://{host}"), format!("/{path}"))
    };
    let (status, answer) = tokio::task::spawn_blocking(move || {
        let headers: Vec<(&str, &str)> = headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        sortie_testkit::http::call(&base, "PUT", &path, &headers, Some("uploaded by URL\n"))
    })
    .await
    .unwrap();
    assert_eq!(status, 200, "{answer}");
    let logs = api.admin(endpoints::get_job_logs(&a), None).await;
    assert_eq!(logs.body["data"], "uploaded by URL\n");

    // The artifacts: fixed names under artifacts/<job>/.
    for (body, key) in [
        (r#"{"kind":"plan"}"#, format!("artifacts/{a}/plan.tfplan")),
        (
            r#"{"kind":"summary","name":"summary.json"}"#,
            format!("artifacts/{a}/summary.json"),
        ),
        (
            r#"{"kind":"outputs","name":null}"#,
            format!("artifacts/{a}/outputs.json"),
        ),
    ] {
        let r = grant(body).await;
        assert_eq!(
            (r.status.as_u16(), r.body["key"].as_str()),
            (200, Some(key.as_str())),
            "{body}: {}",
            r.body
        );
    }

    // Bad requests: 400 naming the field; no way out of the job's prefixes.
    for (body, field) in [
        (r#"{"kind":"state"}"#, "kind"),
        (r#"{"name":"plan.tfplan"}"#, "kind"),
        (r#"{"kind":7}"#, "kind"),
        (r#"{"kind":"log"}"#, "name"),
        (r#"{"kind":"log","name":"12"}"#, "name"),
        (r#"{"kind":"log","name":"../../b/0000"}"#, "name"),
        (r#"{"kind":"plan","name":"../other/plan.tfplan"}"#, "name"),
        (r#"{"kind":"summary","name":"terraform.tfstate"}"#, "name"),
        (r#"{"kind":"plan","name":5}"#, "name"),
        (r#"{"kind":"plan","bucket":"other"}"#, "bucket"),
        (r#"["plan"]"#, "body"),
    ] {
        let r = grant(body).await;
        refused_at(r.status.as_u16(), &r.body, body, field);
    }

    // Upload problems: recorded on the job and shown in its view.
    let report = |body: &'static str| {
        let (api, call) = (&api, endpoints::put_upload_problems(&a));
        async move { api.send(None, call, Some(body), &auth).await }
    };
    let r = report(r#"{"problems":["could not upload the summary: 403"]}"#).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let job = api.admin(endpoints::get_job(&a), None).await;
    assert_eq!(
        job.body["upload_problems"][0],
        "could not upload the summary: 403"
    );
    let many = format!(r#"{{"problems":[{}]}}"#, vec!["\"x\""; 33].join(","));
    let many: &'static str = Box::leak(many.into_boxed_str());
    for (body, field) in [
        (many, "problems"),
        (r#"{"problems":[""]}"#, "problems[0]"),
        (r#"{"problems":["ok","two\nlines"]}"#, "problems[1]"),
        (r#"{"problems":"x"}"#, "problems"),
    ] {
        let r = report(body).await;
        refused_at(r.status.as_u16(), &r.body, body, field);
    }

    // Job A's token never opens job B's uploads.
    let r = api
        .send(
            None,
            endpoints::create_upload(&b),
            Some(r#"{"kind":"plan"}"#),
            &auth,
        )
        .await;
    assert_eq!(r.status, 401, "{}", r.body);
}

/// `runner check` through the router with the real checker on moto: each check in AWS's
/// words, `manage` needed, an org named for a shared runner, and nothing written.
#[tokio::test]
async fn runner_check_answers_each_check_in_the_platform_words_and_needs_manage() {
    let aws = sortie_testkit::require_aws!();
    let api = Api::aws(&aws).await;
    seed_org(&api, "acme").await;
    api.grant("acme", Role::Viewer, "viewer").await;
    let check = |who: &'static str, call: Call| {
        let api = &api;
        async move { api.send(Some(who), call, None, &[]).await }
    };

    // A local runner, where no local launcher exists: the words its jobs would fail with.
    let r = check("acme-owner", endpoints::check_runner("acme", "local")).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["runner_id"], "acme/local");
    assert_eq!(r.body["org"], "acme");
    assert_eq!(r.body["passed"], false);
    assert_eq!(
        r.body["checks"],
        json!([{"name": "launcher", "status": "failed",
                "detail": "no launcher for `local` runners is configured here"}])
    );

    // A Fargate runner whose cluster, task definition and subnet do not exist: the role is
    // assumed (moto lets it), and each missing part fails in AWS's words.
    let fargate = "runner_configuration:\n  type: ecs-fargate\n  role_arn: arn:aws:iam::123456789012:role/sortie-launcher-check\n  external_id: sortie-ext-check-api\n  region: us-east-1\n  cluster: no-such-cluster\n  task_definition: no-such-family:1\n  container_name: runner\n  subnets: [subnet-0123456789abcdef0]\n  security_groups: [sg-0123456789abcdef0]\nstate_storage_configuration:\n  type: s3\n  bucket: acme-state\n  region: us-east-1\n";
    let created = api
        .admin(endpoints::create_runner("acme", "fargate"), Some(fargate))
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let before = api
        .admin(endpoints::get_runner("acme", "fargate"), None)
        .await;
    let r = check("acme-owner", endpoints::check_runner("acme", "fargate")).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["passed"], false);
    let checks: BTreeMap<String, (String, String)> = r.body["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_string(),
                (
                    c["status"].as_str().unwrap().to_string(),
                    c["detail"].as_str().unwrap().to_string(),
                ),
            )
        })
        .collect();
    assert_eq!(checks["assume_role"].0, "passed", "{checks:?}");
    assert_eq!(checks["cluster"].0, "failed");
    assert!(checks["cluster"].1.contains("MISSING"), "{checks:?}");
    assert_eq!(checks["capacity_provider"].0, "skipped");
    assert_eq!(checks["task_definition"].0, "failed");
    assert!(
        checks["task_definition"]
            .1
            .contains("DescribeTaskDefinition failed"),
        "{checks:?}"
    );
    assert_eq!(checks["network"].0, "failed");
    assert!(
        checks["network"].1.contains("InvalidSubnetID.NotFound"),
        "{checks:?}"
    );
    assert_eq!(checks["pass_role"].0, "skipped");
    // Nothing was written: the runner's version is the same.
    let after = api
        .admin(endpoints::get_runner("acme", "fargate"), None)
        .await;
    assert_eq!(before.etag, after.etag);

    // A viewer may not make Sortie assume the runner's role; an unknown runner is 404.
    let r = check("viewer", endpoints::check_runner("acme", "fargate")).await;
    assert_eq!(r.status, 403, "{}", r.body);
    let r = check("acme-owner", endpoints::check_runner("acme", "nope")).await;
    assert_eq!(r.status, 404, "{}", r.body);
    // Another org's name is refused for an org's own runner.
    let r = check(
        "acme-owner",
        endpoints::check_runner("acme", "local").query([("org", Some("globex"))]),
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.body["error"]["fields"][0]["path"], "query.org");

    // A shared runner is checked for one named organisation.
    let shared = api
        .admin(
            endpoints::create_runner("-", "shared-local"),
            Some(local_runner()),
        )
        .await;
    assert_eq!(shared.status, 201, "{}", shared.body);
    let r = api
        .admin(endpoints::check_runner("-", "shared-local"), None)
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.body["error"]["fields"][0]["path"], "query.org");
    assert!(r.body["error"]["fields"][0]["problem"]
        .as_str()
        .unwrap()
        .contains("required for a shared runner"));
    let r = api
        .admin(
            endpoints::check_runner("-", "shared-local").query([("org", Some("a/b"))]),
            None,
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    let r = api
        .admin(
            endpoints::check_runner("-", "shared-local").query([("org", Some("acme"))]),
            None,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["org"], "acme");
    assert_eq!(r.body["runner_id"], "shared-local");
}

#[tokio::test]
async fn the_runners_exit_callback_ends_its_job_once_and_refuses_what_it_cannot_read() {
    let api = Api::new().await;
    seed_org(&api, "acme").await;
    // An eks runner, chosen for `k8s` environments: its jobs' specs ask for the callback.
    let eks = "runner_configuration:\n  type: eks\n  role_arn: arn:aws:iam::123456789012:role/launcher\n  external_id: ext-123456\n  region: us-east-1\n  cluster: prod\n  job: { namespace: sortie-jobs, service_account: terraform }\nstate_storage_configuration: { type: kubernetes }\n";
    assert_eq!(
        api.admin(endpoints::create_runner("acme", "eks"), Some(eks))
            .await
            .status,
        201
    );
    let rule =
        json!({"id": "k8s", "runner_id": "acme/eks", "criteria": {"env_type": "k8s"}}).to_string();
    let r = api.admin(endpoints::create_rule("acme"), Some(&rule)).await;
    assert_eq!(r.status, 201, "{}", r.body);
    api.create_env("acme", "cluster", "k8s").await;
    api.create_env("acme", "dev", "development").await;
    let submit = |env: &'static str| {
        let api = &api;
        async move {
            api.admin(
                endpoints::submit_job(&format!("acme/{env}")),
                Some(r#"{"operation":"apply","files":{"main.tf":""}}"#),
            )
            .await
            .body["id"]
                .as_str()
                .unwrap()
                .to_string()
        }
    };
    let a = submit("cluster").await;
    let b = submit("dev").await;
    api.launch(&a, "token-a").await;
    api.launch(&b, "token-b").await;
    let call = |token: &'static str, id: &str, body: &str| {
        let (api, call, body) = (&api, endpoints::report_job_exit(id), body.to_string());
        async move {
            api.send(
                None,
                call,
                Some(&body),
                &[("authorization", &format!("Bearer {token}"))],
            )
            .await
        }
    };
    let spec = api
        .send(
            None,
            endpoints::get_job_spec(&a),
            None,
            &[("authorization", "Bearer token-a")],
        )
        .await;
    assert_eq!(spec.status, 200, "{}", spec.body);
    assert_eq!(spec.body["report_exit"], true, "eks jobs report their exit");
    assert_eq!(
        spec.body["state_storage"],
        json!({"type": "kubernetes", "namespace": "sortie-jobs"}),
        "kubernetes state lives in the runner's namespace"
    );
    let local = api
        .send(
            None,
            endpoints::get_job_spec(&b),
            None,
            &[("authorization", "Bearer token-b")],
        )
        .await;
    assert_eq!(local.body["report_exit"], false);

    // Another job's token, and bodies that cannot be read: refused, nothing changes.
    assert_eq!(call("token-b", &a, r#"{"exit_code":0}"#).await.status, 401);
    for (body, field) in [
        (r#"{"exit_code":"zero"}"#, "exit_code"),
        (r#"{"exit_code":0,"signal":9}"#, "signal"),
        ("{}", "exit_code"),
        (r#"{"exit_code":1,"reason":"two\nlines"}"#, "reason"),
        (
            &*format!(r#"{{"exit_code":1,"reason":"{}"}}"#, "x".repeat(1025)),
            "reason",
        ),
        ("[]", "body"),
    ] {
        let r = call("token-a", &a, body).await;
        assert_eq!(r.status, 400, "{body}: {}", r.body);
        assert_eq!(
            r.body["error"]["fields"][0]["path"], field,
            "{body}: {}",
            r.body
        );
    }
    assert_eq!(
        api.admin(endpoints::get_job(&a), None).await.body["state"],
        "running"
    );

    let r = call(
        "token-a",
        &a,
        r#"{"exit_code":3,"reason":"Error: creating S3 bucket: AccessDenied"}"#,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["state"], "failed");
    let last = |b: &serde_json::Value| {
        b["transitions"].as_array().unwrap().last().unwrap()["reason"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let reason = last(&r.body);
    assert!(
        reason.contains("exited with code 3") && reason.contains("AccessDenied"),
        "{}",
        r.body
    );
    let env = sortie_store::EnvironmentStore::get_environment(
        &*api.store,
        &sortie_core::EnvPath::parse("acme/cluster").unwrap(),
    )
    .await
    .unwrap();
    assert_eq!(env.item.active_job, None, "the environment is released");
    // A second report, or one after the sweeper ended the job, changes nothing.
    let again = call("token-a", &a, r#"{"exit_code":0}"#).await;
    assert_eq!(again.status, 200, "{}", again.body);
    assert_eq!(again.body["state"], "failed");
    assert_eq!(
        again.body["transitions"].as_array().map(Vec::len),
        r.body["transitions"].as_array().map(Vec::len)
    );
    // The local job succeeds the same way.
    let ok = call("token-b", &b, r#"{"exit_code":0}"#).await;
    assert_eq!(ok.body["state"], "succeeded", "{}", ok.body);
}
