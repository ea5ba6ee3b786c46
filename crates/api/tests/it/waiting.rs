//! A waiting job says why (`waiting` on the job view and in the list), and a 404 of an
//! environment or a job suggests the nearest names the caller may see, never others'.

use crate::common;

use common::{seed_org, typo, Api};
use sortie_client::endpoints;
use sortie_core::Role;

const PLAN: &str = r#"{"operation":"plan","files":{"main.tf":""}}"#;

async fn submit(api: &Api, subject: &str, env: &str) -> String {
    let r = api
        .send(Some(subject), endpoints::submit_job(env), Some(PLAN), &[])
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    r.body["id"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn a_queued_job_says_which_job_it_waits_behind_in_get_and_in_the_list() {
    let api = Api::new().await;
    seed_org(&api, "acme").await;
    api.create_env("acme/web", "prod", "production").await;
    let first = submit(&api, "acme-owner", "acme/web/prod").await;
    let second = submit(&api, "acme-owner", "acme/web/prod").await;
    api.launch(&first, "token-1").await;

    let got = api
        .send(Some("acme-owner"), endpoints::get_job(&second), None, &[])
        .await;
    assert_eq!(got.status, 200);
    let w = &got.body["waiting"];
    assert_eq!(w["kind"], "queued_behind", "{}", got.body);
    assert_eq!(w["behind"], first.as_str());
    assert_eq!(w["behind_state"], "running");
    let text = w["text"].as_str().unwrap();
    assert!(
        text.starts_with(&format!("queued behind {}… (running since ", &first[..8]))
            && text.ends_with(" UTC)"),
        "{text}"
    );

    let running = api
        .send(Some("acme-owner"), endpoints::get_job(&first), None, &[])
        .await;
    assert!(
        running.body.get("waiting").is_none(),
        "a running job does not wait"
    );

    let list = api
        .send(
            Some("acme-owner"),
            endpoints::list_jobs("acme/web/prod"),
            None,
            &[],
        )
        .await;
    assert_eq!(list.status, 200);
    let jobs = list.body["jobs"].as_array().unwrap();
    assert_eq!(jobs[0]["id"], second.as_str());
    assert_eq!(jobs[0]["waiting"]["kind"], "queued_behind");
    assert!(jobs[1].get("waiting").is_none());
}

#[tokio::test]
async fn a_missing_environment_is_404_with_the_nearest_visible_names_and_never_an_empty_list() {
    let api = Api::new().await;
    seed_org(&api, "acme").await;
    api.create_env("acme/web", "prod", "production").await;
    api.create_env("acme/web", "staging", "staging").await;
    // Near `acme/web/x/prod` by one edit, but in a group a viewer of acme/web may not read.
    api.create_env("acme/webx", "prod", "production").await;
    api.grant("acme/web", Role::Viewer, "web-viewer").await;

    let r = api
        .send(
            Some("web-viewer"),
            endpoints::get_environment("acme/web/prdo"),
            None,
            &[],
        )
        .await;
    assert_eq!(r.status, 404);
    assert_eq!(
        r.body["error"]["did_you_mean"],
        serde_json::json!(["acme/web/prod"])
    );

    let jobs = api
        .send(
            Some("web-viewer"),
            endpoints::list_jobs("acme/web/prdo"),
            None,
            &[],
        )
        .await;
    assert_eq!(jobs.status, 404, "not an empty list: {}", jobs.body);
    assert_eq!(jobs.body["error"]["did_you_mean"][0], "acme/web/prod");

    // The group acme/web/x is readable and empty: the organisation's environments are
    // compared, but only those the caller may read are named.
    let hidden = api
        .send(
            Some("web-viewer"),
            endpoints::get_environment("acme/web/x/prod"),
            None,
            &[],
        )
        .await;
    assert_eq!(hidden.status, 404);
    assert_eq!(
        hidden.body["error"]["did_you_mean"],
        serde_json::json!(["acme/web/prod"]),
        "only the names the caller may read: {}",
        hidden.body
    );
    let admin = api
        .admin(endpoints::get_environment("acme/web/x/prod"), None)
        .await;
    assert_eq!(
        admin.body["error"]["did_you_mean"],
        serde_json::json!(["acme/webx/prod", "acme/web/prod"]),
        "the nearest first, for one who may read both"
    );
}

#[tokio::test]
async fn a_mistyped_job_id_suggests_only_the_callers_own_jobs() {
    let api = Api::new().await;
    seed_org(&api, "acme").await;
    seed_org(&api, "globex").await;
    api.create_env("acme/web", "prod", "production").await;
    api.create_env("globex/web", "prod", "production").await;
    let theirs = submit(&api, "globex-owner", "globex/web/prod").await;
    api.launch(&theirs, "token-g").await;
    let ours = submit(&api, "acme-owner", "acme/web/prod").await;
    api.launch(&ours, "token-a").await;

    let r = api
        .send(
            Some("acme-owner"),
            endpoints::get_job(&typo(&ours)),
            None,
            &[],
        )
        .await;
    assert_eq!(r.status, 404);
    assert_eq!(r.body["error"]["did_you_mean"], serde_json::json!([ours]));

    let r = api
        .send(
            Some("acme-owner"),
            endpoints::get_job(&typo(&theirs)),
            None,
            &[],
        )
        .await;
    assert_eq!(r.status, 404);
    let named = r.body["error"]["did_you_mean"].to_string();
    assert!(
        !named.contains(&theirs),
        "another tenant's job id leaked: {named}"
    );
}

#[tokio::test]
async fn list_environments_recursive_adds_the_groups_below() {
    let api = Api::new().await;
    seed_org(&api, "acme").await;
    api.create_env("acme/web", "prod", "production").await;
    api.create_env("acme/web/eu", "prod", "production").await;
    api.create_env("acme/webshop", "prod", "production").await;
    let paths = |r: &common::Reply| -> Vec<String> {
        r.body["environments"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["path"].as_str().unwrap().to_string())
            .collect()
    };
    let own = api
        .admin(endpoints::list_environments("acme/web"), None)
        .await;
    assert_eq!(paths(&own), ["acme/web/prod"]);
    assert_eq!(
        own.body["in_subgroups"], 1,
        "counts acme/web/eu/prod, never acme/webshop's: {}",
        own.body
    );
    assert!(own.body.get("truncated").is_none(), "{}", own.body);
    let org = api.admin(endpoints::list_environments("acme"), None).await;
    assert_eq!(paths(&org), Vec::<String>::new());
    assert_eq!(org.body["in_subgroups"], 3, "{}", org.body);
    let all = api
        .admin(
            endpoints::list_environments("acme/web").query([("recursive", Some("true"))]),
            None,
        )
        .await;
    assert_eq!(paths(&all), ["acme/web/eu/prod", "acme/web/prod"]);
    assert!(all.body.get("in_subgroups").is_none(), "{}", all.body);
    // The root spans every organisation: no recursive listing of every tenant.
    let root = api
        .admin(
            endpoints::list_environments("-").query([("recursive", Some("true"))]),
            None,
        )
        .await;
    assert_eq!(root.status, 400, "{}", root.body);
    assert_eq!(root.body["error"]["fields"][0]["path"], "query.recursive");
    let bad = api
        .admin(
            endpoints::list_environments("acme/web").query([("recursive", Some("yes"))]),
            None,
        )
        .await;
    assert_eq!(bad.status, 400);
    assert_eq!(bad.body["error"]["fields"][0]["path"], "query.recursive");
}
