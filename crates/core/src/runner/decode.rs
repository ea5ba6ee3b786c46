//! Field-by-field decoding of a runner file: every problem at its path.

use std::collections::BTreeMap;

use serde_json::Value;

use super::eks::{decode_eks, dns_label_problem};
use super::*;
use crate::problems::{index, key_path, Fields, Problems};

/// The most jobs one agent may run at once for one runner (`max_concurrent_jobs`).
pub const MAX_CONCURRENT_JOBS: u32 = 100;

/// Reads the `type` field of a tagged block.
fn type_of(f: &mut Fields<'_>, allowed: &[&str], p: &mut Problems) -> Option<String> {
    let t: String = f.required("type", p)?;
    if allowed.contains(&t.as_str()) {
        Some(t)
    } else {
        p.push(
            f.path_of("type"),
            format!(
                "`{t}` is not a known type; known types: {}",
                allowed.join(", ")
            ),
        );
        None
    }
}

pub(super) fn decode_runner(value: &Value, p: &mut Problems) -> Option<RunnerConfiguration> {
    let mut f = Fields::new(value, "runner_configuration", p)?;
    let Some(t) = type_of(&mut f, &["ecs-fargate", "eks", "local", "agent"], p) else {
        // Without a type the other fields cannot be checked; do not report them as unknown.
        return None;
    };
    let out = match t.as_str() {
        "ecs-fargate" => decode_ecs(&mut f, p).map(RunnerConfiguration::EcsFargate),
        "eks" => decode_eks(&mut f, p).map(RunnerConfiguration::Eks),
        "agent" => decode_agent_runner(&mut f, p).map(RunnerConfiguration::Agent),
        _ => decode_local_runner(&mut f, p).map(RunnerConfiguration::Local),
    };
    f.finish(p);
    out
}

/// Records `problem` at `field` when `check` fails for a present value.
pub(super) fn check_field(
    f: &Fields<'_>,
    field: &str,
    value: Option<&String>,
    check: impl Fn(&str) -> Option<String>,
    p: &mut Problems,
) {
    if let Some(problem) = value.and_then(|v| check(v)) {
        p.push(f.path_of(field), problem);
    }
}

/// A check that refuses whitespace and control characters, for values AWS reads as one token.
pub(super) fn no_space_or_control(v: &str) -> Option<String> {
    limits::has_space_or_control(v)
        .then(|| "must not contain whitespace or control characters".into())
}

pub(super) fn decode_access(f: &mut Fields<'_>, p: &mut Problems) -> Option<AwsAccess> {
    let role_arn = f.required_str("role_arn", p);
    check_field(
        f,
        "role_arn",
        role_arn.as_ref(),
        |arn| {
            limits::role_arn_problem(arn).map(|why| {
                format!(
                    "is not an IAM role ARN (arn:aws:iam::<12-digit account>:role/<name>): {why}"
                )
            })
        },
        p,
    );
    let external_id = f.required_str("external_id", p);
    check_field(
        f,
        "external_id",
        external_id.as_ref(),
        limits::external_id_problem,
        p,
    );
    let region = f.required_str("region", p);
    check_region(f, region.as_ref(), p);
    Some(AwsAccess {
        role_arn: role_arn?,
        external_id: external_id?,
        region: region?,
    })
}

fn check_region(f: &Fields<'_>, region: Option<&String>, p: &mut Problems) {
    check_field(
        f,
        "region",
        region,
        |r| {
            (!limits::is_region(r)).then(|| {
                format!(
                    "`{}` is not an AWS region name such as eu-west-1",
                    r.escape_debug()
                )
            })
        },
        p,
    );
}

pub(super) fn decode_timeout(f: &mut Fields<'_>, p: &mut Problems) -> u32 {
    let t: u32 = f
        .optional("timeout_seconds", p)
        .unwrap_or(DEFAULT_TIMEOUT_SECONDS);
    if !(MIN_TIMEOUT_SECONDS..=MAX_TIMEOUT_SECONDS).contains(&t) {
        p.push(
            f.path_of("timeout_seconds"),
            format!("must be between {MIN_TIMEOUT_SECONDS} and {MAX_TIMEOUT_SECONDS} (24 h), but is {t}"),
        );
    }
    t
}

