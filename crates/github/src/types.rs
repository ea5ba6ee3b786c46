//! What the calls return and send: the few fields Sortie reads of GitHub's objects.

use serde::{Deserialize, Serialize};

/// A list read with `If-None-Match`: unchanged since the ETag given, or changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Conditional<T> {
    /// GitHub answered 304: nothing changed since the ETag sent (and the request cost no
    /// rate limit).
    NotModified,
    /// The list as it is now, with its new ETag to send next time.
    Modified {
        /// The value.
        value: T,
        /// The answer's `ETag`, if it had one.
        etag: Option<String>,
    },
}

/// A pull request: the fields a plan or an apply decides on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pull {
    /// Its number in the repository.
    pub number: u64,
    /// `open` or `closed`.
    pub state: String,
    /// Whether it is a draft.
    pub draft: bool,
    /// Whether it was merged.
    pub merged: bool,
    /// The merge commit (or the test merge commit while open), when GitHub has one.
    pub merge_commit_sha: Option<String>,
    /// GitHub's mergeability: `None` while GitHub is still computing it.
    pub mergeable: Option<bool>,
    /// The head commit.
    pub head_sha: String,
    /// The head branch's name.
    pub head_ref: String,
    /// The head repository's `owner/name`; `None` when that repository was deleted.
    /// Different from the base repository for a pull request from a fork.
    pub head_repo_full_name: Option<String>,
    /// The base branch's name.
    pub base_ref: String,
    /// The base repository's `owner/name`.
    pub base_repo_full_name: String,
    /// Who opened it.
    pub user_login: String,
}

impl Pull {
    /// Whether its head is in another repository than its base (a fork, or a deleted one).
    pub fn is_from_fork(&self) -> bool {
        self.head_repo_full_name.as_deref() != Some(self.base_repo_full_name.as_str())
    }
}

#[derive(Deserialize)]
pub(crate) struct PullWire {
    number: u64,
    state: String,
    #[serde(default)]
    draft: bool,
    #[serde(default)]
    merged: bool,
    #[serde(default)]
    merge_commit_sha: Option<String>,
    #[serde(default)]
    mergeable: Option<bool>,
    head: BranchWire,
    base: BranchWire,
    user: UserWire,
}

#[derive(Deserialize)]
struct BranchWire {
    #[serde(rename = "ref")]
    ref_: String,
    sha: String,
    repo: Option<RepoWire>,
}

#[derive(Deserialize)]
struct RepoWire {
    full_name: String,
}

#[derive(Deserialize)]
pub(crate) struct UserWire {
    pub(crate) login: String,
}

impl PullWire {
    pub(crate) fn into_pull(self) -> Pull {
        Pull {
            number: self.number,
            state: self.state,
            draft: self.draft,
            merged: self.merged,
            merge_commit_sha: self.merge_commit_sha,
            mergeable: self.mergeable,
            head_sha: self.head.sha,
            head_ref: self.head.ref_,
            head_repo_full_name: self.head.repo.map(|r| r.full_name),
            base_ref: self.base.ref_,
            base_repo_full_name: self.base.repo.map(|r| r.full_name).unwrap_or_default(),
            user_login: self.user.login,
        }
    }
}

/// One file a pull request changes.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ChangedFile {
    /// Its path after the change.
    pub filename: String,
    /// Its path before, for a rename.
    #[serde(default)]
    pub previous_filename: Option<String>,
    /// `added`, `removed`, `modified`, `renamed`, `copied`, `changed` or `unchanged`.
    pub status: String,
}

/// One review of a pull request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Review {
    /// The review's id.
    pub id: u64,
    /// Who reviewed; `None` for a deleted account.
    pub user_login: Option<String>,
    /// `APPROVED`, `CHANGES_REQUESTED`, `COMMENTED`, `DISMISSED` or `PENDING`.
    pub state: String,
    /// The commit the review was made on.
    pub commit_id: Option<String>,
}

#[derive(Deserialize)]
pub(crate) struct ReviewWire {
    id: u64,
    user: Option<UserWire>,
    state: String,
    #[serde(default)]
    commit_id: Option<String>,
}

impl ReviewWire {
    pub(crate) fn into_review(self) -> Review {
        Review {
            id: self.id,
            user_login: self.user.map(|u| u.login),
            state: self.state,
            commit_id: self.commit_id,
        }
    }
}

/// How a head compares with a base.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Comparison {
    /// Commits the head has that the base has not.
    pub ahead_by: u64,
    /// Commits the base has that the head has not.
    pub behind_by: u64,
    /// `ahead`, `behind`, `identical` or `diverged`.
    pub status: String,
}

/// A check run's status
/// (<https://docs.github.com/en/rest/checks/runs#create-a-check-run>).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckStatus {
    /// Not started.
    Queued,
    /// Running.
    InProgress,
    /// Done (a conclusion is then required).
    Completed,
}

/// A completed check run's conclusion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckConclusion {
    /// Passed.
    Success,
    /// Failed.
    Failure,
    /// Neither.
    Neutral,
    /// Cancelled.
    Cancelled,
    /// Skipped.
    Skipped,
    /// Timed out.
    TimedOut,
    /// Needs a person.
    ActionRequired,
}

/// A check run's `output`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckOutput {
    /// Its title.
    pub title: String,
    /// Its summary (Markdown; GitHub takes at most 65,535 characters).
    pub summary: String,
    /// Its details (Markdown; at most 65,535 characters).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// The body of a check run's create or update.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckRunBody {
    /// The check's name.
    pub name: String,
    /// The commit it is about (sent on create; GitHub ignores it on update).
    pub head_sha: String,
    /// Its status.
    pub status: CheckStatus,
    /// Its conclusion, required when completed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conclusion: Option<CheckConclusion>,
    /// Where the details are (Sortie's job page).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details_url: Option<String>,
    /// Sortie's own reference (a job id).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub external_id: Option<String>,
    /// What the check says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<CheckOutput>,
}
