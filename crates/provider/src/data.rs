//! The data sources, shaped as the resources are: each a [`DataSource`] over its typed
//! model (`sortie_environment`, `sortie_environment_outputs`, `sortie_runner`), all in one
//! [`registry`].

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Number, Value};

use crate::api::Api;
use crate::error::Error;
use crate::model::{field, model, Model};
use crate::schema::Block;
use sortie_client::endpoints;

/// One data source type over its typed model.
#[tonic::async_trait]
pub trait DataSource: Send + Sync + 'static {
    /// Its attributes.
    type Model: Model;
    /// Its Terraform type name.
    fn type_name(&self) -> &'static str;
    /// Reads it.
    async fn read(&self, api: &Api, config: &Self::Model) -> Result<Self::Model, Error>;
}

/// A data source as the service calls it: over JSON objects.
#[tonic::async_trait]
pub trait DynDataSource: Send + Sync {
    /// Its Terraform type name.
    fn type_name(&self) -> &'static str;
    /// Its schema (its model's).
    fn schema(&self) -> Block;
    /// Reads it.
    async fn read(&self, api: &Api, config: &Value) -> Result<Value, Error>;
    /// Its model's JSON with every nested block present (the tests' view of its fields).
    #[cfg(test)]
    fn model_fields(&self) -> Value;
}

#[tonic::async_trait]
impl<D: DataSource> DynDataSource for D {
    fn type_name(&self) -> &'static str {
        DataSource::type_name(self)
    }

    fn schema(&self) -> Block {
        D::Model::block()
    }

    async fn read(&self, api: &Api, config: &Value) -> Result<Value, Error> {
        let config = D::Model::from_json(config)?;
        Ok(DataSource::read(self, api, &config).await?.to_json())
    }

    #[cfg(test)]
    fn model_fields(&self) -> Value {
        D::Model::filled().to_json()
    }
}

/// Every data source type, each once.
pub fn registry() -> &'static [&'static dyn DynDataSource] {
    &[&EnvironmentData, &EnvironmentOutputsData, &RunnerData]
}

/// The data source type of this name.
pub fn find(type_name: &str) -> Option<&'static dyn DynDataSource> {
    registry()
        .iter()
        .copied()
        .find(|d| d.type_name() == type_name)
}

model! {
    /// `sortie_environment`'s attributes.
    pub struct EnvironmentDataModel ("An environment, its runner and why, and the environments its runs follow and lead.") {
        path: String [Required] "The environment's path.",
        env_type: String [Computed] "Its type.",
        labels: BTreeMap<String, String> [Computed] "Its labels.",
        tags: BTreeSet<String> [Computed] "Its tags.",
        runner_id: String [Computed] "The runner it is linked to.",
        rule_id: String [Computed] "The rule that picked the runner.",
        why: String [Computed] "Why that rule won, in Sortie's words.",
        expires_at: String [Computed] "When it expires, if it was given an end (`expires_at`, or an extension).",
        ttl: String [Computed] "Its time to live, if it has one.",
        upstream: Vec<String> [Computed] "The environments whose applies trigger runs here (its `triggers`).",
        downstream: Vec<String> [Computed] "The environments an apply here triggers (their `triggers` name it), sorted by path: the first 100.",
    }
}

model! {
    /// `sortie_environment_outputs`'s attributes.
    pub struct EnvironmentOutputsModel ("An environment's latest outputs.") {
        path: String [Required] "The environment's path.",
        job_id: String [Computed] "The apply job the outputs come from.",
        values: BTreeMap<String, String> [Computed] "The non-sensitive outputs; a value that is not a string is JSON.",
        sensitive_names: BTreeSet<String> [Computed] "The names of the sensitive outputs: the API never shows their values, so neither does Terraform.",
    }
}

model! {
    /// `sortie_runner`'s attributes.
    pub struct RunnerDataModel ("A runner.") {
        id: String [Required] "The runner's id, `<group>/<name>`.",
        description: String [Computed] "Its description.",
        r#type: String [Computed] "Its runner type.",
        state_storage_type: String [Computed] "Its state storage type.",
        timeout_seconds: Number [Computed] "Its job timeout.",
    }
}

/// `sortie_environment`.
pub struct EnvironmentData;

/// `sortie_environment_outputs`.
pub struct EnvironmentOutputsData;

/// `sortie_runner`.
pub struct RunnerData;

fn text(v: &Option<String>) -> String {
    v.clone().unwrap_or_default()
}

#[tonic::async_trait]
impl DataSource for EnvironmentData {
    type Model = EnvironmentDataModel;

