//! The arguments of the job commands: `run`, `get job|jobs`, `list jobs` and `job ...`.

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};

/// `get job ID`, `get jobs ENV`.
#[derive(Debug, Subcommand)]
pub enum JobsGet {
    /// A job, with its transitions (the same as `job get ID`).
    Job {
        /// The job id.
        id: String,
    },
    /// An environment's newest jobs (the same as `list jobs ENV`).
    Jobs {
        /// The environment's path.
        env: String,
    },
}

/// `list jobs ENV`.
#[derive(Debug, Subcommand)]
pub enum JobsListed {
    /// An environment's newest jobs.
    #[command(alias = "job")]
    Jobs {
        /// The environment's path.
        env: String,
    },
}

/// The operation of `run`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Operation {
    /// `terraform plan`.
    Plan,
    /// `terraform apply`.
    Apply,
    /// `terraform destroy`.
    Destroy,
}

/// `run plan|apply|destroy ENV`.
#[derive(Debug, Args)]
pub struct Run {
    /// Plan, apply or destroy.
    #[arg(value_enum)]
    pub operation: Operation,
    /// The environment's path.
    pub env: String,
    /// A directory of `.tf` files sent inline, or a git URL
    /// (`git::https://...//path?ref=main`). A directory sends its own files, never its
    /// subfolders except the local modules it calls (`source = "./modules/..."`), and needs
    /// a `.tf` file of its own. Default: the current directory, for plan and apply only; a
    /// destroy needs an explicit --source, and an apply from the default that would destroy
    /// every resource is refused by the runner.
    #[arg(long)]
    pub source: Option<String>,
    /// A Terraform variable, `name=value` (a JSON value, else a string).
    #[arg(long = "var", value_name = "NAME=VALUE")]
    pub vars: Vec<String>,
    /// A variables file (`.tfvars.json`, or YAML/JSON).
    #[arg(long = "var-file")]
    pub var_files: Vec<PathBuf>,
    /// A sensitive Terraform variable: `name` reads its value from `TF_VAR_<name>`, else
    /// asks for it on a terminal (not echoed); `name=value` takes it from the command line
    /// (and so the shell's history). The value is kept in Secrets Manager for the job's
    /// life only, never stored in the job, logged or shown (`name = (sensitive)`).
    #[arg(long = "sensitive-var", value_name = "NAME[=VALUE]")]
    pub sensitive_vars: Vec<String>,
    /// Follow the job to its end: its state, its log as it grows, its change summary.
    #[arg(long)]
    pub wait: bool,
    /// An idempotency key, so a retried submit makes one job.
    #[arg(long)]
    pub idempotency_key: Option<String>,
}

/// `jobs list ENV`.
#[derive(Debug, Args)]
pub struct JobsList {
    /// `list`.
    #[arg(value_parser = ["list"])]
    pub verb: String,
    /// The environment's path.
    pub env: String,
}

/// `job ...`.
#[derive(Debug, Subcommand)]
pub enum JobCommand {
    /// Show a job.
    Get {
        /// The job id.
        id: String,
    },
    /// Cancel a job.
    Cancel {
        /// The job id.
        id: String,
    },
    /// Approve a job awaiting approval: a second task applies exactly the plan it saved.
    Approve {
        /// The job id.
        id: String,
        /// Why, recorded with the decision (at most 1024 bytes).
        #[arg(long)]
        comment: Option<String>,
    },
    /// Discard a job awaiting approval: nothing is applied, and the environment is released.
    Discard {
        /// The job id.
        id: String,
        /// Why, recorded with the decision (at most 1024 bytes).
        #[arg(long)]
        comment: Option<String>,
    },
    /// The outputs of a succeeded apply (sensitive ones hidden).
    Outputs {
        /// The job id.
        id: String,
    },
    /// The job's plan, shown like `terraform show` (sensitive values redacted).
    Plan {
        /// The job id.
        id: String,
    },
    /// Print a job's log; `-f` follows it until the job ends.
    Logs {
        /// The job id.
        id: String,
        /// Follow the log as it grows, until the job ends.
        #[arg(short = 'f', long)]
        follow: bool,
    },
}
