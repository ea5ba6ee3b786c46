//! `sortie_runner`: a runner with its whole configuration as typed nested blocks, one per
//! runner type (`local`, `agent`, `ecs_fargate`) and per state storage type
//! (`state_local`, `state_s3`).

use std::collections::BTreeMap;

use serde_json::{json, Map, Number, Value};
use sortie_core::RunnerId;

use super::{text, Resource};
use crate::api::Api;
use crate::checks;
use crate::error::Error;
use crate::model::{field, model, set_only, Model};
use sortie_client::{endpoints, Call};

model! {
    /// Its attributes and blocks.
    pub struct RunnerModel ("A Sortie runner: where and how jobs run, and where their state lives.") {
        id: String [Computed] "The runner's id, `<group>/<name>`.",
        group: String [Required, force_new, check(checks::url_group)] "The owner group.",
        name: String [Required, force_new, check(checks::segment)] "The runner's name within its group.",
        description: String [Optional] "Free text shown to users.",
        tool: String [Optional] "`terraform` or `opentofu`.",
        tool_version: String [Optional] "The tool version, exact or a constraint.",
        version: u64 [Computed, volatile] "The version (the API's ETag).",
    }
    blocks {
        local: LocalModel,
        agent: AgentModel,
        ecs_fargate: EcsFargateModel,
        state_local: StateLocalModel,
        state_s3: StateS3Model,
        identity: IdentityModel,
    }
}

model! {
    /// The `local` runner type.
    pub struct LocalModel ("A child process on the host (development, the demo, tests).") {
        runner_binary: String [Optional] "Path of `sortie-pilot`.",
        env: BTreeMap<String, String> [Optional] "Plain environment variables for the runner.",
        timeout_seconds: Number [OptionalComputed] "Job timeout in seconds (600 when unset).",
    }
}

model! {
    /// The `agent` runner type.
    pub struct AgentModel ("Jobs pulled by the agents of a pool.") {
        pool: String [Required] "The agent pool's id (`apool-…`).",
        max_concurrent_jobs: Number [OptionalComputed] "Jobs one agent runs at once (1 when unset).",
        env: BTreeMap<String, String> [Optional] "Plain environment variables for the runner.",
        timeout_seconds: Number [OptionalComputed] "Job timeout in seconds (600 when unset).",
    }
}

model! {
    /// The `ecs-fargate` runner type.
    pub struct EcsFargateModel ("One Fargate task per job in the runner's account.") {
        role_arn: String [Required] "The launcher role Sortie assumes.",
        external_id: String [Required] "The ExternalId the role's trust policy requires.",
        region: String [Required] "The AWS region.",
        cluster: String [Required] "ECS cluster name or ARN.",
        task_definition: String [Required] "Task definition family, `family:revision` or ARN.",
        container_name: String [Required] "The runner container's name.",
        subnets: Vec<String> [Required] "Subnet ids.",
        security_groups: Vec<String> [Required] "Security group ids.",
        assign_public_ip: bool [Optional] "Whether the task gets a public IP.",
        capacity_provider: String [OptionalComputed] "`FARGATE` or `FARGATE_SPOT`.",
        cpu: Number [Optional] "Task CPU override in CPU units.",
        memory: Number [Optional] "Task memory override in MiB.",
        task_role_arn: String [Optional] "A task role per job.",
        env: BTreeMap<String, String> [Optional] "Plain environment variables for the runner.",
        secrets: BTreeMap<String, String> [Optional] "Secret references (ARNs) by variable name.",
        timeout_seconds: Number [OptionalComputed] "Job timeout in seconds (600 when unset).",
    }
}

model! {
    /// The `local` state storage type.
    pub struct StateLocalModel ("State in a directory on the host (`local` runners).") {
        directory: String [Required] "The directory holding one state file per environment.",
    }
}

