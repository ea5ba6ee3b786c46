//! Sensitive variables through the HTTP API, on moto (Secrets Manager included): the
//! submit keeps each value in a secret and the job only its ARN; only the job's own token
//! reads the values back; every view shows `(sensitive)`; the secrets go when the job
//! ends. And a list of jobs names their files without their contents. Every answer is
//! checked against the OpenAPI document (`common::conforms`).

use crate::common;

use common::{seed_org, Api};
use serde_json::{json, Value};
use sortie_client::endpoints;

async fn submit(api: &Api, body: Value) -> common::Reply {
    api.admin(endpoints::submit_job("acme/dev"), Some(&body.to_string()))
        .await
}

#[tokio::test]
async fn sensitive_values_live_in_secrets_reach_only_the_job_token_and_die_with_the_job() {
    let api = Api::new().await;
    seed_org(&api, "acme").await;
    api.create_env("acme", "dev", "development").await;
    let value = format!("hunter2-{}", sortie_testkit::unique("v"));

    let r = submit(
        &api,
        json!({"operation": "apply", "files": {"main.tf": "variable \"db\" {}"},
            "variables": {"region": "eu"}, "sensitive_variables": {"db": value}}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert!(!r.body.to_string().contains(&value), "{}", r.body);
    assert_eq!(r.body["sensitive_variables"], json!({"db": "(sensitive)"}));
    let id = r.body["id"].as_str().unwrap().to_string();

    // The record holds the names and the job's one secret's ARN, named for the job; the
    // secret holds every value.
    let record = {
        api.store
            .get_job(&sortie_core::JobId::from(id.as_str()))
            .await
            .unwrap()
    };
    let arn = record.job.request.sensitive_secret.clone().unwrap();
    assert!(arn.contains(&format!(":secret:sortie/jobs/{id}")), "{arn}");
    assert!(record.job.request.sensitive_variables.contains_key("db"));
    assert_eq!(
        api.secrets.value(&arn).await.unwrap(),
        json!({ "db": value }).to_string()
    );
    let stored = serde_json::to_string(&record.job).unwrap();
    assert!(!stored.contains(&value), "the value is in the record");

    // GET shows the name only.
    let got = api.admin(endpoints::get_job(&id), None).await;
    assert_eq!(
        got.body["sensitive_variables"],
        json!({"db": "(sensitive)"})
    );
    assert!(
        !got.body.to_string().contains(&arn),
        "the view shows the ARN"
    );

    // Only the job's own token, while it runs, reads the values.
    let call = endpoints::get_job_sensitive_variables(&id);
    let before = api
        .send(None, call.clone(), None, &[("authorization", "Bearer t-1")])
        .await;
    assert_eq!(before.status, 401, "not launched yet: {}", before.body);
    api.launch(&id, "t-1").await;
    let spec = api
        .send(
            None,
            endpoints::get_job_spec(&id),
            None,
            &[("authorization", "Bearer t-1")],
        )
        .await;
    assert_eq!(spec.status, 200, "{}", spec.body);
    assert_eq!(spec.body["sensitive_variables"], json!(["db"]));
    assert!(!spec.body.to_string().contains(&value));
    for (who, auth) in [("a user", None), ("another token", Some("Bearer t-2"))] {
        let headers: Vec<(&str, &str)> = auth.map(|a| ("authorization", a)).into_iter().collect();
        let r = api.send(Some("admin"), call.clone(), None, &headers).await;
        assert_eq!(r.status, 401, "{who}: {}", r.body);
        assert!(!r.body.to_string().contains(&value));
    }
    let values = api
        .send(None, call.clone(), None, &[("authorization", "Bearer t-1")])
        .await;
    assert_eq!(values.status, 200, "{}", values.body);
    assert_eq!(values.body, json!({"variables": {"db": value}}));

    // The job ends (the runner's exit report): its secret is deleted.
    let exit = api
        .send(
            None,
            endpoints::report_job_exit(&id),
            Some(r#"{"exit_code":0}"#),
            &[
                ("authorization", "Bearer t-1"),
                ("content-type", "application/json"),
            ],
        )
        .await;
    assert!(exit.status.is_success(), "{}", exit.body);
    let gone = api.secrets.value(&arn).await.unwrap_err();
    assert!(gone.contains("GetSecretValue"), "{gone}");
    let after = api
        .send(None, call.clone(), None, &[("authorization", "Bearer t-1")])
        .await;
    assert_eq!(after.status, 401, "{}", after.body);
}

#[tokio::test]
async fn bad_sensitive_variables_are_400_naming_the_variable_never_the_value() {
    let api = Api::new().await;
    seed_org(&api, "acme").await;
    api.create_env("acme", "dev", "development").await;
    let r = submit(
        &api,
        json!({"operation": "plan", "files": {"main.tf": ""}, "variables": {"db": 1},
            "sensitive_variables": {"db": "hunter2", "9x": "hunter2", "n": 3}}),
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.body);
    let text = r.body.to_string();
    assert!(!text.contains("hunter2"), "{text}");
    for field in ["sensitive_variables.9x", "sensitive_variables.n"] {
        assert!(text.contains(field), "{field}: {text}");
    }
}

#[tokio::test]
async fn a_canceled_job_s_secrets_are_deleted() {
    let api = Api::new().await;
    seed_org(&api, "acme").await;
    api.create_env("acme", "dev", "development").await;
    let r = submit(
        &api,
        json!({"operation": "plan", "files": {"main.tf": ""}, "sensitive_variables": {"a": "x"}}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let id = r.body["id"].as_str().unwrap().to_string();
    let arn = {
        api.store
            .get_job(&sortie_core::JobId::from(id.as_str()))
            .await
            .unwrap()
            .job
            .request
            .sensitive_secret
            .clone()
            .unwrap()
    };
    assert_eq!(api.secrets.value(&arn).await.unwrap(), r#"{"a":"x"}"#);
    let c = api.admin(endpoints::cancel_job(&id), None).await;
    assert_eq!(c.status, 200, "{}", c.body);
    assert!(
        api.secrets.value(&arn).await.is_err(),
        "the secret outlived the job"
    );
}

#[tokio::test]
async fn a_list_of_jobs_names_their_files_and_serves_no_contents() {
    let api = Api::new().await;
    seed_org(&api, "acme").await;
    api.create_env("acme", "dev", "development").await;
    let content = "output \"marker\" { value = \"contents-not-listed\" }";
    let r = submit(
        &api,
        json!({"operation": "plan", "files": {"main.tf": content, "b/x.tf": ""}}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let id = r.body["id"].as_str().unwrap().to_string();
    let list = api.admin(endpoints::list_jobs("acme/dev"), None).await;
    assert_eq!(list.status, 200, "{}", list.body);
    let jobs = list.body["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0]["id"], id.as_str());
    assert!(jobs[0].get("files").is_none(), "{}", list.body);
    assert_eq!(jobs[0]["file_names"], json!(["b/x.tf", "main.tf"]));
    assert_eq!(jobs[0]["source"], json!({"type": "inline"}));
    assert!(!list.body.to_string().contains("contents-not-listed"));
    let one = api.admin(endpoints::get_job(&id), None).await;
    assert_eq!(one.body["files"]["main.tf"], content);
    assert!(one.body.get("file_names").is_none(), "{}", one.body);
}
