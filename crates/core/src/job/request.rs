//! What a job is asked to do: its operation, its source and the request that carries
//! them, with their validation.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::document::parse_any;
use crate::limits;
use crate::problems::{key_path, Fields, Problems};
use crate::runner::check_secret_refs;
use crate::ValidationError;

/// What a job does to its environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    /// `terraform plan`: reads state, writes nothing.
    Plan,
    /// `terraform apply`.
    Apply,
    /// `terraform destroy`.
    Destroy,
}

impl Operation {
    /// True for operations that write state, which must never be re-run blindly.
    pub fn writes_state(self) -> bool {
        !matches!(self, Self::Plan)
    }

    /// The lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Plan => "plan",
            Self::Apply => "apply",
            Self::Destroy => "destroy",
        }
    }
}

/// The indefinite article for `word` as it is spelled: `an` before a vowel (`an apply`,
/// `an outputs upload`), `a` otherwise (`a plan`, `a destroy`).
pub fn a_or_an(word: &str) -> &'static str {
    match word.chars().next().map(|c| c.to_ascii_lowercase()) {
        Some('a' | 'e' | 'i' | 'o' | 'u') => "an",
        _ => "a",
    }
}

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
}

impl Source {
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
                repository,
                commit,
                path,
            } => {
                let short: String = commit.chars().take(SHORT_SHA_LEN).collect();
                match path.trim_matches('/') {
                    "" => format!("github:{repository}@{short}"),
                    path => format!("github:{repository}@{short}/{path}"),
                }
            }
        }
    }
}

/// How many characters of a commit SHA a label shows (GitHub's own abbreviation).
pub const SHORT_SHA_LEN: usize = 7;

/// The longest GitHub user or organisation name.
const GITHUB_OWNER_MAX: usize = 39;

/// The longest GitHub repository name.
const GITHUB_REPOSITORY_NAME_MAX: usize = 100;

/// Why `repository` is not a GitHub `owner/name`, or `None`. The owner (a user or an
/// organisation) is 1 to 39 ASCII letters, digits or single hyphens, neither first nor
/// last; the name is 1 to 100 of `A-Z a-z 0-9 . _ -`, and neither `.` nor `..`.
// Kept private: the `vcs` module has the same rule, and the two become one at integration.
fn repository_problem(repository: &str) -> Option<String> {
    let Some((owner, name)) = repository.split_once('/') else {
        return Some("must be `owner/name`".into());
    };
    if name.contains('/') {
        return Some("must be `owner/name`, with exactly one `/`".into());
    }
    let owner_ok = (1..=GITHUB_OWNER_MAX).contains(&owner.len())
        && owner
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        && !owner.starts_with('-')
        && !owner.ends_with('-')
        && !owner.contains("--");
    if !owner_ok {
        return Some(format!(
            "has owner `{owner}`: a GitHub owner is 1 to {GITHUB_OWNER_MAX} letters, digits or single hyphens, not starting or ending with a hyphen"
        ));
    }
    let name_ok = (1..=GITHUB_REPOSITORY_NAME_MAX).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        && name != "."
        && name != "..";
    if !name_ok {
        return Some(format!(
            "has name `{name}`: a GitHub repository name is 1 to {GITHUB_REPOSITORY_NAME_MAX} letters, digits, `.`, `_` or `-`, and not `.` or `..`"
        ));
    }
    None
}

/// True for a full commit SHA as GitHub writes it: 40 lowercase hexadecimal characters.
fn is_full_commit_sha(commit: &str) -> bool {
    commit.len() == 40
        && commit
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// What a client submits: the job's specification.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobRequest {
    /// Plan, apply or destroy.
    pub operation: Operation,
    /// Where the configuration comes from.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Source>, required = false))]
    pub source: Source,
    /// Terraform variables, written to `terraform.tfvars.json`.
    #[serde(default)]
    pub variables: BTreeMap<String, Value>,
    /// Extra files by relative path, written over the source.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub files: BTreeMap<String, String>,
    /// Secret references (ARNs) by environment variable name.
    #[serde(default)]
    pub secret_refs: BTreeMap<String, String>,
    /// Sensitive Terraform variables. A client submits each value by name; the API keeps it
    /// in Secrets Manager for the job's life, the pilot gives it to terraform as
    /// `TF_VAR_<name>`, and it is never stored in the job, logged or returned. The stored
    /// job holds each name with an empty reference, its values being in the job's one
    /// secret ([`JobRequest::sensitive_secret`]), or, submitted before that, with its own
    /// secret's ARN ([`crate::sensitive`]); the API shows each name with `(sensitive)`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[cfg_attr(feature = "openapi", schema(value_type = BTreeMap<String, String>, format = Password, write_only))]
    pub sensitive_variables: BTreeMap<String, String>,
    /// The ARN of the job's one secret holding every sensitive value (the API's, never a
    /// client's; never shown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(ignore))]
    pub sensitive_secret: Option<String>,
}

