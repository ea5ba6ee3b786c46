//! The resource verbs: create, get, list, update and delete of runners, runner rules and
//! environments (with their approval, drift and tool settings); `env refresh-runner`,
//! `env outputs`, `members` and `runner check`.
//!
//! One module per resource kind (`runners`, `rules`, `environments`, `members`), the
//! environments' text renderers (`env_text`) and the helpers they share (`shared`).
//! Tables are built from the API's own types (`sortie_api::model`); `-o json|yaml` prints
//! the API's JSON as it was received.

mod audit;
mod env_history;
mod env_text;
mod environments;
mod locks;
mod members;
mod notify;
mod policy_sets;
mod rules;
mod runners;
mod shared;
mod vcs;

pub use audit::audit;
pub use environments::{env, show_outputs};
pub use locks::group;
pub use members::members;
pub use notify::notify;
pub use runners::runner;
pub(crate) use shared::env_param;
pub use vcs::vcs;

use crate::args::{
    CreateResource, DeleteResource, GetResource, ListResource, Output, UpdateResource,
};
use crate::client::Api;
use crate::exit::CliError;
use crate::output::print_text;

/// `sortie create ...`.
pub async fn create(api: &Api, resource: CreateResource, out: Output) -> Result<(), CliError> {
    match resource {
        CreateResource::Runner { id, file } => runners::create(api, id, file, out).await,
        CreateResource::RunnerRule { set, file } => rules::create(api, set, file, out).await,
        CreateResource::PolicySet { id, file } => policy_sets::create(api, id, file, out).await,
        CreateResource::Env {
            path,
            env_type,
            labels,
            tags,
            settings,
        } => environments::create(api, path, env_type, labels, tags, settings, out).await,
    }
}

/// `sortie get ...`.
pub async fn get(api: &Api, resource: GetResource, out: Output) -> Result<(), CliError> {
    match resource {
        GetResource::Runner { id } => runners::get(api, id, out).await,
        GetResource::RunnerRule { id } => rules::get(api, id, out).await,
        GetResource::PolicySet { id } => policy_sets::get(api, id, out).await,
        GetResource::Env { path } => environments::get(api, path, out).await,
    }
}

/// `sortie list ...`.
pub async fn list(api: &Api, resource: ListResource, out: Output) -> Result<(), CliError> {
    match resource {
        ListResource::Runners { group } => runners::list(api, group, out).await,
        ListResource::RunnerRules { scope } => rules::list(api, scope, out).await,
        ListResource::PolicySets { group } => policy_sets::list(api, group, out).await,
        ListResource::Envs { group, recursive } => {
            environments::list(api, group, recursive, out).await
        }
    }
}

/// `sortie update ...`: read the resource for its ETag, then change it with `If-Match`,
/// so a change made by someone else in between is a conflict, never overwritten.
pub async fn update(api: &Api, resource: UpdateResource, out: Output) -> Result<(), CliError> {
    match resource {
        UpdateResource::Runner { id, file } => runners::update(api, id, file, out).await,
        UpdateResource::PolicySet { id, file } => policy_sets::update(api, id, file, out).await,
        UpdateResource::Env {
            path,
            env_type,
            labels,
            tags,
            settings,
        } => environments::update(api, path, env_type, labels, tags, settings, out).await,
    }
}

/// `sortie delete ...`.
pub async fn delete(api: &Api, resource: DeleteResource, out: Output) -> Result<(), CliError> {
    let what = match resource {
        DeleteResource::Runner { id } => runners::delete(api, id).await?,
        DeleteResource::RunnerRule { id } => rules::delete(api, id).await?,
        DeleteResource::PolicySet { id } => policy_sets::delete(api, id).await?,
        DeleteResource::Env { path } => environments::delete(api, path).await?,
    };
    // The API answers 204 with no body: JSON and YAML print nothing, scripts read the code.
    if out == Output::Table {
        print_text(&format!("deleted {what}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::environments::split_env;
    use super::shared::split_last;
    use super::*;
    use sortie_client::endpoints;

    #[test]
    fn ids_split_at_their_last_slash_and_the_root_is_spelled_dash() {
        assert_eq!(
            split_last("acme/payments/fargate"),
            ("acme/payments", "fargate")
        );
        assert_eq!(split_last("shared"), ("", "shared"));
        let (group, name) = split_last("shared");
        assert_eq!(
            endpoints::get_runner(sortie_client::group(group), name).path,
            "/v1/groups/-/-/runners/shared"
        );
        let (group, name) = split_last("acme/payments/r 1");
        assert_eq!(
            endpoints::get_runner(sortie_client::group(group), name).path,
            "/v1/groups/acme%2Fpayments/-/runners/r%201"
        );
        assert_eq!(
            endpoints::get_environment(env_param("/acme/prod/")).path,
            "/v1/environments/acme%2Fprod"
        );
        assert!(split_env("prod").is_err());
    }
}
