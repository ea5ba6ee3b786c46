//! A runner's own secrets (issue 41, gap 1), through the HTTP API on moto: the spec a job's
//! pilot fetches names every environment variable its runner injects as a secret (an
//! `ecs-fargate` runner's `secrets`; an `eks` runner's `job.secrets` and the `secretKeyRef`
//! variables its `pod_template` gives the runner container), so that the pilot scrubs their
//! values. Names only: neither the spec nor the stored job holds a reference or a value.

use crate::common;

use common::{seed_org, Api};
use serde_json::{json, Value};
use sortie_client::endpoints;

const RUNNER_TOKEN_ARN: &str =
    "arn:aws:secretsmanager:us-east-1:123456789012:secret:runner-token-AbCdEf";
const DB_PASSWORD_ARN: &str = "arn:aws:ssm:us-east-1:123456789012:parameter/runner/db-password";

/// Registers runner `acme/<name>` from `yaml`, chosen for environments of type `env_type`.
async fn runner_for(api: &Api, name: &str, yaml: &str, env_type: &str) {
    let created = api
        .admin(endpoints::create_runner("acme", name), Some(yaml))
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let rule = json!({"id": name, "runner_id": format!("acme/{name}"),
        "criteria": {"env_type": env_type}})
    .to_string();
    let r = api.admin(endpoints::create_rule("acme"), Some(&rule)).await;
    assert_eq!(r.status, 201, "{}", r.body);
}

/// Submits a plan to `acme/<env>`, launches it with `token` and answers its spec.
async fn spec_of(api: &Api, env: &str, token: &str) -> (String, Value) {
    let r = api
        .admin(
            endpoints::submit_job(&format!("acme/{env}")),
            Some(r#"{"operation":"plan","files":{"main.tf":""}}"#),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let id = r.body["id"].as_str().unwrap().to_string();
    api.launch(&id, token).await;
    let bearer = format!("Bearer {token}");
    let spec = api
        .send(
            None,
            endpoints::get_job_spec(&id),
            None,
            &[("authorization", bearer.as_str())],
        )
        .await;
    assert_eq!(spec.status, 200, "{}", spec.body);
    (id, spec.body)
}

#[tokio::test]
async fn the_spec_names_the_runners_injected_secrets_and_holds_no_reference_or_value() {
    let api = Api::new().await;
    seed_org(&api, "acme").await;
    let fargate = format!(
        "runner_configuration:\n  type: ecs-fargate\n  role_arn: arn:aws:iam::123456789012:role/launcher\n  external_id: ext-123456\n  region: us-east-1\n  cluster: c\n  task_definition: runner:1\n  container_name: runner\n  subnets: [subnet-0123abcd]\n  security_groups: [sg-0123abcd]\n  env: {{TF_LOG: INFO}}\n  secrets:\n    RUNNER_TOKEN: {RUNNER_TOKEN_ARN}\n    TF_VAR_db_password: {DB_PASSWORD_ARN}\nstate_storage_configuration:\n  type: s3\n  bucket: acme-state\n  region: us-east-1\n"
    );
    runner_for(&api, "fargate", &fargate, "fargate").await;
    // An eks runner: its `job.secrets`, and a `secretKeyRef` variable its pod template gives
    // the runner container (a sidecar's is not the pilot's).
    let eks = "runner_configuration:\n  type: eks\n  role_arn: arn:aws:iam::123456789012:role/launcher\n  external_id: ext-123456\n  region: us-east-1\n  cluster: prod\n  job:\n    namespace: sortie-jobs\n    service_account: terraform\n    secrets: {GITHUB_TOKEN: github/token}\n    pod_template:\n      spec:\n        containers:\n          - name: sortie-runner\n            env:\n              - {name: DD_API_KEY, valueFrom: {secretKeyRef: {name: datadog, key: api-key}}}\n              - {name: PLAIN, value: visible}\n          - name: sidecar\n            image: busybox\n            env:\n              - {name: SIDECAR_KEY, valueFrom: {secretKeyRef: {name: side, key: k}}}\nstate_storage_configuration: { type: kubernetes }\n";
    runner_for(&api, "eks", eks, "k8s").await;
    api.create_env("acme", "ecs", "fargate").await;
    api.create_env("acme", "cluster", "k8s").await;

    let (ecs_job, ecs_spec) = spec_of(&api, "ecs", "t-ecs").await;
    assert_eq!(
        ecs_spec["runner_secret_env"],
        json!(["RUNNER_TOKEN", "TF_VAR_db_password"]),
        "{ecs_spec}"
    );
    let (eks_job, eks_spec) = spec_of(&api, "cluster", "t-eks").await;
    assert_eq!(
        eks_spec["runner_secret_env"],
        json!(["DD_API_KEY", "GITHUB_TOKEN"]),
        "{eks_spec}"
    );

    // Names only: no secret's reference in the spec, and no plain variable named a secret.
    for spec in [&ecs_spec, &eks_spec] {
        let text = spec.to_string();
        for reference in [RUNNER_TOKEN_ARN, DB_PASSWORD_ARN, "github/token", "api-key"] {
            assert!(!text.contains(reference), "{reference} in {text}");
        }
        assert!(!text.contains("PLAIN"), "{text}");
    }
    // The stored jobs (DynamoDB) keep the runner's snapshot as it was, and nothing new: the
    // names are derived from it when the spec is answered.
    for id in [&ecs_job, &eks_job] {
        let record = api
            .store
            .get_job(&sortie_core::JobId::from(id.as_str()))
            .await
            .unwrap();
        let stored = serde_json::to_string(&record).unwrap();
        assert!(!stored.contains("runner_secret_env"), "{stored}");
    }
}
