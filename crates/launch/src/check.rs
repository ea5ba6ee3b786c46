//! `runner check`: a runner's preflight, made as Sortie would launch, without launching.
//!
//! [`AwsRunnerChecker`] assumes the runner's launcher role exactly as a launch does
//! (ExternalId, session tags), then asks the target account, read-only, whether a task
//! could start there: the cluster and its capacity providers (ECS DescribeClusters), the
//! task definition and its runner container (DescribeTaskDefinition), the subnets and
//! security groups (EC2 DescribeSubnets, DescribeSecurityGroups) and whether the launcher
//! role may pass the task's roles to ECS (IAM SimulatePrincipalPolicy). It writes nothing.

use std::collections::BTreeSet;

use async_trait::async_trait;
use aws_config::{Region, SdkConfig};
use aws_credential_types::provider::ProvideCredentials;
use aws_credential_types::Credentials;
use aws_sdk_ecs::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_iam::types::{ContextEntry, ContextKeyTypeEnum, PolicyEvaluationDecisionType};
use sortie_core::check::*;
use sortie_core::runner::{AwsAccess, CapacityProvider, EcsFargateRunner, EksRunner};
use sortie_core::{Runner, RunnerCheck, RunnerConfiguration};

use crate::ecs::{from_sdk, launcher_session};
use crate::session::{SessionScope, TAG_ENV};

/// The `sortie:env` session tag of every check. No environment path can be this (a
/// path always has a `/`), and the launcher role's `ChecksOnlyRead` statement lets a
/// session tagged with it only read.
pub const CHECK_SESSION_ENV: &str = "runner-check";

/// Checks a runner's configuration against its platform, on behalf of one organisation.
#[async_trait]
pub trait RunnerChecker: Send + Sync {
    /// Every check of `runner`, in order, for jobs of the organisation `org`. Never fails:
    /// what could not be checked is a failed or skipped check.
    async fn check(&self, runner: &Runner, org: &str) -> Vec<RunnerCheck>;
}

/// The real checker: AWS for `ecs-fargate` (and the role of `eks`) runners, and whether
/// this deployment launches `local` runners.
pub struct AwsRunnerChecker {
    base: SdkConfig,
    local: bool,
}

impl AwsRunnerChecker {
    /// A checker whose base credentials (the ones that assume roles) come from `base`.
    /// `local` is true only where a `local` launcher exists (`sortie dev`).
    pub fn new(base: SdkConfig, local: bool) -> Self {
        Self { base, local }
    }

    /// Assumes the launcher role as a launch would (ExternalId, the session tags of the
    /// runner's [`SessionScope`]), plus the tag that says it is a check: `sortie:env` =
    /// [`CHECK_SESSION_ENV`]. The session is named `sortie-check-<id>` and never cached.
    /// The deployed templates let the api function open only such sessions, and let such a
    /// session only read.
    async fn assume(&self, access: &AwsAccess, scope: &SessionScope) -> Assumed {
        let org = &scope.org;
        let id = ulid::Ulid::new().to_string().to_ascii_lowercase();
        let mut tags = scope.tags();
        tags.push((TAG_ENV, CHECK_SESSION_ENV.to_string()));
        let provider =
            launcher_session(&self.base, access, format!("sortie-check-{id}"), tags).await;
        match provider.provide_credentials().await {
            Ok(credentials) => Assumed {
                check: RunnerCheck::passed(
                    CHECK_ASSUME_ROLE,
                    format!(
                        "assumed `{}` with the ExternalId and the session tags of organisation `{org}`",
                        access.role_arn
                    ),
                ),
                credentials: Some(credentials),
            },
            Err(e) => Assumed {
                check: RunnerCheck::failed(
                    CHECK_ASSUME_ROLE,
                    format!(
                        "could not assume `{}`: {}",
                        access.role_arn,
                        DisplayErrorContext(&e)
                    ),
                ),
                credentials: None,
            },
        }
    }

