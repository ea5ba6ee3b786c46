//! The resources, shaped as hashicorp/terraform-provider-scaffolding-framework's: each a
//! [`Resource`] (its type name, its typed model whose table is also its schema, and its
//! create, read, update, delete and import as thin calls to the shared client), all in
//! one [`registry`] the service looks a type name up in.

mod agent_pool;
mod connection;
mod environment;
mod github_connection;
mod gitlab_connection;
mod membership;
mod notification_destination;
mod policy_set;
mod rule;
mod runner;

use serde_json::{json, Value};

use crate::api::Api;
use crate::error::Error;
use crate::model::Model;
use crate::schema::Block;

/// One resource type over its typed model. The service reaches it through
/// [`DynResource`], which every `Resource` is.
#[tonic::async_trait]
pub trait Resource: Send + Sync + 'static {
    /// Its attributes.
    type Model: Model;

    /// Its Terraform type name (`sortie_runner`).
    fn type_name(&self) -> &'static str;

    /// Checks a configuration (every value known) beyond each attribute's own check.
    fn validate(&self, _config: &Self::Model) -> Result<(), Error> {
        Ok(())
    }

    /// Creates the object; its state.
    async fn create(&self, api: &Api, planned: &Self::Model) -> Result<Self::Model, Error>;

    /// Reads the object of `state` (the API's 404 when it is gone).
    async fn read(&self, api: &Api, state: &Self::Model) -> Result<Self::Model, Error>;

    /// Updates the object in place, carrying the prior state's version as `If-Match`. By
    /// default there is none: every attribute is force-new, so no update reaches here.
    async fn update(
        &self,
        _api: &Api,
        _prior: &Self::Model,
        _planned: &Self::Model,
    ) -> Result<Self::Model, Error> {
        Err(Error::Config(format!(
            "a {} cannot be updated in place",
            self.type_name()
        )))
    }

    /// Deletes the object (the API's 404 when it is gone).
    async fn delete(&self, api: &Api, state: &Self::Model) -> Result<(), Error>;

    /// The state an import of `id` starts from (then read): by default, only `id`.
    fn import(&self, id: &str) -> Result<Self::Model, Error> {
        Self::Model::from_json(&json!({ "id": id }))
    }

    /// The attribute an API field path names, for a diagnostic: by default the attribute
    /// or nested block of the path's first segment.
    fn attribute_of(&self, api_path: &str) -> Option<String> {
        attribute_in(&Self::Model::block(), api_path)
    }
}

/// A resource as the service calls it: over the JSON objects it decodes from cty.
#[tonic::async_trait]
pub trait DynResource: Send + Sync {
    /// Its Terraform type name.
    fn type_name(&self) -> &'static str;
    /// Its schema (its model's).
    fn schema(&self) -> Block;
    /// Checks a configuration without unknown values: each attribute's check, then the
    /// resource's own.
    fn validate(&self, config: &Value) -> Result<(), Error>;
    /// Creates the object; its state.
    async fn create(&self, api: &Api, planned: &Value) -> Result<Value, Error>;
    /// Reads the object of `state`; `None` when it is gone.
    async fn read(&self, api: &Api, state: &Value) -> Result<Option<Value>, Error>;
    /// Updates the object in place.
    async fn update(&self, api: &Api, prior: &Value, planned: &Value) -> Result<Value, Error>;
    /// Deletes the object (already gone is fine).
    async fn delete(&self, api: &Api, state: &Value) -> Result<(), Error>;
    /// The state an import of `id` starts from (then read).
    fn import_state(&self, id: &str) -> Result<Value, Error>;
    /// The attribute an API field path names, for a diagnostic.
    fn attribute_of(&self, api_path: &str) -> Option<String>;
    /// Its model's JSON with every nested block present (the tests' view of its fields).
    #[cfg(test)]
    fn model_fields(&self) -> Value;
}

#[tonic::async_trait]
impl<R: Resource> DynResource for R {
    fn type_name(&self) -> &'static str {
        Resource::type_name(self)
    }

    fn schema(&self) -> Block {
        R::Model::block()
    }

    fn validate(&self, config: &Value) -> Result<(), Error> {
        R::Model::block().check(config)?;
        Resource::validate(self, &R::Model::from_json(config)?)
    }

    async fn create(&self, api: &Api, planned: &Value) -> Result<Value, Error> {
        let planned = R::Model::from_json(planned)?;
        Ok(Resource::create(self, api, &planned).await?.to_json())
    }

    async fn read(&self, api: &Api, state: &Value) -> Result<Option<Value>, Error> {
        let state = R::Model::from_json(state)?;
        match Resource::read(self, api, &state).await {
            Err(e) if e.is_not_found() => Ok(None),
            other => other.map(|m| Some(m.to_json())),
        }
    }

    async fn update(&self, api: &Api, prior: &Value, planned: &Value) -> Result<Value, Error> {
        let (prior, planned) = (R::Model::from_json(prior)?, R::Model::from_json(planned)?);
        Ok(Resource::update(self, api, &prior, &planned)
            .await?
            .to_json())
    }

    async fn delete(&self, api: &Api, state: &Value) -> Result<(), Error> {
        let state = R::Model::from_json(state)?;
        match Resource::delete(self, api, &state).await {
            Err(e) if e.is_not_found() => Ok(()),
            other => other,
        }
    }

    fn import_state(&self, id: &str) -> Result<Value, Error> {
        Ok(self.import(id)?.to_json())
    }

    fn attribute_of(&self, api_path: &str) -> Option<String> {
        Resource::attribute_of(self, api_path)
    }

    #[cfg(test)]
    fn model_fields(&self) -> Value {
        R::Model::filled().to_json()
    }
}