model! {
    /// The `s3` state storage type.
    pub struct StateS3Model ("State in an S3 bucket.") {
        bucket: String [Required] "Bucket name.",
        region: String [Required] "Bucket region.",
        key_prefix: String [Optional] "Prefix of every state key.",
        kms_key_id: String [Optional] "KMS key for server-side encryption.",
        use_lockfile: bool [Optional] "Lock with an S3 lock file.",
        dynamodb_table: String [Optional] "Lock with a DynamoDB table.",
        endpoint: String [Optional] "An S3 endpoint override.",
    }
}

model! {
    /// The job's cloud identity, flat (the API nests it per cloud).
    pub struct IdentityModel ("The job's own cloud identity: a token per job and phase, which each cloud exchanges for the role (or workload identity) named here.") {
        audience: String [Required] "The tokens' `aud` (`sts.amazonaws.com` for AWS).",
        aws_plan_role_arn: String [Optional] "AWS: the role a job's plan phase takes.",
        aws_apply_role_arn: String [Optional] "AWS: the role a job's apply phase takes.",
        gcp_workload_identity_provider: String [Optional] "Google Cloud: the workload identity provider's full resource name.",
        gcp_service_account: String [Optional] "Google Cloud: a service account to impersonate.",
        azure_client_id: String [Optional] "Azure: the application (client) id.",
        azure_tenant_id: String [Optional] "Azure: the tenant id.",
    }
}

/// `sortie_runner`.
pub struct RunnerResource;

/// A block of a configuration family: its name, the API's `type` and its value as JSON
/// (null when absent).
type Family = [(&'static str, &'static str, Value)];

fn json_of<M: Model>(block: &Option<M>) -> Value {
    block.as_ref().map_or(Value::Null, Model::to_json)
}

impl RunnerModel {
    /// The runner type blocks.
    fn runner_types(&self) -> [(&'static str, &'static str, Value); 3] {
        [
            ("local", "local", json_of(&self.local)),
            ("agent", "agent", json_of(&self.agent)),
            ("ecs_fargate", "ecs-fargate", json_of(&self.ecs_fargate)),
        ]
    }

    /// The state storage blocks.
    fn state_types(&self) -> [(&'static str, &'static str, Value); 2] {
        [
            ("state_local", "local", json_of(&self.state_local)),
            ("state_s3", "s3", json_of(&self.state_s3)),
        ]
    }
}

/// Exactly one runner block and one state block.
fn check_blocks(config: &RunnerModel) -> Result<(), Error> {
    let (runners, states) = (config.runner_types(), config.state_types());
    for (family, what) in [
        (
            &runners[..],
            "runner type block (local, agent or ecs_fargate)",
        ),
        (&states[..], "state storage block (state_local or state_s3)"),
    ] {
        let found: Vec<&str> = present(family).map(|(name, _, _)| *name).collect();
        if found.len() != 1 {
            return Err(Error::Invalid {
                attribute: found.get(1).copied().unwrap_or(family[0].0).to_string(),
                problem: format!(
                    "a runner needs exactly one {what}; this one has {}",
                    found.len()
                ),
            });
        }
    }
    Ok(())
}

fn present(family: &Family) -> impl Iterator<Item = &(&'static str, &'static str, Value)> {
    family.iter().filter(|(_, _, v)| !v.is_null())
}

/// The API's configuration of the one block of `family` present: its set values and `type`.
fn configuration(family: &Family) -> Value {
    let (_, api_type, block) = present(family).next().expect("validated");
    let mut m = set_only(block.clone());
    m.insert("type".into(), json!(api_type));
    Value::Object(m)
}

fn spec(planned: &RunnerModel) -> Result<Value, Error> {
    check_blocks(planned)?;
    let mut b = set_only(json!({
        "description": planned.description,
        "tool": planned.tool,
        "tool_version": planned.tool_version,
    }));
    b.insert(
        "runner_configuration".into(),
        configuration(&planned.runner_types()),
    );
    b.insert(
        "state_storage_configuration".into(),
        configuration(&planned.state_types()),
    );
    if let Some(identity) = &planned.identity {
        b.insert("identity".into(), identity_body(identity));
    }
    Ok(Value::Object(b))
}

