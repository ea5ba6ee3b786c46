//! A typed GitHub REST client for Sortie's GitHub App, and GitHub's webhook payloads.
//!
//! [`Github`] authenticates as the app (an RS256 JWT, [`Github::app_jwt`]), mints an
//! installation token per repository and per set of [`Permissions`]
//! ([`Github::repository_token`]; cached until shortly before it expires), and makes the
//! calls a pull request's plans and applies need: the pull request and its changed files,
//! reviews, comparisons, required checks, check runs, the one sticky comment. Every request
//! is bounded (a timeout, an answer-size cap, a bounded number of retries and pages) and
//! counted by endpoint ([`Github::calls`]). [`webhook::parse`] reads the events Sortie
//! handles.
//!
//! Written on hyper over `sortie-http`'s rustls connector, not octocrab: the functions'
//! zips stay small and the build short, and every documented rule this crate relies on is
//! cited where it is used. Its tests drive it against the GitHub double of
//! `sortie-testkit` (`sortie_testkit::github`), which enforces what GitHub documents.

mod auth;
mod client;
mod error;
mod transport;
mod types;
pub mod webhook;

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

pub use client::{Github, MAX_PAGES, MAX_PULL_FILES, PER_PAGE};
pub use error::GithubError;
pub use types::{
    ChangedFile, CheckConclusion, CheckOutput, CheckRunBody, CheckStatus, Comparison, Conditional,
    Pull, Review,
};

/// A GitHub App's identity: its id and the private key GitHub generated for it (PEM,
/// PKCS#1 `RSA PRIVATE KEY` as GitHub hands it out, or PKCS#8 `PRIVATE KEY`).
#[derive(Clone)]
pub struct AppCredentials {
    /// The app's id (the JWT's `iss`).
    pub app_id: u64,
    /// The app's private key, PEM. Never printed: [`fmt::Debug`] shows only its length.
    pub private_key_pem: String,
}

impl AppCredentials {
    /// Checks that `pem` is an RSA private key an App's JWTs can be signed with (PKCS#1 or
    /// PKCS#8 PEM); the error never quotes the key.
    pub fn check_private_key(pem: &str) -> Result<(), String> {
        auth::AppKey::from_pem(pem)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}

impl fmt::Debug for AppCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AppCredentials")
            .field("app_id", &self.app_id)
            .field(
                "private_key_pem",
                &format_args!("<redacted, {} bytes>", self.private_key_pem.len()),
            )
            .finish()
    }
}

/// A repository, `owner/name`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct RepoRef {
    /// The account (user or organisation) that owns it.
    pub owner: String,
    /// The repository's name.
    pub name: String,
}

/// The longest owner GitHub allows (39 characters) and a generous bound on a name (100).
const MAX_OWNER_CHARS: usize = 39;
const MAX_REPO_NAME_CHARS: usize = 100;

impl RepoRef {
    /// A repository from its parts, checked as [`RepoRef::parse`] checks them.
    pub fn new(owner: &str, name: &str) -> Result<Self, GithubError> {
        Self::parse(&format!("{owner}/{name}"))
    }

    /// `owner/name`: both parts present, ASCII letters, digits, `-`, `_` and `.` only (no
    /// `..`), the owner at most 39 characters and the name at most 100.
    pub fn parse(text: &str) -> Result<Self, GithubError> {
        let bad = |reason: &str| GithubError::InvalidRepository {
            value: text.chars().take(120).collect(),
            reason: reason.to_string(),
        };
        let (owner, name) = text
            .split_once('/')
            .ok_or_else(|| bad("expected owner/name"))?;
        for (part, what, max) in [
            (owner, "owner", MAX_OWNER_CHARS),
            (name, "name", MAX_REPO_NAME_CHARS),
        ] {
            if part.is_empty() {
                return Err(bad(&format!("the {what} is empty")));
            }
            if part.chars().count() > max {
                return Err(bad(&format!("the {what} is over {max} characters")));
            }
            if !part
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
                || part == "."
                || part.contains("..")
            {
                return Err(bad(&format!(
                    "the {what} may hold only letters, digits, '-', '_' and '.'"
                )));
            }
        }
        Ok(Self {
            owner: owner.to_string(),
            name: name.to_string(),
        })
    }
}

impl fmt::Display for RepoRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.owner, self.name)
    }
}

impl FromStr for RepoRef {
    type Err = GithubError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// One permission's level, as GitHub spells it in a `permissions` object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Access {
    /// `read`.
    Read,
    /// `write` (which includes read).
    Write,
}