    async fn check_ecs(&self, c: &EcsFargateRunner, scope: &SessionScope) -> Vec<RunnerCheck> {
        let assumed = self.assume(&c.access, scope).await;
        let mut checks = vec![assumed.check];
        let Some(credentials) = assumed.credentials else {
            for name in [
                CHECK_CLUSTER,
                CHECK_CAPACITY_PROVIDER,
                CHECK_TASK_DEFINITION,
                CHECK_NETWORK,
                CHECK_PASS_ROLE,
            ] {
                checks.push(RunnerCheck::skipped(name, CHECK_ASSUME_ROLE));
            }
            return checks;
        };
        let region = Region::new(c.access.region.clone());
        let ecs = aws_sdk_ecs::Client::from_conf(
            aws_sdk_ecs::config::Builder::from(&self.base)
                .region(region.clone())
                .credentials_provider(credentials.clone())
                .build(),
        );
        let ec2 = aws_sdk_ec2::Client::from_conf(
            aws_sdk_ec2::config::Builder::from(&self.base)
                .region(region.clone())
                .credentials_provider(credentials.clone())
                .build(),
        );
        let iam = aws_sdk_iam::Client::from_conf(
            aws_sdk_iam::config::Builder::from(&self.base)
                .region(region)
                .credentials_provider(credentials)
                .build(),
        );
        let ((cluster, capacity), (task_definition, roles), network) = tokio::join!(
            cluster_checks(&ecs, c),
            task_definition_check(&ecs, c),
            network_check(&ec2, c),
        );
        checks.extend([cluster, capacity, task_definition, network]);
        checks.push(match roles {
            Some(roles) => pass_role_check(&iam, &c.access.role_arn, &roles).await,
            None => RunnerCheck::skipped(CHECK_PASS_ROLE, CHECK_TASK_DEFINITION),
        });
        checks
    }
}

impl AwsRunnerChecker {
    /// `eks`: the role, then the Job as it would be built, then DescribeCluster through the
    /// role (and the API's TLS against the cluster CA), then SelfSubjectAccessReviews for
    /// what the launcher does in the namespace.
    async fn check_eks(&self, c: &EksRunner, scope: &SessionScope) -> Vec<RunnerCheck> {
        let assumed = self.assume(&c.access, scope).await;
        let mut checks = vec![assumed.check, eks_template_check(c)];
        let Some(credentials) = assumed.credentials else {
            checks.push(RunnerCheck::skipped(CHECK_CLUSTER, CHECK_ASSUME_ROLE));
            checks.push(RunnerCheck::skipped(
                CHECK_KUBERNETES_ACCESS,
                CHECK_ASSUME_ROLE,
            ));
            return checks;
        };
        let eks = aws_sdk_eks::Client::from_conf(
            aws_sdk_eks::config::Builder::from(&self.base)
                .region(Region::new(c.access.region.clone()))
                .credentials_provider(credentials.clone())
                .build(),
        );
        let client = match crate::eks::describe_cluster(&eks, &c.cluster).await {
            Ok(client) => client,
            Err(e) => {
                checks.push(RunnerCheck::failed(CHECK_CLUSTER, e.to_string()));
                checks.push(RunnerCheck::skipped(CHECK_KUBERNETES_ACCESS, CHECK_CLUSTER));
                return checks;
            }
        };
        let token = match crate::eks::token::bearer_token(
            &credentials,
            &c.cluster,
            &c.access.region,
            std::time::SystemTime::now(),
        ) {
            Ok(t) => t,
            Err(e) => {
                checks.push(RunnerCheck::failed(CHECK_CLUSTER, e.to_string()));
                checks.push(RunnerCheck::skipped(CHECK_KUBERNETES_ACCESS, CHECK_CLUSTER));
                return checks;
            }
        };
        let (cluster, access) = eks_access_check(&client, &token, c).await;
        checks.push(cluster);
        checks.push(access);
        checks
    }
}