/// Decodes a required list of EC2 ids: at least one, at most `max` (the first extra one is
/// reported at its index), each of the shape `valid` accepts.
fn decode_id_list(
    f: &mut Fields<'_>,
    field: &'static str,
    prefix: &str,
    max: usize,
    valid: fn(&str) -> bool,
    p: &mut Problems,
) -> Option<Vec<String>> {
    let list: Vec<String> = f.required(field, p)?;
    let path = f.path_of(field);
    if list.is_empty() {
        p.push(&path, format!("must list at least one `{prefix}...` id"));
    }
    if list.len() > max {
        p.push(
            index(&path, max),
            format!(
                "is one too many: ECS allows at most {max} ({} given)",
                list.len()
            ),
        );
    }
    for (i, id) in list.iter().enumerate() {
        if !valid(id) {
            p.push(
                index(&path, i),
                format!(
                    "`{}` is not an id of the form {prefix}<8 or 17 lowercase hex digits>",
                    id.escape_debug()
                ),
            );
        }
    }
    Some(list)
}

/// Checks environment variable names: `[A-Za-z_][A-Za-z0-9_]*`, and not Sortie's reserved prefix.
pub fn check_env_names<'a>(names: impl Iterator<Item = &'a String>, path: &str, p: &mut Problems) {
    for name in names {
        if !limits::is_env_var_name(name) {
            p.push(
                key_path(path, name),
                "is not a valid environment variable name ([A-Za-z_][A-Za-z0-9_]*)",
            );
        } else if name.starts_with(RESERVED_ENV_PREFIX) {
            p.push(
                key_path(path, name),
                format!("names starting with {RESERVED_ENV_PREFIX} are reserved for Sortie"),
            );
        }
    }
}

pub(super) fn decode_env(f: &mut Fields<'_>, p: &mut Problems) -> BTreeMap<String, String> {
    let env: BTreeMap<String, String> = f.optional("env", p).unwrap_or_default();
    let path = f.path_of("env");
    check_env_names(env.keys(), &path, p);
    let size = limits::env_overrides_size(&env);
    if size > limits::RUNNER_ENV_MAX {
        p.push(
            path,
            format!(
                "takes {size} characters in ECS container overrides; at most {} are allowed (ECS allows {} for all overrides)",
                limits::RUNNER_ENV_MAX,
                limits::ECS_OVERRIDES_MAX
            ),
        );
    }
    env
}

/// Checks secret references: each must be a Secrets Manager secret or SSM parameter ARN.
pub fn check_secret_refs(secrets: &BTreeMap<String, String>, path: &str, p: &mut Problems) {
    check_env_names(secrets.keys(), path, p);
    for (name, reference) in secrets {
        if !limits::is_secret_ref(reference) {
            p.push(
                key_path(path, name),
                "must be a reference, the ARN of a Secrets Manager secret or an SSM parameter (no whitespace), never a secret value",
            );
        }
    }
}

pub(super) fn decode_secrets(f: &mut Fields<'_>, p: &mut Problems) -> BTreeMap<String, String> {
    let secrets: BTreeMap<String, String> = f.optional("secrets", p).unwrap_or_default();
    check_secret_refs(&secrets, &f.path_of("secrets"), p);
    secrets
}

