//! What the calls return and send: the few fields Sortie reads of GitLab's objects.

use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use sortie_core::protocol::pilot::SourceAccess;

use crate::{ProjectPath, Secret};

/// A merge request's `state`
/// (<https://docs.gitlab.com/api/merge_requests/#get-single-mr>).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MergeRequestState {
    /// Open.
    Opened,
    /// Closed without a merge.
    Closed,
    /// Merging now: short-lived and transitional.
    Locked,
    /// Merged.
    Merged,
    /// A state this client does not know.
    #[serde(other)]
    Unknown,
}

/// A merge request: the fields a plan or an apply decides on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeRequest {
    /// Its internal id, the number people see (`!7`).
    pub iid: u64,
    /// Open, closed, locked or merged.
    pub state: MergeRequestState,
    /// The head commit of its diff; `None` while GitLab has not computed it (and once the
    /// source branch of a merged one is gone).
    pub sha: Option<String>,
    /// The branch its changes are on.
    pub source_branch: String,
    /// The branch it merges into.
    pub target_branch: String,
    /// The project of the source branch; `None` when that project was deleted.
    pub source_project_id: Option<u64>,
    /// The project it merges into.
    pub target_project_id: u64,
    /// Who opened it.
    pub author_username: String,
    /// Whether it is a draft.
    pub draft: bool,
    /// GitLab's `detailed_merge_status` (`mergeable`, `checking`, `conflict`,
    /// `need_rebase`, `not_approved`, ...); `None` from an instance older than 15.6.
    pub detailed_merge_status: Option<String>,
    /// Whether GitLab found conflicts (`false` unless `merge_status` is
    /// `cannot_be_merged`).
    pub has_conflicts: bool,
    /// The merge commit, once merged with one.
    pub merge_commit_sha: Option<String>,
    /// The squash commit, once merged with squashing.
    pub squash_commit_sha: Option<String>,
    /// How many commits of the target branch the source is missing; present when asked for
    /// with `include_diverged_commits_count=true` (the single merge request only).
    pub diverged_commits_count: Option<u32>,
    /// GitLab's count of changed files, a string: `"1000+"` when capped; `None` until
    /// computed.
    pub changes_count: Option<String>,
    /// Its page.
    pub web_url: Option<String>,
}

impl MergeRequest {
    /// Whether it is open.
    pub fn is_open(&self) -> bool {
        self.state == MergeRequestState::Opened
    }

    /// Whether it was merged.
    pub fn is_merged(&self) -> bool {
        self.state == MergeRequestState::Merged
    }

    /// Whether its source branch is in another project than its target (a fork, or a
    /// deleted one).
    pub fn is_from_fork(&self) -> bool {
        self.source_project_id != Some(self.target_project_id)
    }

    /// The commit the merge left on the target branch, once merged: the merge commit, else
    /// the squash commit, else (a fast-forward merge) the head commit.
    pub fn landed_sha(&self) -> Option<&str> {
        if !self.is_merged() {
            return None;
        }
        self.merge_commit_sha
            .as_deref()
            .or(self.squash_commit_sha.as_deref())
            .or(self.sha.as_deref())
    }

    /// Whether Git can merge it, from `detailed_merge_status` and `has_conflicts`:
    /// `Some(false)` for conflicts, a needed rebase or a missing source branch; `None` while
    /// GitLab is still checking (or does not say); else `Some(true)`. Policy blockers
    /// (approvals, pipelines, drafts, threads) are not conflicts: they are the caller's to
    /// read from [`MergeRequest::detailed_merge_status`] (a pipeline that must pass may be
    /// waiting for Sortie's own status)
    /// (<https://docs.gitlab.com/api/merge_requests/#merge-status>).
    pub fn mergeable(&self) -> Option<bool> {
        if self.has_conflicts {
            return Some(false);
        }
        match self.detailed_merge_status.as_deref() {
            None | Some("unchecked" | "checking" | "preparing" | "approvals_syncing") => None,
            Some("conflict" | "need_rebase" | "commits_status") => Some(false),
            Some(_) => Some(true),
        }
    }
}

