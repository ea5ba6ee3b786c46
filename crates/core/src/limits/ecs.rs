//! ECS: networks, names, Fargate sizes, overrides, `startedBy`, client tokens, tags.

use super::*;

// ---------------------------------------------------------------------------------------
// ECS
// ---------------------------------------------------------------------------------------

/// Most subnets in a task's `awsvpcConfiguration`: 16.
///
/// Source: <https://docs.aws.amazon.com/AmazonECS/latest/APIReference/API_AwsVpcConfiguration.html>
/// (`subnets`: "You can specify up to 16 subnets").
pub const ECS_SUBNETS_MAX: usize = 16;
/// Most security groups in a task's `awsvpcConfiguration`: 5 (`securityGroups`: "up to 5
/// security groups"; source as [`ECS_SUBNETS_MAX`]).
pub const ECS_SECURITY_GROUPS_MAX: usize = 5;

/// True for an EC2 resource id `<prefix>-<8 or 17 lowercase hex digits>`.
///
/// Source: <https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/resource-ids.html>
/// (ids are the prefix, a hyphen and 8 or, since 2018, 17 hexadecimal characters).
pub fn is_ec2_id(s: &str, prefix: &str) -> bool {
    s.strip_prefix(prefix)
        .and_then(|r| r.strip_prefix('-'))
        .is_some_and(|hex| matches!(hex.len(), 8 | 17) && is_hex_lower(hex))
}

/// True for a subnet id `subnet-<8 or 17 hex>` (see [`is_ec2_id`]).
pub fn is_subnet_id(s: &str) -> bool {
    is_ec2_id(s, "subnet")
}

/// True for a security group id `sg-<8 or 17 hex>` (see [`is_ec2_id`]).
pub fn is_security_group_id(s: &str) -> bool {
    is_ec2_id(s, "sg")
}

/// Longest ECS name (cluster, task definition family, container): 255 characters of
/// letters, digits, `_` and `-`.
///
/// Source: <https://docs.aws.amazon.com/AmazonECS/latest/APIReference/API_CreateCluster.html>
/// (`clusterName`), `RegisterTaskDefinition` `family` and `ContainerDefinition` `name`
/// ("Up to 255 letters (uppercase and lowercase), numbers, underscores, and hyphens").
pub const ECS_NAME_MAX: usize = 255;

/// True for an ECS cluster, family or container name (see [`ECS_NAME_MAX`]).
pub fn is_ecs_name(s: &str) -> bool {
    (1..=ECS_NAME_MAX).contains(&s.len()) && s.chars().all(|c| is_word(c) || c == '-')
}

/// True for a RunTask `cluster`: a cluster name, or
/// `arn:<partition>:ecs:<region>:<account>:cluster/<name>`.
///
/// Source: <https://docs.aws.amazon.com/AmazonECS/latest/APIReference/API_RunTask.html>
/// (`cluster`: "The short name or full Amazon Resource Name (ARN)").
pub fn is_ecs_cluster(s: &str) -> bool {
    is_ecs_name(s)
        || ecs_arn_resource(s)
            .and_then(|r| r.strip_prefix("cluster/"))
            .is_some_and(is_ecs_name)
}

/// True for a RunTask `taskDefinition`: `family`, `family:revision` or
/// `arn:<partition>:ecs:<region>:<account>:task-definition/family:revision`.
///
/// Source: <https://docs.aws.amazon.com/AmazonECS/latest/APIReference/API_RunTask.html>
/// (`taskDefinition`: "The family and revision (family:revision) or full ARN").
pub fn is_task_definition(s: &str) -> bool {
    let family_revision = |s: &str| match s.split_once(':') {
        None => is_ecs_name(s),
        Some((family, revision)) => {
            is_ecs_name(family)
                && !revision.is_empty()
                && revision.len() <= 10
                && revision.bytes().all(|b| b.is_ascii_digit())
        }
    };
    family_revision(s)
        || ecs_arn_resource(s)
            .and_then(|r| r.strip_prefix("task-definition/"))
            .is_some_and(family_revision)
}

fn ecs_arn_resource(s: &str) -> Option<&str> {
    let [_, _, service, region, account, resource] = arn_parts(s)?;
    (service == "ecs" && is_region(region) && is_account_id(account) && !has_space_or_control(s))
        .then_some(resource)
}

/// The Fargate task CPU values, in CPU units.
///
/// Source: <https://docs.aws.amazon.com/AmazonECS/latest/developerguide/fargate-tasks-services.html#fargate-tasks-size>
/// (task CPU and memory) and `TaskOverride` `cpu`/`memory`,
/// <https://docs.aws.amazon.com/AmazonECS/latest/APIReference/API_TaskOverride.html>.
pub const FARGATE_CPU_VALUES: [u32; 7] = [256, 512, 1024, 2048, 4096, 8192, 16384];

/// True when `memory` MiB is a valid Fargate task memory size for `cpu` units (source as
/// [`FARGATE_CPU_VALUES`]): 256 → 512, 1024, 2048; 512 → 1–4 GiB; 1024 → 2–8 GiB;
/// 2048 → 4–16 GiB; 4096 → 8–30 GiB, each in 1 GiB steps; 8192 → 16–60 GiB in 4 GiB
/// steps; 16384 → 32–120 GiB in 8 GiB steps.
pub fn fargate_memory_ok(cpu: u32, memory: u32) -> bool {
    let (lo, hi, step) = match cpu {
        256 => return matches!(memory, 512 | 1024 | 2048),
        512 => (1024, 4096, 1024),
        1024 => (2048, 8192, 1024),
        2048 => (4096, 16384, 1024),
        4096 => (8192, 30720, 1024),
        8192 => (16384, 61440, 4096),
        16384 => (32768, 122_880, 8192),
        _ => return false,
    };
    (lo..=hi).contains(&memory) && (memory - lo).is_multiple_of(step)
}

