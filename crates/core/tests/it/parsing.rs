//! Runner, rule and job parsing: every problem is reported with its field path.

use sortie_core::runner::{CapacityProvider, COMPATIBILITY_MATRIX};
use sortie_core::{
    JobRequest, RunnerConfiguration, RunnerRule, RunnerSpec, StateStorageConfiguration,
    ValidationError,
};

const ECS_YAML: &str = r#"
description: "Fargate runner for payments in eu-west-1"
runner_configuration:
  type: ecs-fargate
  role_arn: arn:aws:iam::123456789012:role/sortie-launcher-payments
  external_id: payments-7f3a
  region: eu-west-1
  cluster: runners
  task_definition: sortie-runner:3
  container_name: runner
  subnets: [subnet-0a1b2c3d]
  security_groups: [sg-0a1b2c3d]
  capacity_provider: FARGATE_SPOT
  cpu: 1024
  memory: 4096
  task_role_arn: arn:aws:iam::123456789012:role/payments-deployer
  env: { TF_IN_AUTOMATION: "1" }
  secrets: { DB_PASSWORD: "arn:aws:secretsmanager:eu-west-1:123456789012:secret:db-AbCdEf" }
  timeout_seconds: 3600
state_storage_configuration:
  type: s3
  bucket: acme-tf-state
  key_prefix: sortie/
  region: eu-west-1
  use_lockfile: true
"#;

fn paths(e: &ValidationError) -> Vec<&str> {
    e.problems.iter().map(|p| p.path.as_str()).collect()
}

#[test]
fn parses_a_full_ecs_fargate_runner_from_yaml() {
    let spec = RunnerSpec::parse(ECS_YAML).expect("valid");
    let RunnerConfiguration::EcsFargate(c) = &spec.runner_configuration else {
        panic!("type")
    };
    assert_eq!(c.access.external_id, "payments-7f3a");
    assert_eq!(c.capacity_provider, CapacityProvider::FargateSpot);
    assert_eq!((c.cpu, c.memory), (Some(1024), Some(4096)));
    assert_eq!(c.timeout_seconds, 3600);
    let StateStorageConfiguration::S3(s3) = &spec.state_storage_configuration else {
        panic!("storage")
    };
    let env = sortie_core::EnvPath::parse("acme/payments/prod").unwrap();
    assert_eq!(
        s3.state_key(&env),
        "sortie/acme/payments/prod/terraform.tfstate"
    );
}

#[test]
fn json_and_yaml_give_the_same_runner_and_it_round_trips() {
    let from_yaml = RunnerSpec::parse(ECS_YAML).unwrap();
    let json = serde_json::to_string(&from_yaml).unwrap();
    assert_eq!(RunnerSpec::parse(&json).unwrap(), from_yaml);
    let stored: RunnerSpec = serde_json::from_str(&json).unwrap();
    assert_eq!(stored, from_yaml);
}

#[test]
fn parses_eks_and_local_runners_with_defaults() {
    let eks = RunnerSpec::parse(
        r#"
runner_configuration:
  type: eks
  role_arn: arn:aws:iam::123456789012:role/sortie-launcher
  external_id: eks-ext
  region: us-east-1
  cluster: platform
  job:
    namespace: sortie-runner
    service_account: sortie-runner
    image: 123456789012.dkr.ecr.us-east-1.amazonaws.com/sortie-runner:1.0.0
    node_selector: { disktype: ssd }
    tolerations: [{ key: spot, operator: Equal, value: "true", effect: NoSchedule }]
    annotations: { karpenter.sh/do-not-disrupt: "true" }
    resources: { requests: { cpu: 500m, memory: 1Gi }, limits: { memory: 2Gi } }
    pod_template: |
      spec:
        imagePullSecrets:
          - name: regcred
    ttl_seconds_after_finished: 600
    active_deadline_seconds: 7200
state_storage_configuration: { type: kubernetes, namespace: sortie-state }
"#,
    )
    .expect("valid eks");
    let RunnerConfiguration::Eks(c) = &eks.runner_configuration else {
        panic!()
    };
    assert_eq!(c.job.tolerations[0].effect.as_deref(), Some("NoSchedule"));
    assert!(c.job.pod_template.as_ref().unwrap()["spec"]["imagePullSecrets"].is_array());
    assert_eq!(
        c.timeout_seconds,
        sortie_core::runner::DEFAULT_TIMEOUT_SECONDS
    );

    let local = RunnerSpec::parse(
        "runner_configuration: {type: local}\nstate_storage_configuration: {type: local, directory: /tmp/state}",
    )
    .expect("valid local");
    assert_eq!(local.runner_configuration.type_name(), "local");
    assert_eq!(local.description, "");
}

