//! The provider's one error type, and its form as Terraform diagnostics.

use crate::proto::tfplugin6 as pb;
use crate::schema;

/// One field problem of the API's 400 answer: the field's path and the problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldProblem {
    /// The API's path of the field (`labels.team`, `runner_configuration.cluster`).
    pub path: String,
    /// What is wrong with it, in the API's words.
    pub problem: String,
}

/// Everything that can go wrong in the provider.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A value Terraform sent could not be read.
    #[error("{0}")]
    Value(String),
    /// The provider's configuration is incomplete or wrong.
    #[error("{0}")]
    Config(String),
    /// The configuration of a resource is wrong (found before the API is asked).
    #[error("{attribute}: {problem}")]
    Invalid {
        /// The attribute, dotted through nested blocks.
        attribute: String,
        /// What is wrong with it.
        problem: String,
    },
    /// The API answered with an error.
    #[error("the Sortie API answered {status} ({code}): {message}")]
    Api {
        /// The HTTP status.
        status: u16,
        /// The API's error code (`invalid_request`, `version_mismatch`, ...).
        code: String,
        /// The API's message.
        message: String,
        /// Its field problems.
        fields: Vec<FieldProblem>,
    },
    /// The API could not be reached.
    #[error("could not reach the Sortie API: {0}")]
    Transport(String),
}

impl Error {
    /// True for the API's 404.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::Api { status: 404, .. })
    }

    /// The error as diagnostics: one per field problem of a 400 (naming the attribute,
    /// mapped by `attribute_of`), else one.
    pub fn diagnostics(
        &self,
        attribute_of: &dyn Fn(&str) -> Option<String>,
    ) -> Vec<pb::Diagnostic> {
        match self {
            Error::Api { status: 412, message, .. } => vec![error(
                "The object was changed outside Terraform since it was read",
                &format!(
                    "{message}. Sortie refused the update (its ETag no longer matches), so nothing was overwritten: run `terraform plan` or `terraform apply` again to see and reconcile the change."
                ),
                None,
            )],
            Error::Api { fields, message, .. } if !fields.is_empty() => fields
                .iter()
                .map(|f| {
                    let attribute = attribute_of(&f.path);
                    let summary = match &attribute {
                        Some(a) => format!("Invalid `{a}`: {}", f.problem),
                        None => format!("Invalid `{}`: {}", f.path, f.problem),
                    };
                    error(&summary, message, attribute.as_deref())
                })
                .collect(),
            Error::Invalid { attribute, problem } => vec![error(
                &format!("Invalid `{attribute}`: {problem}"),
                problem,
                Some(attribute),
            )],
            other => vec![error(&other.to_string(), "", None)],
        }
    }
}

/// An error diagnostic, on `attribute` when given.
pub fn error(summary: &str, detail: &str, attribute: Option<&str>) -> pb::Diagnostic {
    pb::Diagnostic {
        severity: pb::diagnostic::Severity::Error as i32,
        summary: summary.to_string(),
        detail: detail.to_string(),
        attribute: attribute.map(schema::path),
    }
}
