//! The data sources: `sortie_environment`, `sortie_environment_outputs`, `sortie_runner`.

use serde_json::{json, Map, Value};

use crate::api::Api;
use crate::error::Error;
use crate::schema::{attr, string_list, string_map, string_set, Block, Mode, Ty};
use sortie_client::endpoints;

/// A data source type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataKind {
    /// `sortie_environment`.
    Environment,
    /// `sortie_environment_outputs`.
    EnvironmentOutputs,
    /// `sortie_runner`.
    Runner,
}

impl DataKind {
    /// Every data source type.
    pub const ALL: [DataKind; 3] = [
        DataKind::Environment,
        DataKind::EnvironmentOutputs,
        DataKind::Runner,
    ];

    /// Its Terraform type name.
    pub fn name(self) -> &'static str {
        match self {
            DataKind::Environment => "sortie_environment",
            DataKind::EnvironmentOutputs => "sortie_environment_outputs",
            DataKind::Runner => "sortie_runner",
        }
    }

    /// The type of this name.
    pub fn of(name: &str) -> Option<DataKind> {
        DataKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Its schema.
    pub fn block(self) -> Block {
        use Mode::*;
        let s = Ty::String;
        match self {
            DataKind::Environment => Block {
                attrs: vec![
                    attr("path", s.clone(), Required, "The environment's path."),
                    attr("env_type", s.clone(), Computed, "Its type."),
                    attr("labels", string_map(), Computed, "Its labels."),
                    attr("tags", string_set(), Computed, "Its tags."),
                    attr("runner_id", s.clone(), Computed, "The runner it is linked to."),
                    attr("rule_id", s.clone(), Computed, "The rule that picked the runner."),
                    attr("why", s.clone(), Computed, "Why that rule won, in Sortie's words."),
                    attr("expires_at", s.clone(), Computed, "When it expires, if it was given an end (`expires_at`, or an extension)."),
                    attr("ttl", s, Computed, "Its time to live, if it has one."),
                    attr("upstream", string_list(), Computed, "The environments whose applies trigger runs here (its `triggers`)."),
                    attr("downstream", string_list(), Computed, "The environments an apply here triggers (their `triggers` name it), sorted by path: the first 100."),
                ],
                blocks: vec![],
                description: "An environment, its runner and why, and the environments its runs follow and lead.",
            },
            DataKind::EnvironmentOutputs => Block {
                attrs: vec![
                    attr("path", s.clone(), Required, "The environment's path."),
                    attr("job_id", s, Computed, "The apply job the outputs come from."),
                    attr("values", string_map(), Computed, "The non-sensitive outputs; a value that is not a string is JSON."),
                    attr("sensitive_names", string_set(), Computed, "The names of the sensitive outputs: the API never shows their values, so neither does Terraform."),
                ],
                blocks: vec![],
                description: "An environment's latest outputs.",
            },
            DataKind::Runner => Block {
                attrs: vec![
                    attr("id", s.clone(), Required, "The runner's id, `<group>/<name>`."),
                    attr("description", s.clone(), Computed, "Its description."),
                    attr("type", s.clone(), Computed, "Its runner type."),
                    attr("state_storage_type", s, Computed, "Its state storage type."),
                    attr("timeout_seconds", Ty::Number, Computed, "Its job timeout."),
                ],
                blocks: vec![],
                description: "A runner.",
            },
        }
    }

    /// Reads it.
    pub async fn read(self, api: &Api, config: &Value) -> Result<Value, Error> {
        let text = |n: &str| {
            config
                .get(n)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        match self {
            DataKind::Environment => {
                let path = text("path");
                let v = api.get(&endpoints::get_environment(&path)).await?.body;
                let why = api
                    .send(
                        &endpoints::refresh_runner(&path).query([("dry_run", Some("true"))]),
                        None,
                        None,
                    )
                    .await
                    .map(|a| a.body["resolution"]["why"].clone())
                    .unwrap_or(Value::Null);
                let triggers = api
                    .get(
                        &endpoints::get_environment_triggers(&path).query([("limit", Some("100"))]),
                    )
                    .await?
                    .body;
                Ok(json!({
                    "path": path,
                    "env_type": v["env_type"],
                    "labels": v["labels"],
                    "tags": v["tags"],
                    "runner_id": v["runner"]["runner_id"],
                    "rule_id": v["runner"]["rule_id"],
                    "why": why,
                    "expires_at": v["expires_at"],
                    "ttl": v["ttl"],
                    "upstream": triggers["upstream"],
                    "downstream": triggers["downstream"],
                }))
            }
            DataKind::EnvironmentOutputs => {
                let path = text("path");
                let v = api
                    .get(&endpoints::get_environment_outputs(&path))
                    .await?
                    .body;
                let (values, sensitive) = split_outputs(&v["outputs"]);
                Ok(json!({
                    "path": path,
                    "job_id": v["job_id"],
                    "values": values,
                    "sensitive_names": sensitive,
                }))
            }
            DataKind::Runner => {
                let id = text("id");
                let (group, name) = id.rsplit_once('/').unwrap_or(("", &id));
                let v = api
                    .get(&endpoints::get_runner(sortie_client::group(group), name))
                    .await?
                    .body;
                Ok(json!({
                    "id": id,
                    "description": v["description"],
                    "type": v["runner_configuration"]["type"],
                    "state_storage_type": v["state_storage_configuration"]["type"],
                    "timeout_seconds": v["runner_configuration"]["timeout_seconds"],
                }))
            }
        }
    }
}

/// The API's outputs (`{"name": {"value": .., "sensitive": ..}}`) as a string map of the
/// plain ones (a value that is not a string is its JSON) and the names of the sensitive ones.
pub fn split_outputs(outputs: &Value) -> (Map<String, Value>, Vec<Value>) {
    let mut plain = Map::new();
    let mut sensitive = Vec::new();
    for (name, o) in outputs.as_object().into_iter().flatten() {
        if o["sensitive"] == json!(true) {
            sensitive.push(Value::String(name.clone()));
            continue;
        }
        let value = match &o["value"] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        plain.insert(name.clone(), Value::String(value));
    }
    (plain, sensitive)
}
