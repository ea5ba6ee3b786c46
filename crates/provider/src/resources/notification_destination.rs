//! `sortie_notification_destination`: where a group's events are delivered (a signed
//! webhook, or a Slack incoming webhook) and which it wants. A webhook's signing secret is
//! made by Sortie and shown once: the state keeps it (sensitive) so a configuration can
//! hand it to its receiver; it is null after an import. A Slack URL is a secret the API
//! never shows: the state keeps the configuration's.

use serde_json::{json, Value};

use super::{etag_version, split_id, text, Resource};
use crate::api::Api;
use crate::checks;
use crate::error::Error;
use crate::model::{field, model, set_only};
use sortie_client::{endpoints, Call};

model! {
    /// Its attributes.
    pub struct NotificationDestinationModel ("A notification destination of a Sortie group: signed webhooks or Slack messages for its environments' events.") {
        id: String [Computed] "`<group>/<name>`.",
        group: String [Required, force_new, check(checks::url_group)] "The group: the destination hears the environments at or below it.",
        name: String [Required, force_new, check(checks::segment)] "Its name, unique within its group.",
        r#type: String [Required, force_new] "`webhook` (a signed POST to `url`) or `slack` (a Slack incoming webhook at `slack_webhook_url`).",
        url: String [Optional] "A webhook's `https://` URL (required for a `webhook`).",
        slack_webhook_url: String [Optional, sensitive] "A Slack incoming webhook's URL (required for `slack`). Kept by Sortie in Secrets Manager, never shown again; the state holds the configuration's.",
        events: Vec<String> [Optional] "The kinds of event sent: `job_completed`, `job_failed`, `awaiting_approval`, `policy_violation`, `drift_detected`, `expiry_reminder`, `lock_changed`, `configuration_changed` (every kind when unset).",
        environments: String [OptionalComputed] "A glob over environment paths, such as `acme/**/prod` (`**`, every environment of the group, by default).",
        description: String [OptionalComputed] "A sentence for people.",
        signing_secret: String [Computed, sensitive] "A webhook's signing secret (`whsec_…`), which verifies `X-Sortie-Signature`: made by Sortie at creation, kept in the state (null after an import; rotate it with `sortie notify rotate-secret`).",
        healthy: bool [Computed, volatile] "False once a delivery was given up on, until one succeeds.",
        version: u64 [Computed, volatile] "The version (the API's ETag).",
    }
}

/// `sortie_notification_destination`.
pub struct NotificationDestinationResource;

type Model = NotificationDestinationModel;