#[test]
fn malformed_yaml_is_one_clear_problem() {
    let e = RunnerSpec::parse("runner_configuration: [unclosed").unwrap_err();
    assert_eq!(e.problems.len(), 1);
    assert!(
        e.problems[0].problem.contains("not valid YAML or JSON"),
        "{e}"
    );
    let e = RunnerSpec::parse("   ").unwrap_err();
    assert!(e.problems[0].problem.contains("empty"));
    let e = RunnerSpec::parse("- just\n- a list").unwrap_err();
    assert!(e.problems[0].problem.contains("must be a mapping"), "{e}");
}

#[test]
fn unknown_runner_type_names_the_known_ones() {
    let e = RunnerSpec::parse(
        "runner_configuration: {type: kubernetes-gke}\nstate_storage_configuration: {type: s3, bucket: b-b-b, region: eu-west-1}",
    )
    .unwrap_err();
    assert_eq!(paths(&e), vec!["runner_configuration.type"]);
    assert!(
        e.problems[0].problem.contains("ecs-fargate, eks, local"),
        "{e}"
    );
}

#[test]
fn every_problem_is_reported_not_just_the_first() {
    let e = RunnerSpec::parse(
        r#"
descripton: typo
runner_configuration:
  type: ecs-fargate
  role_arn: not-an-arn
  region: mars
  cluster: 42
  task_definition: runner
  subnets: [subnet-0a1b, vpc-123]
  security_groups: "sg-1"
  capacity_provider: SPOT
  cpu: 300
  memory: 512
  env: { SORTIE_TOKEN: x, "1BAD": y }
  secrets: { DB: hunter2 }
  timeout_seconds: 100000
state_storage_configuration:
  type: s3
  bucket: Bad_Bucket
  region: eu-west-1
  key_prefix: /abs
"#,
    )
    .unwrap_err();
    let got = paths(&e);
    for want in [
        "descripton",
        "runner_configuration.role_arn",
        "runner_configuration.external_id",
        "runner_configuration.region",
        "runner_configuration.cluster",
        "runner_configuration.container_name",
        "runner_configuration.subnets[1]",
        "runner_configuration.security_groups",
        "runner_configuration.capacity_provider",
        "runner_configuration.cpu",
        "runner_configuration.env.SORTIE_TOKEN",
        "runner_configuration.env.1BAD",
        "runner_configuration.secrets.DB",
        "runner_configuration.timeout_seconds",
        "state_storage_configuration.bucket",
        "state_storage_configuration.key_prefix",
    ] {
        assert!(
            got.contains(&want),
            "missing problem at {want}; got {got:?}"
        );
    }
    let cluster = e
        .problems
        .iter()
        .find(|p| p.path == "runner_configuration.cluster")
        .unwrap();
    assert!(
        cluster.problem.contains("invalid type"),
        "{}",
        cluster.problem
    );
    assert!(e
        .to_string()
        .starts_with(&format!("{} problem(s)", e.problems.len())));
}

#[test]
fn missing_fields_are_each_named() {
    let e = RunnerSpec::parse("runner_configuration: {type: eks}").unwrap_err();
    let got = paths(&e);
    for want in [
        "runner_configuration.role_arn",
        "runner_configuration.external_id",
        "runner_configuration.region",
        "runner_configuration.cluster",
        "runner_configuration.job",
        "state_storage_configuration",
    ] {
        assert!(got.contains(&want), "missing {want} in {got:?}");
    }
    assert!(e.problems.iter().all(|p| !p.problem.is_empty()));
}

