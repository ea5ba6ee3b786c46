//! The pilot's one error type. Its `Display` is the one-line reason written
//! as the last line of a failed job's log (after `sortie-pilot: `).

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum PilotError {
    /// The pilot's own environment is missing or malformed.
    #[error("configuration error: {0}")]
    Config(String),
    /// The API could not be reached, or refused the request.
    #[error("{0}")]
    Api(String),
    /// The job spec asks for something this pilot cannot do (an apply phase without a
    /// saved plan, a version it cannot read).
    #[error("{0}")]
    Spec(String),
    /// The saved plan of a reviewed job's apply phase could not be downloaded or written.
    #[error("{0}")]
    SavedPlan(String),
    /// The job's source could not be fetched or laid out.
    #[error("{0}")]
    Source(String),
    /// An S3 archive's SHA-256 differs from the one in the job spec.
    #[error("checksum mismatch for s3://{bucket}/{key}: the job spec says sha256 {expected}, the archive has {actual}")]
    Checksum {
        /// Archive bucket.
        bucket: String,
        /// Archive key.
        key: String,
        /// The SHA-256 the spec asked for.
        expected: String,
        /// The SHA-256 of what was downloaded.
        actual: String,
    },
    /// The work directory could not be prepared (files, variables, backend).
    #[error("{0}")]
    Workspace(String),
    /// Terraform or OpenTofu could not be found, started or understood.
    #[error("{0}")]
    Tool(String),
    /// The job would empty an environment by accident, and was refused ([`crate::guard`]).
    #[error("{0}")]
    Refused(String),
    /// A Terraform or OpenTofu command exited unsuccessfully.
    #[error("{tool} {command} failed with exit code {code}{}", first_error.as_ref().map(|e| format!(": {e}")).unwrap_or_default())]
    Terraform {
        /// `terraform` or `tofu`.
        tool: String,
        /// The subcommand, e.g. `apply`.
        command: String,
        /// The exit code, or `signal` text when it was killed.
        code: String,
        /// The first error of its output, whole (its `Error:` block), if any.
        first_error: Option<String>,
    },
}

impl PilotError {
    /// The reason on a single line, with every run of whitespace collapsed to one space,
    /// scrubbed first of the process's secrets ([`crate::scrub::Secrets::process`]: a
    /// reason may quote Terraform's first error, which may quote a value, and collapsing
    /// first would hide a multi-line value from the scrubber).
    pub fn reason(&self) -> String {
        one_line(&crate::scrub::Secrets::process().scrub_str(&self.to_string()))
    }
}

pub use sortie_http::one_line;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terraform_failure_reads_as_one_line_with_the_first_error() {
        let e = PilotError::Terraform {
            tool: "terraform".into(),
            command: "apply".into(),
            code: "1".into(),
            first_error: Some("Error: Unsupported argument".into()),
        };
        assert_eq!(
            e.reason(),
            "terraform apply failed with exit code 1: Error: Unsupported argument"
        );
        let e = PilotError::Terraform {
            tool: "tofu".into(),
            command: "plan".into(),
            code: "2".into(),
            first_error: None,
        };
        assert_eq!(e.reason(), "tofu plan failed with exit code 2");
    }

    #[test]
    fn reasons_never_span_lines() {
        let e = PilotError::Source("git clone failed:\n  fatal: not found\n".into());
        assert_eq!(e.reason(), "git clone failed: fatal: not found");
    }
}