fn decode_ecs(f: &mut Fields<'_>, p: &mut Problems) -> Option<EcsFargateRunner> {
    let access = decode_access(f, p);
    let cluster = f.required_str("cluster", p);
    check_field(
        f,
        "cluster",
        cluster.as_ref(),
        |c| {
            (!limits::is_ecs_cluster(c)).then(|| {
            format!("must be an ECS cluster name (at most {} letters, digits, `_` and `-`) or cluster ARN", limits::ECS_NAME_MAX)
        })
        },
        p,
    );
    let task_definition = f.required_str("task_definition", p);
    check_field(
        f,
        "task_definition",
        task_definition.as_ref(),
        |t| {
            (!limits::is_task_definition(t))
                .then(|| "must be a task definition family, family:revision or ARN".into())
        },
        p,
    );
    let container_name = f.required_str("container_name", p);
    check_field(
        f,
        "container_name",
        container_name.as_ref(),
        |c| {
            (!limits::is_ecs_name(c)).then(|| {
                format!(
                    "must be a container name: at most {} letters, digits, `_` and `-`",
                    limits::ECS_NAME_MAX
                )
            })
        },
        p,
    );
    let subnets = decode_id_list(
        f,
        "subnets",
        "subnet-",
        limits::ECS_SUBNETS_MAX,
        limits::is_subnet_id,
        p,
    );
    let security_groups = decode_id_list(
        f,
        "security_groups",
        "sg-",
        limits::ECS_SECURITY_GROUPS_MAX,
        limits::is_security_group_id,
        p,
    );
    let assign_public_ip: bool = f.optional("assign_public_ip", p).unwrap_or(false);
    let capacity_provider = match f.optional::<String>("capacity_provider", p).as_deref() {
        None | Some("FARGATE") => CapacityProvider::Fargate,
        Some("FARGATE_SPOT") => CapacityProvider::FargateSpot,
        Some(other) => {
            p.push(
                f.path_of("capacity_provider"),
                format!("`{}` is not FARGATE or FARGATE_SPOT", other.escape_debug()),
            );
            CapacityProvider::Fargate
        }
    };
    let cpu: Option<u32> = f.optional("cpu", p);
    let memory: Option<u32> = f.optional("memory", p);
    match (cpu, memory) {
        (Some(c), _) if !limits::FARGATE_CPU_VALUES.contains(&c) => {
            p.push(
                f.path_of("cpu"),
                format!(
                    "{c} is not a Fargate CPU value ({:?})",
                    limits::FARGATE_CPU_VALUES
                ),
            );
        }
        (Some(c), Some(m)) if !limits::fargate_memory_ok(c, m) => {
            p.push(
                f.path_of("memory"),
                format!("{m} MiB is not a valid Fargate memory size for cpu {c}"),
            );
        }
        (None, Some(_)) | (Some(_), None) => {
            p.push(
                f.path_of("cpu"),
                "cpu and memory overrides must be set together",
            );
        }
        _ => {}
    }
    let task_role_arn: Option<String> = f.optional("task_role_arn", p);
    check_field(
        f,
        "task_role_arn",
        task_role_arn.as_ref(),
        |arn| limits::role_arn_problem(arn).map(|why| format!("is not an IAM role ARN: {why}")),
        p,
    );
    let env = decode_env(f, p);
    let secrets = decode_secrets(f, p);
    let timeout_seconds = decode_timeout(f, p);
    Some(EcsFargateRunner {
        access: access?,
        cluster: cluster?,
        task_definition: task_definition?,
        container_name: container_name?,
        subnets: subnets?,
        security_groups: security_groups?,
        assign_public_ip,
        capacity_provider,
        cpu,
        memory,
        task_role_arn,
        env,
        secrets,
        timeout_seconds,
    })
}

fn decode_local_runner(f: &mut Fields<'_>, p: &mut Problems) -> Option<LocalRunner> {
    let runner_binary: Option<String> = f.optional("runner_binary", p);
    check_field(f, "runner_binary", runner_binary.as_ref(), no_control, p);
    let env = decode_env(f, p);
    let timeout_seconds = decode_timeout(f, p);
    Some(LocalRunner {
        runner_binary,
        env,
        timeout_seconds,
    })
}

fn decode_agent_runner(f: &mut Fields<'_>, p: &mut Problems) -> Option<AgentRunner> {
    let pool = f.required_str("pool", p);
    check_field(f, "pool", pool.as_ref(), crate::ids::pool_id_problem, p);
    let max_concurrent_jobs: u32 = f.optional("max_concurrent_jobs", p).unwrap_or(1);
    if !(1..=MAX_CONCURRENT_JOBS).contains(&max_concurrent_jobs) {
        p.push(
            f.path_of("max_concurrent_jobs"),
            format!("must be 1 to {}", MAX_CONCURRENT_JOBS),
        );
    }
    let env = decode_env(f, p);
    let timeout_seconds = decode_timeout(f, p);
    let kubernetes = f
        .raw("kubernetes")
        .and_then(|v| super::eks::decode_eks_job(v, &f.path_of("kubernetes"), p));
    Some(AgentRunner {
        pool: pool?,
        max_concurrent_jobs,
        env,
        timeout_seconds,
        kubernetes,
    })
}