#[test]
fn incompatible_storage_names_the_matrix() {
    let e = RunnerSpec::parse(
        r#"
runner_configuration:
  type: ecs-fargate
  role_arn: arn:aws:iam::123456789012:role/l
  external_id: ext-1
  region: eu-west-1
  cluster: c
  task_definition: t
  container_name: runner
  subnets: [subnet-0a1b2c3d]
  security_groups: [sg-0a1b2c3d]
state_storage_configuration: { type: kubernetes, namespace: state }
"#,
    )
    .unwrap_err();
    assert_eq!(paths(&e), vec!["state_storage_configuration.type"]);
    assert!(e.problems[0].problem.contains(COMPATIBILITY_MATRIX), "{e}");
    let local_on_eks = RunnerSpec::parse(
        "runner_configuration: {type: local}\nstate_storage_configuration: {type: kubernetes, namespace: x}",
    )
    .unwrap_err();
    assert!(local_on_eks.problems[0]
        .problem
        .contains("allowed pairings"));
}

#[test]
fn wrong_typed_nested_eks_fields_carry_their_paths() {
    let e = RunnerSpec::parse(
        r#"
runner_configuration:
  type: eks
  role_arn: arn:aws:iam::123456789012:role/l
  external_id: ext-1
  region: us-east-1
  cluster: c
  job:
    namespace: Not_A_Label
    service_account: sa
    image: img
    tolerations: [{ operator: Maybe, effect: Sometimes }]
    pod_template: 7
    surprise: true
state_storage_configuration: { type: s3, bucket: bkt-1, region: us-east-1 }
"#,
    )
    .unwrap_err();
    let got = paths(&e);
    for want in [
        "runner_configuration.job.namespace",
        "runner_configuration.job.tolerations[0].operator",
        "runner_configuration.job.tolerations[0].effect",
        "runner_configuration.job.pod_template",
        "runner_configuration.job.surprise",
    ] {
        assert!(got.contains(&want), "missing {want} in {got:?}");
    }
}

#[test]
fn rules_parse_and_reject_invisible_runners_and_bad_globs() {
    let r = RunnerRule::parse(
        "id: prod-spot\nscope: acme/payments\nrunner_id: acme/fargate\ncriteria: {env_type: production, tags: [spot]}\npriority: 5",
    )
    .unwrap();
    assert_eq!(r.criteria.count(), 2);
    let e = RunnerRule::parse("id: x\nscope: acme\nrunner_id: globex/fargate").unwrap_err();
    assert_eq!(paths(&e), vec!["runner_id"]);
    assert!(
        e.problems[0]
            .problem
            .contains("not `acme` or one of its ancestors"),
        "{e}"
    );
    let e = RunnerRule::parse("id: Bad Id\nscope: Acme\nrunner_id: r\ncriteria: {env_path: 'acme/[', color: red}\npriority: high")
        .unwrap_err();
    let got = paths(&e);
    for want in [
        "id",
        "scope",
        "criteria.env_path",
        "criteria.color",
        "priority",
    ] {
        assert!(got.contains(&want), "missing {want} in {got:?}");
    }
}