/// The permissions an installation token is minted with: the few Sortie uses, each absent,
/// `read` or `write`. Serialised as GitHub's `permissions` object, absent ones left out
/// (<https://docs.github.com/en/rest/apps/apps#create-an-installation-access-token-for-an-app>).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Permissions {
    /// Repository contents (compare, tarballs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub contents: Option<Access>,
    /// Pull requests (reading them, their files and reviews; commenting on them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pull_requests: Option<Access>,
    /// Check runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checks: Option<Access>,
    /// Issues (issue comments, which pull requests share).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issues: Option<Access>,
    /// Commit statuses.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub statuses: Option<Access>,
    /// Administration (branch protection).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub administration: Option<Access>,
    /// Metadata (every app has read; rulesets for a branch).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Access>,
}

impl Permissions {
    /// No permission at all (what [`Default`] gives).
    pub const NONE: Self = Self {
        contents: None,
        pull_requests: None,
        checks: None,
        issues: None,
        statuses: None,
        administration: None,
        metadata: None,
    };

    /// Reading pull requests, their files and reviews.
    pub const PULLS_READ: Self = Self {
        pull_requests: Some(Access::Read),
        ..Self::NONE
    };
    /// Writing issue comments on pull requests (GitHub accepts pull requests write for them).
    pub const COMMENTS_WRITE: Self = Self {
        pull_requests: Some(Access::Write),
        ..Self::NONE
    };
    /// Reading contents (compare).
    pub const CONTENTS_READ: Self = Self {
        contents: Some(Access::Read),
        ..Self::NONE
    };
    /// Writing check runs.
    pub const CHECKS_WRITE: Self = Self {
        checks: Some(Access::Write),
        ..Self::NONE
    };
    /// Reading check runs and commit statuses.
    pub const CHECKS_READ: Self = Self {
        checks: Some(Access::Read),
        statuses: Some(Access::Read),
        ..Self::NONE
    };
    /// Reading branch protection and rulesets.
    pub const PROTECTION_READ: Self = Self {
        administration: Some(Access::Read),
        metadata: Some(Access::Read),
        ..Self::NONE
    };

    /// Each permission that is set, by GitHub's name, with its level.
    pub fn entries(&self) -> Vec<(&'static str, Access)> {
        [
            ("contents", self.contents),
            ("pull_requests", self.pull_requests),
            ("checks", self.checks),
            ("issues", self.issues),
            ("statuses", self.statuses),
            ("administration", self.administration),
            ("metadata", self.metadata),
        ]
        .into_iter()
        .filter_map(|(name, access)| access.map(|a| (name, a)))
        .collect()
    }
}

/// An installation access token: a bearer token for one installation's repositories and
/// permissions, valid until `expires_at` (GitHub: one hour).
#[derive(Clone, PartialEq, Eq)]
pub struct InstallationToken {
    /// The token itself. Never printed: [`fmt::Debug`] redacts it.
    pub token: String,
    /// When GitHub stops accepting it.
    pub expires_at: DateTime<Utc>,
}

impl fmt::Debug for InstallationToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InstallationToken")
            .field("token", &"<redacted>")
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_repository_parses_and_prints_back() {
        let repo = RepoRef::parse("acme/infra.live").unwrap();
        assert_eq!(repo.owner, "acme");
        assert_eq!(repo.name, "infra.live");
        assert_eq!(repo.to_string(), "acme/infra.live");
    }

    #[test]
    fn a_bad_repository_says_which_part_is_wrong() {
        for (text, needle) in [
            ("acme", "owner/name"),
            ("/x", "owner is empty"),
            ("acme/", "name is empty"),
            ("acme/a b", "name may hold"),
            ("acme/../x", "name may hold"),
            ("a/b/c", "name may hold"),
            (&format!("{}/x", "o".repeat(40)), "owner is over 39"),
        ] {
            let err = RepoRef::parse(text).unwrap_err().to_string();
            assert!(err.contains(needle), "{text}: {err}");
        }
    }

    #[test]
    fn permissions_serialise_as_githubs_object() {
        let json = serde_json::to_value(Permissions::CHECKS_READ).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"checks": "read", "statuses": "read"})
        );
        assert_eq!(
            serde_json::to_value(Permissions::NONE).unwrap(),
            serde_json::json!({})
        );
    }

    #[test]
    fn debug_output_never_shows_secrets() {
        let token = InstallationToken {
            token: "ghs_secretsecret".into(),
            expires_at: Utc::now(),
        };
        assert!(!format!("{token:?}").contains("secretsecret"));
        let creds = AppCredentials {
            app_id: 7,
            private_key_pem: "-----BEGIN RSA PRIVATE KEY-----\nMIIsecret".into(),
        };
        let shown = format!("{creds:?}");
        assert!(
            !shown.contains("MIIsecret") && shown.contains("app_id: 7"),
            "{shown}"
        );
    }

    proptest! {
        #[test]
        fn parse_never_panics_and_round_trips(text in "\\PC{0,80}") {
            if let Ok(repo) = RepoRef::parse(&text) {
                prop_assert_eq!(repo.to_string(), text);
            }
        }
    }
}
