//! `sortie notify …`: a group's notification destinations (list, get, create, update,
//! delete, rotate-secret), their deliveries, a redelivery and a test.

use std::io::Read;

use serde_json::{json, Value};
use sortie_api::model::{
    DeliveryAttempt, DeliveryList, Destination, DestinationList, DestinationType,
};
use sortie_client::{endpoints, Call};
use sortie_store::{DeliveryRecord, DeliveryState};

use super::shared::{changed_meanwhile, if_match, shown_group, split_last};
use crate::args::{DestinationArgs, NotifyCommand, Output};
use crate::client::{decode, Api};
use crate::exit::CliError;
use crate::output::{details, emit, table, when};

/// The call `endpoint` (one of a destination's, taking its group and name) makes of
/// destination `GROUP/NAME`.
fn on_destination(endpoint: fn(&str, &str) -> Call, destination: &str) -> Call {
    let (group, name) = split_last(destination);
    endpoint(sortie_client::group(group), name)
}

/// A Slack webhook's URL from `path` (`-`: standard input), trimmed.
fn read_secret(path: &std::path::Path) -> Result<String, CliError> {
    let text = if path.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| CliError::Usage(format!("could not read standard input: {e}")))?;
        text
    } else {
        std::fs::read_to_string(path).map_err(|e| {
            CliError::Usage(format!("--slack-webhook-url-file {}: {e}", path.display()))
        })?
    };
    Ok(text.trim().to_string())
}

/// The body `args` make over `current` (a destination as read, or nothing for a create).
fn body(args: &DestinationArgs, current: Option<&Destination>) -> Result<Value, CliError> {
    let mut body = match current {
        Some(d) => {
            let mut b = json!({
                "description": d.description,
                "events": d.events,
                "environments": d.environments,
                "type": d.r#type,
            });
            if let Some(url) = &d.url {
                b["url"] = json!(url);
            }
            b
        }
        None => json!({}),
    };
    match (&args.webhook, &args.slack_webhook_url_file) {
        (Some(url), _) => {
            body["type"] = json!("webhook");
            body["url"] = json!(url);
        }
        (None, Some(path)) => {
            body["type"] = json!("slack");
            body["slack_webhook_url"] = json!(read_secret(path)?);
        }
        (None, None) if current.is_none() => {
            return Err(CliError::Usage(
                "say where it sends: --webhook URL, or --slack-webhook-url-file FILE".into(),
            ))
        }
        (None, None) => {}
    }
    if let Some(events) = &args.events {
        let events: Vec<&str> = events
            .iter()
            .map(|e| e.trim())
            .filter(|e| !e.is_empty())
            .collect();
        body["events"] = json!(events);
    }
    if let Some(glob) = &args.environments {
        body["environments"] = json!(glob);
    }
    if let Some(text) = &args.description {
        body["description"] = json!(text);
    }
    Ok(body)
}

fn events_text(d: &Destination) -> String {
    if d.events.is_empty() {
        "every kind".into()
    } else {
        d.events
            .iter()
            .map(super::shared::json_word)
            .collect::<Vec<_>>()
            .join(",")
    }
}

fn sends_to(d: &Destination) -> String {
    match (d.r#type, &d.url) {
        (DestinationType::Webhook, Some(url)) => url.clone(),
        (DestinationType::Webhook, None) => "-".into(),
        (DestinationType::Slack, _) => "(a Slack incoming webhook, kept as a secret)".into(),
    }
}

fn type_text(d: &Destination) -> &'static str {
    match d.r#type {
        DestinationType::Webhook => "webhook",
        DestinationType::Slack => "slack",
    }
}

fn health_text(d: &Destination) -> String {
    if d.health.healthy {
        "healthy".into()
    } else {
        format!(
            "UNHEALTHY since {}: {}",
            d.health.failing_since.map(when).unwrap_or_default(),
            d.health.last_failure.clone().unwrap_or_default()
        )
    }
}

fn destination_text(d: &Destination) -> String {
    let mut text = details(&[
        ("destination", format!("{}/{}", d.group, d.name)),
        ("type", type_text(d).to_string()),
        ("sends to", sends_to(d)),
        ("events", events_text(d)),
        ("environments", d.environments.clone()),
        ("description", d.description.clone()),
        ("health", health_text(d)),
        (
            "created",
            format!("{} by {}", when(d.created_at), d.created_by),
        ),
    ]);
    if let Some(secret) = &d.signing_secret {
        text.push_str(&format!(
            "\nsigning secret: {secret}\nIt is shown this once: keep it where your receiver verifies X-Sortie-Signature.\n"
        ));
    }
    text
}

fn state_text(state: DeliveryState) -> &'static str {
    match state {
        DeliveryState::Delivered => "delivered",
        DeliveryState::Retrying => "retrying",
        DeliveryState::GaveUp => "gave up",
    }
}

fn delivery_text(d: &DeliveryRecord) -> String {
    details(&[
        ("delivery", d.id.clone()),
        ("event", d.event_type.clone()),
        ("environment", d.environment.clone().unwrap_or_default()),
        ("state", state_text(d.state).to_string()),
        (
            "status",
            d.status
                .map(|s| s.to_string())
                .unwrap_or_else(|| "-".into()),
        ),
        ("latency", format!("{} ms", d.latency_ms)),
        ("attempts", d.attempts.to_string()),
        ("reason", d.reason.clone().unwrap_or_default()),
        ("answer", d.answer.clone()),
    ])
}

