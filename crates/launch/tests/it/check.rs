//! `runner check` against moto, through the real SDK and a loopback proxy that records
//! every call: a runner ready to launch passes every check; each way a runner can be
//! broken fails its own check in AWS's words; nothing is ever written.

use std::collections::BTreeMap;

use aws_config::SdkConfig;
use aws_sdk_ecs::types::{Compatibility, ContainerDefinition, NetworkMode};
use serde_json::{json, Value};
use sortie_core::check::*;
use sortie_core::{CheckStatus, Runner, RunnerCheck, RunnerId, RunnerSpec};
use sortie_launch::{AwsRunnerChecker, RunnerChecker};
use sortie_testkit::proxy::FaultProxy;

const EXTERNAL_ID: &str = "sortie-ext-check";

/// What a check may call: reads only, never RunTask or a registration.
const READ_ONLY: &[&str] = &[
    "AssumeRole",
    "DescribeClusters",
    "DescribeTaskDefinition",
    "DescribeSubnets",
    "DescribeSecurityGroups",
    "SimulatePrincipalPolicy",
];

async fn config(endpoint: &str) -> SdkConfig {
    sortie_testkit::sdk_config_at(endpoint).await
}

/// A VPC with one subnet and one security group (crates/testkit/fixtures/ecs_network.py).
fn network(endpoint: &str) -> Value {
    let root = sortie_testkit::repo_root();
    let out = std::process::Command::new(root.join(".tools/venv/bin/python"))
        .arg(root.join("crates/testkit/fixtures/ecs_network.py"))
        .arg(endpoint)
        .output()
        .expect("run the network fixture");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The target account of one test, made directly on moto (not through the proxy).
struct Target {
    direct: SdkConfig,
    net: Value,
    cluster: String,
    task_definition: String,
    launcher_role: String,
    execution_role: String,
    task_role: String,
}

impl Target {
    async fn new(endpoint: &str) -> Self {
        let direct = config(endpoint).await;
        let net = network(endpoint);
        let ecs = aws_sdk_ecs::Client::new(&direct);
        let iam = aws_sdk_iam::Client::new(&direct);
        let cluster = sortie_testkit::unique("check");
        ecs.create_cluster()
            .cluster_name(&cluster)
            .capacity_providers("FARGATE")
            .capacity_providers("FARGATE_SPOT")
            .send()
            .await
            .unwrap();
        let mut roles = vec![];
        for prefix in ["launcher", "execution", "task"] {
            let name = sortie_testkit::unique(prefix);
            let role = iam
                .create_role()
                .role_name(&name)
                .assume_role_policy_document(
                    json!({"Version": "2012-10-17", "Statement": []}).to_string(),
                )
                .send()
                .await
                .unwrap();
            roles.push(role.role.unwrap().arn);
        }
        let [launcher_role, execution_role, task_role] = <[String; 3]>::try_from(roles).unwrap();
        let target = Self {
            direct,
            net,
            cluster,
            task_definition: String::new(),
            launcher_role,
            execution_role,
            task_role,
        };
        let task_definition = target.register("runner").await;
        target
            .allow_pass_role(&[&target.execution_role, &target.task_role])
            .await;
        Self {
            task_definition,
            ..target
        }
    }

    /// Registers a Fargate task definition whose one container is `container`.
    async fn register(&self, container: &str) -> String {
        aws_sdk_ecs::Client::new(&self.direct)
            .register_task_definition()
            .family(sortie_testkit::unique("sortie-runner"))
            .requires_compatibilities(Compatibility::Fargate)
            .network_mode(NetworkMode::Awsvpc)
            .cpu("256")
            .memory("512")
            .execution_role_arn(&self.execution_role)
            .task_role_arn(&self.task_role)
            .container_definitions(
                ContainerDefinition::builder()
                    .name(container)
                    .image("sortie-runner:test")
                    .memory(512)
                    .build(),
            )
            .send()
            .await
            .unwrap()
            .task_definition
            .unwrap()
            .task_definition_arn
            .unwrap()
    }

    /// The launcher role's policy: iam:PassRole on `roles`, to ECS tasks only (as in
    /// infra/target-account.yaml).
    async fn allow_pass_role(&self, roles: &[&String]) {
        let name = self.launcher_role.rsplit('/').next().unwrap();
        aws_sdk_iam::Client::new(&self.direct)
            .put_role_policy()
            .role_name(name)
            .policy_name("launch-runner-tasks")
            .policy_document(
                json!({"Version": "2012-10-17", "Statement": [{
                    "Effect": "Allow", "Action": "iam:PassRole", "Resource": roles,
                    "Condition": {"StringEquals": {"iam:PassedToService": "ecs-tasks.amazonaws.com"}}
                }]})
                .to_string(),
            )
            .send()
            .await
            .unwrap();
    }

    /// A runner of `acme/platform` on this target, with `change` applied to its
    /// configuration first.
    fn runner(&self, change: impl FnOnce(&mut Value)) -> Runner {
        let mut configuration = json!({
            "type": "ecs-fargate",
            "role_arn": self.launcher_role,
            "external_id": EXTERNAL_ID,
            "region": "us-east-1",
            "cluster": self.cluster,
            "task_definition": self.task_definition,
            "container_name": "runner",
            "subnets": [self.net["subnet"]],
            "security_groups": [self.net["security_group"]],
            "capacity_provider": "FARGATE_SPOT",
            "secrets": {"TF_VAR_db_password": "arn:aws:secretsmanager:us-east-1:123456789012:secret:db-AbCdEf"},
        });
        change(&mut configuration);
        let spec = json!({
            "runner_configuration": configuration,
            "state_storage_configuration": {"type": "s3", "bucket": "acme-state", "region": "us-east-1"},
        });
        Runner {
            id: RunnerId::parse("acme/platform/fargate").unwrap(),
            spec: RunnerSpec::parse(&spec.to_string()).unwrap(),
        }
    }
}

fn by_name(checks: &[RunnerCheck]) -> BTreeMap<&str, &RunnerCheck> {
    checks.iter().map(|c| (c.name.as_str(), c)).collect()
}

fn by_name_owned(checks: Vec<RunnerCheck>) -> BTreeMap<String, RunnerCheck> {
    checks.into_iter().map(|c| (c.name.clone(), c)).collect()
}

/// The checks of the target's runner with `change` made to its configuration, by name.
async fn check_runner(
    checker: &AwsRunnerChecker,
    target: &Target,
    change: impl FnOnce(&mut Value),
) -> BTreeMap<String, RunnerCheck> {
    by_name_owned(checker.check(&target.runner(change), "acme").await)
}

/// Asserts that `check` failed and that its detail says `words`.
fn failed_with(check: &RunnerCheck, words: &str) {
    assert_eq!(check.status, CheckStatus::Failed, "{check:?}");
    assert!(check.detail.contains(words), "{words:?} not in {check:?}");
}

fn only_reads(proxy: &FaultProxy) {
    for r in proxy.requests() {
        let op = r.operation.clone().unwrap_or_default();
        assert!(
            READ_ONLY.contains(&op.as_str()),
            "a check called {op}: it may only read"
        );
    }
}

#[tokio::test]
async fn a_runner_ready_to_launch_passes_every_check_and_changes_nothing() {
    sortie_testkit::require_aws!();
    let endpoint = sortie_testkit::endpoint();
    let target = Target::new(&endpoint).await;
    let proxy = FaultProxy::start(&endpoint);
    let checker = AwsRunnerChecker::new(config(&proxy.url()).await, false);
    let runner = target.runner(|_| {});

    let checks = checker.check(&runner, "acme").await;

    let names: Vec<&str> = checks.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            CHECK_ASSUME_ROLE,
            CHECK_CLUSTER,
            CHECK_CAPACITY_PROVIDER,
            CHECK_TASK_DEFINITION,
            CHECK_NETWORK,
            CHECK_PASS_ROLE
        ]
    );
    for c in &checks {
        assert_eq!(c.status, CheckStatus::Passed, "{c:?}");
    }
    let by = by_name(&checks);
    assert!(by[CHECK_CAPACITY_PROVIDER]
        .detail
        .contains("FARGATE and FARGATE_SPOT"));
    assert!(by[CHECK_NETWORK]
        .detail
        .contains(target.net["vpc"].as_str().unwrap()));
    assert!(by[CHECK_PASS_ROLE].detail.contains(&target.execution_role));
    assert!(by[CHECK_PASS_ROLE].detail.contains(&target.task_role));

    // The role is assumed as a launch assumes it (ExternalId, the org and runner session
    // tags), plus the tag that makes it a read-only check session; no job tag.
    let assume = proxy.requests_for("AssumeRole");
    assert_eq!(assume.len(), 1);
    let form = assume[0].form();
    assert_eq!(form["RoleArn"], target.launcher_role);
    assert_eq!(form["ExternalId"], EXTERNAL_ID);
    assert!(form["RoleSessionName"].starts_with("sortie-check-"));
    let tags: BTreeMap<String, String> = (1..)
        .map_while(|i| {
            Some((
                form.get(&format!("Tags.member.{i}.Key"))?.clone(),
                form.get(&format!("Tags.member.{i}.Value"))?.clone(),
            ))
        })
        .collect();
    assert_eq!(
        tags.keys().map(String::as_str).collect::<Vec<_>>(),
        ["sortie:env", "sortie:org", "sortie:runner"]
    );
    assert_eq!(tags["sortie:org"], "acme");
    assert_eq!(tags["sortie:env"], "runner-check");
    assert_eq!(tags["sortie:runner"], runner.id.to_string());
    // The simulation asks exactly whether the launcher role may pass the roles to ECS.
    let simulate = proxy.requests_for("SimulatePrincipalPolicy");
    assert_eq!(simulate.len(), 1);
    let form = simulate[0].form();
    assert_eq!(form["PolicySourceArn"], target.launcher_role);
    assert_eq!(form["ActionNames.member.1"], "iam:PassRole");
    assert_eq!(
        form["ContextEntries.member.1.ContextKeyName"],
        "iam:PassedToService"
    );
    assert_eq!(
        form["ContextEntries.member.1.ContextKeyValues.member.1"],
        "ecs-tasks.amazonaws.com"
    );
    only_reads(&proxy);
}