/// Largest total size of a job's inline files, in bytes.
pub const MAX_FILES_BYTES: usize = 128 * 1024;

impl JobRequest {
    /// Parses a job request from YAML or JSON and validates it, reporting every problem.
    pub fn parse(text: &str) -> Result<Self, ValidationError> {
        Self::from_value(&parse_any(text)?)
    }

    /// Decodes and validates a parsed job request.
    pub fn from_value(value: &Value) -> Result<Self, ValidationError> {
        let mut p = Problems::default();
        let Some(mut f) = Fields::new(value, "", &mut p) else {
            return Err(ValidationError { problems: p.0 });
        };
        let operation: Option<Operation> = f.required("operation", &mut p);
        let source = match f.raw("source") {
            Some(v) => decode_source(v, &mut p),
            None => Some(Source::inline()),
        };
        let variables: BTreeMap<String, Value> =
            f.optional("variables", &mut p).unwrap_or_default();
        for (name, value) in &variables {
            let path = key_path("variables", name);
            if name.is_empty() {
                p.push(&path, "a variable name must not be empty");
            }
            limits::check_dynamodb_value(
                value,
                &path,
                limits::JOB_VARIABLE_ENCLOSING_LEVELS,
                &mut p,
            );
        }
        let files: BTreeMap<String, String> = f.optional("files", &mut p).unwrap_or_default();
        let mut total = 0;
        for (path, content) in &files {
            total += content.len();
            if let Some(problem) = file_path_problem(path) {
                p.push(key_path("files", path), problem);
            }
        }
        if total > MAX_FILES_BYTES {
            p.push("files", format!("total {total} bytes is over the {MAX_FILES_BYTES}-byte limit; use a source instead"));
        }
        let secret_refs: BTreeMap<String, String> =
            f.optional("secret_refs", &mut p).unwrap_or_default();
        check_secret_refs(&secret_refs, "secret_refs", &mut p);
        let refs_size = serde_json::to_string(&secret_refs)
            .map(|j| limits::json_string_len(&j))
            .unwrap_or(usize::MAX);
        if refs_size > limits::JOB_SECRET_REFS_MAX {
            p.push(
                "secret_refs",
                format!(
                    "take {refs_size} characters in the runner's environment; at most {} are allowed (ECS container overrides are limited to {})",
                    limits::JOB_SECRET_REFS_MAX,
                    limits::ECS_OVERRIDES_MAX
                ),
            );
        }
        f.finish(&mut p);
        if let (Some(Operation::Destroy), Some(Source::Inline { implicit: true })) =
            (operation, &source)
        {
            p.push(
                "source.implicit",
                "a destroy needs an explicit source: name the configuration to destroy (the CLI's `--source DIR`)",
            );
        }
        if matches!(source, Some(Source::Inline { .. })) && files.is_empty() && p.is_empty() {
            p.push(
                "source",
                "is required unless the configuration is given inline in `files`",
            );
        }
        match (operation, source) {
            (Some(operation), Some(source)) if p.is_empty() => {
                let request = Self {
                    operation,
                    source,
                    variables,
                    files,
                    secret_refs,
                    sensitive_variables: BTreeMap::new(),
                    sensitive_secret: None,
                };
                let size = request.item_size();
                if size > limits::JOB_REQUEST_ITEM_MAX {
                    p.push(
                        "",
                        format!(
                            "the job takes about {size} bytes in DynamoDB (variables, files, source and secret references); at most {} are allowed within DynamoDB's {}-byte item",
                            limits::JOB_REQUEST_ITEM_MAX,
                            limits::DYNAMODB_ITEM_MAX
                        ),
                    );
                }
                p.finish(request)
            }
            _ => Err(ValidationError { problems: p.0 }),
        }
    }

