//! Notifications (issue 44): the events a destination may be sent, which of them it wants,
//! and how a delivery is made safe, signed, retried and worded. Everything here is pure; the
//! delivery handler sends what it says.
//!
//! - [`EventKind`]: what a destination subscribes to, read from the events Sortie publishes
//!   ([`kind_of`]);
//! - [`Filters`]: the kinds and the environments a destination wants;
//! - [`DestinationInput`]: a destination as written (a webhook, or Slack's incoming
//!   webhook whose URL is a secret);
//! - [`address`]: the SSRF guard (https only, public addresses only, checked after the name
//!   is resolved);
//! - [`delivery`]: the signature, and what follows an attempt (retry, give up);
//! - [`message`]: the webhook's body and the Slack message.

pub mod address;
pub mod delivery;
mod destination;
pub mod message;

pub use destination::{
    DestinationInput, DestinationSpec, Target, DESCRIPTION_MAX, SLACK_WEBHOOK_PREFIX,
};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The `detail-type` of the event published once a delivery is given up on.
pub const NOTIFICATION_FAILED: &str = "sortie.notification.failed";
/// The `detail-type` of an environment locked or unlocked by a person.
pub const ENVIRONMENT_LOCK_CHANGED: &str = "sortie.environment.lock_changed";
/// The `detail-type` of a change to configuration (a runner, a rule, a membership, …).
pub const CONFIGURATION_CHANGED: &str = "sortie.configuration.changed";

/// Every `detail-type` [`kind_of`] reads a kind from: the events the notify queue's rule
/// sends it (the template's `NotifyRule`, checked against this list).
pub const NOTIFIED_DETAIL_TYPES: [&str; 7] = [
    "sortie.job.ended",
    "sortie.job.awaiting_approval",
    "sortie.job.policy_checked",
    "sortie.environment.drifted",
    "sortie.environment.expiring",
    ENVIRONMENT_LOCK_CHANGED,
    CONFIGURATION_CHANGED,
];

/// What a destination may be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// A job ended other than in failure: succeeded, canceled or discarded.
    JobCompleted,
    /// A job failed or timed out.
    JobFailed,
    /// A reviewed job's plan awaits a decision.
    AwaitingApproval,
    /// The policy gate denied a plan.
    PolicyViolation,
    /// A drift check found changes.
    DriftDetected,
    /// An environment expires soon.
    ExpiryReminder,
    /// An environment was locked or unlocked.
    LockChanged,
    /// Configuration changed: a runner, a rule, a membership, a policy set, ….
    ConfigurationChanged,
}

impl EventKind {
    /// Every kind, in order.
    pub const ALL: [EventKind; 8] = [
        Self::JobCompleted,
        Self::JobFailed,
        Self::AwaitingApproval,
        Self::PolicyViolation,
        Self::DriftDetected,
        Self::ExpiryReminder,
        Self::LockChanged,
        Self::ConfigurationChanged,
    ];

    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::JobCompleted => "job_completed",
            Self::JobFailed => "job_failed",
            Self::AwaitingApproval => "awaiting_approval",
            Self::PolicyViolation => "policy_violation",
            Self::DriftDetected => "drift_detected",
            Self::ExpiryReminder => "expiry_reminder",
            Self::LockChanged => "lock_changed",
            Self::ConfigurationChanged => "configuration_changed",
        }
    }
}

/// The kind of a published event (`detail-type` and detail), or `None` for one no
/// destination is sent: a job's dispatch or approval, a passed policy check, an expiry's
/// own troubles, and a failed notification (never notified, so a failing destination
/// cannot feed itself).
pub fn kind_of(detail_type: &str, detail: &Value) -> Option<EventKind> {
    let state = detail.get("state").and_then(Value::as_str).unwrap_or("");
    match detail_type {
        "sortie.job.ended" => Some(if matches!(state, "failed" | "timed_out") {
            EventKind::JobFailed
        } else {
            EventKind::JobCompleted
        }),
        "sortie.job.awaiting_approval" => Some(EventKind::AwaitingApproval),
        "sortie.job.policy_checked" => detail
            .get("violation")
            .and_then(Value::as_bool)
            .unwrap_or(false)
            .then_some(EventKind::PolicyViolation),
        "sortie.environment.drifted" => Some(EventKind::DriftDetected),
        "sortie.environment.expiring" => Some(EventKind::ExpiryReminder),
        ENVIRONMENT_LOCK_CHANGED => Some(EventKind::LockChanged),
        CONFIGURATION_CHANGED => Some(EventKind::ConfigurationChanged),
        _ => None,
    }
}

/// Which events a destination wants: some kinds (none listed: every kind) in environments
/// whose path matches a glob (`**`: every environment of the destination's group).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Filters {
    /// The kinds sent; empty: every kind.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<EventKind>,
    /// A glob over environment paths (`acme/payments/**`, `**/prod`); `**` when absent.
    #[serde(default = "every_environment")]
    pub environments: String,
}

fn every_environment() -> String {
    "**".into()
}

impl Default for Filters {
    fn default() -> Self {
        Self {
            events: Vec::new(),
            environments: every_environment(),
        }
    }
}

impl Filters {
    /// Whether an event of `kind` about `environment` (none for configuration that belongs
    /// to no environment) is wanted.
    pub fn wants(&self, kind: EventKind, environment: Option<&str>) -> bool {
        let kind_wanted = self.events.is_empty() || self.events.contains(&kind);
        let environment_wanted = match environment {
            Some(path) => crate::rule::env_path_matches(&self.environments, path),
            None => true,
        };
        kind_wanted && environment_wanted
    }

    /// What is wrong with the filters, by field, if anything.
    pub fn problems(&self, path: &str) -> Vec<crate::Problem> {
        let mut problems = Vec::new();
        if let Err(e) = glob::Pattern::new(&self.environments) {
            problems.push(crate::Problem {
                path: crate::problems::join(path, "environments"),
                problem: format!("is not a glob: {e}"),
            });
        }
        let mut seen = std::collections::BTreeSet::new();
        if let Some(twice) = self.events.iter().find(|k| !seen.insert(**k)) {
            problems.push(crate::Problem {
                path: crate::problems::join(path, "events"),
                problem: format!("lists `{}` twice", twice.as_str()),
            });
        }
        problems
    }
}

#[cfg(test)]
mod tests;