#[tokio::test]
async fn each_broken_part_fails_its_own_check_in_aws_words() {
    sortie_testkit::require_aws!();
    let endpoint = sortie_testkit::endpoint();
    let target = Target::new(&endpoint).await;
    let other_vpc = network(&endpoint);
    let proxy = FaultProxy::start(&endpoint);
    let checker = AwsRunnerChecker::new(config(&proxy.url()).await, false);

    // No such cluster: the capacity providers cannot be looked at.
    let by = check_runner(&checker, &target, |c| {
        c["cluster"] = json!("no-such-cluster")
    })
    .await;
    failed_with(&by[CHECK_CLUSTER], "MISSING");
    assert_eq!(by[CHECK_CAPACITY_PROVIDER].status, CheckStatus::Skipped);
    assert_eq!(by[CHECK_TASK_DEFINITION].status, CheckStatus::Passed);

    // A cluster without the Spot capacity provider, for a runner whose plans use Spot.
    let plain = sortie_testkit::unique("check-plain");
    aws_sdk_ecs::Client::new(&target.direct)
        .create_cluster()
        .cluster_name(&plain)
        .capacity_providers("FARGATE")
        .send()
        .await
        .unwrap();
    let by = check_runner(&checker, &target, |c| c["cluster"] = json!(plain)).await;
    let capacity = &by[CHECK_CAPACITY_PROVIDER];
    failed_with(capacity, "FARGATE_SPOT");
    assert!(
        capacity
            .detail
            .starts_with("FARGATE_SPOT not associated with cluster"),
        "{capacity:?}"
    );

    // A task definition without the runner container, and one that does not exist.
    let sidecar_only = target.register("sidecar").await;
    let by = check_runner(&checker, &target, |c| {
        c["task_definition"] = json!(sidecar_only)
    })
    .await;
    failed_with(
        &by[CHECK_TASK_DEFINITION],
        "has no container named `runner` (it has: sidecar)",
    );
    let by = check_runner(&checker, &target, |c| {
        c["task_definition"] = json!("no-such-family:1")
    })
    .await;
    failed_with(
        &by[CHECK_TASK_DEFINITION],
        "DescribeTaskDefinition failed: ClientException",
    );
    assert_eq!(by[CHECK_PASS_ROLE].status, CheckStatus::Skipped);

    // A security group of another VPC, and a subnet that does not exist.
    let by = check_runner(&checker, &target, |c| {
        c["security_groups"] = json!([other_vpc["security_group"]])
    })
    .await;
    let net = &by[CHECK_NETWORK];
    failed_with(net, other_vpc["vpc"].as_str().unwrap());
    assert!(
        net.detail
            .starts_with("the subnets and security groups are not in one VPC"),
        "{net:?}"
    );
    let by = check_runner(&checker, &target, |c| {
        c["subnets"] = json!(["subnet-0123456789abcdef0"])
    })
    .await;
    failed_with(
        &by[CHECK_NETWORK],
        "DescribeSubnets failed: InvalidSubnetID.NotFound",
    );

    // A launcher role that may pass the execution role but not the task role.
    target.allow_pass_role(&[&target.execution_role]).await;
    let by = check_runner(&checker, &target, |_| {}).await;
    let pass = &by[CHECK_PASS_ROLE];
    failed_with(pass, &format!("{}: implicitDeny", target.task_role));
    assert!(!pass
        .detail
        .contains(&format!("{}: ", target.execution_role)));
    only_reads(&proxy);
}