#[derive(Deserialize)]
pub(crate) struct MergeRequestWire {
    iid: u64,
    state: MergeRequestState,
    #[serde(default)]
    sha: Option<String>,
    source_branch: String,
    target_branch: String,
    #[serde(default)]
    source_project_id: Option<u64>,
    target_project_id: u64,
    author: UserWire,
    #[serde(default)]
    draft: Option<bool>,
    #[serde(default)]
    work_in_progress: Option<bool>,
    #[serde(default)]
    detailed_merge_status: Option<String>,
    #[serde(default)]
    has_conflicts: bool,
    #[serde(default)]
    merge_commit_sha: Option<String>,
    #[serde(default)]
    squash_commit_sha: Option<String>,
    #[serde(default)]
    diverged_commits_count: Option<u32>,
    #[serde(default)]
    changes_count: Option<String>,
    #[serde(default)]
    web_url: Option<String>,
}

#[derive(Deserialize)]
pub(crate) struct UserWire {
    pub(crate) username: String,
}

impl MergeRequestWire {
    pub(crate) fn into_merge_request(self) -> MergeRequest {
        MergeRequest {
            iid: self.iid,
            state: self.state,
            sha: self.sha.filter(|s| !s.is_empty()),
            source_branch: self.source_branch,
            target_branch: self.target_branch,
            source_project_id: self.source_project_id,
            target_project_id: self.target_project_id,
            author_username: self.author.username,
            // `work_in_progress` is the deprecated name of `draft`.
            draft: self.draft.or(self.work_in_progress).unwrap_or(false),
            detailed_merge_status: self.detailed_merge_status,
            has_conflicts: self.has_conflicts,
            merge_commit_sha: self.merge_commit_sha.filter(|s| !s.is_empty()),
            squash_commit_sha: self.squash_commit_sha.filter(|s| !s.is_empty()),
            diverged_commits_count: self.diverged_commits_count,
            changes_count: self.changes_count,
            web_url: self.web_url,
        }
    }
}

/// One file a merge request changes, as the diffs (or changes) API lists it
/// (<https://docs.gitlab.com/api/merge_requests/#list-merge-request-diffs>).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ChangedFile {
    /// Its path before the change.
    pub old_path: String,
    /// Its path after the change.
    pub new_path: String,
    /// Added.
    #[serde(default)]
    pub new_file: bool,
    /// Renamed (`old_path` is its former name).
    #[serde(default)]
    pub renamed_file: bool,
    /// Removed.
    #[serde(default)]
    pub deleted_file: bool,
}

impl ChangedFile {
    /// The paths the change touches: the new path, and the old one when it differs (both
    /// names of a renamed file).
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.new_path.as_str())
            .chain(Some(self.old_path.as_str()).filter(|old| *old != self.new_path))
    }
}

/// Which endpoint a merge request's files were read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiffSource {
    /// `GET /projects/:id/merge_requests/:merge_request_iid/diffs` (GitLab 15.7 and later),
    /// paged.
    Diffs,
    /// `GET /projects/:id/merge_requests/:merge_request_iid/changes?access_raw_diffs=true`
    /// (an older instance, where `/diffs` is not found).
    Changes,
}

/// The files a merge request changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangedFiles {
    /// The files, in GitLab's order.
    pub files: Vec<ChangedFile>,
    /// Where they were read.
    pub source: DiffSource,
    /// True when the list may be incomplete: GitLab said so (`overflow` of `/changes`), or
    /// it holds as many files as GitLab's diff limit (1,000 by default and on GitLab.com,
    /// at most 3,000) lets a diff have
    /// (<https://docs.gitlab.com/administration/diff_limits/>).
    pub possibly_cut: bool,
}

impl ChangedFiles {
    /// Every path touched, both names of a renamed file, each once, in order.
    pub fn paths(&self) -> Vec<String> {
        let mut seen = std::collections::HashSet::new();
        self.files
            .iter()
            .flat_map(ChangedFile::paths)
            .filter(|p| seen.insert(*p))
            .map(str::to_string)
            .collect()
    }
}

/// A merge request's approvals
/// (<https://docs.gitlab.com/api/merge_request_approvals/#merge-request-level-mr-approvals>).
/// The counts are GitLab Premium's: on the Free tier only `approved` and `approved_by` are
/// sent, and the counts are `None`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approvals {
    /// Whether the approval rules are satisfied.
    pub approved: Option<bool>,
    /// Approvals the rules require.
    pub approvals_required: Option<u32>,
    /// Approvals still missing.
    pub approvals_left: Option<u32>,
    /// Everyone who approved, in GitLab's order.
    pub approved_by: Vec<Approver>,
}

