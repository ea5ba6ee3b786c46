//! What Sortie keeps of a pull request: its head, who opened it, whether its plans may
//! run, its one comment, and per environment the jobs and the check run that report them.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::VcsProvider;

/// At most this many environments are planned for one pull request; the rest are named in
/// its comment as not planned (a pull request touching hundreds of environments is a
/// mistake more often than a wish, and its record must fit one DynamoDB item).
pub const MAX_ENVIRONMENTS: usize = 50;

/// At most this many notes are kept on a pull request (the latest).
pub const MAX_NOTES: usize = 10;

/// A pull request as Sortie follows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PullRequestRecord {
    /// The host: `github`.
    pub provider: VcsProvider,
    /// The organisation whose connection it came through.
    pub org: String,
    /// The repository, `owner/name`.
    pub repository: String,
    /// Its number.
    pub number: u64,
    /// The head commit last seen.
    pub head_sha: String,
    /// The base branch.
    pub base: String,
    /// Its author's login.
    pub author: String,
    /// True when its head is in another repository (a fork).
    pub fork: bool,
    /// False once it is closed or merged.
    pub open: bool,
    /// True once it is merged.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub merged: bool,
    /// What its comment must also say (a merge before an apply, an apply after the merge
    /// that could not be made), at most [`MAX_NOTES`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Who allowed its plans to run (`/sortie plan` by a deployer) when its author could not
    /// (a fork, or an author with no role): plans run code. `None`: not allowed yet, unless
    /// the author may plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plans_allowed_by: Option<String>,
    /// The id of its one comment, once written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment_id: Option<u64>,
    /// The SHA-256 of the comment's last body: an unchanged comment is not edited again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment_digest: Option<String>,
    /// Per environment path: what runs there for this pull request.
    #[serde(default)]
    pub environments: BTreeMap<String, PullEnvironment>,
    /// Environments that matched beyond [`MAX_ENVIRONMENTS`], not planned.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub over_limit: u32,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
}

/// One environment of a pull request.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PullEnvironment {
    /// The commit its plan runs.
    pub sha: String,
    /// Its speculative plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_job: Option<String>,
    /// Its apply, once commanded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apply_job: Option<String>,
    /// The check run on `sha`, once created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_run_id: Option<u64>,
    /// Why it was not planned (waiting for a deployer's `/sortie plan`, say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_planned: Option<String>,
    /// The SHA-256 of what its check run last said: an unchanged check is not written
    /// again, so each job state change costs at most one edit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_digest: Option<String>,
}

impl PullRequestRecord {
    /// Keeps `note` once, and at most [`MAX_NOTES`], the latest.
    pub fn note(&mut self, note: String) {
        if !self.notes.contains(&note) {
            self.notes.push(note);
        }
        let over = self.notes.len().saturating_sub(MAX_NOTES);
        self.notes.drain(..over);
    }

    /// `owner/name#number`.
    pub fn display(&self) -> String {
        format!("{}#{}", self.repository, self.number)
    }

    /// The job reference its jobs carry.
    pub fn job_ref(&self, sha: &str) -> super::origin::PullRequestRef {
        super::origin::PullRequestRef {
            provider: self.provider.as_str().to_string(),
            repository: self.repository.clone(),
            number: self.number,
            head_sha: sha.to_string(),
            merged: false,
        }
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}
