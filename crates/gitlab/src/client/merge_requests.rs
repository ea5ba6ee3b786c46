//! The calls on merge requests: the open ones into a branch, one now, its files and its
//! approvals.

use serde::Deserialize;

use super::{
    check_argument, decode, Gitlab, GET_APPROVALS, GET_CHANGES, GET_MERGE_REQUEST, LIST_DIFFS,
    LIST_MERGE_REQUESTS, LIST_VERSIONS, MAX_MR_FILES, MAX_PAGES, PER_PAGE,
};
use crate::transport::Outgoing;
use crate::types::{ApprovalsWire, MergeRequestWire};
use crate::{
    encode, Approvals, ChangedFile, ChangedFiles, DiffSource, DiffVersion, GitlabError,
    MergeRequest, ProjectPath,
};

/// GitLab's default (and GitLab.com's) limit on the files of one diff: a list this long may
/// have been cut (<https://docs.gitlab.com/administration/diff_limits/>).
const DEFAULT_MAX_DIFF_FILES: usize = 1000;

impl Gitlab {
    /// The open merge requests into `target_branch`, oldest first, every page
    /// (`GET /projects/:id/merge_requests?state=opened&target_branch=...`,
    /// <https://docs.gitlab.com/api/merge_requests/#list-project-merge-requests>); at most
    /// [`MAX_PAGES`] pages of [`PER_PAGE`].
    pub async fn open_merge_requests(
        &self,
        project: &ProjectPath,
        target_branch: &str,
    ) -> Result<Vec<MergeRequest>, GitlabError> {
        check_argument(LIST_MERGE_REQUESTS, "target_branch", target_branch)?;
        let path = format!(
            "/projects/{}/merge_requests?state=opened&target_branch={}&order_by=created_at&sort=asc",
            project.encoded(),
            encode(target_branch)
        );
        self.walk(
            LIST_MERGE_REQUESTS,
            &path,
            MAX_PAGES,
            MAX_PAGES * PER_PAGE,
            |call, body| {
                Ok(decode::<Vec<MergeRequestWire>>(call, body)?
                    .into_iter()
                    .map(MergeRequestWire::into_merge_request)
                    .collect())
            },
        )
        .await
    }

    /// Merge request `iid` now, with how many commits its source is behind its target
    /// (`include_diverged_commits_count=true`,
    /// <https://docs.gitlab.com/api/merge_requests/#get-single-mr>). GitLab checks
    /// mergeability asynchronously: `detailed_merge_status` may say `checking` until it is
    /// asked again.
    pub async fn merge_request(
        &self,
        project: &ProjectPath,
        iid: u64,
    ) -> Result<MergeRequest, GitlabError> {
        let path = format!(
            "/projects/{}/merge_requests/{iid}?include_diverged_commits_count=true",
            project.encoded()
        );
        let answer = self.send(GET_MERGE_REQUEST, &path, &Outgoing::READ).await?;
        Ok(decode::<MergeRequestWire>(GET_MERGE_REQUEST, &answer.body)?.into_merge_request())
    }

    /// The files merge request `iid` changes, paged to the end: at most [`MAX_MR_FILES`]
    /// (GitLab's highest diff limit), a longer list being [`GitlabError::TooManyPages`].
    ///
    /// Read from `GET /projects/:id/merge_requests/:merge_request_iid/diffs` (GitLab 15.7
    /// and later, which deprecated `/changes`;
    /// <https://docs.gitlab.com/api/merge_requests/#list-merge-request-diffs>). When an
    /// older instance answers that route with 404, from
    /// `GET /projects/:id/merge_requests/:merge_request_iid/changes?access_raw_diffs=true`,
    /// one answer, read from Gitaly so that the database's diff limits do not cut it
    /// (<https://docs.gitlab.com/api/merge_requests/#get-single-merge-request-changes>). A
    /// merge request that does not exist is a 404 from both.
    pub async fn changed_files(
        &self,
        project: &ProjectPath,
        iid: u64,
    ) -> Result<ChangedFiles, GitlabError> {
        let path = format!("/projects/{}/merge_requests/{iid}/diffs", project.encoded());
        let diffs = self
            .walk(
                LIST_DIFFS,
                &path,
                MAX_MR_FILES.div_ceil(PER_PAGE),
                MAX_MR_FILES,
                decode::<Vec<ChangedFile>>,
            )
            .await;
        match diffs {
            Ok(files) => Ok(ChangedFiles {
                possibly_cut: files.len() >= DEFAULT_MAX_DIFF_FILES,
                files,
                source: DiffSource::Diffs,
            }),
            Err(GitlabError::Refused { status: 404, .. }) => self.changes(project, iid).await,
            Err(e) => Err(e),
        }
    }

