//! `sortie_runner`: a runner with its whole configuration as typed nested blocks, one per
//! runner type (`local`, `agent`, `ecs_fargate`) and per state storage type
//! (`state_local`, `state_s3`).

use serde_json::{json, Map, Value};

use super::{pick, text, version};
use crate::api::Api;
use crate::error::Error;
use crate::schema::{attr, string_list, string_map, Block, Mode, Nested, Ty};
use sortie_client::{endpoints, Call};

/// The runner blocks: Terraform name, API `type`.
const RUNNER_TYPES: [(&str, &str); 3] = [
    ("local", "local"),
    ("agent", "agent"),
    ("ecs_fargate", "ecs-fargate"),
];

/// The state storage blocks: Terraform name, API `type`.
const STATE_TYPES: [(&str, &str); 2] = [("state_local", "local"), ("state_s3", "s3")];

fn timeout() -> crate::schema::Attr {
    attr(
        "timeout_seconds",
        Ty::Number,
        Mode::OptionalComputed,
        "Job timeout in seconds (600 when unset).",
    )
}

fn env() -> crate::schema::Attr {
    attr(
        "env",
        string_map(),
        Mode::Optional,
        "Plain environment variables for the runner.",
    )
}

fn nested(
    name: &'static str,
    description: &'static str,
    attrs: Vec<crate::schema::Attr>,
) -> Nested {
    Nested {
        name,
        block: Block {
            attrs,
            blocks: vec![],
            description,
        },
    }
}

/// Its schema.
pub fn block() -> Block {
    use Mode::*;
    let s = Ty::String;
    Block {
        attrs: vec![
            attr(
                "id",
                s.clone(),
                Computed,
                "The runner's id, `<group>/<name>`.",
            ),
            attr("group", s.clone(), Required, "The owner group.").force_new(),
            attr(
                "name",
                s.clone(),
                Required,
                "The runner's name within its group.",
            )
            .force_new(),
            attr(
                "description",
                s.clone(),
                Optional,
                "Free text shown to users.",
            ),
            attr("tool", s.clone(), Optional, "`terraform` or `opentofu`."),
            attr(
                "tool_version",
                s.clone(),
                Optional,
                "The tool version, exact or a constraint.",
            ),
            attr(
                "version",
                Ty::Number,
                Computed,
                "The version (the API's ETag).",
            )
            .volatile(),
        ],
        blocks: vec![
            nested(
                "local",
                "A child process on the host (development, the demo, tests).",
                vec![
                    attr(
                        "runner_binary",
                        s.clone(),
                        Optional,
                        "Path of `sortie-pilot`.",
                    ),
                    env(),
                    timeout(),
                ],
            ),
            nested(
                "agent",
                "Jobs pulled by the agents of a pool.",
                vec![
                    attr(
                        "pool",
                        s.clone(),
                        Required,
                        "The agent pool's id (`apool-…`).",
                    ),
                    attr(
                        "max_concurrent_jobs",
                        Ty::Number,
                        OptionalComputed,
                        "Jobs one agent runs at once (1 when unset).",
                    ),
                    env(),
                    timeout(),
                ],
            ),
            nested(
                "ecs_fargate",
                "One Fargate task per job in the runner's account.",
                vec![
                    attr(
                        "role_arn",
                        s.clone(),
                        Required,
                        "The launcher role Sortie assumes.",
                    ),
                    attr(
                        "external_id",
                        s.clone(),
                        Required,
                        "The ExternalId the role's trust policy requires.",
                    ),
                    attr("region", s.clone(), Required, "The AWS region."),
                    attr("cluster", s.clone(), Required, "ECS cluster name or ARN."),
                    attr(
                        "task_definition",
                        s.clone(),
                        Required,
                        "Task definition family, `family:revision` or ARN.",
                    ),
                    attr(
                        "container_name",
                        s.clone(),
                        Required,
                        "The runner container's name.",
                    ),
                    attr("subnets", string_list(), Required, "Subnet ids."),
                    attr(
                        "security_groups",
                        string_list(),
                        Required,
                        "Security group ids.",
                    ),
                    attr(
                        "assign_public_ip",
                        Ty::Bool,
                        Optional,
                        "Whether the task gets a public IP.",
                    ),
                    attr(
                        "capacity_provider",
                        s.clone(),
                        OptionalComputed,
                        "`FARGATE` or `FARGATE_SPOT`.",
                    ),
                    attr(
                        "cpu",
                        Ty::Number,
                        Optional,
                        "Task CPU override in CPU units.",
                    ),
                    attr(
                        "memory",
                        Ty::Number,
                        Optional,
                        "Task memory override in MiB.",
                    ),
                    attr("task_role_arn", s.clone(), Optional, "A task role per job."),
                    env(),
                    attr(
                        "secrets",
                        string_map(),
                        Optional,
                        "Secret references (ARNs) by variable name.",
                    ),
                    timeout(),
                ],
            ),
            nested(
                "state_local",
                "State in a directory on the host (`local` runners).",
                vec![attr(
                    "directory",
                    s.clone(),
                    Required,
                    "The directory holding one state file per environment.",
                )],
            ),
            nested(
                "state_s3",
                "State in an S3 bucket.",
                vec![
                    attr("bucket", s.clone(), Required, "Bucket name."),
                    attr("region", s.clone(), Required, "Bucket region."),
                    attr(
                        "key_prefix",
                        s.clone(),
                        Optional,
                        "Prefix of every state key.",
                    ),
                    attr(
                        "kms_key_id",
                        s.clone(),
                        Optional,
                        "KMS key for server-side encryption.",
                    ),
                    attr(
                        "use_lockfile",
                        Ty::Bool,
                        Optional,
                        "Lock with an S3 lock file.",
                    ),
                    attr(
                        "dynamodb_table",
                        s.clone(),
                        Optional,
                        "Lock with a DynamoDB table.",
                    ),
                    attr("endpoint", s.clone(), Optional, "An S3 endpoint override."),
                ],
            ),
            nested(
                "identity",
                "The job's own cloud identity: a token per job and phase, which each cloud exchanges for the role (or workload identity) named here.",
                vec![
                    attr(
                        "audience",
                        s.clone(),
                        Required,
                        "The tokens' `aud` (`sts.amazonaws.com` for AWS).",
                    ),
                    attr(
                        "aws_plan_role_arn",
                        s.clone(),
                        Optional,
                        "AWS: the role a job's plan phase takes.",
                    ),
                    attr(
                        "aws_apply_role_arn",
                        s.clone(),
                        Optional,
                        "AWS: the role a job's apply phase takes.",
                    ),
                    attr(
                        "gcp_workload_identity_provider",
                        s.clone(),
                        Optional,
                        "Google Cloud: the workload identity provider's full resource name.",
                    ),
                    attr(
                        "gcp_service_account",
                        s.clone(),
                        Optional,
                        "Google Cloud: a service account to impersonate.",
                    ),
                    attr(
                        "azure_client_id",
                        s.clone(),
                        Optional,
                        "Azure: the application (client) id.",
                    ),
                    attr("azure_tenant_id", s, Optional, "Azure: the tenant id."),
                ],
            ),
        ],
        description: "A Sortie runner: where and how jobs run, and where their state lives.",
    }
}

