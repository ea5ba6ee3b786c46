//! Where a job's configuration comes from ([`Source`]: git, S3, a GitHub commit or inline
//! files): its label, and the decoding and validation of a request's `source`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::request::file_path_problem;
use crate::limits;
use crate::problems::{Fields, Problems};
use crate::vcs::repository_problem;

/// Where a job's Terraform configuration comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Source {
    /// A git repository.
    Git {
        /// Clone URL (`https://`, `ssh://`, `git@host:` or, for local development, `file://`).
        url: String,
        /// Branch, tag or commit; the default branch when absent.
        #[serde(default, rename = "ref", skip_serializing_if = "Option::is_none")]
        git_ref: Option<String>,
        /// Directory inside the repository holding the configuration.
        #[serde(default)]
        path: String,
        /// A secret reference (ARN) for the clone credentials.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        credentials_secret: Option<String>,
    },
    /// A tar.gz archive in S3.
    S3 {
        /// Bucket.
        bucket: String,
        /// Object key.
        key: String,
        /// The archive's SHA-256, hex; the runner refuses an archive that does not match.
        sha256: String,
        /// Directory inside the archive holding the configuration.
        #[serde(default)]
        path: String,
    },
    /// No source: the configuration is made entirely of the job's `files`.
    Inline {
        /// True when the client chose the files itself, without being told which (the CLI's
        /// `run` with no `--source`). Such a job may not destroy: a destroy is refused at
        /// submit, and the runner refuses to apply a plan that destroys every resource and
        /// creates none.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        implicit: bool,
    },
    /// One commit of a GitHub repository (a pull request's head): the pilot downloads
    /// GitHub's tarball of that commit with the short-lived, read-only token the API gives
    /// it in the job spec (`source_access`).
    Github {
        /// The repository, `owner/name`.
        repository: String,
        /// The commit: a full SHA, 40 lowercase hexadecimal characters.
        commit: String,
        /// Directory inside the repository holding the configuration.
        #[serde(default)]
        path: String,
    },
    /// One commit of a GitLab project (a merge request's head): the pilot downloads
    /// GitLab's archive of that commit with the short-lived token, which can only read
    /// that project, that the API gives it in the job spec (`source_access`).
    Gitlab {
        /// The project's full path, `group/subgroup/project`.
        project: String,
        /// The commit: a full SHA, 40 lowercase hexadecimal characters.
        commit: String,
        /// Directory inside the project holding the configuration.
        #[serde(default)]
        path: String,
    },
}

impl Source {
    /// The source of one commit of `repository` on `provider` (a pull request's head or
    /// merge commit), the configuration in `path`.
    pub fn of_commit(
        provider: crate::vcs::VcsProvider,
        repository: &str,
        commit: &str,
        path: &str,
    ) -> Self {
        let (repository, commit, path) = (repository.into(), commit.into(), path.into());
        match provider {
            crate::vcs::VcsProvider::Github => Self::Github {
                repository,
                commit,
                path,
            },
            crate::vcs::VcsProvider::Gitlab => Self::Gitlab {
                project: repository,
                commit,
                path,
            },
        }
    }

    /// The host, repository and commit of a source that is one commit of a host's
    /// repository; `None` for any other.
    pub fn commit_of(&self) -> Option<(crate::vcs::VcsProvider, &str, &str)> {
        match self {
            Self::Github {
                repository, commit, ..
            } => Some((crate::vcs::VcsProvider::Github, repository, commit)),
            Self::Gitlab {
                project, commit, ..
            } => Some((crate::vcs::VcsProvider::Gitlab, project, commit)),
            _ => None,
        }
    }

    /// The inline source of files the client was told to send (`implicit: false`).
    pub fn inline() -> Self {
        Self::Inline { implicit: false }
    }

    /// True for an inline source whose files the client chose without being told which.
    pub fn is_implicit(&self) -> bool {
        matches!(self, Self::Inline { implicit: true })
    }

