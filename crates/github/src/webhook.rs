//! GitHub's webhook deliveries: the events Sortie handles, as minimal typed payloads
//! (<https://docs.github.com/en/webhooks/webhook-events-and-payloads>).
//!
//! [`parse`] takes the `X-GitHub-Event` header and the body. Events and actions Sortie does
//! not handle are [`Event::Ignored`]; a body that is not the documented shape is an error
//! naming the field; nothing a sender writes can make it panic. Checking the
//! `X-Hub-Signature-256` is the receiver's job, before this.

use serde::Deserialize;

use crate::GithubError;

/// GitHub caps a webhook payload at 25 MB; a larger body is refused unread
/// (<https://docs.github.com/en/webhooks/webhook-events-and-payloads#payload-cap>).
pub const MAX_PAYLOAD_BYTES: usize = 25 * 1024 * 1024;

/// A delivery, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// `pull_request` opened, synchronize (new commits), reopened or closed.
    PullRequest(PullRequestEvent),
    /// `issue_comment` created (on an issue or a pull request).
    IssueComment(IssueCommentEvent),
    /// `pull_request_review` submitted or dismissed.
    PullRequestReview(PullRequestReviewEvent),
    /// `push` to a branch or tag.
    Push(PushEvent),
    /// `ping`, sent when a webhook is created.
    Ping(PingEvent),
    /// `installation`: the app installed, uninstalled, suspended...
    Installation(InstallationEvent),
    /// An event, or an action of one, Sortie does not handle.
    Ignored {
        /// The `X-GitHub-Event`.
        event: String,
        /// The payload's `action`, if any.
        action: Option<String>,
    },
}

/// A `pull_request` action Sortie handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PullRequestAction {
    /// Opened.
    Opened,
    /// New commits pushed to its head.
    Synchronize,
    /// Reopened.
    Reopened,
    /// Closed, merged or not (see [`PullRequestPayload::merged`]).
    Closed,
    /// Retargeted: `edited` with a new base branch (`changes.base`); any other edit (title,
    /// body) is not read.
    Edited,
}

/// A repository as payloads carry it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct RepositoryPayload {
    /// Its id.
    pub id: u64,
    /// `owner/name`.
    pub full_name: String,
}

/// The installation a delivery came through (present on a GitHub App's deliveries).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct InstallationRef {
    /// The installation's id.
    pub id: u64,
}

/// A user (or bot) as payloads carry it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct UserPayload {
    /// The login.
    pub login: String,
    /// `User`, `Bot` or `Organization`.
    #[serde(rename = "type", default)]
    pub kind: String,
}

/// One side (head or base) of a pull request.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct BranchPayload {
    /// The branch's name.
    #[serde(rename = "ref")]
    pub ref_name: String,
    /// Its commit.
    pub sha: String,
    /// Its repository; `None` when it was deleted.
    pub repo: Option<RepositoryPayload>,
}

/// The pull request inside a `pull_request` delivery.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PullRequestPayload {
    /// Its number.
    pub number: u64,
    /// `open` or `closed`.
    pub state: String,
    /// Whether it is a draft.
    #[serde(default)]
    pub draft: bool,
    /// Whether it was merged (on `closed`).
    #[serde(default)]
    pub merged: Option<bool>,
    /// The merge commit, once merged.
    #[serde(default)]
    pub merge_commit_sha: Option<String>,
    /// Its head.
    pub head: BranchPayload,
    /// Its base.
    pub base: BranchPayload,
    /// Who opened it.
    pub user: UserPayload,
}

/// A `pull_request` delivery.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PullRequestEvent {
    /// What happened.
    pub action: PullRequestAction,
    /// The pull request's number.
    pub number: u64,
    /// The pull request.
    pub pull_request: PullRequestPayload,
    /// The base repository.
    pub repository: RepositoryPayload,
    /// The installation.
    #[serde(default)]
    pub installation: Option<InstallationRef>,
    /// What an `edited` delivery changed (its keys only are read).
    #[serde(default)]
    pub changes: Option<serde_json::Map<String, serde_json::Value>>,
}