fn body(planned: &Model) -> Value {
    let mut b = set_only(json!({
        "url": planned.url,
        "slack_webhook_url": planned.slack_webhook_url,
        "events": planned.events,
        "environments": planned.environments,
        "description": planned.description,
    }));
    b.insert("type".into(), json!(planned.r#type));
    Value::Object(b)
}

/// The API's view as state: the secrets are the answer's (a signing secret just made) or
/// `kept`'s.
fn state_of(group: &str, view: &Value, version: Option<&str>, kept: &Model) -> Model {
    let name = field::<String>(&view["name"]);
    Model {
        id: Some(format!("{group}/{}", text(&name))),
        group: Some(group.into()),
        name,
        r#type: field(&view["type"]),
        url: field(&view["url"]),
        slack_webhook_url: kept.slack_webhook_url.clone(),
        events: match field::<Vec<String>>(&view["events"]) {
            Some(events) if !events.is_empty() => Some(events),
            _ => kept.events.clone(),
        },
        environments: field(&view["environments"]),
        description: field(&view["description"]),
        signing_secret: field(&view["signing_secret"]).or_else(|| kept.signing_secret.clone()),
        healthy: field(&view["health"]["healthy"]),
        version: etag_version(version),
    }
}

fn at(endpoint: fn(&str, &str) -> Call, state: &Model) -> Call {
    endpoint(sortie_client::group(text(&state.group)), text(&state.name))
}

/// An update's body: a Slack URL only when the configuration changed it (else the API
/// keeps the one it holds).
fn update_body(prior: &Model, planned: &Model) -> Value {
    let mut b = body(planned);
    if planned.slack_webhook_url == prior.slack_webhook_url {
        if let Some(o) = b.as_object_mut() {
            o.remove("slack_webhook_url");
        }
    }
    b
}

#[tonic::async_trait]
impl Resource for NotificationDestinationResource {
    type Model = Model;

    fn type_name(&self) -> &'static str {
        "sortie_notification_destination"
    }

    /// Makes it; a webhook's signing secret comes back this once, into the state.
    async fn create(&self, api: &Api, planned: &Model) -> Result<Model, Error> {
        let a = api
            .send(
                &at(endpoints::create_notification, planned),
                Some(&body(planned)),
                None,
            )
            .await?;
        Ok(state_of(
            text(&planned.group),
            &a.body,
            a.etag.as_deref(),
            planned,
        ))
    }

    /// Reads it; the secrets are the state's own.
    async fn read(&self, api: &Api, state: &Model) -> Result<Model, Error> {
        let a = api.get(&at(endpoints::get_notification, state)).await?;
        Ok(state_of(
            text(&state.group),
            &a.body,
            a.etag.as_deref(),
            state,
        ))
    }

    /// Replaces its specification (a Slack URL is replaced when the configuration's changed).
    async fn update(&self, api: &Api, prior: &Model, planned: &Model) -> Result<Model, Error> {
        let a = api
            .send(
                &at(endpoints::update_notification, prior),
                Some(&update_body(prior, planned)),
                Some(prior.version.unwrap_or_default()),
            )
            .await?;
        let kept = Model {
            signing_secret: prior.signing_secret.clone(),
            slack_webhook_url: planned.slack_webhook_url.clone(),
            events: planned.events.clone(),
            ..Default::default()
        };
        Ok(state_of(
            text(&prior.group),
            &a.body,
            a.etag.as_deref(),
            &kept,
        ))
    }

    /// Deletes it and its secret.
    async fn delete(&self, api: &Api, state: &Model) -> Result<(), Error> {
        api.send(
            &at(endpoints::delete_notification, state),
            None,
            Some(state.version.unwrap_or_default()),
        )
        .await?;
        Ok(())
    }

    /// The state an import of `<group>/<name>` starts from.
    fn import(&self, id: &str) -> Result<Model, Error> {
        let (group, name) = split_id(id, "<group>/<name>", true)?;
        Ok(Model {
            id: Some(id.into()),
            group: Some(group.into()),
            name: Some(name.into()),
            ..Default::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Model as _;

    #[test]
    fn the_signing_secret_is_kept_from_the_answer_that_made_it_and_never_read_back() {
        let made = json!({"name": "ops", "type": "webhook", "url": "https://h.example.com",
            "environments": "**", "description": "", "health": {"healthy": true},
            "signing_secret": "whsec_1"});
        let planned = Model::from_json(&json!({"group": "acme", "name": "ops", "type": "webhook",
            "url": "https://h.example.com", "events": null}))
        .unwrap();
        let state = state_of("acme", &made, Some("1"), &planned);
        assert_eq!(state.signing_secret.as_deref(), Some("whsec_1"));
        assert_eq!(state.version, Some(1));
        // A read shows no secret: the state's stays.
        let read = json!({"name": "ops", "type": "webhook", "url": "https://h.example.com",
            "environments": "**", "description": "", "health": {"healthy": false}});
        let again = state_of("acme", &read, Some("2"), &state);
        assert_eq!(again.signing_secret.as_deref(), Some("whsec_1"));
        assert_eq!(again.healthy, Some(false));
        assert_eq!(again.to_json()["events"], Value::Null);
        // A Slack URL is sent by an update only when the configuration changed it.
        let prior = Model::from_json(&json!({"group": "acme", "name": "s", "type": "slack",
            "slack_webhook_url": "https://hooks.slack.com/services/T/B/x", "description": "a"}))
        .unwrap();
        let mut planned = prior.clone();
        planned.description = Some("b".into());
        let b = update_body(&prior, &planned);
        assert!(b.get("slack_webhook_url").is_none(), "{b}");
        assert_eq!(b["description"], "b");
        planned.slack_webhook_url = Some("https://hooks.slack.com/services/T/B/y".into());
        assert_eq!(
            update_body(&prior, &planned)["slack_webhook_url"],
            "https://hooks.slack.com/services/T/B/y"
        );
    }
}