/// The API's `identity` object of the flat block: a cloud's object when any of its
/// attributes is set (the API names what is missing).
fn identity_body(i: &IdentityModel) -> Value {
    let mut body = Map::new();
    body.insert("audience".into(), json!(i.audience));
    for (cloud, fields) in [
        (
            "aws",
            json!({ "plan_role_arn": i.aws_plan_role_arn, "apply_role_arn": i.aws_apply_role_arn }),
        ),
        (
            "gcp",
            json!({ "workload_identity_provider": i.gcp_workload_identity_provider,
                    "service_account": i.gcp_service_account }),
        ),
        (
            "azure",
            json!({ "client_id": i.azure_client_id, "tenant_id": i.azure_tenant_id }),
        ),
    ] {
        let set = set_only(fields);
        if !set.is_empty() {
            body.insert(cloud.into(), Value::Object(set));
        }
    }
    Value::Object(body)
}

/// The flat block of the API's `identity` object (`None` when absent).
fn identity_state(v: &Value) -> Option<IdentityModel> {
    if v.is_null() {
        return None;
    }
    Some(IdentityModel {
        audience: field(&v["audience"]),
        aws_plan_role_arn: field(&v["aws"]["plan_role_arn"]),
        aws_apply_role_arn: field(&v["aws"]["apply_role_arn"]),
        gcp_workload_identity_provider: field(&v["gcp"]["workload_identity_provider"]),
        gcp_service_account: field(&v["gcp"]["service_account"]),
        azure_client_id: field(&v["azure"]["client_id"]),
        azure_tenant_id: field(&v["azure"]["tenant_id"]),
    })
}

/// The block of a configuration of the API's `type` `api_type` (`None` for another type).
fn block_of<M: Model>(configuration: &Value, api_type: &str) -> Option<M> {
    (configuration["type"] == json!(api_type))
        .then(|| field(configuration))
        .flatten()
}

/// The API's runner as state.
fn state_of(view: &Value) -> RunnerModel {
    let runner = &view["runner_configuration"];
    let state = &view["state_storage_configuration"];
    RunnerModel {
        id: field(&view["id"]),
        group: field(&view["group"]),
        name: field(&view["name"]),
        description: field(&view["description"]),
        tool: field(&view["tool"]),
        tool_version: field(&view["tool_version"]),
        version: field(&view["version"]),
        local: block_of(runner, "local"),
        agent: block_of(runner, "agent"),
        ecs_fargate: block_of(runner, "ecs-fargate"),
        state_local: block_of(state, "local"),
        state_s3: block_of(state, "s3"),
        identity: identity_state(&view["identity"]),
    }
}

fn at(endpoint: fn(&str, &str) -> Call, state: &RunnerModel) -> Call {
    let id = text(&state.id);
    let (group, name) = id.rsplit_once('/').unwrap_or(("", id));
    endpoint(sortie_client::group(group), name)
}

#[tonic::async_trait]
impl Resource for RunnerResource {
    type Model = RunnerModel;