fn no_control(v: &str) -> Option<String> {
    limits::has_control(v).then(|| "must not contain control characters".into())
}

pub(super) fn decode_storage(value: &Value, p: &mut Problems) -> Option<StateStorageConfiguration> {
    let mut f = Fields::new(value, "state_storage_configuration", p)?;
    let t = type_of(&mut f, &["s3", "kubernetes", "local"], p)?;
    let out = match t.as_str() {
        "s3" => decode_s3(&mut f, p).map(StateStorageConfiguration::S3),
        "kubernetes" => {
            let namespace: Option<String> = f.optional("namespace", p);
            check_field(&f, "namespace", namespace.as_ref(), dns_label_problem, p);
            Some(StateStorageConfiguration::Kubernetes(KubernetesStorage {
                namespace,
            }))
        }
        _ => {
            let directory = f.required_str("directory", p);
            check_field(&f, "directory", directory.as_ref(), no_control, p);
            directory.map(|directory| StateStorageConfiguration::Local(LocalStorage { directory }))
        }
    };
    f.finish(p);
    out
}

fn decode_s3(f: &mut Fields<'_>, p: &mut Problems) -> Option<S3Storage> {
    let bucket = f.required_str("bucket", p);
    check_field(
        f,
        "bucket",
        bucket.as_ref(),
        |b| {
            limits::bucket_name_problem(b).map(|why| {
                format!(
                    "`{}` is not a valid S3 bucket name: it {why}",
                    b.escape_debug()
                )
            })
        },
        p,
    );
    let key_prefix: String = f.optional("key_prefix", p).unwrap_or_default();
    if key_prefix.starts_with('/') || (!key_prefix.is_empty() && !key_prefix.ends_with('/')) {
        p.push(
            f.path_of("key_prefix"),
            "must not start with `/`, and must end with `/` when set",
        );
    } else if key_prefix.len() > limits::STATE_KEY_PREFIX_MAX_BYTES
        || limits::has_control(&key_prefix)
    {
        p.push(
            f.path_of("key_prefix"),
            format!(
                "must be at most {} bytes without control characters, so that every state key fits S3's {}-byte limit",
                limits::STATE_KEY_PREFIX_MAX_BYTES,
                limits::OBJECT_KEY_MAX_BYTES
            ),
        );
    }
    let region = f.required_str("region", p);
    check_region(f, region.as_ref(), p);
    let kms_key_id: Option<String> = f.optional("kms_key_id", p);
    check_field(
        f,
        "kms_key_id",
        kms_key_id.as_ref(),
        |k| {
            let shaped = k.starts_with("arn:") || k.starts_with("alias/");
            (!shaped || k.len() > limits::KMS_KEY_ID_MAX || limits::has_space_or_control(k)).then(|| {
            format!("must be a KMS key ARN or an alias/<name>, at most {} characters without whitespace", limits::KMS_KEY_ID_MAX)
        })
        },
        p,
    );
    let use_lockfile = f.optional("use_lockfile", p).unwrap_or(false);
    let dynamodb_table: Option<String> = f.optional("dynamodb_table", p);
    check_field(
        f,
        "dynamodb_table",
        dynamodb_table.as_ref(),
        |t| {
            (!limits::is_dynamodb_table_name(t)).then(|| {
                format!(
                    "must be a DynamoDB table name: {} to {} of [a-zA-Z0-9_.-]",
                    limits::DYNAMODB_TABLE_NAME_MIN,
                    limits::DYNAMODB_TABLE_NAME_MAX
                )
            })
        },
        p,
    );
    let endpoint: Option<String> = f.optional("endpoint", p);
    check_field(
        f,
        "endpoint",
        endpoint.as_ref(),
        |e| crate::urls::web_url(e).err(),
        p,
    );
    Some(S3Storage {
        bucket: bucket?,
        key_prefix,
        region: region?,
        kms_key_id,
        use_lockfile,
        dynamodb_table,
        endpoint,
    })
}
