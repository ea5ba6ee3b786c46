//! `sortie_agent_pool`: an agent pool and its first token (sensitive, known only at create).

use serde_json::{json, Value};

use super::{text, Resource};
use crate::api::Api;
use crate::checks;
use crate::error::Error;
use crate::model::{field, model};
use sortie_client::endpoints;

model! {
    /// Its attributes: the API has no update of a pool, so every setting replaces it.
    pub struct AgentPoolModel ("A Sortie agent pool.") {
        id: String [Computed] "The pool's id (`apool-…`).",
        group: String [Required, force_new, check(checks::owner_group)] "The owner group (its runners may use the pool).",
        name: String [Required, force_new, check(checks::segment)] "The pool's name.",
        description: String [Optional, force_new] "Free text.",
        token: String [Computed, sensitive] "The first agent token: shown once by the API, kept in state (null after an import).",
        token_id: String [Computed] "The first token's id.",
    }
}

/// `sortie_agent_pool`.
pub struct AgentPoolResource;

/// The API's pool as state, with the first token `kept` (the API shows it only at create).
fn state_of(view: &Value, kept: &AgentPoolModel) -> AgentPoolModel {
    AgentPoolModel {
        id: field(&view["id"]),
        group: field(&view["group"]),
        name: field(&view["name"]),
        description: field(&view["description"]),
        token: kept.token.clone(),
        token_id: kept.token_id.clone(),
    }
}

#[tonic::async_trait]
impl Resource for AgentPoolResource {
    type Model = AgentPoolModel;

    fn type_name(&self) -> &'static str {
        "sortie_agent_pool"
    }

    /// Creates it, with its first token.
    async fn create(&self, api: &Api, planned: &AgentPoolModel) -> Result<AgentPoolModel, Error> {
        let mut b = json!({ "group": planned.group, "name": planned.name });
        if let Some(description) = &planned.description {
            b["description"] = json!(description);
        }
        let a = api
            .send(&endpoints::create_agent_pool(), Some(&b), None)
            .await?;
        let first = AgentPoolModel {
            token: field(&a.body["token"]),
            token_id: field(&a.body["token_id"]),
            ..Default::default()
        };
        Ok(state_of(&a.body, &first))
    }

    /// Reads it; the token is the state's own (the API never shows it again).
    async fn read(&self, api: &Api, state: &AgentPoolModel) -> Result<AgentPoolModel, Error> {
        let a = api.get(&endpoints::get_agent_pool(text(&state.id))).await?;
        Ok(state_of(&a.body, state))
    }

    /// Deletes it.
    async fn delete(&self, api: &Api, state: &AgentPoolModel) -> Result<(), Error> {
        api.send(&endpoints::delete_agent_pool(text(&state.id)), None, None)
            .await?;
        Ok(())
    }
}