#[tokio::test]
async fn a_role_that_cannot_be_assumed_fails_with_sts_words_and_nothing_else_is_asked() {
    sortie_testkit::require_aws!();
    let endpoint = sortie_testkit::endpoint();
    let target = Target::new(&endpoint).await;
    let proxy = FaultProxy::start(&endpoint);
    let checker = AwsRunnerChecker::new(config(&proxy.url()).await, false);
    // moto lets anyone assume anything; STS in AWS answers a wrong ExternalId like this.
    let words = "User: arn:aws:iam::123456789012:user/sortie is not authorized to perform: sts:AssumeRole on resource: x";
    proxy.inject("AssumeRole", 1, 403, "AccessDenied", words);

    let checks = checker.check(&target.runner(|_| {}), "acme").await;

    assert_eq!(checks[0].name, CHECK_ASSUME_ROLE);
    assert_eq!(checks[0].status, CheckStatus::Failed);
    assert!(checks[0].detail.contains("AccessDenied"), "{:?}", checks[0]);
    assert!(checks[0].detail.contains(words), "{:?}", checks[0]);
    assert_eq!(checks.len(), 6);
    for c in &checks[1..] {
        assert_eq!(c.status, CheckStatus::Skipped, "{c:?}");
        assert_eq!(c.detail, "not checked: `assume_role` did not pass");
    }
    assert_eq!(proxy.requests().len(), 1, "only AssumeRole was called");
}

#[tokio::test]
async fn a_runner_type_without_a_launcher_fails_with_the_words_its_jobs_would_get() {
    sortie_testkit::require_aws!();
    let endpoint = sortie_testkit::endpoint();
    let checker = AwsRunnerChecker::new(config(&endpoint).await, false);
    let local = Runner {
        id: RunnerId::parse("acme/laptop").unwrap(),
        spec: RunnerSpec::parse(
            "runner_configuration: {type: local}\nstate_storage_configuration: {type: local, directory: /tmp/x}",
        )
        .unwrap(),
    };
    let checks = checker.check(&local, "acme").await;
    assert_eq!(
        checks,
        [RunnerCheck::failed(
            CHECK_LAUNCHER,
            "no launcher for `local` runners is configured here"
        )]
    );
    let here = AwsRunnerChecker::new(config(&endpoint).await, true);
    assert!(sortie_core::check::all_passed(
        &here.check(&local, "acme").await
    ));
}
