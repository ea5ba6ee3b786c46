//! What a job is asked to do: its operation and the request that carries it with its
//! source ([`super::Source`]), variables and files, with their validation.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::document::parse_any;
use crate::limits;
use crate::problems::{key_path, Fields, Problems};
use crate::runner::check_secret_refs;
use crate::ValidationError;

use super::source::decode_source;
use super::Source;

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
