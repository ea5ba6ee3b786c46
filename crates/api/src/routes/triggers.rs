//! Runs that follow other runs: `/v1/environments/{environment}/-/triggers`, an
//! environment's upstream environments (its `triggers`) and, paged, its downstream ones.
//! Thin: the graph is read by `sortie_lifecycle::triggers::graph`.

use axum::extract::State;
use serde::{Deserialize, Serialize};
use sortie_core::Action;
use utoipa::{IntoParams, ToSchema};

use super::Reply;
use crate::error::ApiError;
use crate::extract::{query_field, Caller, EnvParam, QueryParams};
use crate::openapi::errors::*;
use crate::AppState;

/// The query of the trigger view.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct TriggersQuery {
    /// Downstream page size: 1 to 100, default 50.
    #[serde(default, deserialize_with = "limit")]
    #[param(value_type = Option<u32>, minimum = 1, maximum = 100)]
    limit: Option<u32>,
    /// The `next` of the previous page (a downstream environment's path).
    #[serde(default)]
    cursor: Option<String>,
}

fn limit<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    query_field(d, "limit", "must be a whole number from 1 to 100", |s| {
        s.parse::<u32>().ok().filter(|l| (1..=100).contains(l))
    })
}

/// An environment's place in the trigger graph.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TriggersView {
    /// The environment.
    pub environment: String,
    /// Its upstream environments: an apply of one with changed outputs triggers it.
    pub upstream: Vec<String>,
    /// What a trigger submits here: `plan` or `apply`.
    pub trigger_operation: sortie_core::triggers::TriggerOperation,
    /// Upstream outputs given to its triggered jobs as `TF_VAR_<name>`.
    pub trigger_inputs: Vec<String>,
    /// One page of its downstream environments (those whose `triggers` name it), by path.
    pub downstream: Vec<String>,
    /// The cursor of the next page of downstream environments.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

/// The environment's upstream and (paged) downstream environments.
#[utoipa::path(get, path = "/v1/environments/{environment}/-/triggers", tag = "environments",
    params(("environment" = String, Path, description = "Environment path"), TriggersQuery),
    security(("bearerAuth" = [])),
    responses((status = 200, description = "Upstream and downstream environments", body = TriggersView),
        BadRequest, Unauthorized, NotFound, BadGateway, Unavailable))]
pub(crate) async fn get_environment_triggers(
    State(state): State<AppState>,
    EnvParam(path): EnvParam,
    caller: Caller,
    query: QueryParams<TriggersQuery>,
) -> Result<Reply<TriggersView>, ApiError> {
    caller
        .authorize(
            &state,
            Action::Read,
            path.group(),
            &format!("environment `{path}`"),
        )
        .await?;
    let query = query.get()?;
    let env = state.environments().get(&path).await?.item.environment;
    let graph = state.environments().trigger_graph(path.org()).await?;
    let all = sortie_core::triggers::downstream_of(&graph, &path);
    let from = match &query.cursor {
        Some(c) => all
            .iter()
            .position(|e| e.to_string().as_str() > c.as_str())
            .unwrap_or(all.len()),
        None => 0,
    };
    let limit = query.limit.unwrap_or(50) as usize;
    let page: Vec<String> = all
        .iter()
        .skip(from)
        .take(limit)
        .map(ToString::to_string)
        .collect();
    let next = (from + page.len() < all.len())
        .then(|| page.last().cloned())
        .flatten();
    Ok(Reply::ok(TriggersView {
        environment: path.to_string(),
        upstream: env
            .settings
            .triggers
            .iter()
            .map(ToString::to_string)
            .collect(),
        trigger_operation: env.settings.trigger_operation,
        trigger_inputs: env.settings.trigger_inputs.clone(),
        downstream: page,
        next,
    }))
}
