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