/// The Job a launch would create can be built from the runner's configuration.
fn eks_template_check(c: &EksRunner) -> RunnerCheck {
    let (Ok(environment), Ok(runner_id), Ok(request)) = (
        sortie_core::EnvPath::parse("runner-check/env"),
        sortie_core::RunnerId::parse("runner-check"),
        sortie_core::JobRequest::parse(r#"{"operation":"plan","files":{"main.tf":""}}"#),
    ) else {
        return RunnerCheck::failed(CHECK_JOB_TEMPLATE, "the check's sample job is invalid");
    };
    let mut job = sortie_core::Job::new(
        sortie_core::JobId::new("00000000000000000000000000"),
        environment,
        runner_id,
        request,
        "runner-check".to_string(),
        chrono::Utc::now(),
    );
    job.runner_spec = Some(sortie_core::RunnerSpec {
        tool: None,
        tool_version: None,
        description: String::new(),
        runner_configuration: RunnerConfiguration::Eks(c.clone()),
        state_storage_configuration: sortie_core::StateStorageConfiguration::Kubernetes(
            sortie_core::runner::KubernetesStorage { namespace: None },
        ),
    });
    let spec = crate::LaunchSpec {
        job: &job,
        token: "check",
        api_url: "https://sortie.invalid",
        attempt: 1,
    };
    match crate::eks::job::build_job(c, &spec) {
        Ok(built) => RunnerCheck::passed(
            CHECK_JOB_TEMPLATE,
            format!(
                "a Job `{}*` in namespace `{}` runs `{}` as service account `{}`",
                built.metadata.generate_name.unwrap_or_default(),
                c.job.namespace,
                built
                    .spec
                    .as_ref()
                    .and_then(|s| s.template.spec.as_ref())
                    .and_then(|p| p
                        .containers
                        .iter()
                        .find(|x| x.name == crate::eks::job::RUNNER_CONTAINER))
                    .and_then(|x| x.image.clone())
                    .unwrap_or_default(),
                c.job.service_account
            ),
        ),
        Err(e) => RunnerCheck::failed(CHECK_JOB_TEMPLATE, e.to_string()),
    }
}

/// One SelfSubjectAccessReview per thing the launcher does in the namespace.
async fn eks_access_check(
    client: &crate::eks::client::KubeClient,
    token: &str,
    c: &EksRunner,
) -> (RunnerCheck, RunnerCheck) {
    let wanted = [
        ("create", "batch", "jobs"),
        ("get", "batch", "jobs"),
        ("list", "batch", "jobs"),
        ("delete", "batch", "jobs"),
        ("list", "", "pods"),
    ];
    let mut denied = Vec::new();
    for (i, (verb, group, resource)) in wanted.iter().enumerate() {
        let review = serde_json::json!({
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {
                "namespace": c.job.namespace, "verb": verb, "group": group, "resource": resource,
            }},
        });
        let answer: serde_json::Value = match client
            .call(
                http::Method::POST,
                "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                token,
                Some(&review),
            )
            .await
        {
            Ok(a) => a,
            Err(e) => {
                let words = e.into_launch("SelfSubjectAccessReview", false).to_string();
                // The first call is the first to reach the API: a failure there (TLS, a
                // refused token) is the cluster's.
                return if i == 0 {
                    (
                        RunnerCheck::failed(CHECK_CLUSTER, words),
                        RunnerCheck::skipped(CHECK_KUBERNETES_ACCESS, CHECK_CLUSTER),
                    )
                } else {
                    (
                        RunnerCheck::passed(CHECK_CLUSTER, cluster_words(client, c)),
                        RunnerCheck::failed(CHECK_KUBERNETES_ACCESS, words),
                    )
                };
            }
        };
        let status = &answer["status"];
        if status["allowed"].as_bool() != Some(true) {
            let why = status["reason"]
                .as_str()
                .filter(|r| !r.is_empty())
                .unwrap_or("no reason given");
            let what = if group.is_empty() {
                format!("{verb} {resource}")
            } else {
                format!("{verb} {resource}.{group}")
            };
            denied.push(format!("{what}: {why}"));
        }
    }
    let cluster = RunnerCheck::passed(CHECK_CLUSTER, cluster_words(client, c));
    let access = if denied.is_empty() {
        RunnerCheck::passed(
            CHECK_KUBERNETES_ACCESS,
            format!(
                "the launcher role may create, get, list and delete Jobs and list pods in namespace `{}`",
                c.job.namespace
            ),
        )
    } else {
        RunnerCheck::failed(
            CHECK_KUBERNETES_ACCESS,
            format!(
                "in namespace `{}` the launcher role may not: {}",
                c.job.namespace,
                denied.join("; ")
            ),
        )
    };
    (cluster, access)
}

