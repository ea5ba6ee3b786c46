//! The calls on comments: finding Sortie's sticky comment, writing and replacing it.

use serde::Deserialize;

use super::{
    check_argument, decode, repo_path, Github, Id, CREATE_COMMENT, LIST_COMMENTS, PER_PAGE,
    UPDATE_COMMENT,
};
use crate::{GithubError, Permissions, RepoRef};

impl Github {
    /// The oldest comment on pull request (or issue) `number` written by an app (a `Bot`)
    /// whose body holds `marker`: Sortie's sticky comment. All pages, bounded
    /// (<https://docs.github.com/en/rest/issues/comments#list-issue-comments>).
    pub async fn find_comment(
        &self,
        repo: &RepoRef,
        number: u64,
        marker: &str,
    ) -> Result<Option<u64>, GithubError> {
        if marker.trim().is_empty() {
            return Err(GithubError::InvalidArgument {
                call: LIST_COMMENTS,
                field: "marker",
                reason: "is empty".into(),
            });
        }
        check_argument(LIST_COMMENTS, "marker", marker)?;
        #[derive(Deserialize)]
        struct Comment {
            id: u64,
            #[serde(default)]
            body: Option<String>,
            user: Option<Author>,
        }
        #[derive(Deserialize)]
        struct Author {
            #[serde(rename = "type", default)]
            kind: String,
        }
        let first = format!(
            "{}/issues/{number}/comments?per_page={PER_PAGE}&page=1",
            repo_path(repo)
        );
        let comments = self
            .list(
                repo,
                &Permissions::COMMENTS_WRITE,
                LIST_COMMENTS,
                first,
                decode::<Vec<Comment>>,
            )
            .await?;
        Ok(comments
            .into_iter()
            .find(|c| {
                c.user.as_ref().is_some_and(|u| u.kind == "Bot")
                    && c.body.as_deref().is_some_and(|b| b.contains(marker))
            })
            .map(|c| c.id))
    }

    /// Comments on pull request (or issue) `number`; the comment's id
    /// (<https://docs.github.com/en/rest/issues/comments#create-an-issue-comment>).
    pub async fn create_comment(
        &self,
        repo: &RepoRef,
        number: u64,
        body: &str,
    ) -> Result<u64, GithubError> {
        let path = format!("{}/issues/{number}/comments", repo_path(repo));
        let answer = self
            .send_json(
                repo,
                &Permissions::COMMENTS_WRITE,
                CREATE_COMMENT,
                &path,
                &serde_json::json!({ "body": body }),
            )
            .await?;
        Ok(decode::<Id>(CREATE_COMMENT, &answer.body)?.id)
    }

    /// Replaces comment `id`'s body
    /// (<https://docs.github.com/en/rest/issues/comments#update-an-issue-comment>).
    pub async fn update_comment(
        &self,
        repo: &RepoRef,
        id: u64,
        body: &str,
    ) -> Result<(), GithubError> {
        let path = format!("{}/issues/comments/{id}", repo_path(repo));
        self.send_json(
            repo,
            &Permissions::COMMENTS_WRITE,
            UPDATE_COMMENT,
            &path,
            &serde_json::json!({ "body": body }),
        )
        .await
        .map(drop)
    }
}
