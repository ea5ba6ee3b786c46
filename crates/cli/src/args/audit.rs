//! `sortie audit …`: an organisation's audit trail, and the verification of its chain.

use clap::{Args, Subcommand};

/// `audit ...`. `ORG` is an organisation's name (`-`: the root group's configuration).
#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// List the organisation's audit entries, newest first.
    List {
        /// The organisation.
        org: String,
        /// Which entries.
        #[command(flatten)]
        filter: AuditFilter,
    },
    /// Recompute the organisation's hash chain from its stored entries and name the first
    /// broken link: an entry edited after it was sealed, entries removed, or a chain that
    /// stops short of its head (exit 1).
    Verify {
        /// The organisation.
        org: String,
    },
}

/// Which audit entries `audit list` shows.
#[derive(Debug, Args, Default)]
pub struct AuditFilter {
    /// Only entries by this subject.
    #[arg(long, value_name = "SUBJECT")]
    pub actor: Option<String>,
    /// Only entries of this action (`create_runner`, `approve_job`, …).
    #[arg(long)]
    pub action: Option<String>,
    /// Only entries whose target starts with this path (`/v1/groups/acme/-/runners`).
    #[arg(long, value_name = "PATH")]
    pub target: Option<String>,
    /// Only entries made at or after this time (RFC 3339).
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// Only entries made before this time (RFC 3339).
    #[arg(long, value_name = "TIME")]
    pub until: Option<String>,
    /// At most this many entries.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub limit: u32,
}