fn cluster_words(client: &crate::eks::client::KubeClient, c: &EksRunner) -> String {
    format!(
        "EKS cluster `{}` is ACTIVE; its API at {} answers over TLS verified against the cluster's CA",
        c.cluster,
        client.endpoint()
    )
}

/// The outcome of assuming a runner's role.
struct Assumed {
    check: RunnerCheck,
    credentials: Option<Credentials>,
}

#[async_trait]
impl RunnerChecker for AwsRunnerChecker {
    async fn check(&self, runner: &Runner, org: &str) -> Vec<RunnerCheck> {
        let scope = SessionScope {
            org: org.to_string(),
            runner: runner.id.to_string(),
        };
        match &runner.spec.runner_configuration {
            RunnerConfiguration::EcsFargate(c) => self.check_ecs(c, &scope).await,
            RunnerConfiguration::Eks(c) => self.check_eks(c, &scope).await,
            RunnerConfiguration::Local(_) if self.local => vec![RunnerCheck::passed(
                CHECK_LAUNCHER,
                "`local` runners run here, as child processes of `sortie dev`",
            )],
            RunnerConfiguration::Local(_) => {
                vec![RunnerCheck::failed(CHECK_LAUNCHER, no_launcher("local"))]
            }
            // Nothing to reach from here: the pool's agents pull its jobs. The API checks
            // that the pool exists in the runner's group when the runner is written.
            RunnerConfiguration::Agent(c) => vec![RunnerCheck::passed(
                CHECK_LAUNCHER,
                format!(
                    "`agent` runners launch nothing from Sortie: agents of pool {} pull their jobs",
                    c.pool
                ),
            )],
        }
    }
}

/// The words a job on a runner type without a launcher fails with (see `ByRunnerType`).
pub(crate) fn no_launcher(kind: &str) -> String {
    format!("no launcher for `{kind}` runners is configured here")
}

/// An AWS error in the words a launch would fail with (`<operation> failed: <code>:
/// <message>`), so a check and a job on the same runner quote AWS alike.
fn aws_words<E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static>(
    operation: &str,
    err: SdkError<E>,
) -> String {
    from_sdk(operation, err).to_string()
}

/// The cluster is ACTIVE; the capacity providers the runner's jobs use are associated.
async fn cluster_checks(
    ecs: &aws_sdk_ecs::Client,
    c: &EcsFargateRunner,
) -> (RunnerCheck, RunnerCheck) {
    let skipped = || RunnerCheck::skipped(CHECK_CAPACITY_PROVIDER, CHECK_CLUSTER);
    let out = match ecs.describe_clusters().clusters(&c.cluster).send().await {
        Ok(out) => out,
        Err(e) => {
            return (
                RunnerCheck::failed(CHECK_CLUSTER, aws_words("DescribeClusters", e)),
                skipped(),
            )
        }
    };
    let Some(cluster) = out.clusters().first() else {
        let why = out
            .failures()
            .first()
            .map(|f| f.reason().unwrap_or("no reason given").to_string())
            .unwrap_or_else(|| "no cluster and no failure returned".into());
        return (
            RunnerCheck::failed(
                CHECK_CLUSTER,
                format!("DescribeClusters: cluster `{}`: {why}", c.cluster),
            ),
            skipped(),
        );
    };
    let status = cluster.status().unwrap_or("UNKNOWN");
    if status != "ACTIVE" {
        return (
            RunnerCheck::failed(
                CHECK_CLUSTER,
                format!(
                    "DescribeClusters: cluster `{}` is {status}, not ACTIVE",
                    c.cluster
                ),
            ),
            skipped(),
        );
    }
    let cluster_check = RunnerCheck::passed(
        CHECK_CLUSTER,
        format!(
            "cluster `{}` is ACTIVE",
            cluster.cluster_arn().unwrap_or(&c.cluster)
        ),
    );
    let mut wanted = vec!["FARGATE"];
    if c.capacity_provider == CapacityProvider::FargateSpot {
        wanted.push("FARGATE_SPOT");
    }
    let associated: BTreeSet<&str> = cluster
        .capacity_providers()
        .iter()
        .map(String::as_str)
        .collect();
    let missing: Vec<&str> = wanted
        .iter()
        .copied()
        .filter(|p| !associated.contains(p))
        .collect();
    let capacity = if missing.is_empty() {
        RunnerCheck::passed(
            CHECK_CAPACITY_PROVIDER,
            format!("{} associated with the cluster", wanted.join(" and ")),
        )
    } else {
        RunnerCheck::failed(
            CHECK_CAPACITY_PROVIDER,
            format!(
                "{} not associated with cluster `{}` (it has: {}); RunTask refuses a capacity \
                 provider strategy that names one, see PutClusterCapacityProviders",
                missing.join(" and "),
                c.cluster,
                if associated.is_empty() {
                    "none".to_string()
                } else {
                    associated.into_iter().collect::<Vec<_>>().join(", ")
                }
            ),
        )
    };
    (cluster_check, capacity)
}

