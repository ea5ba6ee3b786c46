//! `sortie_agent_pool`: an agent pool and its first token (sensitive, known only at create).

use serde_json::{json, Value};

use super::text;
use crate::api::Api;
use crate::error::Error;
use crate::schema::{attr, Block, Mode, Ty};
use sortie_client::endpoints;

/// Its schema: the API has no update of a pool, so every setting replaces it.
pub fn block() -> Block {
    use Mode::*;
    Block {
        attrs: vec![
            attr("id", Ty::String, Computed, "The pool's id (`apool-…`)."),
            attr("group", Ty::String, Required, "The owner group (its runners may use the pool).").force_new(),
            attr("name", Ty::String, Required, "The pool's name.").force_new(),
            attr("description", Ty::String, Optional, "Free text.").force_new(),
            attr("token", Ty::String, Computed, "The first agent token: shown once by the API, kept in state (null after an import).").sensitive(),
            attr("token_id", Ty::String, Computed, "The first token's id."),
        ],
        blocks: vec![],
        description: "A Sortie agent pool.",
    }
}

fn state_of(view: &Value, token: &Value, token_id: &Value) -> Value {
    json!({
        "id": view["id"],
        "group": view["group"],
        "name": view["name"],
        "description": view["description"],
        "token": token,
        "token_id": token_id,
    })
}

/// Creates it, with its first token.
pub async fn create(api: &Api, planned: &Value) -> Result<Value, Error> {
    let mut b = json!({ "group": planned["group"], "name": planned["name"] });
    if !planned["description"].is_null() {
        b["description"] = planned["description"].clone();
    }
    let a = api
        .send(&endpoints::create_agent_pool(), Some(&b), None)
        .await?;
    Ok(state_of(&a.body, &a.body["token"], &a.body["token_id"]))
}

/// Reads it; the token is the state's own (the API never shows it again).
pub async fn read(api: &Api, state: &Value) -> Result<Value, Error> {
    let a = api
        .get(&endpoints::get_agent_pool(text(state, "id")))
        .await?;
    Ok(state_of(&a.body, &state["token"], &state["token_id"]))
}

/// Deletes it.
pub async fn delete(api: &Api, state: &Value) -> Result<(), Error> {
    api.send(&endpoints::delete_agent_pool(text(state, "id")), None, None)
        .await?;
    Ok(())
}
