//! `sortie_github_connection`: an organisation's connection to GitHub through a GitHub App
//! (its id, its API, its private key and webhook secret). The key and the secret are sent
//! to the API, which keeps them in Secrets Manager and never shows them again: the state
//! keeps the configuration's (sensitive), and they are null after an import.

use serde_json::{json, Number, Value};

use super::connection::{Calls, ConnectionResource, Host};
use crate::checks;
use crate::model::{field, model};
use sortie_client::endpoints;

model! {
    /// Its attributes.
    pub struct GithubConnectionModel ("An organisation's connection to GitHub through a GitHub App: Sortie plans its repositories' pull requests (see `vcs` on `sortie_environment`).") {
        id: String [Computed] "The organisation.",
        org: String [Required, force_new, check(checks::org)] "The organisation it serves (a top-level group).",
        app_id: Number [Required] "The GitHub App's id.",
        api_url: String [OptionalComputed] "GitHub's REST API: `https://api.github.com` (the default), or a GitHub Enterprise Server's `https://<host>/api/v3`.",
        private_key: String [Required, sensitive] "The App's private key (PEM). Kept by Sortie in Secrets Manager, never shown again; the state holds the configuration's.",
        webhook_secret: String [Required, sensitive] "The App's webhook secret. Kept by Sortie in Secrets Manager, never shown again.",
        webhook_url: String [Computed] "Where GitHub must deliver the App's webhooks (the App's webhook URL).",
        issuer: String [Computed, volatile] "The issuer of the App's users: a `sortie_membership` of this issuer and subject `<login>` gives a GitHub user a role.",
        created_by: String [Computed, volatile] "Who connected it last.",
    }
}

/// `sortie_github_connection`.
pub type GithubConnectionResource = ConnectionResource<Github>;

/// The Github host of [`ConnectionResource`].
pub struct Github;

type Model = GithubConnectionModel;

impl Host for Github {
    type Model = Model;
    const TYPE_NAME: &'static str = "sortie_github_connection";

    const CALLS: Calls = Calls {
        connect: endpoints::connect_github,
        get: endpoints::get_github_connection,
        delete: endpoints::delete_github_connection,
    };

    fn body(planned: &Model) -> Value {
        let mut body = json!({
            "app_id": planned.app_id,
            "private_key": planned.private_key,
            "webhook_secret": planned.webhook_secret,
        });
        if let Some(api_url) = &planned.api_url {
            body["api_url"] = json!(api_url);
        }
        body
    }

    fn state_of(view: &Value, secrets: &Model) -> Model {
        Model {
            id: field(&view["org"]),
            org: field(&view["org"]),
            app_id: field(&view["app_id"]),
            api_url: field(&view["api_url"]),
            private_key: secrets.private_key.clone(),
            webhook_secret: secrets.webhook_secret.clone(),
            webhook_url: field(&view["webhook_url"]),
            issuer: field(&view["issuer"]),
            created_by: field(&view["created_by"]),
        }
    }

    fn org(model: &Model, from_id: bool) -> &Option<String> {
        if from_id {
            &model.id
        } else {
            &model.org
        }
    }
}