/// The task definition runs on Fargate and has the runner container. Answers with the
/// roles a launch passes to ECS (the execution role, and the task role or its override),
/// or `None` when the definition could not be read.
async fn task_definition_check(
    ecs: &aws_sdk_ecs::Client,
    c: &EcsFargateRunner,
) -> (RunnerCheck, Option<Vec<String>>) {
    let out = match ecs
        .describe_task_definition()
        .task_definition(&c.task_definition)
        .send()
        .await
    {
        Ok(out) => out,
        Err(e) => {
            return (
                RunnerCheck::failed(
                    CHECK_TASK_DEFINITION,
                    format!(
                        "task definition `{}`: {}",
                        c.task_definition,
                        aws_words("DescribeTaskDefinition", e)
                    ),
                ),
                None,
            )
        }
    };
    let Some(td) = out.task_definition() else {
        return (
            RunnerCheck::failed(
                CHECK_TASK_DEFINITION,
                format!("task definition `{}` was not found", c.task_definition),
            ),
            None,
        );
    };
    let arn = td.task_definition_arn().unwrap_or(&c.task_definition);
    let mut roles: Vec<String> = td
        .execution_role_arn()
        .map(String::from)
        .into_iter()
        .collect();
    if let Some(task_role) = c.task_role_arn.as_deref().or(td.task_role_arn()) {
        roles.push(task_role.to_string());
    }
    let mut problems = vec![];
    if let Some(status) = td.status().filter(|s| s.as_str() != "ACTIVE") {
        problems.push(format!("its status is {}", status.as_str()));
    }
    if !td
        .requires_compatibilities()
        .iter()
        .any(|x| x.as_str() == "FARGATE")
    {
        problems.push("it does not require the FARGATE compatibility".to_string());
    }
    if td.network_mode().map(|m| m.as_str()) != Some("awsvpc") {
        problems.push("its network mode is not `awsvpc`, which Fargate needs".to_string());
    }
    let names: Vec<&str> = td
        .container_definitions()
        .iter()
        .filter_map(|x| x.name())
        .collect();
    if !names.contains(&c.container_name.as_str()) {
        problems.push(format!(
            "it has no container named `{}` (it has: {})",
            c.container_name,
            names.join(", ")
        ));
    }
    problems.extend(size_problems(c, td));
    if !c.secrets.is_empty() && td.execution_role_arn().is_none() {
        problems.push(
            "it has no execution role, which ECS needs to inject the runner's secrets".to_string(),
        );
    }
    let check = if problems.is_empty() {
        RunnerCheck::passed(
            CHECK_TASK_DEFINITION,
            format!(
                "`{arn}` is a Fargate task definition with the container `{}`",
                c.container_name
            ),
        )
    } else {
        RunnerCheck::failed(
            CHECK_TASK_DEFINITION,
            format!("task definition `{arn}`: {}", problems.join("; ")),
        )
    };
    (check, Some(roles))
}

