//! `sortie_notification_destination`: where a group's events are delivered (a signed
//! webhook, or a Slack incoming webhook) and which it wants. A webhook's signing secret is
//! made by Sortie and shown once: the state keeps it (sensitive) so a configuration can
//! hand it to its receiver; it is null after an import. A Slack URL is a secret the API
//! never shows: the state keeps the configuration's.

use serde_json::{json, Value};

use super::{text, version};
use crate::api::Api;
use crate::error::Error;
use crate::schema::{attr, string_list, Block, Mode, Ty};
use sortie_client::{endpoints, Call};

/// Its schema.
pub fn block() -> Block {
    use Mode::*;
    let s = Ty::String;
    Block {
        attrs: vec![
            attr("id", s.clone(), Computed, "`<group>/<name>`."),
            attr(
                "group",
                s.clone(),
                Required,
                "The group: the destination hears the environments at or below it.",
            )
            .force_new(),
            attr(
                "name",
                s.clone(),
                Required,
                "Its name, unique within its group.",
            )
            .force_new(),
            attr(
                "type",
                s.clone(),
                Required,
                "`webhook` (a signed POST to `url`) or `slack` (a Slack incoming webhook at `slack_webhook_url`).",
            )
            .force_new(),
            attr(
                "url",
                s.clone(),
                Optional,
                "A webhook's `https://` URL (required for a `webhook`).",
            ),
            attr(
                "slack_webhook_url",
                s.clone(),
                Optional,
                "A Slack incoming webhook's URL (required for `slack`). Kept by Sortie in Secrets Manager, never shown again; the state holds the configuration's.",
            )
            .sensitive(),
            attr(
                "events",
                string_list(),
                Optional,
                "The kinds of event sent: `job_completed`, `job_failed`, `awaiting_approval`, `policy_violation`, `drift_detected`, `expiry_reminder`, `lock_changed`, `configuration_changed` (every kind when unset).",
            ),
            attr(
                "environments",
                s.clone(),
                OptionalComputed,
                "A glob over environment paths, such as `acme/**/prod` (`**`, every environment of the group, by default).",
            ),
            attr(
                "description",
                s.clone(),
                OptionalComputed,
                "A sentence for people.",
            ),
            attr(
                "signing_secret",
                s.clone(),
                Computed,
                "A webhook's signing secret (`whsec_…`), which verifies `X-Sortie-Signature`: made by Sortie at creation, kept in the state (null after an import; rotate it with `sortie notify rotate-secret`).",
            )
            .sensitive(),
            attr(
                "healthy",
                Ty::Bool,
                Computed,
                "False once a delivery was given up on, until one succeeds.",
            )
            .volatile(),
            attr(
                "version",
                Ty::Number,
                Computed,
                "The version (the API's ETag).",
            )
            .volatile(),
        ],
        blocks: vec![],
        description: "A notification destination of a Sortie group: signed webhooks or Slack messages for its environments' events.",
    }
}

fn body(planned: &Value) -> Value {
    let mut b = json!({ "type": planned["type"] });
    for o in [
        "url",
        "slack_webhook_url",
        "events",
        "environments",
        "description",
    ] {
        if !planned[o].is_null() {
            b[o] = planned[o].clone();
        }
    }
    b
}

/// The API's view as state: the secrets are the answer's (a signing secret just made) or
/// `kept`'s.
fn state_of(group: &str, view: &Value, version: Option<&str>, kept: &Value) -> Value {
    let signing_secret = match &view["signing_secret"] {
        Value::Null => kept["signing_secret"].clone(),
        made => made.clone(),
    };
    json!({
        "id": format!("{group}/{}", text(view, "name")),
        "group": group,
        "name": view["name"],
        "type": view["type"],
        "url": view["url"],
        "slack_webhook_url": kept["slack_webhook_url"],
        "events": match &view["events"] {
            Value::Array(a) if !a.is_empty() => view["events"].clone(),
            _ => kept["events"].clone(),
        },
        "environments": view["environments"],
        "description": view["description"],
        "signing_secret": signing_secret,
        "healthy": view["health"]["healthy"],
        "version": version.and_then(|v| v.parse::<u64>().ok()),
    })
}

fn at(endpoint: fn(&str, &str) -> Call, state: &Value) -> Call {
    endpoint(
        sortie_client::group(text(state, "group")),
        text(state, "name"),
    )
}