impl Approvals {
    /// The usernames of everyone who approved, in GitLab's order.
    pub fn usernames(&self) -> Vec<String> {
        self.approved_by
            .iter()
            .map(|a| a.username.clone())
            .collect()
    }
}

/// One approval of a merge request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approver {
    /// Who approved.
    pub username: String,
    /// When; `None` from an instance that does not send `approved_at`.
    pub approved_at: Option<DateTime<Utc>>,
}

#[derive(Deserialize)]
pub(crate) struct ApprovalsWire {
    #[serde(default)]
    approved: Option<bool>,
    #[serde(default)]
    approvals_required: Option<u32>,
    #[serde(default)]
    approvals_left: Option<u32>,
    #[serde(default)]
    approved_by: Vec<ApproverWire>,
}

#[derive(Deserialize)]
struct ApproverWire {
    user: UserWire,
    #[serde(default)]
    approved_at: Option<DateTime<Utc>>,
}

impl ApprovalsWire {
    pub(crate) fn into_approvals(self) -> Approvals {
        Approvals {
            approved: self.approved,
            approvals_required: self.approvals_required,
            approvals_left: self.approvals_left,
            approved_by: self
                .approved_by
                .into_iter()
                .map(|a| Approver {
                    username: a.user.username,
                    approved_at: a.approved_at,
                })
                .collect(),
        }
    }
}

/// One version of a merge request's diff: GitLab makes one each time its source branch
/// moves (<https://docs.gitlab.com/api/merge_requests/#get-merge-request-diff-versions>).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct DiffVersion {
    /// Its id (newer versions have higher ids).
    pub id: u64,
    /// The source branch's head commit of this version.
    pub head_commit_sha: String,
    /// When the version was made: when that head arrived.
    pub created_at: DateTime<Utc>,
}

/// A commit status on a commit: an external status (Sortie's, or another system's) or a CI
/// job (<https://docs.gitlab.com/api/commits/#list-the-statuses-of-a-commit>).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct CommitStatus {
    /// Its id.
    pub id: u64,
    /// Its name (`sortie: prod`, a job's name).
    pub name: String,
    /// Its state: `pending`, `running`, `success`, `failed`, `canceled`, `skipped`, or a
    /// CI job's other states (`created`, `manual`, `scheduled`, ...).
    pub status: String,
    /// Whether its failure is allowed (does not fail the pipeline).
    #[serde(default)]
    pub allow_failure: bool,
    /// The ref it refers to.
    #[serde(default, rename = "ref")]
    pub ref_name: Option<String>,
    /// Its description.
    #[serde(default)]
    pub description: Option<String>,
}

impl CommitStatus {
    /// Whether it is finished and does not hold a pipeline back: `success` or `skipped`, or
    /// `failed` or `canceled` with its failure allowed.
    pub fn passed(&self) -> bool {
        match self.status.as_str() {
            "success" | "skipped" => true,
            "failed" | "canceled" => self.allow_failure,
            _ => false,
        }
    }

    /// Whether it is finished (passed or not).
    pub fn finished(&self) -> bool {
        matches!(
            self.status.as_str(),
            "success" | "skipped" | "failed" | "canceled"
        )
    }
}

/// An external commit status's state
/// (<https://docs.gitlab.com/api/commits/#set-the-pipeline-status-of-a-commit>).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CommitState {
    /// Waiting to start.
    Pending,
    /// Running.
    Running,
    /// Passed.
    Success,
    /// Failed.
    Failed,
    /// Cancelled.
    Canceled,
    /// Not run.
    Skipped,
}

impl CommitState {
    /// The state that shows a Sortie check (status and conclusion, in GitHub's words, as
    /// `sortie_core::vcs::report::render_check` makes them) on GitLab: queued is `pending`,
    /// in progress `running`; success, failure, cancelled and skipped are `success`,
    /// `failed`, `canceled` and `skipped`; neutral (not planned) is `success`, so that it
    /// never blocks a merge; action required (awaiting approval) is `pending`, waiting for
    /// someone (GitLab refuses `running` back to `pending`: the status then stays `running`,
    /// [`StatusOutcome::Kept`], until the apply moves it on).
    pub fn from_check(
        status: sortie_core::vcs::report::CheckStatus,
        conclusion: Option<sortie_core::vcs::report::Conclusion>,
    ) -> Self {
        use sortie_core::vcs::report::{CheckStatus, Conclusion};
        match (status, conclusion) {
            (CheckStatus::Queued, _) => Self::Pending,
            (CheckStatus::InProgress, _) => Self::Running,
            (CheckStatus::Completed, None | Some(Conclusion::Success | Conclusion::Neutral)) => {
                Self::Success
            }
            (CheckStatus::Completed, Some(Conclusion::Failure)) => Self::Failed,
            (CheckStatus::Completed, Some(Conclusion::Cancelled)) => Self::Canceled,
            (CheckStatus::Completed, Some(Conclusion::Skipped)) => Self::Skipped,
            (CheckStatus::Completed, Some(Conclusion::ActionRequired)) => Self::Pending,
        }
    }
}

