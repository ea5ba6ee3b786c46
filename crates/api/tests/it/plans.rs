//! `GET /v1/jobs/{id}/plan` (issue 28 item 1): the plan the runner uploaded as `plan.json`
//! (through a URL the API presigned for kind `plan_json`), one entry per resource, paged past
//! 1,000 resources; 200 `available: false` with the reason when the runner said why there
//! is none; 404 when it uploaded nothing; read permission as for the job's log. Every answer
//! is checked against the OpenAPI document (`common::conforms`).

use crate::common;

use common::{seed_org, Api};
use serde_json::{json, Value};
use sortie_client::endpoints;
use sortie_core::Role;

/// A plan job on `acme/dev`, launched with token `t`; its id.
async fn planned_job(api: &Api) -> String {
    seed_org(api, "acme").await;
    api.create_env("acme", "dev", "development").await;
    let r = api
        .admin(
            endpoints::submit_job("acme/dev"),
            Some(&json!({"operation": "plan", "files": {"main.tf": ""}}).to_string()),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let id = r.body["id"].as_str().unwrap().to_string();
    api.launch(&id, "t").await;
    id
}

/// The runner's upload of `plan.json`: a presigned grant of kind `plan_json`, then the bytes.
async fn upload_plan(api: &Api, id: &str, body: String) {
    let grant = api
        .send(
            None,
            endpoints::create_upload(id),
            Some(r#"{"kind":"plan_json"}"#),
            &[
                ("authorization", "Bearer t"),
                ("content-type", "application/json"),
            ],
        )
        .await;
    assert_eq!(grant.status, 200, "{}", grant.body);
    let key = grant.body["key"].as_str().unwrap();
    assert_eq!(key, format!("artifacts/{id}/plan.json"));
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

fn big_plan(resources: usize) -> Value {
    let changes: Vec<Value> = (0..resources)
        .map(|i| {
            json!({"address": format!("module.m.terraform_data.r[{i}]"), "module_address": "module.m",
                   "type": "terraform_data", "name": "r",
                   "change": {"actions": ["create"], "before": null, "after": {"input": i},
                              "after_unknown": {"id": true}}})
        })
        .collect();
    json!({
        "format_version": "1.2",
        "resource_changes": changes,
        "output_changes": {"pw": {"actions": ["create"], "before": null, "after": "(sensitive value)"}}
    })
}

#[tokio::test]
async fn a_plan_is_served_one_entry_per_resource_and_paged_past_1000() {
    let api = Api::new().await;
    let id = planned_job(&api).await;

    // Nothing uploaded yet: a 404 that says so.
    let r = api.admin(endpoints::get_job_plan(&id), None).await;
    assert_eq!(r.status, 404, "{}", r.body);
    assert!(
        r.body.to_string().contains("has no plan data"),
        "{}",
        r.body
    );

    upload_plan(&api, &id, big_plan(1234).to_string()).await;
    let first = api.admin(endpoints::get_job_plan(&id), None).await;
    assert_eq!(first.status, 200, "{}", first.body);
    assert_eq!(first.body["available"], true);
    assert_eq!(first.body["total_resources"], 1234);
    assert_eq!(first.body["counts"]["create"], 1234);
    let entries = first.body["resource_changes"].as_array().unwrap();
    assert_eq!(entries.len(), 1000, "the default and largest page");
    assert_eq!(
        entries[7],
        json!({"address": "module.m.terraform_data.r[7]", "module": "module.m",
               "type": "terraform_data", "name": "r", "action": "create",
               "changes": [
                   {"path": "id", "before": null, "after": null, "after_unknown": true},
                   {"path": "input", "before": null, "after": 7}
               ],
               "replace_paths": []})
    );
    assert_eq!(
        first.body["output_changes"][0]["after"],
        "(sensitive value)"
    );
    let cursor = first.body["next_cursor"].as_str().unwrap();
    let second = api
        .admin(
            endpoints::get_job_plan(&id).query([
                ("cursor", Some(cursor.to_string().as_str())),
                ("limit", Some("1000")),
            ]),
            None,
        )
        .await;
    assert_eq!(second.status, 200, "{}", second.body);
    assert_eq!(
        second.body["resource_changes"].as_array().unwrap().len(),
        234
    );
    assert_eq!(
        second.body["resource_changes"][0]["address"],
        "module.m.terraform_data.r[1000]"
    );
    assert_eq!(second.body["next_cursor"], Value::Null);
    let small = api
        .admin(
            endpoints::get_job_plan(&id).query([("limit", Some("5"))]),
            None,
        )
        .await;
    assert_eq!(small.body["resource_changes"].as_array().unwrap().len(), 5);

    // Bad queries name their field.
    for (name, value, field) in [
        ("limit", "0", "query.limit"),
        ("limit", "1001", "query.limit"),
        ("cursor", "not-ours", "query.cursor"),
    ] {
        let query = format!("{name}={value}");
        let r = api
            .admin(
                endpoints::get_job_plan(&id).query([(name, Some(value))]),
                None,
            )
            .await;
        assert_eq!(r.status, 400, "{query}: {}", r.body);
        assert!(r.body.to_string().contains(field), "{query}: {}", r.body);
    }

    // Read permission on the environment, as for the log.
    let stranger = api
        .send(Some("stranger"), endpoints::get_job_plan(&id), None, &[])
        .await;
    assert!(
        stranger.status == 403 || stranger.status == 404,
        "{}: {}",
        stranger.status,
        stranger.body
    );
    api.grant("acme", Role::Viewer, "reader").await;
    let reader = api
        .send(
            Some("reader"),
            endpoints::get_job_plan(&id).query([("limit", Some("1"))]),
            None,
            &[],
        )
        .await;
    assert_eq!(reader.status, 200, "{}", reader.body);
}

#[tokio::test]
async fn an_unavailable_plan_answers_its_reason() {
    let api = Api::new().await;
    let id = planned_job(&api).await;
    upload_plan(
        &api,
        &id,
        json!({"unavailable": "plan data unavailable for Terraform 0.11"}).to_string(),
    )
    .await;
    let r = api.admin(endpoints::get_job_plan(&id), None).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["available"], false);
    assert_eq!(r.body["reason"], "plan data unavailable for Terraform 0.11");
    assert_eq!(r.body["resource_changes"], json!([]));

    upload_plan(&api, &id, "{not json".into()).await;
    let r = api.admin(endpoints::get_job_plan(&id), None).await;
    assert_eq!(r.body["available"], false, "{}", r.body);
    assert!(r.body["reason"]
        .as_str()
        .unwrap()
        .starts_with("the plan's JSON could not be read"));
}
