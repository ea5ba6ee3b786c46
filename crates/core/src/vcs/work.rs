//! The work a pull request makes, as the queue carries it: what a webhook said (after its
//! signature was verified and its payload read), a report to write again after a job
//! moved, or a reconcile. Host-neutral: the GitHub client makes these from GitHub's
//! payloads, and a GitLab one would make the same.

use serde::{Deserialize, Serialize};

use super::VcsProvider;

/// What happened to a pull request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PullAction {
    /// Opened.
    Opened,
    /// New commits on its head.
    Synchronize,
    /// Reopened.
    Reopened,
    /// Closed (merged or not).
    Closed,
}

/// One piece of pull-request work for the queue's handler.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PullWork {
    /// A pull request opened, moved, reopened or closed.
    PullRequest {
        /// The organisation whose connection received it.
        org: String,
        /// The host the work is on (`github` for work queued before GitLab came).
        #[serde(default)]
        provider: VcsProvider,
        /// `owner/name`.
        repository: String,
        /// The pull request.
        number: u64,
        /// What happened.
        action: PullAction,
        /// Its head commit.
        head_sha: String,
        /// True when it was closed by a merge.
        #[serde(default)]
        merged: bool,
    },
    /// A comment on a pull request: its commands only (a comment with none makes no work).
    Comment {
        /// The organisation.
        org: String,
        /// The host the work is on (`github` for work queued before GitLab came).
        #[serde(default)]
        provider: VcsProvider,
        /// `owner/name`.
        repository: String,
        /// The pull request.
        number: u64,
        /// The commenter's login.
        author: String,
        /// The comment's commands, read by [`super::command::parse_commands`] (which
        /// bounds them and ignores quoted and fenced lines).
        commands: Vec<super::command::Command>,
    },
    /// A review was submitted or dismissed: the requirements may hold now.
    Review {
        /// The organisation.
        org: String,
        /// The host the work is on (`github` for work queued before GitLab came).
        #[serde(default)]
        provider: VcsProvider,
        /// `owner/name`.
        repository: String,
        /// The pull request.
        number: u64,
    },
    /// A push to a branch (the base, after a merge).
    Push {
        /// The organisation.
        org: String,
        /// The host the work is on (`github` for work queued before GitLab came).
        #[serde(default)]
        provider: VcsProvider,
        /// `owner/name`.
        repository: String,
        /// The branch, without `refs/heads/`.
        branch: String,
        /// The commit it now points at.
        after: String,
    },
    /// Write the pull request's checks and comment again from its jobs (a job moved).
    Report {
        /// The organisation.
        org: String,
        /// The host the work is on (`github` for work queued before GitLab came).
        #[serde(default)]
        provider: VcsProvider,
        /// `owner/name`.
        repository: String,
        /// The pull request.
        number: u64,
    },
    /// Compare every bound repository's open pull requests with what Sortie recorded, and
    /// make good what lost webhooks missed (the schedule queues one per connection).
    Reconcile {
        /// The organisation.
        org: String,
        /// The host the work is on (`github` for work queued before GitLab came).
        #[serde(default)]
        provider: VcsProvider,
    },
}

impl PullWork {
    /// The organisation the work belongs to (its tenant).
    pub fn org(&self) -> &str {
        match self {
            Self::PullRequest { org, .. }
            | Self::Comment { org, .. }
            | Self::Review { org, .. }
            | Self::Push { org, .. }
            | Self::Report { org, .. }
            | Self::Reconcile { org, .. } => org,
        }
    }

    /// The host the work is on.
    pub fn provider(&self) -> VcsProvider {
        match self {
            Self::PullRequest { provider, .. }
            | Self::Comment { provider, .. }
            | Self::Review { provider, .. }
            | Self::Push { provider, .. }
            | Self::Report { provider, .. }
            | Self::Reconcile { provider, .. } => *provider,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_round_trips_with_its_kind() {
        let w = PullWork::Report {
            org: "acme".into(),
            provider: VcsProvider::Gitlab,
            repository: "acme/infra".into(),
            number: 7,
        };
        let text = serde_json::to_string(&w).unwrap();
        assert!(text.contains(r#""kind":"report""#), "{text}");
        assert_eq!(serde_json::from_str::<PullWork>(&text).unwrap(), w);
        assert_eq!((w.org(), w.provider()), ("acme", VcsProvider::Gitlab));
    }

    #[test]
    fn work_queued_before_gitlab_came_is_githubs() {
        let old = r#"{"kind":"reconcile","org":"acme"}"#;
        let w: PullWork = serde_json::from_str(old).unwrap();
        assert_eq!(w.provider(), VcsProvider::Github);
    }
}