#[test]
fn job_requests_validate_sources_files_and_secret_refs() {
    let ok = JobRequest::parse(
        r#"{"operation":"apply","source":{"type":"git","url":"https://git.example.com/acme/infra.git","ref":"main","path":"stacks/app"},
            "variables":{"region":"eu-west-1","replicas":3},"files":{"extra.auto.tfvars.json":"{}"},
            "secret_refs":{"TF_VAR_token":"arn:aws:ssm:eu-west-1:123456789012:parameter/ci/token"}}"#,
    )
    .unwrap();
    assert_eq!(ok.operation, sortie_core::Operation::Apply);
    let e = JobRequest::parse(
        r#"{"operation":"yeet","source":{"type":"s3","bucket":"b","key":"k","sha256":"xyz"},
            "files":{"../etc/passwd":"x","/abs":"y"},"secret_refs":{"TOKEN":"plain-secret"},"extra":1}"#,
    )
    .unwrap_err();
    let got = paths(&e);
    for want in [
        "operation",
        "source.sha256",
        "files.../etc/passwd",
        "files./abs",
        "secret_refs.TOKEN",
        "extra",
    ] {
        assert!(got.contains(&want), "missing {want} in {got:?}");
    }
    let e = JobRequest::parse(r#"{"operation":"plan"}"#).unwrap_err();
    assert_eq!(paths(&e), vec!["source"]);
    let inline = JobRequest::parse(
        r#"{"operation":"plan","files":{"main.tf":"output \"x\" { value = 1 }"}}"#,
    )
    .unwrap();
    assert_eq!(inline.source, sortie_core::Source::inline());
}

#[test]
fn invalid_group_paths_are_rejected_with_a_reason() {
    for bad in [
        "Acme",
        "acme//pay",
        "acme/",
        "-acme",
        "a/b/c/d/e/f/g/h/i",
        "acme/pay_ments",
    ] {
        let e = sortie_core::GroupPath::parse(bad).unwrap_err();
        assert!(
            e.to_string().contains(&format!("`{bad}`")),
            "the error must name the path: {e}"
        );
    }
}

#[test]
fn an_eks_runner_defaults_its_image_and_takes_kubernetes_secret_keys_not_arns() {
    let base = |job_extra: &str| {
        format!(
            "runner_configuration:\n  type: eks\n  role_arn: arn:aws:iam::123456789012:role/l\n  external_id: ext-123456\n  region: us-east-1\n  cluster: prod\n  job:\n    namespace: sortie\n    service_account: runner\n{job_extra}state_storage_configuration: {{ type: kubernetes }}\n"
        )
    };
    let ok = RunnerSpec::parse(&base(
        "    image_pull_policy: IfNotPresent\n    image_pull_secrets: [regcred]\n    secrets: { TF_VAR_db: db-creds/password }\n",
    ))
    .expect("valid eks");
    let RunnerConfiguration::Eks(c) = &ok.runner_configuration else {
        panic!()
    };
    assert_eq!(c.job.image, sortie_core::runner::DEFAULT_EKS_IMAGE);
    assert_eq!(c.job.image_pull_policy.as_deref(), Some("IfNotPresent"));
    assert_eq!(c.job.image_pull_secrets, vec!["regcred".to_string()]);
    assert!(!c.job.automount_service_account_token, "off by default");
    let sortie_core::StateStorageConfiguration::Kubernetes(k) = &ok.state_storage_configuration
    else {
        panic!()
    };
    assert_eq!(k.namespace, None, "the runner's namespace is used");

    let e = RunnerSpec::parse(&base(
        "    image_pull_policy: Sometimes\n    ttl_seconds_after_finished: 30\n    image_pull_secrets: [Not_A_Name]\n    secrets: { TF_VAR_db: \"arn:aws:secretsmanager:us-east-1:123456789012:secret:db\", SORTIE_X: a/b, OTHER: no-key }\n",
    ))
    .unwrap_err();
    let got = paths(&e);
    for want in [
        "runner_configuration.job.image_pull_policy",
        "runner_configuration.job.ttl_seconds_after_finished",
        "runner_configuration.job.image_pull_secrets[0]",
        "runner_configuration.job.secrets.TF_VAR_db",
        "runner_configuration.job.secrets.SORTIE_X",
        "runner_configuration.job.secrets.OTHER",
    ] {
        assert!(got.contains(&want), "missing {want} in {got:?}");
    }
    let arn = e
        .problems
        .iter()
        .find(|p| p.path == "runner_configuration.job.secrets.TF_VAR_db")
        .unwrap();
    assert!(
        arn.problem.contains("<secret name>/<key>") && arn.problem.contains("External Secrets"),
        "{}",
        arn.problem
    );
}
