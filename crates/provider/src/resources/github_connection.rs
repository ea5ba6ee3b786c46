//! `sortie_github_connection`: an organisation's connection to GitHub through a GitHub App
//! (its id, its API, its private key and webhook secret). The key and the secret are sent
//! to the API, which keeps them in Secrets Manager and never shows them again: the state
//! keeps the configuration's (sensitive), and they are null after an import.

use serde_json::{json, Value};

use super::text;
use crate::api::Api;
use crate::error::Error;
use crate::schema::{attr, Block, Mode, Ty};
use sortie_client::endpoints;

/// Its schema.
pub fn block() -> Block {
    use Mode::*;
    Block {
        attrs: vec![
            attr("id", Ty::String, Computed, "The organisation."),
            attr(
                "org",
                Ty::String,
                Required,
                "The organisation it serves (a top-level group).",
            )
            .force_new(),
            attr("app_id", Ty::Number, Required, "The GitHub App's id."),
            attr(
                "api_url",
                Ty::String,
                OptionalComputed,
                "GitHub's REST API: `https://api.github.com` (the default), or a GitHub Enterprise Server's `https://<host>/api/v3`.",
            ),
            attr(
                "private_key",
                Ty::String,
                Required,
                "The App's private key (PEM). Kept by Sortie in Secrets Manager, never shown again; the state holds the configuration's.",
            )
            .sensitive(),
            attr(
                "webhook_secret",
                Ty::String,
                Required,
                "The App's webhook secret. Kept by Sortie in Secrets Manager, never shown again.",
            )
            .sensitive(),
            attr(
                "webhook_url",
                Ty::String,
                Computed,
                "Where GitHub must deliver the App's webhooks (the App's webhook URL).",
            ),
            attr(
                "issuer",
                Ty::String,
                Computed,
                "The issuer of the App's users: a `sortie_membership` of this issuer and subject `<login>` gives a GitHub user a role.",
            ),
            attr(
                "created_by",
                Ty::String,
                Computed,
                "Who connected it last.",
            )
            .volatile(),
        ],
        blocks: vec![],
        description: "An organisation's connection to GitHub through a GitHub App: Sortie plans its repositories' pull requests (see `vcs` on `sortie_environment`).",
    }
}

fn org(value: &str) -> &str {
    sortie_client::group(value)
}

/// The API's view as state; the key and the secret are `secrets`' (the API never shows
/// them).
fn state_of(view: &Value, secrets: &Value) -> Value {
    json!({
        "id": view["org"],
        "org": view["org"],
        "app_id": view["app_id"],
        "api_url": view["api_url"],
        "private_key": secrets["private_key"],
        "webhook_secret": secrets["webhook_secret"],
        "webhook_url": view["webhook_url"],
        "issuer": view["issuer"],
        "created_by": view["created_by"],
    })
}

/// Connects the organisation (replacing a connection it had: the API's `PUT`).
async fn put(api: &Api, planned: &Value) -> Result<Value, Error> {
    let mut body = json!({
        "app_id": planned["app_id"],
        "private_key": planned["private_key"],
        "webhook_secret": planned["webhook_secret"],
    });
    if !planned["api_url"].is_null() {
        body["api_url"] = planned["api_url"].clone();
    }
    let answer = api
        .send(
            &endpoints::connect_github(org(text(planned, "org"))),
            Some(&body),
            None,
        )
        .await?;
    Ok(state_of(&answer.body, planned))
}

/// Creates it.
pub async fn create(api: &Api, planned: &Value) -> Result<Value, Error> {
    put(api, planned).await
}

/// Reads it; the key and the secret are the state's own.
pub async fn read(api: &Api, state: &Value) -> Result<Value, Error> {
    Ok(state_of(
        &api.get(&endpoints::get_github_connection(org(text(state, "id"))))
            .await?
            .body,
        state,
    ))
}

/// Updates it: the API replaces the connection, storing the key and the secret anew.
pub async fn update(api: &Api, _prior: &Value, planned: &Value) -> Result<Value, Error> {
    put(api, planned).await
}

/// Deletes it (its secrets go with it).
pub async fn delete(api: &Api, state: &Value) -> Result<(), Error> {
    api.send(
        &endpoints::delete_github_connection(org(text(state, "id"))),
        None,
        None,
    )
    .await?;
    Ok(())
}
