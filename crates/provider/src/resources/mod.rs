//! The resources: each a schema and its create, read, update, delete and import over the
//! API. States and configurations reach them as JSON objects conformed to the schema;
//! what they return is the API's view in the schema's shape (the service settles it).

mod agent_pool;
mod environment;
mod github_connection;
mod membership;
mod notification_destination;
mod policy_set;
mod rule;
mod runner;

use serde_json::{Map, Value};

use crate::api::Api;
use crate::error::Error;
use crate::schema::Block;

/// A resource type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `sortie_environment`.
    Environment,
    /// `sortie_runner`.
    Runner,
    /// `sortie_runner_rule`.
    Rule,
    /// `sortie_agent_pool`.
    AgentPool,
    /// `sortie_membership`.
    Membership,
    /// `sortie_policy_set`.
    PolicySet,
    /// `sortie_github_connection`.
    GithubConnection,
    /// `sortie_notification_destination`.
    NotificationDestination,
}

impl Kind {
    /// Every resource type.
    pub const ALL: [Kind; 8] = [
        Kind::Environment,
        Kind::Runner,
        Kind::Rule,
        Kind::AgentPool,
        Kind::Membership,
        Kind::PolicySet,
        Kind::GithubConnection,
        Kind::NotificationDestination,
    ];

    /// Its Terraform type name.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Environment => "sortie_environment",
            Kind::Runner => "sortie_runner",
            Kind::Rule => "sortie_runner_rule",
            Kind::AgentPool => "sortie_agent_pool",
            Kind::Membership => "sortie_membership",
            Kind::PolicySet => "sortie_policy_set",
            Kind::GithubConnection => "sortie_github_connection",
            Kind::NotificationDestination => "sortie_notification_destination",
        }
    }

    /// The type of this name.
    pub fn of(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Its schema.
    pub fn block(self) -> Block {
        match self {
            Kind::Environment => environment::block(),
            Kind::Runner => runner::block(),
            Kind::Rule => rule::block(),
            Kind::AgentPool => agent_pool::block(),
            Kind::Membership => membership::block(),
            Kind::PolicySet => policy_set::block(),
            Kind::GithubConnection => github_connection::block(),
            Kind::NotificationDestination => notification_destination::block(),
        }
    }

    /// Checks a configuration before the API sees it (values may be null when unknown).
    pub fn validate(self, config: &Value) -> Result<(), Error> {
        match self {
            Kind::Runner => runner::validate(config),
            Kind::Membership => membership::validate(config),
            _ => Ok(()),
        }
    }

    /// Creates the object; its state.
    pub async fn create(self, api: &Api, planned: &Value) -> Result<Value, Error> {
        match self {
            Kind::Environment => environment::create(api, planned).await,
            Kind::Runner => runner::create(api, planned).await,
            Kind::Rule => rule::create(api, planned).await,
            Kind::AgentPool => agent_pool::create(api, planned).await,
            Kind::Membership => membership::create(api, planned).await,
            Kind::PolicySet => policy_set::create(api, planned).await,
            Kind::GithubConnection => github_connection::create(api, planned).await,
            Kind::NotificationDestination => notification_destination::create(api, planned).await,
        }
    }

    /// Reads the object of `state`; `None` when it is gone.
    pub async fn read(self, api: &Api, state: &Value) -> Result<Option<Value>, Error> {
        let read = match self {
            Kind::Environment => environment::read(api, state).await,
            Kind::Runner => runner::read(api, state).await,
            Kind::Rule => rule::read(api, state).await,
            Kind::AgentPool => agent_pool::read(api, state).await,
            Kind::Membership => membership::read(api, state).await,
            Kind::PolicySet => policy_set::read(api, state).await,
            Kind::GithubConnection => github_connection::read(api, state).await,
            Kind::NotificationDestination => notification_destination::read(api, state).await,
        };
        match read {
            Err(e) if e.is_not_found() => Ok(None),
            other => other.map(Some),
        }
    }

    /// Updates the object in place, carrying the prior state's version as `If-Match`.
    pub async fn update(self, api: &Api, prior: &Value, planned: &Value) -> Result<Value, Error> {
        match self {
            Kind::Environment => environment::update(api, prior, planned).await,
            Kind::Runner => runner::update(api, prior, planned).await,
            Kind::Rule => rule::update(api, prior, planned).await,
            Kind::PolicySet => policy_set::update(api, prior, planned).await,
            Kind::GithubConnection => github_connection::update(api, prior, planned).await,
            Kind::NotificationDestination => {
                notification_destination::update(api, prior, planned).await
            }
            // Every attribute of a pool or a membership is force-new: no update reaches here.
            Kind::AgentPool | Kind::Membership => Err(Error::Config(format!(
                "a {} cannot be updated in place",
                self.name()
            ))),
        }
    }

    /// Deletes the object (already gone is fine).
    pub async fn delete(self, api: &Api, state: &Value) -> Result<(), Error> {
        let deleted = match self {
            Kind::Environment => environment::delete(api, state).await,
            Kind::Runner => runner::delete(api, state).await,
            Kind::Rule => rule::delete(api, state).await,
            Kind::AgentPool => agent_pool::delete(api, state).await,
            Kind::Membership => membership::delete(api, state).await,
            Kind::PolicySet => policy_set::delete(api, state).await,
            Kind::GithubConnection => github_connection::delete(api, state).await,
            Kind::NotificationDestination => notification_destination::delete(api, state).await,
        };
        match deleted {
            Err(e) if e.is_not_found() => Ok(()),
            other => other,
        }
    }

    /// The state an import of `id` starts from (then read).
    pub fn import_state(self, id: &str) -> Result<Value, Error> {
        match self {
            Kind::Rule => rule::import_state(id),
            Kind::Membership => membership::import_state(id),
            Kind::PolicySet => policy_set::import_state(id),
            Kind::NotificationDestination => notification_destination::import_state(id),
            _ => Ok(serde_json::json!({ "id": id })),
        }
    }

    /// The attribute an API field path names, for a diagnostic.
    pub fn attribute_of(self, api_path: &str) -> Option<String> {
        match self {
            Kind::Runner => runner::attribute_of(api_path),
            Kind::Rule => rule::attribute_of(api_path),
            Kind::Membership => membership::attribute_of(api_path),
            Kind::PolicySet => policy_set::attribute_of(api_path),
            _ => {
                let first = api_path.split(['.', '[']).next()?;
                let block = self.block();
                if block.blocks.iter().any(|n| n.name == first) {
                    // A nested block's field: its path without list indexes
                    // (`vcs.when_modified[2]` is `vcs.when_modified`).
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
        }
    }
}

/// `v[name]` as a string ("" when absent).
pub(crate) fn text<'a>(v: &'a Value, name: &str) -> &'a str {
    v.get(name).and_then(Value::as_str).unwrap_or_default()
}

/// The version of a state (0 when absent).
pub(crate) fn version(v: &Value) -> u64 {
    v.get("version").and_then(Value::as_u64).unwrap_or_default()
}

/// An object of the non-null values of `v` named in `names`.
pub(crate) fn pick(v: &Value, names: &[&str]) -> Map<String, Value> {
    names
        .iter()
        .filter_map(|n| {
            v.get(*n)
                .filter(|x| !x.is_null())
                .map(|x| (n.to_string(), x.clone()))
        })
        .collect()
}
