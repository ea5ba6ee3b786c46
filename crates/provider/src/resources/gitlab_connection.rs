//! `sortie_gitlab_connection`: an organisation's connection to GitLab.com or a self-managed
//! GitLab (its instance, an access token and the webhook's secret token). The token and the
//! secret are sent to the API, which keeps them in Secrets Manager and never shows them
//! again: the state keeps the configuration's (sensitive), and they are null after an
//! import.

use serde_json::{json, Value};

use super::connection::{Calls, ConnectionResource, Host};
use crate::checks;
use crate::model::{field, model};
use sortie_client::endpoints;

model! {
    /// Its attributes.
    pub struct GitlabConnectionModel ("An organisation's connection to GitLab: Sortie plans its projects' merge requests (see `vcs` on `sortie_environment`, with `provider = \"gitlab\"`).") {
        id: String [Computed] "The organisation.",
        org: String [Required, force_new, check(checks::org)] "The organisation it serves (a top-level group).",
        instance_url: String [OptionalComputed] "The GitLab instance: `https://gitlab.com` (the default), or a self-managed one's `https://<host>[/<relative root>]`, never its `/api/v4`.",
        token: String [Required, sensitive] "A personal access token of a Maintainer of the projects, with the `api` scope. Kept by Sortie in Secrets Manager, never shown again; the state holds the configuration's.",
        webhook_secret: String [Required, sensitive] "The webhook's secret token (GitLab sends it as `X-Gitlab-Token`). Kept by Sortie in Secrets Manager, never shown again.",
        webhook_url: String [Computed] "Where GitLab must deliver the webhooks (merge request, comment and push events) of each project or group.",
        issuer: String [Computed, volatile] "The issuer of the instance's users: a `sortie_membership` of this issuer and subject `<username>` gives a GitLab user a role.",
        created_by: String [Computed, volatile] "Who connected it last.",
    }
}

/// `sortie_gitlab_connection`.
pub type GitlabConnectionResource = ConnectionResource<Gitlab>;

/// The Gitlab host of [`ConnectionResource`].
pub struct Gitlab;

type Model = GitlabConnectionModel;

impl Host for Gitlab {
    type Model = Model;
    const TYPE_NAME: &'static str = "sortie_gitlab_connection";

    const CALLS: Calls = Calls {
        connect: endpoints::connect_gitlab,
        get: endpoints::get_gitlab_connection,
        delete: endpoints::delete_gitlab_connection,
    };

    fn body(planned: &Model) -> Value {
        let mut body = json!({
            "token": planned.token,
            "webhook_secret": planned.webhook_secret,
        });
        if let Some(instance_url) = &planned.instance_url {
            body["instance_url"] = json!(instance_url);
        }
        body
    }

    fn state_of(view: &Value, secrets: &Model) -> Model {
        Model {
            id: field(&view["org"]),
            org: field(&view["org"]),
            instance_url: field(&view["instance_url"]),
            token: secrets.token.clone(),
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
