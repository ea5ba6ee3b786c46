//! A notification destination as a group's member writes it: where deliveries go, and
//! which events they want.
//!
//! Two kinds:
//! - `webhook`: an `https://` URL; every delivery is signed with the destination's own
//!   secret ([`super::delivery`]), which Sortie makes, keeps in Secrets Manager and shows
//!   once;
//! - `slack`: a Slack incoming webhook, whose URL is itself the secret: it is given as
//!   `slack_webhook_url` when the destination is created (or replaced), kept in Secrets
//!   Manager, and never shown again.
//!
//! A destination belongs to a group and hears the events of every environment at or below
//! it that its [`Filters`] let through.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Filters;
use crate::problems::{Fields, Problems};
use crate::ValidationError;

/// The most characters of a destination's description.
pub const DESCRIPTION_MAX: usize = 256;

/// Where a destination's deliveries go.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Target {
    /// A generic webhook, signed.
    Webhook {
        /// The `https://` URL deliveries are POSTed to.
        url: String,
    },
    /// A Slack incoming webhook (its URL is kept as a secret, never shown).
    Slack {},
}

impl Target {
    /// `webhook` or `slack`.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::Webhook { .. } => "webhook",
            Self::Slack {} => "slack",
        }
    }
}

/// A destination's specification, as stored and shown (never a secret).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DestinationSpec {
    /// Free text shown to users.
    #[serde(default)]
    pub description: String,
    /// Where deliveries go.
    #[serde(flatten)]
    pub target: Target,
    /// Which events it wants.
    #[serde(flatten)]
    pub filters: Filters,
}

/// A destination as written: its specification, and a Slack webhook's URL when one is
/// given (the secret, kept apart from the specification from the start). Its `Debug`
/// never shows the URL.
#[derive(Clone, PartialEq, Eq)]
pub struct DestinationInput {
    /// What is stored and shown.
    pub spec: DestinationSpec,
    /// A `slack` destination's incoming webhook URL, when given.
    pub slack_webhook_url: Option<String>,
}

impl std::fmt::Debug for DestinationInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DestinationInput")
            .field("spec", &self.spec)
            .field(
                "slack_webhook_url",
                &self.slack_webhook_url.as_ref().map(|_| "(not shown)"),
            )
            .finish()
    }
}

/// Where Slack's incoming webhooks are (<https://api.slack.com/messaging/webhooks>).
pub const SLACK_WEBHOOK_PREFIX: &str = "https://hooks.slack.com/services/";

impl DestinationInput {
    /// Reads a destination's body (JSON or YAML already parsed), reporting every problem by
    /// field. `local` allows plain `http://` to loopback (`sortie dev`), for a webhook and
    /// for a Slack URL alike (a local Slack double).
    pub fn from_value(value: &Value, local: bool) -> Result<Self, ValidationError> {
        let mut p = Problems::default();
        let Some(mut top) = Fields::new(value, "", &mut p) else {
            return Err(ValidationError { problems: p.0 });
        };
        let description: String = top.optional("description", &mut p).unwrap_or_default();
        if description.chars().count() > DESCRIPTION_MAX {
            p.push(
                "description",
                format!("must be at most {DESCRIPTION_MAX} characters"),
            );
        }
        crate::problems::refuse_control(&mut p, "description", &description);
        let kind: Option<String> = top.optional("type", &mut p);
        let url: Option<String> = top.optional("url", &mut p);
        let slack_webhook_url: Option<String> = top.optional("slack_webhook_url", &mut p);
        let events: Vec<super::EventKind> = top.optional("events", &mut p).unwrap_or_default();
        let environments: String = top
            .optional("environments", &mut p)
            .unwrap_or_else(|| "**".into());
        top.finish(&mut p);
        let filters = Filters {
            events,
            environments,
        };
        for problem in filters.problems("") {
            p.push(problem.path.trim_start_matches('.'), problem.problem);
        }
        let target = match kind.as_deref() {
            Some("webhook") => {
                if slack_webhook_url.is_some() {
                    p.push("slack_webhook_url", "is only for a `slack` destination");
                }
                match url {
                    Some(url) => {
                        if let Err(problem) = super::address::destination_url(&url, local) {
                            p.push("url", problem);
                        }
                        Some(Target::Webhook { url })
                    }
                    None => {
                        p.push("url", "is required for a `webhook` destination");
                        None
                    }
                }
            }
            Some("slack") => {
                if url.is_some() {
                    p.push(
                        "url",
                        "is not for a `slack` destination: give its incoming webhook as `slack_webhook_url` (it is kept as a secret)",
                    );
                }
                if let Some(slack) = &slack_webhook_url {
                    if let Some(problem) = slack_url_problem(slack, local) {
                        p.push("slack_webhook_url", problem);
                    }
                }
                Some(Target::Slack {})
            }
            Some(other) => {
                p.push(
                    "type",
                    format!("`{other}` is not a destination type: `webhook` or `slack`"),
                );
                None
            }
            None => {
                p.push("type", "is required: `webhook` or `slack`");
                None
            }
        };
        match target {
            Some(target) if p.is_empty() => Ok(Self {
                spec: DestinationSpec {
                    description,
                    target,
                    filters,
                },
                slack_webhook_url,
            }),
            _ => Err(ValidationError { problems: p.0 }),
        }
    }
}

/// What is wrong with a Slack incoming webhook URL, if anything: Slack's own, or (when
/// `local`) a loopback one. The message never quotes the URL: it is a secret.
fn slack_url_problem(url: &str, local: bool) -> Option<String> {
    if local && super::address::destination_url(url, true).is_ok_and(|u| u.scheme() == "http") {
        return None;
    }
    let shaped = url.starts_with(SLACK_WEBHOOK_PREFIX)
        && url.len() > SLACK_WEBHOOK_PREFIX.len()
        && super::address::destination_url(url, false).is_ok();
    (!shaped).then(|| {
        format!("must be a Slack incoming webhook URL, `{SLACK_WEBHOOK_PREFIX}…` (not quoted here: it is a secret)")
    })
}