/// Most characters in a RunTask `overrides`, JSON formatting included: 8192.
///
/// Source: <https://docs.aws.amazon.com/AmazonECS/latest/APIReference/API_RunTask.html>
/// (`overrides`: "A total of 8192 characters are allowed for overrides. This limit
/// includes the JSON formatting characters of the override structure.")
pub const ECS_OVERRIDES_MAX: usize = 8192;

/// Sortie's share of [`ECS_OVERRIDES_MAX`] for a runner's `env`, measured by
/// [`env_overrides_size`]: 4096. Another 2048 are kept for a job's `secret_refs` (see
/// [`JOB_SECRET_REFS_MAX`]); the rest is left for
/// Sortie's own variables (job id, token, API URL), the container name and the structure.
/// The same bound applies to `eks` and `local` runners, so a runner can change type.
pub const RUNNER_ENV_MAX: usize = 4096;

/// The bound on a job's `secret_refs`, measured as their JSON text: 2048. They once
/// travelled in the overrides as `SORTIE_SECRET_REFS`; they now are `secrets` of the
/// derived task definition (whose own limit, 64 KiB, this keeps far away), and the bound
/// is kept so that jobs accepted before stay valid and nothing accepted now grows.
pub const JOB_SECRET_REFS_MAX: usize = 2048;

/// How many characters `env` takes in ECS overrides: each variable is
/// `{"name":"<name>","value":"<value>"},` with the name and value JSON-escaped.
pub fn env_overrides_size<'a>(env: impl IntoIterator<Item = (&'a String, &'a String)>) -> usize {
    env.into_iter()
        .map(|(k, v)| json_string_len(k) + json_string_len(v) + r#"{"name":,"value":},"#.len())
        .sum()
}

/// The length of `s` as a JSON string literal, quotes included.
pub fn json_string_len(s: &str) -> usize {
    serde_json::to_string(s)
        .map(|j| j.len())
        .unwrap_or(usize::MAX)
}

/// Longest RunTask `startedBy`: 36 characters of letters, digits, `-`, `/` and `_`.
///
/// Source: <https://docs.aws.amazon.com/AmazonECS/latest/APIReference/API_RunTask.html>
/// (`startedBy`: "Up to 36 letters (uppercase and lowercase), numbers, hyphens (-), forward
/// slash (/), and underscores (_) are allowed").
pub const ECS_STARTED_BY_MAX: usize = 36;

/// True for a `startedBy` value ECS documents as valid (see [`ECS_STARTED_BY_MAX`]).
pub fn is_ecs_started_by(s: &str) -> bool {
    s.len() <= ECS_STARTED_BY_MAX && s.chars().all(|c| is_word(c) || c == '-' || c == '/')
}

/// Longest RunTask `clientToken`: 64 characters.
///
/// Source: <https://docs.aws.amazon.com/AmazonECS/latest/APIReference/API_RunTask.html>
/// (`clientToken`: "Up to 64 ASCII characters are allowed").
pub const ECS_CLIENT_TOKEN_MAX: usize = 64;

/// Longest ECS resource tag key (128) and value (256).
///
/// Source: <https://docs.aws.amazon.com/AmazonECS/latest/APIReference/API_Tag.html>
/// (`key` 1–128, `value` 0–256). The task's `sortie:env` tag carries the environment
/// path, bounded by [`SESSION_TAG_VALUE_MAX`], the same 256.
pub const ECS_TAG_VALUE_MAX: usize = 256;

/// Least memory ECS lets a container have: 6 MiB.
///
/// Source: <https://docs.aws.amazon.com/AmazonECS/latest/APIReference/API_ContainerDefinition.html>
/// (`memory`: "The Docker 20.10.0 or later daemon reserves a minimum of 6 MiB of memory for
/// a container. So, don't specify less than 6 MiB").
pub const CONTAINER_MEMORY_MIN: u32 = 6;

/// The hard memory limit (MiB) of the runner container in a task of `task_memory` MiB
/// whose other containers reserve `others` MiB between them (each its
/// `memoryReservation`, else its `memory`): what they leave. `runner_reservation` is the
/// runner container's own `memoryReservation`, which its limit may not be below.
///
/// Source: `ContainerDefinition` `memory` (as [`CONTAINER_MEMORY_MIN`]): "The total
/// amount of memory reserved for all containers within a task must be lower than the task
/// memory value", and "If you specify both a container-level memory and
/// memoryReservation value, memory must be greater than memoryReservation". A runner's
/// `memory` overrides the task's; without the container's too, the runner stays at the
/// container definition's own limit (issue 25, item 3).
pub fn runner_container_memory(
    task_memory: u32,
    others: u32,
    runner_reservation: Option<u32>,
) -> Result<u32, String> {
    let need = runner_reservation
        .unwrap_or(0)
        .max(CONTAINER_MEMORY_MIN)
        .saturating_add(others);
    if task_memory < need {
        return Err(format!(
            "{task_memory} MiB leaves the runner container less than it needs: the task \
             definition's other containers reserve {others} MiB and the runner container \
             {} MiB",
            runner_reservation.unwrap_or(CONTAINER_MEMORY_MIN)
        ));
    }
    Ok(task_memory - others)
}