fn present<'a>(
    config: &'a Value,
    names: &[(&'static str, &str)],
) -> Vec<(&'static str, &'a Value)> {
    names
        .iter()
        .filter_map(|(n, _)| config.get(*n).filter(|v| !v.is_null()).map(|v| (*n, v)))
        .collect()
}

/// Exactly one runner block and one state block.
pub fn validate(config: &Value) -> Result<(), Error> {
    for (kinds, what, first) in [
        (
            &RUNNER_TYPES[..],
            "runner type block (local, agent or ecs_fargate)",
            "local",
        ),
        (
            &STATE_TYPES[..],
            "state storage block (state_local or state_s3)",
            "state_local",
        ),
    ] {
        let found = present(config, kinds);
        if found.len() != 1 {
            return Err(Error::Invalid {
                attribute: found.get(1).map_or(first, |f| f.0).to_string(),
                problem: format!(
                    "a runner needs exactly one {what}; this one has {}",
                    found.len()
                ),
            });
        }
    }
    Ok(())
}

fn configuration(block: &Value, api_type: &str) -> Value {
    let mut m: Map<String, Value> = block
        .as_object()
        .map(|o| {
            o.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default();
    m.insert("type".into(), json!(api_type));
    Value::Object(m)
}

fn spec(planned: &Value) -> Result<Value, Error> {
    validate(planned)?;
    let (runner, api_runner) = RUNNER_TYPES
        .iter()
        .find(|(n, _)| !planned[*n].is_null())
        .expect("validated");
    let (state, api_state) = STATE_TYPES
        .iter()
        .find(|(n, _)| !planned[*n].is_null())
        .expect("validated");
    let mut b = pick(planned, &["description", "tool", "tool_version"]);
    b.insert(
        "runner_configuration".into(),
        configuration(&planned[*runner], api_runner),
    );
    b.insert(
        "state_storage_configuration".into(),
        configuration(&planned[*state], api_state),
    );
    if let Some(identity) = planned.get("identity").filter(|v| !v.is_null()) {
        b.insert("identity".into(), identity_body(identity));
    }
    Ok(Value::Object(b))
}

/// The flat `identity` block's attributes for each cloud: `(cloud, attribute prefix, the
/// API's fields)`.
const IDENTITY_CLOUDS: [(&str, &str, &[&str]); 3] = [
    ("aws", "aws_", &["plan_role_arn", "apply_role_arn"]),
    (
        "gcp",
        "gcp_",
        &["workload_identity_provider", "service_account"],
    ),
    ("azure", "azure_", &["client_id", "tenant_id"]),
];

/// The API's `identity` object of the flat block: a cloud's object when any of its
/// attributes is set (the API names what is missing).
fn identity_body(block: &Value) -> Value {
    let mut body = Map::new();
    body.insert("audience".into(), block["audience"].clone());
    for (cloud, prefix, fields) in IDENTITY_CLOUDS {
        let set: Map<String, Value> = fields
            .iter()
            .filter_map(|f| {
                let v = &block[format!("{prefix}{f}")];
                (!v.is_null()).then(|| (f.to_string(), v.clone()))
            })
            .collect();
        if !set.is_empty() {
            body.insert(cloud.into(), Value::Object(set));
        }
    }
    Value::Object(body)
}

/// The flat block of the API's `identity` object (null when absent).
fn identity_state(identity: &Value) -> Value {
    if identity.is_null() {
        return Value::Null;
    }
    let mut state = Map::new();
    state.insert("audience".into(), identity["audience"].clone());
    for (cloud, prefix, fields) in IDENTITY_CLOUDS {
        for f in fields {
            state.insert(format!("{prefix}{f}"), identity[cloud][*f].clone());
        }
    }
    Value::Object(state)
}

/// The API's runner as state.
pub fn state_of(view: &Value) -> Value {
    let mut s = json!({
        "id": view["id"],
        "group": view["group"],
        "name": view["name"],
        "description": view["description"],
        "tool": view["tool"],
        "tool_version": view["tool_version"],
        "version": view["version"],
        "identity": identity_state(&view["identity"]),
    });
    for (kinds, field) in [
        (&RUNNER_TYPES[..], "runner_configuration"),
        (&STATE_TYPES[..], "state_storage_configuration"),
    ] {
        let c = &view[field];
        for (name, api_type) in kinds {
            s[*name] = if c["type"] == json!(api_type) {
                c.clone()
            } else {
                Value::Null
            };
        }
    }
    s
}

fn at(endpoint: fn(&str, &str) -> Call, state: &Value) -> Call {
    let id = text(state, "id");
    let (group, name) = id.rsplit_once('/').unwrap_or(("", id));
    endpoint(sortie_client::group(group), name)
}

/// Creates it.
pub async fn create(api: &Api, planned: &Value) -> Result<Value, Error> {
    let p = endpoints::create_runner(
        sortie_client::group(text(planned, "group")),
        text(planned, "name"),
    );
    let answer = api.send(&p, Some(&spec(planned)?), None).await?;
    Ok(state_of(&answer.body))
}

/// Reads it.
pub async fn read(api: &Api, state: &Value) -> Result<Value, Error> {
    Ok(state_of(
        &api.get(&at(endpoints::get_runner, state)).await?.body,
    ))
}

/// Replaces its specification in place (`PUT` with `If-Match`).
pub async fn update(api: &Api, prior: &Value, planned: &Value) -> Result<Value, Error> {
    let answer = api
        .send(
            &at(endpoints::update_runner, prior),
            Some(&spec(planned)?),
            Some(version(prior)),
        )
        .await?;
    Ok(state_of(&answer.body))
}

/// Deletes it.
pub async fn delete(api: &Api, state: &Value) -> Result<(), Error> {
    api.send(&at(endpoints::delete_runner, state), None, None)
        .await?;
    Ok(())
}

/// `runner_configuration.cluster` → `ecs_fargate.cluster` (the block of the type in use is
/// not known here, so the attribute names the first segment's block family).
pub fn attribute_of(api_path: &str) -> Option<String> {
    let (head, rest) = api_path.split_once('.').unwrap_or((api_path, ""));
    match head {
        "runner_configuration" | "state_storage_configuration" => Some(if rest.is_empty() {
            head.to_string()
        } else {
            rest.split('.').next().unwrap_or(rest).to_string()
        }),
        "description" | "tool" | "tool_version" | "name" | "group" | "identity" => {
            Some(head.to_string())
        }
        _ => None,
    }
}