    /// The source in one short word or phrase, for tables and log lines: `inline`, `git
    /// <url>[//path][@ref]`, `s3://bucket/key[//path]`, or
    /// `github:owner/name@<short sha>[/path]` (the first [`SHORT_SHA_LEN`] characters of
    /// the commit).
    pub fn label(&self) -> String {
        let sub = |path: &str| {
            if path.is_empty() {
                String::new()
            } else {
                format!("//{path}")
            }
        };
        match self {
            Self::Inline { .. } => "inline".into(),
            Self::Git {
                url, git_ref, path, ..
            } => {
                let at = git_ref
                    .as_deref()
                    .map(|r| format!("@{r}"))
                    .unwrap_or_default();
                format!("git {url}{}{at}", sub(path))
            }
            Self::S3 {
                bucket, key, path, ..
            } => format!("s3://{bucket}/{key}{}", sub(path)),
            Self::Github {
                repository: project,
                commit,
                path,
            }
            | Self::Gitlab {
                project,
                commit,
                path,
            } => {
                let host = self.commit_of().map_or("", |(p, ..)| p.as_str());
                let short: String = commit.chars().take(SHORT_SHA_LEN).collect();
                match path.trim_matches('/') {
                    "" => format!("{host}:{project}@{short}"),
                    path => format!("{host}:{project}@{short}/{path}"),
                }
            }
        }
    }
}

/// How many characters of a commit SHA a label shows (GitHub's own abbreviation).
pub const SHORT_SHA_LEN: usize = 7;

/// True for a full commit SHA as GitHub writes it: 40 lowercase hexadecimal characters.
fn is_full_commit_sha(commit: &str) -> bool {
    commit.len() == 40
        && commit
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Refuses a value git would read as an option (a leading `-`), or that has whitespace or
/// control characters.
fn git_argument_problem(v: &str) -> Option<&'static str> {
    if v.starts_with('-') {
        Some("must not start with `-`")
    } else if limits::has_space_or_control(v) {
        Some("must not contain whitespace or control characters")
    } else {
        None
    }
}

/// The optional `path` of a source: empty, or a relative path without `..`.
fn decode_source_path(f: &mut Fields<'_>, p: &mut Problems) -> String {
    let path: String = f.optional("path", p).unwrap_or_default();
    if !path.is_empty() {
        if let Some(problem) = file_path_problem(&path) {
            p.push("source.path", problem);
        }
    }
    path
}