/// What ECS would refuse about the runner's `cpu` and `memory` overrides with this task
/// definition: a memory that leaves the runner container less than it needs once the other
/// containers have theirs ([`sortie_core::limits::runner_container_memory`]), or a cpu
/// below what the containers reserve between them.
fn size_problems(c: &EcsFargateRunner, td: &aws_sdk_ecs::types::TaskDefinition) -> Vec<String> {
    let mut problems = vec![];
    let containers = td.container_definitions();
    let mib = |v: Option<i32>| v.map(|m| u32::try_from(m).unwrap_or(0));
    let is_runner = |cd: &&aws_sdk_ecs::types::ContainerDefinition| {
        cd.name() == Some(c.container_name.as_str())
    };
    if let Some(memory) = c.memory {
        let others: u32 = containers
            .iter()
            .filter(|cd| !is_runner(cd))
            .map(|cd| mib(cd.memory_reservation().or(cd.memory())).unwrap_or(0))
            .sum();
        let reservation = containers
            .iter()
            .find(is_runner)
            .and_then(|cd| mib(cd.memory_reservation()));
        if let Err(why) = sortie_core::limits::runner_container_memory(memory, others, reservation)
        {
            problems.push(format!("the runner's memory {why}"));
        }
    }
    if let Some(cpu) = c.cpu {
        let reserved: u32 = containers
            .iter()
            .map(|cd| u32::try_from(cd.cpu()).unwrap_or(0))
            .sum();
        if reserved > cpu {
            problems.push(format!(
                "its containers reserve {reserved} CPU units, more than the runner's cpu {cpu}"
            ));
        }
    }
    problems
}

