//! State history and triggers through the HTTP API (fast tier, the state versions in
//! memory): the list (paged, each with its writer), one version redacted for `deploy`,
//! a restore for `manage`, the clear answer of a storage without history, and the trigger
//! graph: a cycle refused naming it, upstream and downstream shown. Every answer is
//! checked against the OpenAPI document (`common::conforms`).

use std::sync::Arc;

use chrono::Utc;
use serde_json::json;
use sortie_core::{EnvPath, Role};
use sortie_launch::state_history::MemoryStateHistory;
use sortie_store::LastApply;
use sortie_testkit::world::World;

use crate::common::{self, Api};
use sortie_client::endpoints;

/// An API whose state versions are `history`'s, with org `acme` on an `s3` runner
/// (`acme/s3`, rule at `acme/app`) and its `local` one elsewhere.
async fn api_with(history: Arc<MemoryStateHistory>) -> Api {
    let world = World::fast_with(|_| {});
    let mut state = world.api_state();
    state.state_history = history;
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
    common::seed_org(&api, "acme").await;
    let s3 = "runner_configuration:\n  type: local\nstate_storage_configuration:\n  type: s3\n  bucket: acme-state\n  region: us-east-1\n";
    let r = api
        .admin(endpoints::create_runner("acme", "s3"), Some(s3))
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let rule = json!({"id": "s3", "runner_id": "acme/s3"}).to_string();
    let r = api
        .admin(endpoints::create_rule("acme/app"), Some(&rule))
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    api
}

fn state(serial: u64) -> Vec<u8> {
    json!({
        "version": 4, "serial": serial, "lineage": "lin", "terraform_version": "1.11.4",
        "outputs": {"token": {"value": "s3cret-out", "type": "string", "sensitive": true}},
        "resources": [{"mode": "managed", "type": "terraform_data", "name": "x", "instances": [{
            "attributes": {"id": format!("id-{serial}"), "input": "s3cret-in"},
            "sensitive_attributes": [[{"type": "get_attr", "value": "input"}]]
        }]}]
    })
    .to_string()
    .into_bytes()
}

