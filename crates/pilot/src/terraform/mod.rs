//! Finding, identifying and running Terraform or OpenTofu (and other tools,
//! such as git) with their combined output in the job log.
//!
//! - `request`: what the job asks for ([`ToolRequest`]) and the pure [`select`] among the
//!   binaries there are;
//! - `binary`: what is there ([`candidates`], [`identify`]) and the one to run ([`choose`]);
//! - `steps`: the job's commands after `init` ([`job_steps`], [`Step`]);
//! - `output`: running a command with its output in the log ([`run_logged`]) and its first
//!   error ([`first_error`]).

use std::fmt;
use std::process::Command;

mod binary;
mod output;
mod request;
mod steps;

pub use binary::{
    candidates, choose, detect_version, find_binary, identify, parse_binary_name, Candidate, Choice,
};
pub use output::{first_error, run_captured, run_logged, Finished, FIRST_ERROR_MAX};
pub use request::{newest, select, Available, ToolRequest};
pub use steps::{init_args, job_steps, Step};

/// The plan file `plan` writes, relative to the configuration directory.
pub const PLAN_FILE: &str = "plan.tfplan";

/// The environment every tool runs with: the pilot's own, minus `remove`, plus `set`.
/// Its `Debug` names the variables set, never their values (sensitive variables are here).
#[derive(Clone, Default)]
pub struct ToolEnv {
    /// Variables added or replaced.
    pub set: Vec<(String, String)>,
    /// Variables taken away (the job token, git credentials).
    pub remove: Vec<String>,
}

impl fmt::Debug for ToolEnv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolEnv")
            .field("set", &self.set.iter().map(|(k, _)| k).collect::<Vec<_>>())
            .field("remove", &self.remove)
            .finish()
    }
}

impl ToolEnv {
    /// The environment for terraform: non-interactive, no update check, no job token.
    pub fn for_terraform() -> Self {
        Self {
            set: vec![
                ("TF_IN_AUTOMATION".into(), "1".into()),
                ("TF_INPUT".into(), "0".into()),
                ("CHECKPOINT_DISABLE".into(), "1".into()),
            ],
            remove: crate::env::PRIVATE_VARS
                .iter()
                .map(|v| v.to_string())
                .collect(),
        }
    }

    fn apply(&self, command: &mut Command) {
        for name in &self.remove {
            command.env_remove(name);
        }
        for (name, value) in &self.set {
            command.env(name, value);
        }
    }
}
