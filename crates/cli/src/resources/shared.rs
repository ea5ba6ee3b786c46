//! What the resource verbs share: ids and paths, the ETag read before a change, errors
//! with what to do next, and reading a YAML or JSON document.

use std::io::Read;
use std::path::Path;

use http::header::{HeaderName, IF_MATCH};
use serde_json::Value;

use crate::client::Answer;
use crate::exit::CliError;

/// `GROUP/NAME` split at its last `/`; a single segment is `("", NAME)` (the root group).
pub(super) fn split_last(id: &str) -> (&str, &str) {
    id.rsplit_once('/').unwrap_or(("", id))
}

/// An environment path as its `{environment}` parameter: without a leading or trailing
/// `/` (the endpoint encodes it as one segment).
pub(crate) fn env_param(path: &str) -> &str {
    path.trim_matches('/')
}

pub(super) fn shown_group(group: &str) -> &str {
    if group.is_empty() {
        "(root)"
    } else {
        group
    }
}

/// A 412 after our own read (the only conflict a PUT of a runner or a PATCH of an
/// environment answers): someone changed the resource in between.
pub(super) fn changed_meanwhile(e: CliError, what: &str, read_again: &str) -> CliError {
    match e {
        CliError::Conflict(m) => {
            CliError::Conflict(format!(
                "{what} was changed by someone else after it was read ({m}); read it again with `{read_again}` and retry"
            ))
        }
        other => other,
    }
}

/// `If-Match` with the ETag `current` was read with, when it had one.
pub(super) fn if_match(current: &Answer) -> Vec<(HeaderName, &str)> {
    current
        .etag
        .as_deref()
        .map(|etag| vec![(IF_MATCH, etag)])
        .unwrap_or_default()
}

/// A YAML or JSON file (`-` is standard input) and the content type it is sent with.
pub(super) fn read_document(path: &Path) -> Result<(&'static str, String), CliError> {
    let text = if path.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| CliError::Usage(format!("could not read standard input: {e}")))?;
        text
    } else {
        std::fs::read_to_string(path)
            .map_err(|e| CliError::Usage(format!("could not read {}: {e}", path.display())))?
    };
    let content_type = if serde_json::from_str::<Value>(&text).is_ok() {
        "application/json"
    } else {
        yaml_syntax(path, &text)?;
        "application/yaml"
    };
    Ok((content_type, text))
}

/// A YAML syntax error names the file, line and column (the API would name a field).
pub(super) fn yaml_syntax(path: &Path, text: &str) -> Result<(), CliError> {
    match serde_norway::from_str::<serde_norway::Value>(text) {
        Ok(_) => Ok(()),
        Err(e) => {
            let problem = e.to_string();
            let problem = problem
                .split(" at line ")
                .next()
                .unwrap_or(&problem)
                .to_string();
            let at = e
                .location()
                .map(|l| format!(" at line {}, column {}", l.line(), l.column()))
                .unwrap_or_default();
            Err(CliError::Usage(format!(
                "{}: not valid YAML or JSON{at}: {problem}",
                path.display()
            )))
        }
    }
}

/// A value's serde name (`passed`, `ecs-fargate`), for enums serialised as strings or
/// tagged with `type`.
pub(super) fn json_word<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(Value::String(s)) => s,
        Ok(Value::Object(o)) => o
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_string(),
        _ => "?".into(),
    }
}

pub(super) fn or_dash(s: String) -> String {
    if s.is_empty() {
        "-".into()
    } else {
        s
    }
}