#[tokio::test]
async fn state_versions_are_listed_paged_redacted_and_restored_with_the_right_roles() {
    let history = Arc::new(MemoryStateHistory::default());
    let api = api_with(history.clone()).await;
    api.create_env("acme/app", "b", "development").await;
    let env = EnvPath::parse("acme/app/b").unwrap();
    let v1 = history.put(&env, Utc::now(), state(1));
    let v2 = history.put(&env, Utc::now(), state(2));
    api.grant("acme", Role::Viewer, "viewer").await;
    api.grant("acme", Role::Deployer, "deployer").await;

    let r = api
        .send(
            Some("viewer"),
            endpoints::list_state_versions("acme/app/b"),
            None,
            &[],
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let ids: Vec<&str> = r.body["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["version_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [v2.as_str(), v1.as_str()]);
    assert_eq!(r.body["versions"][1]["serial"], 1);
    assert_eq!(r.body["versions"][1]["lineage"], "lin");

    let r = api
        .admin(
            endpoints::list_state_versions("acme/app/b").query([("limit", Some("1"))]),
            None,
        )
        .await;
    assert_eq!(r.body["next"], json!(v2));
    let r = api
        .admin(
            endpoints::list_state_versions("acme/app/b").query([
                ("limit", Some("1")),
                ("cursor", Some(v2.to_string().as_str())),
            ]),
            None,
        )
        .await;
    assert_eq!(r.body["versions"][0]["version_id"], json!(v1));
    let r = api
        .admin(
            endpoints::list_state_versions("acme/app/b").query([("limit", Some("0"))]),
            None,
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.body);

    // One version needs deploy, and nothing sensitive is in it.
    let r = api
        .send(
            Some("viewer"),
            endpoints::get_state_version("acme/app/b", &v1),
            None,
            &[],
        )
        .await;
    assert_eq!(r.status, 403, "{}", r.body);
    let r = api
        .send(
            Some("deployer"),
            endpoints::get_state_version("acme/app/b", &v1),
            None,
            &[],
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(!r.body.to_string().contains("s3cret"), "{}", r.body);
    assert_eq!(
        r.body["state"]["resources"][0]["instances"][0]["attributes"]["id"],
        "id-1"
    );
    let r = api
        .admin(endpoints::get_state_version("acme/app/b", "nope"), None)
        .await;
    assert_eq!(r.status, 404, "{}", r.body);

    // A restore needs manage, a reason, and a configuration to plan with.
    let why = json!({"reason": "roll back"}).to_string();
    let r = api
        .send(
            Some("deployer"),
            endpoints::restore_state_version("acme/app/b", &v1),
            Some(&why),
            &[("content-type", "application/json")],
        )
        .await;
    assert_eq!(r.status, 403, "{}", r.body);
    let r = api
        .admin(
            endpoints::restore_state_version("acme/app/b", &v1),
            Some("{}"),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.body["error"]["fields"][0]["path"], "reason");
    let r = api
        .admin(
            endpoints::restore_state_version("acme/app/b", &v1),
            Some(&why),
        )
        .await;
    assert_eq!(r.status, 409, "{}", r.body);
    assert_eq!(r.body["error"]["code"], "no_configuration");
    // An apply recorded: the restore's plan takes its configuration.
    let job = api
        .admin(
            endpoints::submit_job("acme/app/b"),
            Some(r#"{"operation":"apply","files":{"main.tf":""}}"#),
        )
        .await;
    assert_eq!(job.status, 201, "{}", job.body);
    let applied = sortie_core::JobId::from(job.body["id"].as_str().unwrap());
    api.store
        .record_last_apply(
            &env,
            &LastApply {
                job_id: applied,
                at: Utc::now(),
            },
        )
        .await
        .unwrap();
    let r = api
        .admin(
            endpoints::restore_state_version("acme/app/b", &v1),
            Some(&why),
        )
        .await;
    assert_eq!(r.status, 202, "{}", r.body);
    let id = r.body["job_id"].as_str().unwrap();
    let got = api.admin(endpoints::get_job(id), None).await;
    assert_eq!(got.body["operation"], "plan");
    assert_eq!(
        got.body["restore"],
        json!({"version_id": v1, "reason": "roll back"})
    );
    assert_eq!(got.body["requested_by"], "admin");
}

#[tokio::test]
async fn a_storage_without_versions_says_so() {
    let api = api_with(Arc::new(MemoryStateHistory::default())).await;
    api.create_env("acme", "dev", "development").await;
    let r = api
        .admin(endpoints::list_state_versions("acme/dev"), None)
        .await;
    assert_eq!(r.status, 409, "{}", r.body);
    assert_eq!(r.body["error"]["code"], "no_state_history");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`local` state storage, which has no history"),
        "{}",
        r.body
    );
}

#[tokio::test]
async fn triggers_refuse_a_cycle_and_show_both_directions() {
    let api = api_with(Arc::new(MemoryStateHistory::default())).await;
    api.create_env("acme", "a", "development").await;
    let b = json!({"name": "b", "env_type": "development", "triggers": ["acme/a"], "trigger_inputs": ["ip"]}).to_string();
    let r = api
        .admin(endpoints::create_environment("acme"), Some(&b))
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["triggers"], json!(["acme/a"]));

    let cycle = json!({"triggers": ["acme/b"]}).to_string();
    let r = api
        .admin(endpoints::update_environment("acme/a"), Some(&cycle))
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.body["error"]["fields"][0]["path"], "triggers");
    assert_eq!(
        r.body["error"]["fields"][0]["problem"],
        "would make a cycle: acme/a → acme/b → acme/a"
    );
    let r = api
        .admin(
            endpoints::update_environment("acme/a"),
            Some(r#"{"triggers": ["acme/a"]}"#),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    let r = api
        .admin(
            endpoints::update_environment("acme/a"),
            Some(r#"{"triggers": ["not a path"]}"#),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.body);

    let r = api
        .admin(endpoints::get_environment_triggers("acme/a"), None)
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        (&r.body["upstream"], &r.body["downstream"]),
        (&json!([]), &json!(["acme/b"]))
    );
    let r = api
        .admin(endpoints::get_environment_triggers("acme/b"), None)
        .await;
    assert_eq!(
        (&r.body["upstream"], &r.body["trigger_inputs"]),
        (&json!(["acme/a"]), &json!(["ip"]))
    );
}
