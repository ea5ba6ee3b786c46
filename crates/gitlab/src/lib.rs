//! A typed GitLab REST (v4) client for Sortie's merge requests, and GitLab's webhook
//! payloads, for GitLab.com and self-managed GitLab.
//!
//! [`Gitlab`] talks to one instance (`https://gitlab.com` or a self-managed host; the API is
//! under `/api/v4`) with one access token, sent in `PRIVATE-TOKEN` and never shown
//! ([`Secret`]). It makes the calls a merge request's plans and applies need: the open
//! merge requests into a branch, one merge request now (with how far it is behind its
//! target), its changed paths, its approvals (and those given at its head), the statuses on
//! its head, an external commit status per environment (through GitLab's state machine:
//! [`StatusOutcome`]), the one sticky note, replies, and a short-lived project access token
//! that can only read one project, for a job to download its source. Every request is bounded (a timeout, an
//! answer-size cap, a bounded number of retries and pages) and counted by endpoint
//! ([`Gitlab::calls`]). [`webhook::parse`] turns GitLab's webhook deliveries into Sortie's
//! host-neutral [`sortie_core::vcs::work::PullWork`].
//!
//! Projects are named by their full path ([`ProjectPath`], nested groups allowed), which the
//! API takes URL-encoded (`acme%2Fplatform%2Finfra`); [`ProjectPath::encoded`] is the one
//! place that encodes it.
//!
//! Written on hyper over `sortie-http`'s rustls connector, not a GitLab crate: the
//! functions' zips stay small and the build short, and every documented rule this crate
//! relies on is cited where it is used. Its tests drive it against the GitLab double of
//! `sortie-testkit` (`sortie_testkit::gitlab`), written from GitLab's documentation.

mod client;
mod error;
mod transport;
mod types;
pub mod webhook;

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

pub use client::{
    job_of_source_token, source_token_name, Gitlab, MAX_MR_FILES, MAX_NOTE_CHARS, MAX_PAGES,
    MAX_STATUS_TEXT_CHARS, PER_PAGE, SOURCE_TOKEN_ACCESS_LEVEL, SOURCE_TOKEN_MIN_LIFETIME,
    SOURCE_TOKEN_PREFIX, SOURCE_TOKEN_SCOPES,
};
pub use error::GitlabError;
pub use types::{
    Approvals, Approver, ChangedFile, ChangedFiles, CommitState, CommitStatus, CurrentUser,
    DiffSource, DiffVersion, HeldSourceToken, MergeRequest, MergeRequestState, Note, NoteAuthor,
    SourceGrant, SourceToken, StatusBody, StatusOutcome,
};

/// A secret (an access token): [`fmt::Debug`] never shows it, and nothing in this crate
/// prints, logs or puts it in an error.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps `value`.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself, to send it where it belongs.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// A project's full path, `namespace/project`, with any number of nested groups between
/// (`acme/platform/infra`): what webhooks call `path_with_namespace` and the API takes,
/// URL-encoded, as a project's `:id`
/// (<https://docs.gitlab.com/api/rest/#namespaced-paths>).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ProjectPath(String);

/// The most segments of a path: GitLab nests at most 20 subgroups under a top-level group
/// (<https://docs.gitlab.com/user/group/subgroups/>), and the project is one more.
const MAX_PATH_SEGMENTS: usize = 22;
/// A generous bound on one segment (GitLab's own is 255 characters).
const MAX_SEGMENT_CHARS: usize = 255;

impl ProjectPath {
    /// `group[/subgroup...]/project`: at least two segments and at most 22, each made of
    /// ASCII letters, digits, `_`, `-` and `.`, not starting with `-` or `.`, not ending in
    /// `.git` or `.atom`, at most 255 characters (GitLab's rules for paths).
    pub fn parse(text: &str) -> Result<Self, GitlabError> {
        let bad = |reason: &str| GitlabError::InvalidProject {
            value: text.chars().take(120).collect(),
            reason: reason.to_string(),
        };
        let segments: Vec<&str> = text.split('/').collect();
        if segments.len() < 2 {
            return Err(bad("expected namespace/project"));
        }
        if segments.len() > MAX_PATH_SEGMENTS {
            return Err(bad("more than 20 nested groups"));
        }
        for segment in &segments {
            if segment.is_empty() {
                return Err(bad("a segment is empty"));
            }
            if segment.chars().count() > MAX_SEGMENT_CHARS {
                return Err(bad("a segment is over 255 characters"));
            }
            if !segment
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            {
                return Err(bad(
                    "a segment may hold only letters, digits, '-', '_' and '.'",
                ));
            }
            if segment.starts_with(['-', '.']) || segment.contains("..") {
                return Err(bad(
                    "a segment may not start with '-' or '.', nor hold '..'",
                ));
            }
            if segment.ends_with(".git") || segment.ends_with(".atom") {
                return Err(bad("a segment may not end in .git or .atom"));
            }
        }
        Ok(Self(text.to_string()))
    }