    fn type_name(&self) -> &'static str {
        "sortie_environment"
    }

    async fn read(&self, api: &Api, config: &Self::Model) -> Result<Self::Model, Error> {
        let path = text(&config.path);
        let v = api.get(&endpoints::get_environment(&path)).await?.body;
        let why = api
            .send(
                &endpoints::refresh_runner(&path).query([("dry_run", Some("true"))]),
                None,
                None,
            )
            .await
            .ok()
            .and_then(|a| field(&a.body["resolution"]["why"]));
        let triggers = api
            .get(&endpoints::get_environment_triggers(&path).query([("limit", Some("100"))]))
            .await?
            .body;
        Ok(EnvironmentDataModel {
            path: Some(path),
            env_type: field(&v["env_type"]),
            labels: field(&v["labels"]),
            tags: field(&v["tags"]),
            runner_id: field(&v["runner"]["runner_id"]),
            rule_id: field(&v["runner"]["rule_id"]),
            why,
            expires_at: field(&v["expires_at"]),
            ttl: field(&v["ttl"]),
            upstream: field(&triggers["upstream"]),
            downstream: field(&triggers["downstream"]),
        })
    }
}

#[tonic::async_trait]
impl DataSource for EnvironmentOutputsData {
    type Model = EnvironmentOutputsModel;

    fn type_name(&self) -> &'static str {
        "sortie_environment_outputs"
    }

    async fn read(&self, api: &Api, config: &Self::Model) -> Result<Self::Model, Error> {
        let path = text(&config.path);
        let v = api
            .get(&endpoints::get_environment_outputs(&path))
            .await?
            .body;
        let (values, sensitive) = split_outputs(&v["outputs"]);
        Ok(EnvironmentOutputsModel {
            path: Some(path),
            job_id: field(&v["job_id"]),
            values: Some(values),
            sensitive_names: Some(sensitive),
        })
    }
}

#[tonic::async_trait]
impl DataSource for RunnerData {
    type Model = RunnerDataModel;

    fn type_name(&self) -> &'static str {
        "sortie_runner"
    }

    async fn read(&self, api: &Api, config: &Self::Model) -> Result<Self::Model, Error> {
        let id = text(&config.id);
        let (group, name) = id.rsplit_once('/').unwrap_or(("", &id));
        let v = api
            .get(&endpoints::get_runner(sortie_client::group(group), name))
            .await?
            .body;
        Ok(RunnerDataModel {
            description: field(&v["description"]),
            r#type: field(&v["runner_configuration"]["type"]),
            state_storage_type: field(&v["state_storage_configuration"]["type"]),
            timeout_seconds: field(&v["runner_configuration"]["timeout_seconds"]),
            id: Some(id),
        })
    }
}

/// The API's outputs (`{"name": {"value": .., "sensitive": ..}}`) as a string map of the
/// plain ones (a value that is not a string is its JSON) and the names of the sensitive ones.
pub fn split_outputs(outputs: &Value) -> (BTreeMap<String, String>, BTreeSet<String>) {
    let mut plain = BTreeMap::new();
    let mut sensitive = BTreeSet::new();
    for (name, o) in outputs.as_object().into_iter().flatten() {
        if o["sensitive"] == json!(true) {
            sensitive.insert(name.clone());
            continue;
        }
        let value = match &o["value"] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        plain.insert(name.clone(), value);
    }
    (plain, sensitive)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_two_data_sources_share_a_type_name_and_each_schema_is_its_models() {
        let names: BTreeSet<&str> = registry().iter().map(|d| d.type_name()).collect();
        assert_eq!(names.len(), registry().len(), "{names:?}");
        for d in registry() {
            let schema: BTreeSet<&str> = d.schema().attrs.iter().map(|a| a.name).collect();
            let model = d.model_fields();
            let model: BTreeSet<&str> = model
                .as_object()
                .into_iter()
                .flatten()
                .map(|(k, _)| k.as_str())
                .collect();
            assert_eq!(schema, model, "{}", d.type_name());
            assert!(find(d.type_name()).is_some());
        }
    }

    #[test]
    fn outputs_split_into_plain_strings_and_sensitive_names() {
        let (plain, sensitive) = split_outputs(&json!({
            "a": {"value": "x", "sensitive": false},
            "b": {"value": {"k": 1}, "sensitive": false},
            "c": {"value": "s", "sensitive": true},
        }));
        assert_eq!(plain["a"], "x");
        assert_eq!(plain["b"], r#"{"k":1}"#);
        assert_eq!(sensitive.into_iter().collect::<Vec<_>>(), vec!["c"]);
    }
}
