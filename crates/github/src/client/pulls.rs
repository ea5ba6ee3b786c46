//! The calls on pull requests: one pull request, the open ones, a pull request's files
//! and reviews, and how two commits compare.

use super::{
    check_argument, decode, repo_path, segment, Github, COMPARE, GET_PULL, LIST_PULLS,
    LIST_PULL_FILES, LIST_REVIEWS, MAX_PAGES, MAX_PULL_FILES, PER_PAGE,
};
use crate::types::{PullWire, ReviewWire};
use crate::{
    ChangedFile, Comparison, Conditional, GithubError, Permissions, Pull, RepoRef, Review,
};

impl Github {
    /// `GET /repos/{owner}/{repo}/pulls/{pull_number}`
    /// (<https://docs.github.com/en/rest/pulls/pulls#get-a-pull-request>).
    pub async fn pull(&self, repo: &RepoRef, number: u64) -> Result<Pull, GithubError> {
        let path = format!("{}/pulls/{number}", repo_path(repo));
        let answer = self
            .send(repo, &Permissions::PULLS_READ, GET_PULL, &path, None, None)
            .await?;
        Ok(decode::<PullWire>(GET_PULL, &answer.body)?.into_pull())
    }

    /// The open pull requests into `base`, all pages
    /// (<https://docs.github.com/en/rest/pulls/pulls#list-pull-requests>). With `etag` (from
    /// the last answer), the first page is asked with `If-None-Match`: a 304 is
    /// [`Conditional::NotModified`] and "does not count against your primary rate limit"
    /// (<https://docs.github.com/en/rest/using-the-rest-api/best-practices-for-using-the-rest-api#use-conditional-requests-if-appropriate>).
    pub async fn open_pulls(
        &self,
        repo: &RepoRef,
        base: &str,
        etag: Option<&str>,
    ) -> Result<Conditional<Vec<Pull>>, GithubError> {
        check_argument(LIST_PULLS, "base", base)?;
        let first = format!(
            "{}/pulls?state=open&base={}&per_page={PER_PAGE}&page=1",
            repo_path(repo),
            segment(base)
        );
        self.walk(
            repo,
            &Permissions::PULLS_READ,
            LIST_PULLS,
            first,
            etag,
            MAX_PAGES,
            MAX_PAGES * PER_PAGE,
            |call, body| {
                Ok(decode::<Vec<PullWire>>(call, body)?
                    .into_iter()
                    .map(PullWire::into_pull)
                    .collect())
            },
        )
        .await
    }

    /// The files pull request `number` changes, renames with their old path, all pages of
    /// 100, at most [`MAX_PULL_FILES`]
    /// (<https://docs.github.com/en/rest/pulls/pulls#list-pull-requests-files>).
    pub async fn pull_files(
        &self,
        repo: &RepoRef,
        number: u64,
    ) -> Result<Vec<ChangedFile>, GithubError> {
        let first = format!(
            "{}/pulls/{number}/files?per_page={PER_PAGE}&page=1",
            repo_path(repo)
        );
        self.walk_all(
            repo,
            &Permissions::PULLS_READ,
            LIST_PULL_FILES,
            first,
            MAX_PULL_FILES.div_ceil(PER_PAGE),
            MAX_PULL_FILES,
            decode::<Vec<ChangedFile>>,
        )
        .await
    }

    /// The reviews of pull request `number`, oldest first, all pages
    /// (<https://docs.github.com/en/rest/pulls/reviews#list-reviews-for-a-pull-request>).
    pub async fn reviews(&self, repo: &RepoRef, number: u64) -> Result<Vec<Review>, GithubError> {
        let first = format!(
            "{}/pulls/{number}/reviews?per_page={PER_PAGE}&page=1",
            repo_path(repo)
        );
        self.list(
            repo,
            &Permissions::PULLS_READ,
            LIST_REVIEWS,
            first,
            |call, body| {
                Ok(decode::<Vec<ReviewWire>>(call, body)?
                    .into_iter()
                    .map(ReviewWire::into_review)
                    .collect())
            },
        )
        .await
    }

    /// How `head` compares with `base`
    /// (<https://docs.github.com/en/rest/commits/commits#compare-two-commits>). Asks for
    /// one file per page: only the counts are read.
    pub async fn compare(
        &self,
        repo: &RepoRef,
        base: &str,
        head: &str,
    ) -> Result<Comparison, GithubError> {
        check_argument(COMPARE, "base", base)?;
        check_argument(COMPARE, "head", head)?;
        let path = format!(
            "{}/compare/{}...{}?per_page=1",
            repo_path(repo),
            segment(base),
            segment(head)
        );
        let answer = self
            .send(
                repo,
                &Permissions::CONTENTS_READ,
                COMPARE,
                &path,
                None,
                None,
            )
            .await?;
        decode(COMPARE, &answer.body)
    }
}
