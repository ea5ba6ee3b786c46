//! The `ecs-fargate` checks, read-only in the target account: the cluster and its capacity
//! providers, the task definition and its runner container, the network, and `iam:PassRole`.

use std::collections::BTreeSet;

use aws_sdk_iam::types::{ContextEntry, ContextKeyTypeEnum, PolicyEvaluationDecisionType};
use sortie_core::check::*;
use sortie_core::runner::{CapacityProvider, EcsFargateRunner};
use sortie_core::RunnerCheck;

use super::aws_words;
use super::ec2::Ec2Query;

/// The cluster is ACTIVE; the capacity providers the runner's jobs use are associated.
pub(super) async fn cluster_checks(
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
pub(super) async fn task_definition_check(
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
pub(super) async fn network_check(
    ec2: &Result<Ec2Query, String>,
    c: &EcsFargateRunner,
) -> RunnerCheck {
    let ec2 = match ec2 {
        Ok(ec2) => ec2,
        Err(e) => return RunnerCheck::failed(CHECK_NETWORK, e.clone()),
    };
    let subnets = match ec2.describe_subnets(&c.subnets).await {
        Ok(found) => found,
        Err(e) => return RunnerCheck::failed(CHECK_NETWORK, e),
    };
    let groups = match ec2.describe_security_groups(&c.security_groups).await {
        Ok(found) => found,
        Err(e) => return RunnerCheck::failed(CHECK_NETWORK, e),
    };
    let found: Vec<(String, String)> = subnets
        .into_iter()
        .chain(groups)
        .map(|l| (l.id, l.vpc))
        .collect();
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
pub(super) async fn pass_role_check(
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

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_ecs::types::{ContainerDefinition, TaskDefinition};
    use sortie_core::RunnerConfiguration;

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
