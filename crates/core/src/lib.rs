//! Sortie's domain: names, runners, rules and their resolution, environments,
//! jobs and their state machine, principals and authorisation.
//!
//! This crate has no AWS, Lambda or I/O types. Everything here is a pure
//! function of its inputs (time is passed in), so it is tested with unit and
//! property tests alone.

pub mod agent_pool;
pub mod arn;
pub mod audit;
pub mod auth;
pub mod backoff;
pub mod changes;
pub mod check;
pub mod container_env;
pub mod document;
pub mod drift;
pub mod end_retry;
pub mod environment;
pub mod expiry;
pub mod identity;
pub mod ids;
pub mod job;
pub mod limits;
pub mod lock;
pub mod names;
pub mod notify;
pub mod outcome;
pub mod oversight;
pub mod plan;
pub mod policy;
pub mod presign;
pub mod problems;
pub mod protocol;
pub mod retry;
pub mod rule;
pub mod rule_index;
pub mod runner;
pub mod sensitive;
pub mod state_version;
pub mod suggest;
pub mod tokens;
pub mod tool;
pub mod triggers;
pub mod urls;
pub mod vcs;
pub mod waiting;

pub use auth::{can, Action, Grantee, Membership, Principal, Role};
pub use changes::ChangeSummary;
pub use check::{CheckStatus, RunnerCheck};
pub use environment::{Approval, DriftRemediation, EnvFacts, EnvSettings, Environment, RunnerLink};
pub use ids::{JobId, TaskRef};
pub use job::{
    review_refusal, IllegalTransition, Job, JobPhase, JobRequest, JobState, Operation, Review,
    ReviewDecision, ReviewRefusal, ReviewVerdict, Source, Transition,
};
pub use names::{EnvPath, GroupPath, RunnerId};
pub use outcome::{task_outcome, Outcome, TaskStop};
pub use problems::{Problem, Problems};
pub use rule::{
    resolve, Considered, Criteria, NoRunnerMatched, Resolution, RuleVerdict, RunnerRule,
};
pub use rule_index::{NoRuleMatched, Pick, RuleIndex, Tally};
pub use runner::{Runner, RunnerConfiguration, RunnerSpec, StateStorageConfiguration};
pub use tool::{ToolName, ToolUsed};

/// Input that failed parsing or validation, with every problem found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", describe(.problems))]
pub struct ValidationError {
    /// Every problem, each with its field path and a sentence.
    pub problems: Vec<Problem>,
}

impl ValidationError {
    /// An error with one problem.
    pub fn single(path: impl Into<String>, problem: impl Into<String>) -> Self {
        Self {
            problems: vec![Problem {
                path: path.into(),
                problem: problem.into(),
            }],
        }
    }

    /// The first problem's sentence, for nesting into another field's problem.
    pub fn first_problem(&self) -> String {
        self.problems
            .first()
            .map(|p| p.problem.clone())
            .unwrap_or_default()
    }
}

fn describe(problems: &[Problem]) -> String {
    let parts: Vec<String> = problems
        .iter()
        .map(|p| {
            if p.path.is_empty() {
                p.problem.clone()
            } else {
                format!("{}: {}", p.path, p.problem)
            }
        })
        .collect();
    format!("{} problem(s): {}", parts.len(), parts.join("; "))
}