impl PullRequestEvent {
    /// True for an `edited` delivery that moved the pull request to another base branch
    /// (<https://docs.github.com/en/webhooks/webhook-events-and-payloads#pull_request>:
    /// `changes.base.ref.from`).
    pub fn retargeted(&self) -> bool {
        self.action == PullRequestAction::Edited
            && self
                .changes
                .as_ref()
                .is_some_and(|c| c.contains_key("base"))
    }
}

/// The issue (or pull request) an `issue_comment` is on.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct IssuePayload {
    /// Its number.
    pub number: u64,
    /// Present when the issue is a pull request (its URLs; only its presence is read).
    #[serde(default)]
    pub pull_request: Option<PullRequestMarker>,
}

/// The `pull_request` member of an issue that is a pull request (its URLs, not read).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct PullRequestMarker {}

/// A comment.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct CommentPayload {
    /// Its id.
    pub id: u64,
    /// Its text.
    pub body: String,
    /// Its author.
    pub user: UserPayload,
}

/// An `issue_comment` delivery (action `created`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct IssueCommentEvent {
    /// The issue or pull request.
    pub issue: IssuePayload,
    /// The comment.
    pub comment: CommentPayload,
    /// The repository.
    pub repository: RepositoryPayload,
    /// The installation.
    #[serde(default)]
    pub installation: Option<InstallationRef>,
}

impl IssueCommentEvent {
    /// Whether the comment is on a pull request (the issue has a `pull_request` member).
    pub fn is_on_pull_request(&self) -> bool {
        self.issue.pull_request.is_some()
    }
}

/// A `pull_request_review` action Sortie handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReviewAction {
    /// A review was submitted.
    Submitted,
    /// A review was dismissed.
    Dismissed,
}

/// A review.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ReviewPayload {
    /// Its id.
    pub id: u64,
    /// Its author; `None` for a deleted account.
    pub user: Option<UserPayload>,
    /// `approved`, `changes_requested`, `commented` or `dismissed` (lowercase in payloads).
    pub state: String,
    /// The commit reviewed.
    #[serde(default)]
    pub commit_id: Option<String>,
}

/// The pull request of a review (the fields read).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ReviewedPull {
    /// Its number.
    pub number: u64,
    /// Its head.
    pub head: BranchPayload,
    /// Its base.
    pub base: BranchPayload,
}

/// A `pull_request_review` delivery.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PullRequestReviewEvent {
    /// What happened.
    pub action: ReviewAction,
    /// The review.
    pub review: ReviewPayload,
    /// The pull request.
    pub pull_request: ReviewedPull,
    /// The repository.
    pub repository: RepositoryPayload,
    /// The installation.
    #[serde(default)]
    pub installation: Option<InstallationRef>,
}

/// A `push` delivery.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PushEvent {
    /// The full ref pushed, `refs/heads/main`.
    #[serde(rename = "ref")]
    pub ref_name: String,
    /// The commit before.
    pub before: String,
    /// The commit after (all zeros when the ref was deleted).
    pub after: String,
    /// For a tag pushed with a branch, the branch's ref.
    #[serde(default)]
    pub base_ref: Option<String>,
    /// Whether the push deleted the ref.
    #[serde(default)]
    pub deleted: bool,
    /// The repository.
    pub repository: RepositoryPayload,
    /// The installation.
    #[serde(default)]
    pub installation: Option<InstallationRef>,
}

impl PushEvent {
    /// The branch pushed, when the ref is one (`refs/heads/<branch>`).
    pub fn branch(&self) -> Option<&str> {
        self.ref_name.strip_prefix("refs/heads/")
    }
}

/// A `ping` delivery.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PingEvent {
    /// GitHub's zen line.
    #[serde(default)]
    pub zen: String,
    /// The webhook's id.
    #[serde(default)]
    pub hook_id: Option<u64>,
}

/// An account an installation belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct AccountPayload {
    /// The login of the organisation or user.
    pub login: String,
}

/// The installation of an `installation` delivery.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct InstallationPayload {
    /// Its id.
    pub id: u64,
    /// Whose it is.
    pub account: AccountPayload,
}

/// A repository listed in an `installation` delivery.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct InstalledRepository {
    /// `owner/name`.
    pub full_name: String,
}