/// `sortie_github_connection`.
const GITHUB_CONNECTION: github_connection::GithubConnectionResource =
    connection::ConnectionResource::new();
/// `sortie_gitlab_connection`.
const GITLAB_CONNECTION: gitlab_connection::GitlabConnectionResource =
    connection::ConnectionResource::new();

/// Every resource type, each once.
pub fn registry() -> &'static [&'static dyn DynResource] {
    &[
        &environment::EnvironmentResource,
        &runner::RunnerResource,
        &rule::RuleResource,
        &agent_pool::AgentPoolResource,
        &membership::MembershipResource,
        &policy_set::PolicySetResource,
        &GITHUB_CONNECTION,
        &GITLAB_CONNECTION,
        &notification_destination::NotificationDestinationResource,
    ]
}

/// The resource type of this name.
pub fn find(type_name: &str) -> Option<&'static dyn DynResource> {
    registry()
        .iter()
        .copied()
        .find(|r| r.type_name() == type_name)
}

/// The attribute or nested block of `block` an API field path's first segment names: a
/// nested block's field keeps its path without list indexes (`vcs.when_modified[2]` is
/// `vcs.when_modified`).
pub fn attribute_in(block: &Block, api_path: &str) -> Option<String> {
    let first = api_path.split(['.', '[']).next()?;
    if block.blocks.iter().any(|n| n.name == first) {
        let mut dotted = String::new();
        let mut depth = 0;
        for c in api_path.chars() {
            match c {
                '[' => depth += 1,
                ']' => depth -= 1,
                _ if depth == 0 => dotted.push(c),
                _ => {}
            }
        }
        return Some(dotted);
    }
    block
        .attrs
        .iter()
        .find(|a| a.name == first)
        .map(|a| a.name.to_string())
}

/// A string field's value ("" when unset).
pub(crate) fn text(v: &Option<String>) -> &str {
    v.as_deref().unwrap_or_default()
}

/// The version an ETag carries.
pub(crate) fn etag_version(etag: Option<&str>) -> Option<u64> {
    etag.and_then(|v| v.parse().ok())
}

/// An import id `<group>/<name>` split at its last `/`; `shape` names it in the error. The
/// name must not be empty, nor the group when `group_required`.
pub(crate) fn split_id<'a>(
    id: &'a str,
    shape: &str,
    group_required: bool,
) -> Result<(&'a str, &'a str), Error> {
    match id.rsplit_once('/') {
        Some((group, name)) if !(name.is_empty() || group_required && group.is_empty()) => {
            Ok((group, name))
        }
        _ => Err(Error::Invalid {
            attribute: "id".into(),
            problem: format!("`{id}` is not `{shape}`"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn no_two_resources_share_a_type_name() {
        let names: BTreeSet<&str> = registry().iter().map(|r| r.type_name()).collect();
        assert_eq!(names.len(), registry().len(), "{names:?}");
        for r in registry() {
            assert_eq!(
                find(r.type_name()).map(|f| f.type_name()),
                Some(r.type_name())
            );
        }
        assert!(find("sortie_nothing").is_none());
    }

    /// The names of a block's attributes and nested blocks, nested ones dotted.
    fn schema_names(block: &Block, prefix: &str, out: &mut BTreeSet<String>) {
        for a in &block.attrs {
            out.insert(format!("{prefix}{}", a.name));
        }
        for n in &block.blocks {
            out.insert(format!("{prefix}{}", n.name));
            schema_names(&n.block, &format!("{prefix}{}.", n.name), out);
        }
    }

    /// The names of a model's JSON fields, nested ones dotted.
    fn model_names(v: &Value, prefix: &str, out: &mut BTreeSet<String>) {
        for (k, v) in v.as_object().into_iter().flatten() {
            out.insert(format!("{prefix}{k}"));
            if v.is_object() {
                model_names(v, &format!("{prefix}{k}."), out);
            }
        }
    }

    #[test]
    fn every_schema_has_exactly_its_models_fields() {
        for r in registry() {
            let (mut schema, mut model) = (BTreeSet::new(), BTreeSet::new());
            schema_names(&r.schema(), "", &mut schema);
            model_names(&r.model_fields(), "", &mut model);
            assert_eq!(schema, model, "{}", r.type_name());
        }
    }
}