    /// The path as GitLab shows it.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The path as the API's `:id`, URL-encoded: `acme%2Fplatform%2Finfra`.
    pub fn encoded(&self) -> String {
        encode(&self.0)
    }

    /// The project's own name, the last segment.
    pub fn name(&self) -> &str {
        self.0.rsplit('/').next().unwrap_or(&self.0)
    }

    /// The namespace (group, subgroups or user) the project is in.
    pub fn namespace(&self) -> &str {
        self.0.rsplit_once('/').map(|(ns, _)| ns).unwrap_or("")
    }
}

impl fmt::Display for ProjectPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for ProjectPath {
    type Err = GitlabError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl TryFrom<String> for ProjectPath {
    type Error = GitlabError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::parse(&value)
    }
}

impl From<ProjectPath> for String {
    fn from(value: ProjectPath) -> Self {
        value.0
    }
}

/// `text` as one path segment or query value: everything but RFC 3986's unreserved
/// characters percent-encoded (a `/` included). The one encoder of the crate.
pub(crate) fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_nested_path_is_encoded_in_one_segment() {
        let path = ProjectPath::parse("acme/platform/infra").unwrap();
        assert_eq!(path.encoded(), "acme%2Fplatform%2Finfra");
        assert_eq!(path.name(), "infra");
        assert_eq!(path.namespace(), "acme/platform");
        assert_eq!(path.to_string(), "acme/platform/infra");
        let dotted = ProjectPath::parse("my-group/infra.live_2").unwrap();
        assert_eq!(dotted.encoded(), "my-group%2Finfra.live_2");
    }

    #[test]
    fn a_bad_path_says_what_is_wrong() {
        let deep = vec!["g"; 23].join("/");
        for (text, needle) in [
            ("acme", "namespace/project"),
            ("/x", "segment is empty"),
            ("acme/", "segment is empty"),
            ("acme//x", "segment is empty"),
            ("acme/a b", "may hold only"),
            ("acme/../x", "may not start"),
            ("acme/-x", "may not start"),
            ("acme/x.git", ".git or .atom"),
            ("acme/x%2Fy", "may hold only"),
            (deep.as_str(), "20 nested groups"),
        ] {
            let err = ProjectPath::parse(text).unwrap_err().to_string();
            assert!(err.contains(needle), "{text}: {err}");
        }
        assert!(ProjectPath::parse(&vec!["g"; 22].join("/")).is_ok());
    }

    #[test]
    fn paths_round_trip_through_serde() {
        let path: ProjectPath = serde_json::from_str(r#""acme/infra""#).unwrap();
        assert_eq!(serde_json::to_string(&path).unwrap(), r#""acme/infra""#);
        assert!(serde_json::from_str::<ProjectPath>(r#""acme""#).is_err());
    }

    #[test]
    fn secrets_never_show_in_debug_output() {
        let secret = Secret::new("glpat-supersecret");
        assert_eq!(format!("{secret:?}"), "Secret(<redacted>)");
        assert_eq!(secret.expose(), "glpat-supersecret");
    }

    #[test]
    fn encoding_keeps_only_unreserved_characters() {
        assert_eq!(encode("feature/x y"), "feature%2Fx%20y");
        assert_eq!(encode("main"), "main");
        assert_eq!(encode("é"), "%C3%A9");
    }

    proptest! {
        #[test]
        fn parse_never_panics_and_round_trips(text in "\\PC{0,80}") {
            if let Ok(path) = ProjectPath::parse(&text) {
                prop_assert_eq!(path.to_string(), text);
                prop_assert!(!path.encoded().contains('/'));
            }
        }

        #[test]
        fn an_encoded_value_is_always_one_clean_segment(text in "\\PC{0,64}") {
            let encoded = encode(&text);
            prop_assert!(encoded.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~%".contains(&b)));
        }
    }
}