/// Makes it; a webhook's signing secret comes back this once, into the state.
pub async fn create(api: &Api, planned: &Value) -> Result<Value, Error> {
    let a = api
        .send(
            &at(endpoints::create_notification, planned),
            Some(&body(planned)),
            None,
        )
        .await?;
    Ok(state_of(
        text(planned, "group"),
        &a.body,
        a.etag.as_deref(),
        planned,
    ))
}

/// Reads it; the secrets are the state's own.
pub async fn read(api: &Api, state: &Value) -> Result<Value, Error> {
    let a = api.get(&at(endpoints::get_notification, state)).await?;
    Ok(state_of(
        text(state, "group"),
        &a.body,
        a.etag.as_deref(),
        state,
    ))
}

/// An update's body: a Slack URL only when the configuration changed it (else the API
/// keeps the one it holds).
fn update_body(prior: &Value, planned: &Value) -> Value {
    let mut b = body(planned);
    if planned["slack_webhook_url"] == prior["slack_webhook_url"] {
        if let Some(o) = b.as_object_mut() {
            o.remove("slack_webhook_url");
        }
    }
    b
}

/// Replaces its specification (a Slack URL is replaced when the configuration's changed).
pub async fn update(api: &Api, prior: &Value, planned: &Value) -> Result<Value, Error> {
    let b = update_body(prior, planned);
    let a = api
        .send(
            &at(endpoints::update_notification, prior),
            Some(&b),
            Some(version(prior)),
        )
        .await?;
    let kept = json!({
        "signing_secret": prior["signing_secret"],
        "slack_webhook_url": planned["slack_webhook_url"],
        "events": planned["events"],
    });
    Ok(state_of(
        text(prior, "group"),
        &a.body,
        a.etag.as_deref(),
        &kept,
    ))
}

/// Deletes it and its secret.
pub async fn delete(api: &Api, state: &Value) -> Result<(), Error> {
    api.send(
        &at(endpoints::delete_notification, state),
        None,
        Some(version(state)),
    )
    .await?;
    Ok(())
}

/// The state an import of `<group>/<name>` starts from.
pub fn import_state(id: &str) -> Result<Value, Error> {
    match id.rsplit_once('/') {
        Some((group, name)) if !name.is_empty() && !group.is_empty() => {
            Ok(json!({ "id": id, "group": group, "name": name }))
        }
        _ => Err(Error::Invalid {
            attribute: "id".into(),
            problem: format!("`{id}` is not `<group>/<name>`"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signing_secret_is_kept_from_the_answer_that_made_it_and_never_read_back() {
        let made = json!({"name": "ops", "type": "webhook", "url": "https://h.example.com",
            "environments": "**", "description": "", "health": {"healthy": true},
            "signing_secret": "whsec_1"});
        let planned = json!({"group": "acme", "name": "ops", "type": "webhook",
            "url": "https://h.example.com", "events": null});
        let state = state_of("acme", &made, Some("1"), &planned);
        assert_eq!(state["signing_secret"], "whsec_1");
        assert_eq!(state["version"], 1);
        // A read shows no secret: the state's stays.
        let read = json!({"name": "ops", "type": "webhook", "url": "https://h.example.com",
            "environments": "**", "description": "", "health": {"healthy": false}});
        let again = state_of("acme", &read, Some("2"), &state);
        assert_eq!(again["signing_secret"], "whsec_1");
        assert_eq!(again["healthy"], false);
        assert_eq!(again["events"], Value::Null);
        // A Slack URL is sent by an update only when the configuration changed it.
        let prior = json!({"group": "acme", "name": "s", "type": "slack",
            "slack_webhook_url": "https://hooks.slack.com/services/T/B/x", "description": "a"});
        let mut planned = prior.clone();
        planned["description"] = json!("b");
        let b = update_body(&prior, &planned);
        assert!(b.get("slack_webhook_url").is_none(), "{b}");
        assert_eq!(b["description"], "b");
        planned["slack_webhook_url"] = json!("https://hooks.slack.com/services/T/B/y");
        assert_eq!(
            update_body(&prior, &planned)["slack_webhook_url"],
            "https://hooks.slack.com/services/T/B/y"
        );
    }
}
