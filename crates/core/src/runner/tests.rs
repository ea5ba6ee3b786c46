//! Unit tests of runner decoding.

use super::*;

fn runner(cluster: &str) -> EcsFargateRunner {
    let spec = RunnerSpec::parse(&format!(
        "runner_configuration:\n  type: ecs-fargate\n  role_arn: arn:aws:iam::123456789012:role/launcher\n  external_id: ext-123456\n  region: eu-west-1\n  cluster: {cluster}\n  task_definition: runner\n  container_name: runner\n  subnets: [subnet-0123abcd]\n  security_groups: [sg-0123abcd]\nstate_storage_configuration:\n  type: s3\n  bucket: state\n  region: eu-west-1\n"
    ))
    .unwrap();
    match spec.runner_configuration {
        RunnerConfiguration::EcsFargate(c) => c,
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_task_event_must_come_from_the_runners_own_cluster() {
    let arn = "arn:aws:ecs:eu-west-1:123456789012:cluster/runners";
    assert_eq!(runner("runners").owns_cluster(arn), Ok(()));
    assert_eq!(runner(arn).owns_cluster(arn), Ok(()));
    let other_account = runner("runners")
        .owns_cluster("arn:aws:ecs:eu-west-1:999999999999:cluster/runners")
        .unwrap_err();
    assert!(
        other_account.contains("account 999999999999"),
        "{other_account}"
    );
    assert!(runner("runners")
        .owns_cluster("arn:aws:ecs:us-east-1:123456789012:cluster/runners")
        .unwrap_err()
        .contains("region"));
    assert!(runner("runners")
        .owns_cluster("arn:aws:ecs:eu-west-1:123456789012:cluster/other")
        .unwrap_err()
        .contains("cluster other"));
    assert!(runner("runners").owns_cluster("not-an-arn").is_err());
    assert!(runner("runners")
        .owns_cluster("arn:aws:s3:::runners")
        .is_err());
}

#[test]
fn the_secret_env_names_are_the_runners_injected_secrets_by_name_only() {
    let ecs = RunnerSpec::parse(
        "runner_configuration:\n  type: ecs-fargate\n  role_arn: arn:aws:iam::123456789012:role/launcher\n  external_id: ext-123456\n  region: eu-west-1\n  cluster: c\n  task_definition: runner\n  container_name: runner\n  subnets: [subnet-0123abcd]\n  security_groups: [sg-0123abcd]\n  env: {PLAIN: x}\n  secrets:\n    TOKEN_B: arn:aws:ssm:eu-west-1:123456789012:parameter/b\n    TOKEN_A: arn:aws:secretsmanager:eu-west-1:123456789012:secret:a-AbCdEf\nstate_storage_configuration:\n  type: s3\n  bucket: state\n  region: eu-west-1\n",
    )
    .unwrap();
    assert_eq!(
        ecs.runner_configuration.secret_env_names(),
        ["TOKEN_A", "TOKEN_B"]
    );
    let eks = RunnerSpec::parse(
        "runner_configuration:\n  type: eks\n  role_arn: arn:aws:iam::123456789012:role/launcher\n  external_id: ext-123456\n  region: eu-west-1\n  cluster: prod\n  job:\n    namespace: jobs\n    service_account: tf\n    secrets: {GITHUB_TOKEN: github/token, DD_API_KEY: datadog/key}\n    pod_template:\n      spec:\n        containers:\n          - name: sortie-runner\n            env:\n              - {name: DD_API_KEY, valueFrom: {secretKeyRef: {name: dd, key: k}}}\n              - {name: VAULT_TOKEN, valueFrom: {secretKeyRef: {name: vault, key: t}}}\n              - {name: POD_IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}\n              - {name: PLAIN, value: x}\n          - name: sidecar\n            env:\n              - {name: SIDECAR, valueFrom: {secretKeyRef: {name: s, key: k}}}\nstate_storage_configuration: { type: kubernetes }\n",
    )
    .unwrap();
    assert_eq!(
        eks.runner_configuration.secret_env_names(),
        ["DD_API_KEY", "GITHUB_TOKEN", "VAULT_TOKEN"]
    );
    let local = RunnerSpec::parse(
        "runner_configuration:\n  type: local\n  env: {A: b}\nstate_storage_configuration:\n  type: local\n  directory: /tmp/x\n",
    )
    .unwrap();
    assert!(local.runner_configuration.secret_env_names().is_empty());
}
