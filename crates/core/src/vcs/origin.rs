//! Where a job came from when a pull request asked for it: the repository, the pull
//! request and the commit it plans, so its check run and comment can be written as it runs.

use serde::{Deserialize, Serialize};

/// The pull request a job plans or applies (its origin, for reporting), as recorded at
/// submit. Never a credential: names and numbers only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PullRequestRef {
    /// The hosting service: `github`.
    pub provider: String,
    /// The repository, `owner/name`.
    pub repository: String,
    /// The pull request's number.
    pub number: u64,
    /// The commit the job runs: the pull request's head when it was submitted.
    pub head_sha: String,
    /// True for the apply of a merged pull request's merge commit (`after_merge`): it is
    /// past every requirement, so none is checked again before its apply phase.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub merged: bool,
}

impl PullRequestRef {
    /// `owner/name#number`, as people write it.
    pub fn display(&self) -> String {
        format!("{}#{}", self.repository, self.number)
    }
}