/// An external commit status to set on a commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StatusBody {
    /// The status's name, what tells it from other systems' (`sortie: <env>`).
    pub name: String,
    /// Its state.
    pub state: CommitState,
    /// Where its details are (Sortie's job page); left out when over GitLab's 255
    /// characters.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_url: Option<String>,
    /// A short description; cut to GitLab's 255 characters when sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The branch the status refers to (the merge request's source branch); GitLab picks
    /// one containing the commit when left out.
    #[serde(rename = "ref", skip_serializing_if = "Option::is_none")]
    pub ref_name: Option<String>,
}

impl StatusBody {
    /// The status of a Sortie check (`sortie: <env>`): its name, its state
    /// ([`CommitState::from_check`]), its title as the description, and `target_url` (the
    /// job's page).
    pub fn for_check(
        check: &sortie_core::vcs::report::CheckOutput,
        target_url: Option<&str>,
    ) -> Self {
        Self {
            name: check.name.clone(),
            state: CommitState::from_check(check.status, check.conclusion),
            target_url: target_url.map(str::to_string),
            description: Some(check.title.clone()).filter(|t| !t.is_empty()),
            ref_name: None,
        }
    }
}

/// What setting a commit status did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatusOutcome {
    /// GitLab set it: its id and state.
    Set {
        /// The status's id.
        id: u64,
        /// Its state now.
        state: CommitState,
    },
    /// GitLab kept the state the status already had: the state asked for is not a
    /// transition from it (`pending` or `running` again, or `running` back to `pending`),
    /// which GitLab refuses with a 400 "Cannot transition status". The status is left as
    /// it was; nothing failed.
    Kept {
        /// GitLab's words.
        message: String,
    },
}

/// A note (comment) on a merge request
/// (<https://docs.gitlab.com/api/notes/#merge-requests>).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Note {
    /// Its id.
    pub id: u64,
    /// Its text (Markdown).
    #[serde(default)]
    pub body: String,
    /// Who wrote it.
    pub author: NoteAuthor,
    /// A note GitLab wrote about a change (not a comment).
    #[serde(default)]
    pub system: bool,
}

/// A note's author.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct NoteAuthor {
    /// The user's id.
    pub id: u64,
    /// The user's username.
    #[serde(default)]
    pub username: String,
}

/// The user the client's token belongs to (`GET /user`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct CurrentUser {
    /// Its id.
    pub id: u64,
    /// Its username (a project or group token's bot user for such a token).
    pub username: String,
}

/// A project access token minted for one job's source download: it reads one project
/// only, for a short while. [`fmt::Debug`](std::fmt::Debug) never shows the token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceToken {
    /// The token's id, to revoke it.
    pub id: u64,
    /// The token.
    pub token: Secret,
    /// Its `expires_at` date.
    pub expires_on: NaiveDate,
    /// When it stops working: GitLab expires a token "at midnight, 00:00 AM UTC" of its
    /// date (<https://docs.gitlab.com/user/project/settings/project_access_tokens/>).
    pub expires_at: DateTime<Utc>,
    /// The scopes GitLab granted.
    pub scopes: Vec<String>,
}

/// What a job needs to download a commit of a project, with the id of the token to revoke
/// once it is no longer needed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceGrant {
    /// The archive URL, the token and its expiry, as the pilot takes them (its `Debug`
    /// hides the token).
    pub access: SourceAccess,
    /// The project the token reads.
    pub project: ProjectPath,
    /// The project access token's id.
    pub token_id: u64,
}

/// An active source token of a project: its id, to revoke it, and the job it was minted
/// for (from its name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldSourceToken {
    /// The project access token's id.
    pub id: u64,
    /// The job it was minted for.
    pub job: String,
}

