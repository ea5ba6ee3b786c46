//! `sortie policy ...`: a policy set evaluated locally against a saved plan.

use std::path::PathBuf;

use clap::Subcommand;

/// `policy ...`.
#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Evaluate a policy set locally against a saved plan (`terraform show -json`), with the
    /// input Sortie would build; exits 7 when a mandatory or review set denies.
    Test {
        /// The policy set file (YAML or JSON).
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
        /// The plan, as `terraform show -json` (or `GET /v1/jobs/ID/plan.json`) writes it.
        #[arg(long)]
        plan: PathBuf,
        /// An environment whose type, labels, tags and runner go in the input (read from the
        /// API); without it the input's job has none and criteria are not checked.
        #[arg(long)]
        env: Option<String>,
        /// The job's operation in the input.
        #[arg(long, default_value = "apply")]
        operation: String,
    },
}