    /// The estimated DynamoDB size of this request's attributes in its job item (see
    /// [`limits::dynamodb_item_size`]).
    pub fn item_size(&self) -> usize {
        serde_json::to_value(self)
            .map(|v| limits::dynamodb_item_size(&v))
            .unwrap_or(usize::MAX)
    }
}

/// Why `path` is not a job file name Sortie accepts, or `None`: a relative path inside
/// the working directory (no `..`, `.` or empty segment, no `\`), without control
/// characters, each segment at most [`limits::FILE_NAME_SEGMENT_MAX`] bytes and the whole
/// at most [`limits::FILE_PATH_MAX`].
pub fn file_path_problem(path: &str) -> Option<String> {
    if path.is_empty() {
        return Some("a file name must not be empty".into());
    }
    if limits::has_control(path) {
        return Some("a file name must not contain control characters".into());
    }
    if !is_relative_safe_path(path) {
        return Some("must be a relative path inside the working directory, without `..`".into());
    }
    if path.len() > limits::FILE_PATH_MAX
        || path
            .split('/')
            .any(|s| s.len() > limits::FILE_NAME_SEGMENT_MAX)
    {
        return Some(format!(
            "must be at most {} bytes, each segment at most {}",
            limits::FILE_PATH_MAX,
            limits::FILE_NAME_SEGMENT_MAX
        ));
    }
    None
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

/// True for a relative path that stays inside its base directory.
pub fn is_relative_safe_path(path: &str) -> bool {
    !path.is_empty()
        && !path.starts_with('/')
        && !path.contains('\\')
        && !path.contains('\0')
        && path
            .split('/')
            .all(|s| !s.is_empty() && s != ".." && s != ".")
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

fn decode_source(value: &Value, p: &mut Problems) -> Option<Source> {
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
                    "`{other}` is not a known source type; known types: git, s3, github, inline"
                ),
            );
            return None;
        }
    };
    f.finish(p);
    out
}

#[cfg(test)]
mod implicit_source_tests {
    use super::*;

    #[test]
    fn the_article_follows_the_first_letter() {
        assert_eq!(a_or_an("apply"), "an");
        assert_eq!(a_or_an("outputs"), "an");
        assert_eq!(a_or_an("Error"), "an");
        assert_eq!(a_or_an("plan"), "a");
        assert_eq!(a_or_an("destroy"), "a");
        assert_eq!(a_or_an(""), "a");
    }

    #[test]
    fn an_inline_source_may_be_marked_implicit_and_then_may_not_destroy() {
        let parse = |op: &str, source: &str| {
            JobRequest::parse(&format!(
                r#"{{"operation":"{op}","source":{source},"files":{{"main.tf":"output \"x\" {{ value = 1 }}"}}}}"#
            ))
        };
        let apply = parse("apply", r#"{"type":"inline","implicit":true}"#).unwrap();
        assert_eq!(apply.source, Source::Inline { implicit: true });
        assert!(apply.source.is_implicit());
        // It travels as `implicit: true`, and an explicit one as a plain inline source.
        let json = serde_json::to_value(&apply.source).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"type": "inline", "implicit": true})
        );
        let plain = parse("apply", r#"{"type":"inline"}"#).unwrap();
        assert_eq!(plain.source, Source::inline());
        assert!(!plain.source.is_implicit());
        assert_eq!(
            serde_json::to_value(&plain.source).unwrap(),
            serde_json::json!({"type": "inline"})
        );
        let back: Source = serde_json::from_value(serde_json::json!({"type": "inline"})).unwrap();
        assert_eq!(back, Source::inline());

        let e = parse("destroy", r#"{"type":"inline","implicit":true}"#).unwrap_err();
        assert_eq!(e.problems.len(), 1, "{e}");
        assert_eq!(e.problems[0].path, "source.implicit");
        assert!(e.problems[0].problem.contains("explicit source"), "{e}");
        assert!(parse("destroy", r#"{"type":"inline","implicit":false}"#).is_ok());
        let e = parse("apply", r#"{"type":"inline","implicit":"yes"}"#).unwrap_err();
        assert_eq!(e.problems[0].path, "source.implicit", "{e}");
        let e = parse(
            "apply",
            r#"{"type":"git","url":"https://h/r.git","implicit":true}"#,
        )
        .unwrap_err();
        assert_eq!(e.problems[0].path, "source.implicit", "{e}");
    }
}

#[cfg(test)]
mod github_source_tests {
    use super::*;
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
