//! Reviewed applies, outputs, drift settings and the tool report through the HTTP API, on
//! moto; every answer is checked against the OpenAPI document (`common::conforms`).

use crate::common;

use common::{seed_org, Api};
use serde_json::{json, Value};
use sortie_client::endpoints;
use sortie_core::Role;

/// Submits `operation` to `acme/<env>` as `who`; the job id.
async fn submit(api: &Api, who: &str, env: &str, operation: &str) -> String {
    let r = api
        .send(
            Some(who),
            endpoints::submit_job(&format!("acme/{env}")),
            Some(&json!({"operation": operation, "files": {"main.tf": ""}}).to_string()),
            &[],
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    r.body["id"].as_str().unwrap().to_string()
}

/// The runner's side of one task: launched with `token`, its summary, then its exit 0.
async fn run_task(api: &Api, id: &str, token: &str) {
    api.launch(id, token).await;
    let auth = format!("Bearer {token}");
    let headers = [
        ("authorization", auth.as_str()),
        ("content-type", "application/json"),
    ];
    let r = api
        .send(
            None,
            endpoints::put_job_summary(id),
            Some(r#"{"add":1,"change":0,"destroy":0}"#),
            &headers,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let r = api
        .send(
            None,
            endpoints::report_job_exit(id),
            Some(r#"{"exit_code":0}"#),
            &headers,
        )
        .await;
    assert!(r.status.is_success(), "{}", r.body);
}

async fn job(api: &Api, id: &str) -> Value {
    api.admin(endpoints::get_job(id), None).await.body
}

/// A fresh API with organisation `acme` and its environment `prod` made from `body`; the
/// API and the created environment.
async fn prod_made_of(body: &str) -> (Api, Value) {
    let api = Api::new().await;
    seed_org(&api, "acme").await;
    let r = api
        .admin(endpoints::create_environment("acme"), Some(body))
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    (api, r.body)
}

/// A fresh API whose `acme/prod` has approval `required` (and no four eyes).
async fn reviewed_prod() -> Api {
    prod_made_of(r#"{"name":"prod","env_type":"production","approval":"required"}"#)
        .await
        .0
}

#[tokio::test]
async fn a_reviewed_apply_awaits_approval_holding_the_lock_and_only_a_second_deployer_approves() {
    let (api, env) = prod_made_of(
        r#"{"name":"prod","env_type":"production","approval":"required","four_eyes":true,"approval_timeout_seconds":3600}"#,
    )
    .await;
    assert_eq!(env["approval"], "required");
    assert_eq!(env["four_eyes"], true);
    api.grant("acme", Role::Deployer, "alice").await;
    api.grant("acme", Role::Deployer, "bob").await;
    api.grant("acme", Role::Viewer, "carol").await;

    let id = submit(&api, "alice", "prod", "apply").await;
    assert_eq!(job(&api, &id).await["review"]["phase"], "plan");
    run_task(&api, &id, "plan-token").await;
    let awaiting = job(&api, &id).await;
    assert_eq!(awaiting["state"], "awaiting_approval", "{awaiting}");
    assert_eq!(awaiting["plan_phase"]["summary"]["add"], 1, "{awaiting}");
    assert!(awaiting["review"]["awaiting_since"].is_string());
    let env = api
        .admin(endpoints::get_environment("acme/prod"), None)
        .await
        .body;
    assert_eq!(env["active_job"], id.as_str(), "the lock is held: {env}");

    // The job token of the finished plan task is dead.
    let r = api
        .send(
            None,
            endpoints::get_job_spec(&id),
            None,
            &[("authorization", "Bearer plan-token")],
        )
        .await;
    assert_eq!(
        r.status, 401,
        "the plan task's token died with its task: it cannot write while the job awaits approval"
    );

    let approve = |who: &'static str, body: Option<&'static str>| {
        let (api, id) = (&api, id.clone());
        async move {
            api.send(
                Some(who),
                endpoints::approve_job(&id),
                body,
                &[("content-type", "application/json")],
            )
            .await
        }
    };
    let r = approve("alice", None).await;
    assert_eq!(r.status, 403, "{}", r.body);
    assert!(r.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("four eyes"));
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("another person with the deployer role"),
        "the four-eyes message names the real role: {}",
        r.body
    );
    // A viewer sees the job, so it is told what it lacks (403 naming the role), for each
    // decision and for cancel; a stranger still cannot tell the job exists (404).
    for (action, call) in [
        ("approve", endpoints::approve_job(&id)),
        ("discard", endpoints::discard_job(&id)),
        ("cancel", endpoints::cancel_job(&id)),
    ] {
        let r = api.send(Some("carol"), call, None, &[]).await;
        assert_eq!(r.status, 403, "{action} by a viewer: {}", r.body);
        let message = r.body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("deployer role") && message.contains("acme"),
            "{action}: {message}"
        );
    }
    let r = approve("mallory", None).await;
    assert_eq!(r.status, 404, "{}", r.body);
    let r = approve("bob", Some(r#"{"comment":"ship it","extra":1}"#)).await;
    assert_eq!(r.status, 400, "an unknown field: {}", r.body);
    let r = approve("bob", Some(r#"{"comment":"ship it"}"#)).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["state"], "queued");
    assert_eq!(r.body["review"]["phase"], "apply");
    assert_eq!(r.body["review"]["decision"]["by"], "bob");
    assert_eq!(r.body["review"]["decision"]["comment"], "ship it");
    assert!(
        r.body.get("task_arn").is_none(),
        "the plan task is forgotten"
    );
    let again = approve("bob", None).await;
    assert_eq!(again.status, 409, "{}", again.body);
    assert!(again.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("queued"));
    assert!(
        api.drain_queue().await.contains(&id),
        "the approved job was sent"
    );

    // The apply phase's spec: the saved plan's URL and where the log goes on.
    api.launch(&id, "apply-token").await;
    let r = api
        .send(
            None,
            endpoints::get_job_spec(&id),
            None,
            &[("authorization", "Bearer apply-token")],
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["phase"], "apply");
    let url = r.body["saved_plan_url"].as_str().unwrap();
    assert!(
        url.contains(&format!("artifacts/{id}/plan.tfplan")),
        "{url}"
    );
    assert_ne!(r.body["detailed_exitcode"], true, "not a drift check");

    // The pilot reports its tool; a version that is not exact is refused.
    let headers = [
        ("authorization", "Bearer apply-token"),
        ("content-type", "application/json"),
    ];
    let r = api
        .send(
            None,
            endpoints::put_job_tool(&id),
            Some(r#"{"tool":"terraform","version":"~> 1.0"}"#),
            &headers,
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    let r = api
        .send(
            None,
            endpoints::put_job_tool(&id),
            Some(r#"{"tool":"terraform","version":"1.0.3"}"#),
            &headers,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.body["tool_used"],
        json!({"tool": "terraform", "version": "1.0.3"})
    );
}

#[tokio::test]
async fn whoami_names_the_caller_and_the_roles_it_holds_in_the_org_asked_for() {
    let api = Api::new().await;
    seed_org(&api, "acme").await;
    api.grant("acme/payments", Role::Deployer, "dana").await;
    api.grant("acme", Role::Viewer, "erin").await;
    let r = api
        .send(
            Some("dana"),
            endpoints::whoami().query([("org", Some("acme"))]),
            None,
            &[],
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["subject"], "dana");
    assert_eq!(r.body["org"], "acme");
    assert_eq!(
        r.body["memberships"],
        json!([{"group": "acme/payments", "role": "deployer"}]),
        "only the caller's own memberships: {}",
        r.body
    );
    // Without `org`, the root group's only: none for dana; any caller may ask.
    let r = api.send(Some("dana"), endpoints::whoami(), None, &[]).await;
    assert_eq!(
        (r.status.as_u16(), r.body["memberships"].clone()),
        (200, json!([]))
    );
    let r = api
        .send(
            Some("nobody"),
            endpoints::whoami().query([("org", Some("acme"))]),
            None,
            &[],
        )
        .await;
    assert_eq!(
        (r.status.as_u16(), r.body["memberships"].clone()),
        (200, json!([]))
    );
    let r = api
        .send(
            Some("dana"),
            endpoints::whoami().query([("org", Some("ACME!"))]),
            None,
            &[],
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.body["error"]["fields"][0]["path"], "query.org");
    let r = api.send(None, endpoints::whoami(), None, &[]).await;
    assert_eq!(r.status, 401, "{}", r.body);
}

#[tokio::test]
async fn a_mistyped_approve_suggests_the_job_awaiting_approval() {
    // It was told only "you need the deployer role": jobs awaiting approval were never
    // compared, only those dispatching or running (issue 47 item 9).
    let api = reviewed_prod().await;
    api.grant("acme", Role::Deployer, "alice").await;
    let id = submit(&api, "admin", "prod", "apply").await;
    run_task(&api, &id, "t").await;
    assert_eq!(job(&api, &id).await["state"], "awaiting_approval");
    let typo = common::typo(&id);
    let approve = |who: &'static str| {
        api.send(
            Some(who),
            endpoints::approve_job(&typo),
            Some("{}"),
            &[("content-type", "application/json")],
        )
    };
    let r = approve("alice").await;
    assert_eq!(r.status, 404, "{}", r.body);
    assert_eq!(r.body["error"]["did_you_mean"], json!([id]), "{}", r.body);
    // Another organisation's member is offered nothing of acme's.
    seed_org(&api, "globex").await;
    let r = approve("globex-owner").await;
    assert_eq!(r.status, 404, "{}", r.body);
    assert!(!r.body.to_string().contains(&id), "{}", r.body);
}

#[tokio::test]
async fn a_discard_ends_the_job_releases_the_lock_and_a_waiting_job_goes_next() {
    let api = reviewed_prod().await;
    let id = submit(&api, "admin", "prod", "destroy").await;
    let waiting = submit(&api, "admin", "prod", "plan").await;
    run_task(&api, &id, "t").await;
    assert_eq!(job(&api, &id).await["state"], "awaiting_approval");
    assert_eq!(job(&api, &waiting).await["state"], "queued");
    // Without four eyes the requester may decide; discard takes no body.
    let r = api.admin(endpoints::discard_job(&id), None).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["state"], "discarded");
    assert_eq!(r.body["review"]["decision"]["verdict"], "discarded");
    let env = api
        .admin(endpoints::get_environment("acme/prod"), None)
        .await
        .body;
    assert_eq!(env["active_job"], waiting.as_str(), "handed on: {env}");
    let r = api.admin(endpoints::get_job_outputs(&id), None).await;
    assert_eq!(r.status, 404, "{}", r.body);
    let r = api
        .admin(endpoints::get_environment_outputs("acme/prod"), None)
        .await;
    assert_eq!(r.status, 404, "no apply yet: {}", r.body);
}

#[tokio::test]
async fn an_auto_apply_has_no_review_and_its_outputs_drop_sensitive_values() {
    let api = Api::new().await;
    seed_org(&api, "acme").await;
    api.create_env("acme", "dev", "development").await;
    let id = submit(&api, "admin", "dev", "apply").await;
    assert!(job(&api, &id).await.get("review").is_none());
    api.launch(&id, "t").await;
    // The runner's upload of outputs.json (with a sensitive value it failed to redact).
    let outputs = json!({
        "message": {"sensitive": false, "type": "string", "value": "hello"},
        "password": {"sensitive": true, "type": "string", "value": "hunter2"},
        "odd": {"type": "string", "value": "no sensitive flag"},
    });
    let grant = api
        .send(
            None,
            endpoints::create_upload(&id),
            Some(r#"{"kind":"outputs"}"#),
            &[
                ("authorization", "Bearer t"),
                ("content-type", "application/json"),
            ],
        )
        .await;
    assert_eq!(grant.status, 200, "{}", grant.body);
    let key = grant.body["key"].as_str().unwrap();
    put_object(&api, key, outputs.to_string()).await;
    let r = api
        .send(
            None,
            endpoints::report_job_exit(&id),
            Some(r#"{"exit_code":0}"#),
            &[
                ("authorization", "Bearer t"),
                ("content-type", "application/json"),
            ],
        )
        .await;
    assert!(r.status.is_success(), "{}", r.body);
    assert_eq!(job(&api, &id).await["state"], "succeeded");
    for call in [
        endpoints::get_job_outputs(&id),
        endpoints::get_environment_outputs("acme/dev"),
    ] {
        let path = call.path.clone();
        let r = api.admin(call, None).await;
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        assert_eq!(r.body["job_id"], id.as_str());
        assert_eq!(r.body["outputs"]["message"]["value"], "hello");
        assert_eq!(
            r.body["outputs"]["password"],
            json!({"sensitive": true, "type": "string"})
        );
        assert_eq!(r.body["outputs"]["odd"]["sensitive"], true);
        assert!(!r.body.to_string().contains("hunter2"));
        assert!(!r.body.to_string().contains("no sensitive flag"));
    }
}

/// Writes an object as a runner's upload would: into the fast world's bucket, or S3 on moto.
async fn put_object(api: &Api, key: &str, body: String) {
    match &api.world.tier {
        sortie_testkit::world::Tier::Fast(fakes) => fakes.artifacts.put(key, body),
        sortie_testkit::world::Tier::Aws(moto) => {
            moto.artifacts
                .client()
                .put_object()
                .bucket(&api.bucket)
                .key(key)
                .body(body.into_bytes().into())
                .send()
                .await
                .unwrap();
        }
    }
}

#[tokio::test]
async fn settings_are_validated_to_the_field_and_a_patch_can_clear_them() {
    let api = Api::new().await;
    seed_org(&api, "acme").await;
    for (body, field) in [
        (json!({"drift_schedule": "*/5 * * * *"}), "drift_schedule"),
        (json!({"drift_schedule": "every day"}), "drift_schedule"),
        (json!({"drift_schedule": "0 0 * * * *"}), "drift_schedule"),
        (json!({"tool_version": "latest"}), "tool_version"),
        (json!({"tool": "pulumi"}), "tool"),
        (json!({"approval": "maybe"}), "approval"),
        (
            json!({"approval_timeout_seconds": 10}),
            "approval_timeout_seconds",
        ),
        (json!({"drift_remediation": "destroy"}), "drift_remediation"),
    ] {
        let mut create = json!({"name": "prod", "env_type": "production"});
        for (k, v) in body.as_object().unwrap() {
            create[k] = v.clone();
        }
        let r = api
            .admin(
                endpoints::create_environment("acme"),
                Some(&create.to_string()),
            )
            .await;
        assert_eq!(r.status, 400, "{create}: {}", r.body);
        let fields: Vec<&str> = r.body["error"]["fields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["path"].as_str().unwrap())
            .collect();
        assert_eq!(fields, vec![field], "{create}: {}", r.body);
    }
    let r = api
        .admin(
            endpoints::create_environment("acme"),
            Some(r#"{"name":"prod","env_type":"production","drift_schedule":"*/15 * * * *","drift_remediation":"apply","tool":"terraform","tool_version":"~> 1.0"}"#),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert!(r.body["next_drift_at"].is_string(), "{}", r.body);
    assert_eq!(r.body["version"], 1);
    let r = api
        .admin(
            endpoints::update_environment("acme/prod"),
            Some(r#"{"drift_schedule":null,"tool":null}"#),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.get("drift_schedule").is_none(), "{}", r.body);
    assert!(r.body.get("next_drift_at").is_none(), "{}", r.body);
    assert!(r.body.get("tool").is_none(), "{}", r.body);
    assert_eq!(
        r.body["drift_remediation"], "apply",
        "untouched: {}",
        r.body
    );
    // A job takes the environment's version; the runner file's tool and version too.
    let id = submit(&api, "admin", "prod", "plan").await;
    assert_eq!(job(&api, &id).await["tool_version"], "~> 1.0");
    let r = api
        .admin(
            endpoints::update_runner("acme", "local"),
            Some("tool: opentofu\ntool_version: nope\nrunner_configuration:\n  type: local\nstate_storage_configuration:\n  type: local\n  directory: /tmp/x\n"),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.body["error"]["fields"][0]["path"], "tool_version");
}

#[tokio::test]
async fn a_job_awaiting_approval_can_be_canceled_and_then_frees_its_environment() {
    let api = reviewed_prod().await;
    let id = submit(&api, "admin", "prod", "apply").await;
    run_task(&api, &id, "t").await;
    assert_eq!(job(&api, &id).await["state"], "awaiting_approval");
    let r = api.admin(endpoints::cancel_job(&id), None).await;
    assert_eq!(
        r.status, 200,
        "no task runs, so it ends at once: {}",
        r.body
    );
    assert_eq!(r.body["state"], "canceled");
    let env = api
        .admin(endpoints::get_environment("acme/prod"), None)
        .await
        .body;
    assert!(env.get("active_job").is_none(), "{env}");
    let r = api.admin(endpoints::discard_job(&id), None).await;
    assert_eq!(r.status, 409, "{}", r.body);
    assert!(r.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("canceled"));
}