pub(super) fn decode_source(value: &Value, p: &mut Problems) -> Option<Source> {
    let mut f = Fields::new(value, "source", p)?;
    let t: String = f.required("type", p)?;
    let out = match t.as_str() {
        "git" => {
            let url = f.required_str("url", p);
            if let Some(u) = &url {
                if let Some(problem) = crate::urls::git_url_problem(u) {
                    p.push("source.url", problem);
                } else if let Some(problem) = git_argument_problem(u) {
                    p.push("source.url", problem);
                }
            }
            let git_ref: Option<String> = f.optional("ref", p);
            if let Some(problem) = git_ref.as_deref().and_then(|r| {
                if r.is_empty() {
                    Some("must not be empty when set")
                } else {
                    git_argument_problem(r)
                }
            }) {
                p.push("source.ref", problem);
            }
            let path = decode_source_path(&mut f, p);
            let credentials_secret: Option<String> = f.optional("credentials_secret", p);
            if let Some(c) = &credentials_secret {
                if !limits::is_secret_ref(c) {
                    p.push(
                        "source.credentials_secret",
                        "must be the ARN of a Secrets Manager secret or SSM parameter",
                    );
                }
            }
            url.map(|url| Source::Git {
                url,
                git_ref,
                path,
                credentials_secret,
            })
        }
        "s3" => {
            let bucket = f.required_str("bucket", p);
            if let Some(why) = bucket.as_deref().and_then(limits::bucket_name_problem) {
                p.push(
                    "source.bucket",
                    format!("is not a valid S3 bucket name: it {why}"),
                );
            }
            let key = f.required_str("key", p);
            if let Some(why) = key.as_deref().and_then(limits::object_key_problem) {
                p.push(
                    "source.key",
                    format!("is not a valid S3 object key: it {why}"),
                );
            }
            let sha256 = f.required_str("sha256", p);
            if let Some(s) = &sha256 {
                if s.len() != 64 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
                    p.push("source.sha256", "must be 64 hexadecimal characters");
                }
            }
            let path = decode_source_path(&mut f, p);
            match (bucket, key, sha256) {
                (Some(bucket), Some(key), Some(sha256)) => Some(Source::S3 {
                    bucket,
                    key,
                    sha256,
                    path,
                }),
                _ => None,
            }
        }
        "github" => {
            let repository = f.required_str("repository", p);
            if let Some(problem) = repository.as_deref().and_then(repository_problem) {
                p.push("source.repository", problem);
            }
            let commit = f.required_str("commit", p);
            if commit.as_deref().is_some_and(|c| !is_full_commit_sha(c)) {
                p.push(
                    "source.commit",
                    "must be a full commit SHA: 40 lowercase hexadecimal characters",
                );
            }
            let path = decode_source_path(&mut f, p);
            match (repository, commit) {
                (Some(repository), Some(commit)) => Some(Source::Github {
                    repository,
                    commit,
                    path,
                }),
                _ => None,
            }
        }
        "gitlab" => {
            let repository = f.required_str("project", p);
            if let Some(problem) = repository
                .as_deref()
                .and_then(crate::vcs::gitlab_project_problem)
            {
                p.push("source.project", problem);
            }
            let commit = f.required_str("commit", p);
            if commit.as_deref().is_some_and(|c| !is_full_commit_sha(c)) {
                p.push(
                    "source.commit",
                    "must be a full commit SHA: 40 lowercase hexadecimal characters",
                );
            }
            let path = decode_source_path(&mut f, p);
            match (repository, commit) {
                (Some(repository), Some(commit)) => Some(Source::Gitlab {
                    project: repository,
                    commit,
                    path,
                }),
                _ => None,
            }
        }
        "inline" => {
            let implicit: Option<bool> = f.optional("implicit", p);
            Some(Source::Inline {
                implicit: implicit.unwrap_or(false),
            })
        }
        other => {
            p.push(
                "source.type",
                format!(
                    "`{other}` is not a known source type; known types: git, s3, github, gitlab, inline"
                ),
            );
            return None;
        }
    };
    f.finish(p);
    out
}

#[cfg(test)]
mod github_source_tests {
    use super::*;
    use crate::job::JobRequest;
    use crate::ValidationError;
    use proptest::prelude::*;

    const SHA: &str = "0123456789abcdef0123456789abcdef01234567";

    fn parse(source: serde_json::Value) -> Result<JobRequest, ValidationError> {
        JobRequest::from_value(&serde_json::json!({"operation": "plan", "source": source}))
    }

    fn problem_paths(e: &ValidationError) -> Vec<&str> {
        e.problems.iter().map(|p| p.path.as_str()).collect()
    }

    #[test]
    fn a_github_source_travels_with_its_tag_and_a_default_path() {
        let request = parse(serde_json::json!(
            {"type": "github", "repository": "acme-corp/infra.live", "commit": SHA, "path": "stacks/app"}
        ))
        .unwrap();
        assert_eq!(
            request.source,
            Source::Github {
                repository: "acme-corp/infra.live".into(),
                commit: SHA.into(),
                path: "stacks/app".into(),
            }
        );
        let json = serde_json::to_value(&request.source).unwrap();
        assert_eq!(json["type"], "github");
        let back: Source = serde_json::from_value(
            serde_json::json!({"type": "github", "repository": "o/r", "commit": SHA}),
        )
        .unwrap();
        assert!(matches!(back, Source::Github { ref path, .. } if path.is_empty()));
    }

    #[test]
    fn a_github_source_is_labelled_with_its_short_sha_and_path() {
        let source = |path: &str| Source::Github {
            repository: "acme/infra".into(),
            commit: SHA.into(),
            path: path.into(),
        };
        assert_eq!(source("").label(), "github:acme/infra@0123456");
        assert_eq!(
            source("stacks/app").label(),
            "github:acme/infra@0123456/stacks/app"
        );
        assert_eq!(Source::inline().label(), "inline");
    }