    fn type_name(&self) -> &'static str {
        "sortie_runner"
    }

    /// Exactly one runner block and one state block, and an id (`<group>/<name>`) the
    /// API takes.
    fn validate(&self, config: &RunnerModel) -> Result<(), Error> {
        check_blocks(config)?;
        if let (Some(group), Some(name)) = (&config.group, &config.name) {
            let invalid = |attribute: &str, problem| Error::Invalid {
                attribute: attribute.into(),
                problem,
            };
            let group = checks::url_group_path(group).map_err(|p| invalid("group", p))?;
            RunnerId::new(group, name).map_err(|e| invalid("name", e.first_problem()))?;
        }
        Ok(())
    }

    async fn create(&self, api: &Api, planned: &RunnerModel) -> Result<RunnerModel, Error> {
        let p = endpoints::create_runner(
            sortie_client::group(text(&planned.group)),
            text(&planned.name),
        );
        let answer = api.send(&p, Some(&spec(planned)?), None).await?;
        Ok(state_of(&answer.body))
    }

    async fn read(&self, api: &Api, state: &RunnerModel) -> Result<RunnerModel, Error> {
        Ok(state_of(
            &api.get(&at(endpoints::get_runner, state)).await?.body,
        ))
    }

    /// Replaces its specification in place (`PUT` with `If-Match`).
    async fn update(
        &self,
        api: &Api,
        prior: &RunnerModel,
        planned: &RunnerModel,
    ) -> Result<RunnerModel, Error> {
        let answer = api
            .send(
                &at(endpoints::update_runner, prior),
                Some(&spec(planned)?),
                Some(prior.version.unwrap_or_default()),
            )
            .await?;
        Ok(state_of(&answer.body))
    }

    async fn delete(&self, api: &Api, state: &RunnerModel) -> Result<(), Error> {
        api.send(&at(endpoints::delete_runner, state), None, None)
            .await?;
        Ok(())
    }

    /// An import id: the runner's id, `<group>/<name>` (a shared runner's is `<name>`).
    fn import(&self, id: &str) -> Result<RunnerModel, Error> {
        checks::runner_id(id).map_err(|problem| Error::Invalid {
            attribute: "id".into(),
            problem,
        })?;
        Ok(RunnerModel {
            id: Some(id.into()),
            ..Default::default()
        })
    }

    /// `runner_configuration.cluster` → `ecs_fargate.cluster` (the block of the type in use
    /// is not known here, so the attribute names the first segment's block family).
    fn attribute_of(&self, api_path: &str) -> Option<String> {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runner(v: Value) -> RunnerModel {
        RunnerModel::from_json(&v).unwrap()
    }

    #[test]
    fn a_runner_needs_one_block_of_each_family_and_an_id_the_api_takes() {
        let ok = json!({"group": "acme", "name": "local",
            "local": {"timeout_seconds": 900}, "state_local": {"directory": "/tmp/s"}});
        assert!(RunnerResource.validate(&runner(ok.clone())).is_ok());
        let mut two = ok.clone();
        two["agent"] = json!({"pool": "apool-1"});
        let mut none = ok.clone();
        none["state_local"] = Value::Null;
        let mut long = ok.clone();
        long["name"] = json!("n".repeat(63));
        long["group"] = json!(vec!["g".repeat(63); 4].join("/"));
        for (c, attribute) in [(two, "agent"), (none, "state_local"), (long, "name")] {
            match RunnerResource.validate(&runner(c.clone())) {
                Err(Error::Invalid { attribute: a, .. }) => assert_eq!(a, attribute, "{c}"),
                other => panic!("{c}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_runner_round_trips_through_the_api_shape() {
        let planned = runner(json!({"group": "acme", "name": "fg", "description": "d",
            "ecs_fargate": {"role_arn": "arn:r", "external_id": "x", "region": "eu-west-1",
                "cluster": "c", "task_definition": "t", "container_name": "runner",
                "subnets": ["s1"], "security_groups": ["sg"], "cpu": 512},
            "state_s3": {"bucket": "b", "region": "eu-west-1"},
            "identity": {"audience": "sts.amazonaws.com", "aws_plan_role_arn": "arn:p"}}));
        let mut view = spec(&planned).unwrap();
        assert_eq!(view["runner_configuration"]["type"], "ecs-fargate");
        assert_eq!(view["runner_configuration"]["cpu"], 512);
        assert!(view["runner_configuration"].get("memory").is_none());
        assert_eq!(view["identity"]["aws"], json!({"plan_role_arn": "arn:p"}));
        assert!(view["identity"].get("gcp").is_none());
        view["id"] = json!("acme/fg");
        view["group"] = json!("acme");
        view["name"] = json!("fg");
        view["version"] = json!(2);
        let state = state_of(&view);
        assert_eq!(state.ecs_fargate, planned.ecs_fargate);
        assert_eq!(state.state_s3, planned.state_s3);
        assert_eq!(state.identity, planned.identity);
        assert_eq!(
            (state.local, state.agent, state.state_local),
            (None, None, None)
        );
        assert_eq!(state.version, Some(2));
    }
}
