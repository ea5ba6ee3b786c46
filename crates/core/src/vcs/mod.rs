//! Sortie in the pull request: the pure domain of plans on pull requests (issue 42).
//!
//! Nothing here does I/O or speaks GitHub's wire format: the GitHub client turns webhook
//! deliveries and REST answers into these types, and carries out what they decide.
//!
//! - [`binding`]: an environment's binding to a repository directory ([`VcsBinding`]): the
//!   repository, directory, base branch, the globs that decide which pull requests touch
//!   it, the apply mode and the apply requirements; its validation and glob matching.
//! - [`connection`]: an organisation's connection ([`connection::VcsConnection`]): a GitHub
//!   App's id and API URL, its key and webhook secret by ARN only.
//! - [`origin`]: the pull request a job came from ([`origin::PullRequestRef`]).
//! - [`pull`]: what Sortie keeps of a pull request ([`pull::PullRequestRecord`]).
//! - [`webhook`]: the delivery headers, the payload cap, and the `X-Hub-Signature-256`
//!   HMAC-SHA256 signature ([`webhook::sign`], [`webhook::verify_signature`]).
//! - [`command`]: the `/sortie` commands in a pull request comment
//!   ([`command::parse_commands`]), and the help text.
//! - [`requirements`]: what must hold before a pull request's plan may be applied,
//!   evaluated over facts the caller gathered ([`requirements::evaluate`]).
//! - [`report`]: what a pull request is shown: the one sticky comment
//!   ([`report::render_comment`]) and a check run per environment
//!   ([`report::render_check`]), always within GitHub's limits and safe against the
//!   hostile text a plan carries.

pub mod binding;
pub mod command;
pub mod connection;
pub mod origin;
pub mod pull;
pub mod reconcile;
pub mod report;
pub mod requirements;
pub mod webhook;
pub mod work;

pub use binding::{
    gitlab_project_problem, repository_problem, repository_problem_on, ApplyMode, Requirements,
    VcsBinding, VcsProvider,
};
pub use command::{parse_commands, Command};
pub use requirements::{evaluate, PullFacts, Unmet};
