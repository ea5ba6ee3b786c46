//! `sortie notify …`: a group's notification destinations, their deliveries, a
//! redelivery and a test.

use std::path::PathBuf;

use clap::{Args, Subcommand};

/// `notify ...`. A destination is `GROUP/NAME` (`NAME` alone: the root group's).
#[derive(Debug, Subcommand)]
pub enum NotifyCommand {
    /// List a group's destinations, with their health.
    List {
        /// The group.
        group: String,
    },
    /// Show a destination: what it hears, where it sends, its health.
    Get {
        /// `GROUP/NAME`.
        destination: String,
    },
    /// Make a destination: `--webhook URL` (its signing secret is printed this once) or
    /// `--slack-webhook-url-file FILE` (the URL is kept as a secret, never shown).
    Create {
        /// `GROUP/NAME`.
        destination: String,
        /// What it hears and where it sends.
        #[command(flatten)]
        spec: DestinationArgs,
    },
    /// Change a destination: the options given replace its values; the rest stay.
    Update {
        /// `GROUP/NAME`.
        destination: String,
        /// What changes.
        #[command(flatten)]
        spec: DestinationArgs,
    },
    /// Delete a destination and its secret.
    Delete {
        /// `GROUP/NAME`.
        destination: String,
    },
    /// Give a webhook a new signing secret, printed this once; the old one stops at once.
    RotateSecret {
        /// `GROUP/NAME`.
        destination: String,
    },
    /// A destination's last deliveries, newest first (at most 100).
    Deliveries {
        /// `GROUP/NAME`.
        destination: String,
    },
    /// Send a delivery of the history again, once, and print how it went.
    Redeliver {
        /// `GROUP/NAME`.
        destination: String,
        /// The delivery's id (`X-Sortie-Delivery`, the ID column of `deliveries`).
        delivery: String,
    },
    /// Send the destination a test event, once, and print the receiver's answer (exit 1
    /// when it did not take it).
    Test {
        /// `GROUP/NAME`.
        destination: String,
    },
}

/// What a destination hears and where it sends.
#[derive(Debug, Args, Default)]
pub struct DestinationArgs {
    /// A webhook's `https://` URL.
    #[arg(long, value_name = "URL", conflicts_with = "slack_webhook_url_file")]
    pub webhook: Option<String>,
    /// A file holding a Slack incoming webhook's URL (a file, so the secret stays out of
    /// the shell's history; `-` reads standard input).
    #[arg(long, value_name = "FILE")]
    pub slack_webhook_url_file: Option<PathBuf>,
    /// The kinds of event sent, comma separated (`job_completed`, `job_failed`,
    /// `awaiting_approval`, `policy_violation`, `drift_detected`, `expiry_reminder`,
    /// `lock_changed`, `configuration_changed`); none: every kind.
    #[arg(long, value_delimiter = ',', value_name = "KIND,...")]
    pub events: Option<Vec<String>>,
    /// A glob over environment paths (`acme/payments/**`, `**/prod`); `**`: every
    /// environment of the group.
    #[arg(long, value_name = "GLOB")]
    pub environments: Option<String>,
    /// Free text shown to users.
    #[arg(long)]
    pub description: Option<String>,
}