/// Runs a `notify` command.
pub async fn notify(api: &Api, command: NotifyCommand, out: Output) -> Result<(), CliError> {
    match command {
        NotifyCommand::List { group } => {
            let group = group.trim_matches('/');
            let answer = api
                .send(
                    &endpoints::list_notifications(sortie_client::group(group)),
                    None,
                    &[],
                )
                .await?;
            let list: DestinationList = decode(answer.body.clone())?;
            emit(&answer.body, out, || {
                if list.destinations.is_empty() {
                    return format!(
                        "no notification destinations in {}; make one: sortie notify create {}/NAME --webhook URL\n",
                        shown_group(group),
                        if group.is_empty() { "GROUP" } else { group }
                    );
                }
                table(
                    &[
                        "NAME",
                        "TYPE",
                        "SENDS TO",
                        "EVENTS",
                        "ENVIRONMENTS",
                        "HEALTH",
                    ],
                    list.destinations
                        .iter()
                        .map(|d| {
                            vec![
                                d.name.clone(),
                                type_text(d).to_string(),
                                sends_to(d),
                                events_text(d),
                                d.environments.clone(),
                                if d.health.healthy {
                                    "healthy".into()
                                } else {
                                    "UNHEALTHY".into()
                                },
                            ]
                        })
                        .collect(),
                )
            })
        }
        NotifyCommand::Get { destination } => {
            let answer = api
                .send(
                    &on_destination(endpoints::get_notification, &destination),
                    None,
                    &[],
                )
                .await?;
            let d: Destination = decode(answer.body.clone())?;
            emit(&answer.body, out, || destination_text(&d))
        }
        NotifyCommand::Create { destination, spec } => {
            let body = body(&spec, None)?;
            let answer = api
                .send(
                    &on_destination(endpoints::create_notification, &destination),
                    Some(&body),
                    &[],
                )
                .await?;
            let d: Destination = decode(answer.body.clone())?;
            emit(&answer.body, out, || {
                format!(
                    "created {}/{}\n\n{}\nTry it: sortie notify test {destination}\n",
                    d.group,
                    d.name,
                    destination_text(&d)
                )
            })
        }
        NotifyCommand::Update { destination, spec } => {
            let current = api
                .send(
                    &on_destination(endpoints::get_notification, &destination),
                    None,
                    &[],
                )
                .await?;
            let read: Destination = decode(current.body.clone())?;
            let body = body(&spec, Some(&read))?;
            let answer = api
                .send(
                    &on_destination(endpoints::update_notification, &destination),
                    Some(&body),
                    &if_match(&current),
                )
                .await
                .map_err(|e| {
                    changed_meanwhile(
                        e,
                        &format!("destination {destination}"),
                        &format!("sortie notify get {destination}"),
                    )
                })?;
            let d: Destination = decode(answer.body.clone())?;
            emit(&answer.body, out, || {
                format!("updated {destination}\n\n{}", destination_text(&d))
            })
        }
        NotifyCommand::Delete { destination } => {
            api.send(
                &on_destination(endpoints::delete_notification, &destination),
                None,
                &[],
            )
            .await?;
            println!("deleted {destination} and its secret");
            Ok(())
        }
        NotifyCommand::RotateSecret { destination } => {
            let answer = api
                .send(
                    &on_destination(endpoints::rotate_notification_secret, &destination),
                    None,
                    &[],
                )
                .await?;
            let d: Destination = decode(answer.body.clone())?;
            emit(&answer.body, out, || {
                format!(
                    "rotated {destination}: the old secret signs nothing from now on\n\n{}",
                    destination_text(&d)
                )
            })
        }
        NotifyCommand::Deliveries { destination } => {
            let answer = api
                .send(
                    &on_destination(endpoints::list_notification_deliveries, &destination),
                    None,
                    &[],
                )
                .await?;
            let list: DeliveryList = decode(answer.body.clone())?;
            emit(&answer.body, out, || {
                if list.deliveries.is_empty() {
                    return format!(
                        "no deliveries to {destination} yet; send a test: sortie notify test {destination}\n"
                    );
                }
                table(
                    &[
                        "WHEN",
                        "EVENT",
                        "ENVIRONMENT",
                        "STATE",
                        "STATUS",
                        "ATTEMPTS",
                        "LATENCY",
                        "ID",
                    ],
                    list.deliveries
                        .iter()
                        .map(|d| {
                            vec![
                                when(d.attempted_at),
                                d.event_type.clone(),
                                d.environment.clone().unwrap_or_else(|| "-".into()),
                                state_text(d.state).to_string(),
                                d.status
                                    .map(|s| s.to_string())
                                    .unwrap_or_else(|| "-".into()),
                                d.attempts.to_string(),
                                format!("{} ms", d.latency_ms),
                                d.id.clone(),
                            ]
                        })
                        .collect(),
                )
            })
        }
        NotifyCommand::Redeliver {
            destination,
            delivery,
        } => {
            let (group, name) = split_last(&destination);
            let call =
                endpoints::redeliver_notification(sortie_client::group(group), name, &delivery);
            let answer = api.send(&call, None, &[]).await?;
            attempted(answer.body, out, &format!("redelivered to {destination}"))
        }
        NotifyCommand::Test { destination } => {
            let answer = api
                .send(
                    &on_destination(endpoints::test_notification, &destination),
                    None,
                    &[],
                )
                .await?;
            attempted(answer.body, out, &format!("sent a test to {destination}"))
        }
    }
}

/// Prints a delivery made when asked; an error (exit 1) when the receiver did not take it.
fn attempted(body: Value, out: Output, done: &str) -> Result<(), CliError> {
    let sent: DeliveryAttempt = decode(body.clone())?;
    emit(&body, out, || {
        format!("{done}\n\n{}", delivery_text(&sent.delivery))
    })?;
    match sent.delivery.state {
        DeliveryState::Delivered => Ok(()),
        _ => Err(CliError::Other(format!(
            "the receiver did not take it: {}",
            sent.delivery.reason.clone().unwrap_or_default()
        ))),
    }
}