/// One project access token as `GET /projects/:id/access_tokens` lists it (never its value).
#[derive(Deserialize)]
pub(crate) struct ListedTokenWire {
    pub(crate) id: u64,
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) active: bool,
    #[serde(default)]
    pub(crate) revoked: bool,
}

#[derive(Deserialize)]
pub(crate) struct MintedTokenWire {
    pub(crate) id: u64,
    pub(crate) token: String,
    pub(crate) expires_at: Option<NaiveDate>,
    #[serde(default)]
    pub(crate) scopes: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mr(json: serde_json::Value) -> MergeRequest {
        serde_json::from_value::<MergeRequestWire>(json)
            .unwrap()
            .into_merge_request()
    }

    /// The documented example of `GET /projects/:id/merge_requests/:merge_request_iid`,
    /// cut to the fields read (<https://docs.gitlab.com/api/merge_requests/#get-single-mr>).
    fn documented() -> serde_json::Value {
        serde_json::json!({
            "id": 155016530, "iid": 133, "project_id": 15513260, "title": "Manual job rules",
            "state": "opened", "target_branch": "main", "source_branch": "manual-job-rules",
            "author": {"id": 4155490, "username": "marcel.amirault", "name": "Marcel Amirault"},
            "source_project_id": 15513260, "target_project_id": 15513260,
            "draft": false, "work_in_progress": false,
            "merge_status": "can_be_merged", "detailed_merge_status": "can_be_merged",
            "sha": "e82eb4a098e32c796079ca3915e07487fc4db24c",
            "merge_commit_sha": null, "squash_commit_sha": null,
            "has_conflicts": false, "changes_count": "1",
            "web_url": "https://gitlab.com/marcel.amirault/test-project/-/merge_requests/133"
        })
    }

    #[test]
    fn the_documented_merge_request_is_read() {
        let m = mr(documented());
        assert_eq!(m.iid, 133);
        assert!(m.is_open() && !m.is_merged() && !m.is_from_fork());
        assert_eq!(
            m.sha.as_deref(),
            Some("e82eb4a098e32c796079ca3915e07487fc4db24c")
        );
        assert_eq!(m.author_username, "marcel.amirault");
        assert_eq!(m.mergeable(), Some(true));
        assert_eq!(m.diverged_commits_count, None);
        assert_eq!(m.landed_sha(), None);
    }

    #[test]
    fn forks_merges_and_mergeability_are_read() {
        let mut json = documented();
        json["source_project_id"] = 2.into();
        json["target_project_id"] = 3.into();
        json["state"] = "merged".into();
        json["merge_commit_sha"] = "m1".into();
        json["detailed_merge_status"] = "not_open".into();
        json["diverged_commits_count"] = 4.into();
        let m = mr(json.clone());
        assert!(m.is_from_fork() && m.is_merged());
        assert_eq!(m.landed_sha(), Some("m1"));
        assert_eq!(m.diverged_commits_count, Some(4));
        json["merge_commit_sha"] = serde_json::Value::Null;
        json["squash_commit_sha"] = "s1".into();
        assert_eq!(mr(json.clone()).landed_sha(), Some("s1"));
        json["squash_commit_sha"] = serde_json::Value::Null;
        assert_eq!(
            mr(json.clone()).landed_sha(),
            Some("e82eb4a098e32c796079ca3915e07487fc4db24c")
        );
        json["source_project_id"] = serde_json::Value::Null;
        assert!(mr(json.clone()).is_from_fork());
        for (status, conflicts, mergeable) in [
            ("checking", false, None),
            ("unchecked", false, None),
            ("conflict", false, Some(false)),
            ("need_rebase", false, Some(false)),
            ("not_approved", false, Some(true)),
            ("ci_must_pass", false, Some(true)),
            ("mergeable", true, Some(false)),
        ] {
            json["detailed_merge_status"] = status.into();
            json["has_conflicts"] = conflicts.into();
            assert_eq!(mr(json.clone()).mergeable(), mergeable, "{status}");
        }
        json["state"] = "something_new".into();
        assert_eq!(mr(json).state, MergeRequestState::Unknown);
    }

    #[test]
    fn an_old_draft_flag_is_read() {
        let mut json = documented();
        json.as_object_mut().unwrap().remove("draft");
        json["work_in_progress"] = true.into();
        assert!(mr(json).draft);
    }