    #[test]
    fn each_bad_field_of_a_github_source_is_named() {
        let cases = [
            (
                serde_json::json!({"type": "github", "repository": "acme", "commit": SHA}),
                "source.repository",
            ),
            (
                serde_json::json!({"type": "github", "repository": "acme/infra", "commit": SHA.to_uppercase()}),
                "source.commit",
            ),
            (
                serde_json::json!({"type": "github", "repository": "acme/infra", "commit": "0123456"}),
                "source.commit",
            ),
            (
                serde_json::json!({"type": "github", "repository": "acme/infra", "commit": SHA, "path": "../x"}),
                "source.path",
            ),
            (
                serde_json::json!({"type": "github", "repository": "acme/infra", "commit": SHA, "path": "/etc"}),
                "source.path",
            ),
            (
                serde_json::json!({"type": "github", "commit": SHA}),
                "source.repository",
            ),
            (
                serde_json::json!({"type": "github", "repository": "acme/infra"}),
                "source.commit",
            ),
            (
                serde_json::json!({"type": "github", "repository": "acme/infra", "commit": SHA, "ref": "main"}),
                "source.ref",
            ),
        ];
        for (source, path) in cases {
            let e = parse(source.clone()).unwrap_err();
            assert_eq!(problem_paths(&e), [path], "{source}: {e}");
        }
    }

    #[test]
    fn repository_names_follow_githubs_rules() {
        for good in [
            "a/b",
            "acme/infra",
            "a-b-c/x.y_z-1",
            "Acme1/.github",
            "o/..x",
            &format!("{}/{}", "a".repeat(39), "b".repeat(100)),
        ] {
            assert_eq!(repository_problem(good), None, "{good}");
        }
        for bad in [
            "",
            "acme",
            "/infra",
            "acme/",
            "a/b/c",
            "-acme/infra",
            "acme-/infra",
            "ac--me/infra",
            "ac_me/infra",
            "ac.me/infra",
            "acme/.",
            "acme/..",
            "acme/in fra",
            "acme/in+fra",
            &format!("{}/b", "a".repeat(40)),
            &format!("a/{}", "b".repeat(101)),
        ] {
            assert!(repository_problem(bad).is_some(), "{bad:?} was accepted");
        }
    }

    proptest! {
        /// Any owner of 1-39 alphanumerics with single inner hyphens and any name of 1-100
        /// allowed characters (other than `.` and `..`) is accepted.
        #[test]
        fn every_well_formed_repository_is_accepted(
            parts in proptest::collection::vec("[A-Za-z0-9]{1,6}", 1..6),
            name in "[A-Za-z0-9._-]{1,100}",
        ) {
            let owner: String = parts.join("-").chars().take(39).collect();
            let owner = owner.trim_end_matches('-').to_string();
            prop_assume!(name != "." && name != "..");
            prop_assert_eq!(repository_problem(&format!("{owner}/{name}")), None);
        }

        /// A character outside GitHub's alphabets anywhere makes the repository refused.
        #[test]
        fn a_stray_character_is_refused(
            owner in "[a-z0-9]{1,10}",
            name in "[a-z0-9]{1,10}",
            bad in "[^A-Za-z0-9._/-]",
            at_owner in any::<bool>(),
        ) {
            let repository = if at_owner {
                format!("{owner}{bad}/{name}")
            } else {
                format!("{owner}/{name}{bad}")
            };
            prop_assert!(repository_problem(&repository).is_some(), "{}", repository);
        }

        /// Only 40 lowercase hex characters are a commit.
        #[test]
        fn only_full_lowercase_shas_are_commits(commit in "[0-9a-fA-Fg]{0,45}") {
            let expected = commit.len() == 40
                && commit.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
            prop_assert_eq!(is_full_commit_sha(&commit), expected);
        }
    }
}