/// The subnets and security groups exist and are in one VPC.
async fn network_check(ec2: &aws_sdk_ec2::Client, c: &EcsFargateRunner) -> RunnerCheck {
    let subnets = match ec2
        .describe_subnets()
        .set_subnet_ids(Some(c.subnets.clone()))
        .send()
        .await
    {
        Ok(out) => out,
        Err(e) => return RunnerCheck::failed(CHECK_NETWORK, aws_words("DescribeSubnets", e)),
    };
    let groups = match ec2
        .describe_security_groups()
        .set_group_ids(Some(c.security_groups.clone()))
        .send()
        .await
    {
        Ok(out) => out,
        Err(e) => {
            return RunnerCheck::failed(CHECK_NETWORK, aws_words("DescribeSecurityGroups", e))
        }
    };
    let mut found: Vec<(String, String)> = vec![];
    for s in subnets.subnets() {
        found.push((
            s.subnet_id().unwrap_or_default().to_string(),
            s.vpc_id().unwrap_or_default().to_string(),
        ));
    }
    for g in groups.security_groups() {
        found.push((
            g.group_id().unwrap_or_default().to_string(),
            g.vpc_id().unwrap_or_default().to_string(),
        ));
    }
    let missing: Vec<&String> = c
        .subnets
        .iter()
        .chain(&c.security_groups)
        .filter(|id| !found.iter().any(|(f, _)| f == *id))
        .collect();
    if !missing.is_empty() {
        return RunnerCheck::failed(
            CHECK_NETWORK,
            format!(
                "not found: {}",
                missing
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
    }
    let vpcs: BTreeSet<&str> = found.iter().map(|(_, v)| v.as_str()).collect();
    if vpcs.len() > 1 {
        let each = found
            .iter()
            .map(|(id, vpc)| format!("{id} in {vpc}"))
            .collect::<Vec<_>>()
            .join(", ");
        return RunnerCheck::failed(
            CHECK_NETWORK,
            format!("the subnets and security groups are not in one VPC: {each}"),
        );
    }
    RunnerCheck::passed(
        CHECK_NETWORK,
        format!(
            "{} subnet(s) and {} security group(s), all in {}",
            c.subnets.len(),
            c.security_groups.len(),
            vpcs.into_iter().next().unwrap_or("one VPC")
        ),
    )
}

/// The launcher role may pass each of `roles` to ECS tasks (iam:PassRole with
/// `iam:PassedToService = ecs-tasks.amazonaws.com`), as IAM's policy simulator says.
async fn pass_role_check(
    iam: &aws_sdk_iam::Client,
    launcher: &str,
    roles: &[String],
) -> RunnerCheck {
    if roles.is_empty() {
        return RunnerCheck::passed(
            CHECK_PASS_ROLE,
            "the task definition names no role, and the runner no task role: nothing to pass",
        );
    }
    let context = ContextEntry::builder()
        .context_key_name("iam:PassedToService")
        .context_key_values("ecs-tasks.amazonaws.com")
        .context_key_type(ContextKeyTypeEnum::String)
        .build();
    let out = match iam
        .simulate_principal_policy()
        .policy_source_arn(launcher)
        .action_names("iam:PassRole")
        .set_resource_arns(Some(roles.to_vec()))
        .context_entries(context)
        .send()
        .await
    {
        Ok(out) => out,
        Err(e) => {
            return RunnerCheck::failed(CHECK_PASS_ROLE, aws_words("SimulatePrincipalPolicy", e))
        }
    };
    let mut refused = vec![];
    for role in roles {
        let decision = out
            .evaluation_results()
            .iter()
            .find(|r| r.eval_resource_name() == Some(role.as_str()))
            .map(|r| r.eval_decision().clone());
        match decision {
            Some(PolicyEvaluationDecisionType::Allowed) => {}
            Some(other) => refused.push(format!("{role}: {}", other.as_str())),
            None => refused.push(format!("{role}: not evaluated")),
        }
    }
    if refused.is_empty() {
        RunnerCheck::passed(
            CHECK_PASS_ROLE,
            format!(
                "the launcher role may pass {} to ECS tasks",
                roles.join(" and ")
            ),
        )
    } else {
        RunnerCheck::failed(
            CHECK_PASS_ROLE,
            format!(
                "SimulatePrincipalPolicy: the launcher role may not pass to ECS tasks (iam:PassRole): {}",
                refused.join("; ")
            ),
        )
    }
}

/// A checker that answers the same checks for every runner (API tests).
pub struct StaticRunnerChecker(pub Vec<RunnerCheck>);

#[async_trait]
impl RunnerChecker for StaticRunnerChecker {
    async fn check(&self, _: &Runner, _: &str) -> Vec<RunnerCheck> {
        self.0.clone()
    }
}

#[cfg(test)]
mod size_tests {
    use super::*;
    use aws_sdk_ecs::types::{ContainerDefinition, TaskDefinition};

    fn runner(size: &str) -> EcsFargateRunner {
        let spec = sortie_core::RunnerSpec::parse(&format!(
            "runner_configuration:\n  type: ecs-fargate\n  role_arn: arn:aws:iam::123456789012:role/launcher\n  external_id: ext-123456\n  region: eu-west-1\n  cluster: c\n  task_definition: runner\n  container_name: runner\n  subnets: [subnet-0123abcd]\n  security_groups: [sg-0123abcd]\n{size}state_storage_configuration:\n  type: s3\n  bucket: state\n  region: eu-west-1\n",
        ))
        .unwrap();
        match spec.runner_configuration {
            RunnerConfiguration::EcsFargate(c) => c,
            _ => unreachable!(),
        }
    }

    #[test]
    fn a_memory_the_other_containers_leave_too_little_of_fails_the_check() {
        let td = TaskDefinition::builder()
            .container_definitions(
                ContainerDefinition::builder()
                    .name("runner")
                    .memory_reservation(1536)
                    .build(),
            )
            .container_definitions(
                ContainerDefinition::builder()
                    .name("proxy")
                    .memory(1024)
                    .cpu(1024)
                    .build(),
            )
            .build();
        let tight = size_problems(&runner("  cpu: 512\n  memory: 2048\n"), &td);
        assert_eq!(tight.len(), 2, "{tight:?}");
        assert!(tight[0].contains("1024 MiB"), "{tight:?}");
        assert!(tight[1].contains("1024 CPU units"), "{tight:?}");
        let roomy = size_problems(&runner("  cpu: 1024\n  memory: 4096\n"), &td);
        assert!(roomy.is_empty(), "{roomy:?}");
        assert!(size_problems(&runner(""), &td).is_empty());
    }
}