    #[test]
    fn a_rename_touches_both_paths_once() {
        let files = ChangedFiles {
            files: vec![
                ChangedFile {
                    old_path: "a.tf".into(),
                    new_path: "b.tf".into(),
                    new_file: false,
                    renamed_file: true,
                    deleted_file: false,
                },
                ChangedFile {
                    old_path: "VERSION".into(),
                    new_path: "VERSION".into(),
                    new_file: false,
                    renamed_file: false,
                    deleted_file: false,
                },
                ChangedFile {
                    old_path: "c.tf".into(),
                    new_path: "a.tf".into(),
                    new_file: false,
                    renamed_file: true,
                    deleted_file: false,
                },
            ],
            source: DiffSource::Diffs,
            possibly_cut: false,
        };
        assert_eq!(files.paths(), vec!["b.tf", "a.tf", "VERSION", "c.tf"]);
    }

    #[test]
    fn approvals_of_every_tier_are_read() {
        let premium: ApprovalsWire = serde_json::from_value(serde_json::json!({
            "id": 5, "iid": 5, "project_id": 1, "state": "opened",
            "approvals_required": 2, "approvals_left": 1,
            "approved_by": [{"user": {"name": "Administrator", "username": "root", "id": 1}}]
        }))
        .unwrap();
        let premium = premium.into_approvals();
        assert_eq!(premium.approvals_left, Some(1));
        assert_eq!(premium.usernames(), vec!["root"]);
        assert_eq!(premium.approved_by[0].approved_at, None);
        let free: ApprovalsWire = serde_json::from_value(serde_json::json!({
            "approved": true, "user_has_approved": false, "user_can_approve": false,
            "approved_by": [{"user": {"username": "alice"}, "approved_at": "2026-01-15T10:30:00Z"}]
        }))
        .unwrap();
        let free = free.into_approvals();
        assert_eq!(free.approved, Some(true));
        assert_eq!(free.approvals_left, None);
        assert_eq!(free.usernames(), vec!["alice"]);
        assert_eq!(
            free.approved_by[0].approved_at,
            Some("2026-01-15T10:30:00Z".parse().unwrap())
        );
    }

    #[test]
    fn sortie_checks_map_to_gitlab_states() {
        use sortie_core::vcs::report::{CheckStatus, Conclusion};
        for (status, conclusion, state) in [
            (CheckStatus::Queued, None, CommitState::Pending),
            (CheckStatus::InProgress, None, CommitState::Running),
            (
                CheckStatus::Completed,
                Some(Conclusion::Success),
                CommitState::Success,
            ),
            (
                CheckStatus::Completed,
                Some(Conclusion::Neutral),
                CommitState::Success,
            ),
            (
                CheckStatus::Completed,
                Some(Conclusion::Failure),
                CommitState::Failed,
            ),
            (
                CheckStatus::Completed,
                Some(Conclusion::Cancelled),
                CommitState::Canceled,
            ),
            (
                CheckStatus::Completed,
                Some(Conclusion::Skipped),
                CommitState::Skipped,
            ),
            (
                CheckStatus::Completed,
                Some(Conclusion::ActionRequired),
                CommitState::Pending,
            ),
        ] {
            assert_eq!(CommitState::from_check(status, conclusion), state);
        }
    }

    #[test]
    fn a_status_passes_when_it_holds_nothing_back() {
        let status = |state: &str, allow_failure: bool| CommitStatus {
            id: 1,
            name: "lint".into(),
            status: state.into(),
            allow_failure,
            ref_name: None,
            description: None,
        };
        assert!(status("success", false).passed());
        assert!(status("skipped", false).passed());
        assert!(!status("failed", false).passed());
        assert!(status("failed", true).passed());
        assert!(!status("running", true).passed() && !status("running", true).finished());
        assert!(!status("manual", false).passed());
        assert!(status("canceled", false).finished());
    }

    #[test]
    fn a_status_body_is_gitlabs_form() {
        let body = StatusBody {
            name: "sortie: prod".into(),
            state: CommitState::Running,
            target_url: None,
            description: Some("planning".into()),
            ref_name: Some("feature".into()),
        };
        assert_eq!(
            serde_json::to_value(&body).unwrap(),
            serde_json::json!({"name": "sortie: prod", "state": "running", "description": "planning", "ref": "feature"})
        );
    }
}