/// An `installation` delivery.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct InstallationEvent {
    /// `created`, `deleted`, `suspend`, `unsuspend` or `new_permissions_accepted`.
    pub action: String,
    /// The installation.
    pub installation: InstallationPayload,
    /// The repositories it covers, when listed.
    #[serde(default)]
    pub repositories: Option<Vec<InstalledRepository>>,
}

#[derive(Deserialize)]
struct Action {
    #[serde(default)]
    action: Option<serde_json::Value>,
}

/// Reads a delivery of event `event` (its `X-GitHub-Event` header).
pub fn parse(event: &str, body: &[u8]) -> Result<Event, GithubError> {
    let fail = |reason: String| GithubError::Webhook {
        event: event.chars().take(64).collect(),
        reason,
    };
    if body.len() > MAX_PAYLOAD_BYTES {
        return Err(fail(format!(
            "the payload is over {MAX_PAYLOAD_BYTES} bytes"
        )));
    }
    let action = serde_json::from_slice::<Action>(body)
        .map_err(|e| fail(e.to_string()))?
        .action
        .map(|a| match a {
            serde_json::Value::String(s) => s,
            other => other.to_string(),
        });
    let typed = |e: serde_json::Error| fail(e.to_string());
    let ignored = || Event::Ignored {
        event: event.chars().take(64).collect(),
        action: action.clone(),
    };
    let parsed = match (event, action.as_deref()) {
        ("pull_request", Some("opened" | "synchronize" | "reopened" | "closed")) => {
            Event::PullRequest(serde_json::from_slice(body).map_err(typed)?)
        }
        // Retitled, redescribed: nothing to do. Retargeted: the bound environments change.
        ("pull_request", Some("edited")) => {
            let e: PullRequestEvent = serde_json::from_slice(body).map_err(typed)?;
            if e.retargeted() {
                Event::PullRequest(e)
            } else {
                ignored()
            }
        }
        ("issue_comment", Some("created")) => {
            Event::IssueComment(serde_json::from_slice(body).map_err(typed)?)
        }
        ("pull_request_review", Some("submitted" | "dismissed")) => {
            Event::PullRequestReview(serde_json::from_slice(body).map_err(typed)?)
        }
        ("push", _) => Event::Push(serde_json::from_slice(body).map_err(typed)?),
        ("ping", _) => Event::Ping(serde_json::from_slice(body).map_err(typed)?),
        ("installation", Some(_)) => {
            Event::Installation(serde_json::from_slice(body).map_err(typed)?)
        }
        _ => ignored(),
    };
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn repo() -> serde_json::Value {
        json!({"id": 1296269, "full_name": "octocat/Hello-World", "name": "Hello-World"})
    }

    fn branch(r: &str, sha: &str) -> serde_json::Value {
        json!({"ref": r, "sha": sha, "repo": repo(), "label": format!("octocat:{r}")})
    }

    #[test]
    fn an_edit_is_read_only_when_it_moves_the_base() {
        let edited = |changes: serde_json::Value| {
            json!({
                "action": "edited", "number": 7, "changes": changes,
                "pull_request": {"number": 7, "state": "open", "draft": false,
                    "head": branch("topic", "h1"), "base": branch("release", "b2"),
                    "user": {"login": "octocat", "type": "User"}},
                "repository": repo()
            })
            .to_string()
        };
        let moved = parse(
            "pull_request",
            edited(json!({"base": {"ref": {"from": "main"}, "sha": {"from": "b1"}}})).as_bytes(),
        )
        .unwrap();
        let Event::PullRequest(e) = moved else {
            panic!("a retarget is a pull request's work: {moved:?}")
        };
        assert!(e.retargeted());
        assert_eq!(e.pull_request.base.ref_name, "release");
        for changes in [
            json!({"title": {"from": "old"}}),
            json!({"body": {"from": ""}}),
            json!({}),
        ] {
            let other = parse("pull_request", edited(changes.clone()).as_bytes()).unwrap();
            assert!(
                matches!(other, Event::Ignored { .. }),
                "{changes}: {other:?}"
            );
        }
    }

    #[test]
    fn a_merged_close_is_read_with_its_merge() {
        let body = json!({
            "action": "closed", "number": 7,
            "pull_request": {"number": 7, "state": "closed", "draft": false, "merged": true,
                "merge_commit_sha": "m1", "head": branch("topic", "h1"), "base": branch("main", "b1"),
                "user": {"login": "octocat", "type": "User"}},
            "repository": repo(), "installation": {"id": 9}
        });
        let Event::PullRequest(event) = parse("pull_request", body.to_string().as_bytes()).unwrap()
        else {
            panic!("a pull_request event")
        };
        assert_eq!(event.action, PullRequestAction::Closed);
        assert_eq!(event.pull_request.merged, Some(true));
        assert_eq!(event.pull_request.head.sha, "h1");
        assert_eq!(event.installation, Some(InstallationRef { id: 9 }));
    }

    #[test]
    fn unhandled_actions_and_events_are_ignored() {
        let labeled = json!({"action": "labeled", "number": 1});
        assert_eq!(
            parse("pull_request", labeled.to_string().as_bytes()).unwrap(),
            Event::Ignored {
                event: "pull_request".into(),
                action: Some("labeled".into())
            }
        );
        assert!(matches!(
            parse("star", b"{}").unwrap(),
            Event::Ignored { action: None, .. }
        ));
        let edited = json!({"action": "edited"});
        assert!(matches!(
            parse("issue_comment", edited.to_string().as_bytes()).unwrap(),
            Event::Ignored { .. }
        ));
    }

    #[test]
    fn a_comment_knows_whether_it_is_on_a_pull_request() {
        let mut body = json!({
            "action": "created",
            "issue": {"number": 3, "pull_request": {"url": "https://api.github.com/repos/o/r/pulls/3"}},
            "comment": {"id": 11, "body": "/sortie apply", "user": {"login": "alice", "type": "User"}},
            "repository": repo()
        });
        let Event::IssueComment(on_pull) =
            parse("issue_comment", body.to_string().as_bytes()).unwrap()
        else {
            panic!("an issue_comment")
        };
        assert!(on_pull.is_on_pull_request());
        assert_eq!(on_pull.comment.body, "/sortie apply");
        body["issue"]
            .as_object_mut()
            .unwrap()
            .remove("pull_request");
        let Event::IssueComment(on_issue) =
            parse("issue_comment", body.to_string().as_bytes()).unwrap()
        else {
            panic!("an issue_comment")
        };
        assert!(!on_issue.is_on_pull_request());
    }

    #[test]
    fn a_missing_field_is_named() {
        let body = json!({"action": "opened", "number": 1, "repository": repo()});
        let err = parse("pull_request", body.to_string().as_bytes())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("pull_request") && err.contains("missing field"),
            "{err}"
        );
    }

    #[test]
    fn a_push_names_its_branch() {
        let body =
            json!({"ref": "refs/heads/main", "before": "a", "after": "b", "repository": repo()});
        let Event::Push(push) = parse("push", body.to_string().as_bytes()).unwrap() else {
            panic!("a push")
        };
        assert_eq!(push.branch(), Some("main"));
    }

    #[test]
    fn an_oversized_payload_is_refused_unread() {
        let body = vec![b' '; MAX_PAYLOAD_BYTES + 1];
        assert!(parse("push", &body)
            .unwrap_err()
            .to_string()
            .contains("over"));
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(
            event in prop::sample::select(vec!["pull_request", "issue_comment", "pull_request_review", "push", "ping", "installation", "other"]),
            body in proptest::collection::vec(any::<u8>(), 0..512)
        ) {
            let _ = parse(event, &body);
        }

        #[test]
        fn json_of_any_shape_never_panics(
            event in prop::sample::select(vec!["pull_request", "issue_comment", "pull_request_review", "push", "ping", "installation"]),
            action in prop::sample::select(vec!["opened", "closed", "created", "submitted", "deleted", ""]),
            number in any::<i64>(),
            text in "\\PC{0,16}",
            depth in 0usize..200
        ) {
            let nested = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
            let body = format!(
                r#"{{"action":"{action}","number":{number},"ref":{text:?},"pull_request":{nested},"issue":{{"number":{number}}},"comment":{{"id":1,"body":{text:?},"user":{{"login":{text:?}}}}},"repository":{{"id":1,"full_name":{text:?}}}}}"#
            );
            let _ = parse(event, body.as_bytes());
        }
    }
}