    async fn changes(&self, project: &ProjectPath, iid: u64) -> Result<ChangedFiles, GitlabError> {
        #[derive(Deserialize)]
        struct Changes {
            #[serde(default)]
            changes: Vec<ChangedFile>,
            #[serde(default)]
            overflow: bool,
        }
        let path = format!(
            "/projects/{}/merge_requests/{iid}/changes?access_raw_diffs=true",
            project.encoded()
        );
        let answer = self.send(GET_CHANGES, &path, &Outgoing::READ).await?;
        let mut changes = decode::<Changes>(GET_CHANGES, &answer.body)?;
        let over = changes.changes.len() > MAX_MR_FILES;
        changes.changes.truncate(MAX_MR_FILES);
        Ok(ChangedFiles {
            possibly_cut: changes.overflow
                || over
                || changes.changes.len() >= DEFAULT_MAX_DIFF_FILES,
            files: changes.changes,
            source: DiffSource::Changes,
        })
    }

    /// Merge request `iid`'s approvals: who approved, and (GitLab Premium) how many are
    /// still required
    /// (<https://docs.gitlab.com/api/merge_request_approvals/#merge-request-level-mr-approvals>).
    pub async fn approvals(
        &self,
        project: &ProjectPath,
        iid: u64,
    ) -> Result<Approvals, GitlabError> {
        let path = format!(
            "/projects/{}/merge_requests/{iid}/approvals",
            project.encoded()
        );
        let answer = self.send(GET_APPROVALS, &path, &Outgoing::READ).await?;
        Ok(decode::<ApprovalsWire>(GET_APPROVALS, &answer.body)?.into_approvals())
    }

    /// Merge request `iid`'s diff versions, newest first: one each time its source branch
    /// moved, with the head it moved to and when
    /// (<https://docs.gitlab.com/api/merge_requests/#get-merge-request-diff-versions>). The
    /// first page of 100 only: the newest is what matters.
    pub async fn diff_versions(
        &self,
        project: &ProjectPath,
        iid: u64,
    ) -> Result<Vec<DiffVersion>, GitlabError> {
        let path = format!(
            "/projects/{}/merge_requests/{iid}/versions?per_page={PER_PAGE}&page=1",
            project.encoded()
        );
        let answer = self.send(LIST_VERSIONS, &path, &Outgoing::READ).await?;
        let mut versions = decode::<Vec<DiffVersion>>(LIST_VERSIONS, &answer.body)?;
        versions.sort_by_key(|v| std::cmp::Reverse(v.id));
        Ok(versions)
    }

    /// The usernames of those who approved merge request `iid` at its head now: approvals
    /// given before its source branch last moved do not count, whatever the project's
    /// "reset approvals on push" setting (off on GitLab Free, which cannot reset them).
    ///
    /// The head's time is its newest diff version's `created_at`
    /// ([`Gitlab::diff_versions`]); an approval counts when its `approved_at` (GitLab sends
    /// the approval's creation time under that name) is not earlier. It fails closed:
    /// an approval without `approved_at` (an older instance does not send it) does not
    /// count, so an apply waits rather than trust an approval of an older head; a merge
    /// request without a version (its diff not computed yet) has no approval on its head;
    /// and a refused versions call is the error, a 404 included: for a merge request whose
    /// approvals were just listed it means the merge request is gone or hidden now, not
    /// that its approvals all count.
    pub async fn approvals_on_head(
        &self,
        project: &ProjectPath,
        iid: u64,
    ) -> Result<Vec<String>, GitlabError> {
        let approvals = self.approvals(project, iid).await?;
        if approvals.approved_by.is_empty() {
            return Ok(Vec::new());
        }
        let versions = self.diff_versions(project, iid).await?;
        let Some(head_since) = versions.first().map(|newest| newest.created_at) else {
            return Ok(Vec::new());
        };
        Ok(approvals
            .approved_by
            .into_iter()
            .filter(|a| a.approved_at.is_some_and(|at| at >= head_since))
            .map(|a| a.username)
            .collect())
    }
}
