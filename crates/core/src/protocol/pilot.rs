//! The contract between the API and the pilot (`sortie-pilot`, the program in a job's
//! container): what the pilot fetches with its
//! job token (`GET /v1/jobs/{id}/spec`), what it reports back
//! (`PUT /v1/jobs/{id}/summary`, `PUT /v1/jobs/{id}/upload-problems`), and the objects it
//! uploads through URLs the API presigns for it (`POST /v1/jobs/{id}/uploads`): each
//! [`UploadKind`] maps to one key under the job's own prefix ([`upload_key`]).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use crate::changes::ChangeSummary;
pub use crate::job::JobPhase;
use crate::job::{Operation, Source};
use crate::names::EnvPath;
use crate::runner::StateStorageConfiguration;

/// Everything the pilot needs to run one job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobSpec {
    /// The job.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub job_id: crate::JobId,
    /// The environment it runs against.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub environment: EnvPath,
    /// Plan, apply or destroy.
    pub operation: Operation,
    /// Where the configuration comes from.
    pub source: Source,
    /// For a `github` source: where and with what the pilot downloads the commit's
    /// tarball. Absent for every other source; a `github` source without it fails the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_access: Option<SourceAccess>,
    /// A pull request's plan: it holds no environment lock, so terraform runs with
    /// `-lock=false`; it can never apply (the pilot refuses a speculative spec whose
    /// operation is not `plan` before it runs anything).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub speculative: bool,
    /// Terraform variables, for `terraform.tfvars.json`.
    #[serde(default)]
    pub variables: BTreeMap<String, Value>,
    /// Extra files by relative path.
    #[serde(default)]
    pub files: BTreeMap<String, String>,
    /// Secret references (ARNs) by environment variable name; resolved by the pilot.
    #[serde(default)]
    pub secret_refs: BTreeMap<String, String>,
    /// The names of the job's sensitive variables: the pilot fetches their values with
    /// its job token (`GET /v1/jobs/{id}/sensitive-variables`) and gives them to terraform
    /// as `TF_VAR_<name>`, in its environment only ([`crate::sensitive`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sensitive_variables: Vec<String>,
    /// The names of the environment variables the job's runner injects into the pilot's
    /// container as secrets ([`crate::runner::RunnerConfiguration::secret_env_names`]: an
    /// `ecs-fargate` runner's `secrets`, an `eks` runner's `job.secrets` and the
    /// `secretKeyRef` variables its `pod_template` gives the runner container). The pilot
    /// reads their values from its own environment and scrubs them from everything it
    /// writes. Names only: never a value, nor the reference it comes from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runner_secret_env: Vec<String>,
    /// The runner's state storage.
    pub state_storage: StateStorageConfiguration,
    /// For `s3` storage: the state object's key, `<key_prefix><environment path>/terraform.tfstate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_key: Option<String>,
    /// True when the pilot must report its own exit (`POST /v1/jobs/{id}/events`) before it
    /// ends: set for platforms that send no task event (`eks`), where that callback is the
    /// fast path of completion and the sweeper's poll the safety net.
    #[serde(default)]
    pub report_exit: bool,
    /// Which phase of a reviewed apply or destroy this task runs. Absent: one task does the
    /// whole operation (a plan plans to `plan.tfplan`; an apply or destroy plans to
    /// `plan.tfplan` and applies exactly that file, never a second plan).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<JobPhase>,
    /// For the [`JobPhase::Apply`] phase: a presigned GET URL of the plan the first phase
    /// saved, which this task applies (`terraform apply plan.tfplan`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saved_plan_url: Option<String>,
    /// For a restore (the job's `restore`): a presigned GET URL of the state version the
    /// pilot writes back as the current state (`terraform state push -force`) after `init`
    /// and before it plans.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore_state_url: Option<String>,
    /// A drift check: the plan runs with `-detailed-exitcode`, exit code 2 (changes) is a
    /// success, and the summary's `has_changes` says which it was.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub detailed_exitcode: bool,
    /// The tool asked for (the environment's, else the runner's); any when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<crate::tool::ToolName>,
    /// The version asked for: exact or a constraint ([`crate::tool::parse_constraint`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The byte offset of this task's first log byte: a second phase continues the job's
    /// log where the first phase's ended, so the job has one log.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub log_offset: u64,
    /// The runner's `identity` block: the pilot asks for a token per phase
    /// (`POST /v1/jobs/{id}/identity-token`), keeps it fresh in a file only Terraform's
    /// process reads, and points each cloud's SDK at it ([`crate::identity::token_setup`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<crate::identity::RunnerIdentity>,
}

/// The pilot's request for a job identity token (`POST /v1/jobs/{id}/identity-token`).
/// Unknown fields are refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct IdentityTokenRequest {
    /// The phase the token is for: `plan` (reads) or `apply` (writes).
    pub phase: crate::identity::Phase,
}

/// A job identity token: a JWT the cloud's STS (or workload identity federation) exchanges
/// for the phase's role. Its `Debug` never shows the token.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct IdentityToken {
    /// The JWT (ES256). Never logged, stored or put in an event.
    #[cfg_attr(feature = "openapi", schema(format = Password))]
    pub token: String,
    /// When it stops working: the pilot writes a fresh one well before.
    pub expires_at: DateTime<Utc>,
}

impl std::fmt::Debug for IdentityToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdentityToken")
            .field("token", &"(not shown)")
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

/// How the pilot downloads a `github` or `gitlab` source: the host's archive of the commit
/// (GitHub's `GET /repos/{owner}/{repo}/tarball/{sha}`, GitLab's
/// `GET /projects/:id/repository/archive.tar.gz?sha=`) with a token that can only read that
/// one repository. Its `Debug` never shows the token.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SourceAccess {
    /// The archive URL, `https://api.github.com/repos/{owner}/{repo}/tarball/{sha}` or
    /// GitLab's `.../api/v4/projects/{id}/repository/archive.tar.gz?sha={sha}`.
    pub url: String,
    /// A token that can only read the source's repository: a GitHub App installation
    /// token, or a GitLab project access token. Never logged, stored or written to a file.
    #[cfg_attr(feature = "openapi", schema(format = Password, write_only))]
    pub token: String,
    /// When the token stops working; the pilot refuses one already expired.
    pub expires_at: DateTime<Utc>,
    /// Where the pilot revokes the token itself (`DELETE`, the token as its bearer) as soon
    /// as the archive is downloaded, before any Terraform runs: GitLab's
    /// `.../api/v4/personal_access_tokens/self`. Absent when the token is not the job's
    /// alone (a GitHub installation token is shared by the jobs of one repository).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoke_url: Option<String>,
}

impl std::fmt::Debug for SourceAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SourceAccess")
            .field("url", &self.url)
            .field("token", &"(not shown)")
            .field("expires_at", &self.expires_at)
            .field("revoke_url", &self.revoke_url)
            .finish()
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The pilot's final callback (`POST /v1/jobs/{id}/events`): how it is about to exit.
/// Unknown fields are refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = RunnerExit))]
#[serde(deny_unknown_fields)]
pub struct PilotExit {
    /// The pilot's exit code: 0 for success.
    pub exit_code: i32,
    /// Why it failed, in one line (at most [`PILOT_EXIT_REASON_MAX`] bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The longest [`PilotExit::reason`] the API accepts, in bytes.
pub const PILOT_EXIT_REASON_MAX: usize = 1024;

/// What the pilot uploads: one object of the job's, under the job's own prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum UploadKind {
    /// A log chunk; its name is the chunk's start offset, 12 digits.
    Log,
    /// The saved plan, `plan.tfplan`.
    Plan,
    /// The change summary, `summary.json`.
    Summary,
    /// The outputs after an apply, `outputs.json` (sensitive values redacted).
    Outputs,
    /// The plan as data, `plan.json`: `terraform show -json` of the saved plan, redacted
    /// ([`crate::plan::redact`]), or `{"unavailable": "<reason>"}` ([`crate::plan::PlanData`]).
    PlanJson,
}

impl UploadKind {
    /// Every kind.
    pub const ALL: [UploadKind; 5] = [
        Self::Log,
        Self::Plan,
        Self::Summary,
        Self::Outputs,
        Self::PlanJson,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Log => "log",
            Self::Plan => "plan",
            Self::Summary => "summary",
            Self::Outputs => "outputs",
            Self::PlanJson => "plan_json",
        }
    }

    /// The fixed file name of an artifact (`None` for a log chunk, named by its offset).
    pub fn file_name(self) -> Option<&'static str> {
        match self {
            Self::Log => None,
            Self::Plan => Some("plan.tfplan"),
            Self::Summary => Some("summary.json"),
            Self::Outputs => Some("outputs.json"),
            Self::PlanJson => Some("plan.json"),
        }
    }

    /// The Content-Type the object is stored with (and its presigned URL is signed for).
    pub fn content_type(self) -> &'static str {
        match self {
            Self::Log => "text/plain; charset=utf-8",
            Self::Plan => "application/octet-stream",
            Self::Summary | Self::Outputs | Self::PlanJson => "application/json",
        }
    }
}

/// The key of job `job_id`'s upload of `kind` named `name`: `logs/<job id>/<offset>.log`
/// for a log chunk (`name` = the start offset, exactly 12 digits), else
/// `artifacts/<job id>/<file name>` (`name` absent or that file name). The error is the
/// problem with `name`. A job's keys never leave its own prefixes.
pub fn upload_key(
    job_id: &crate::JobId,
    kind: UploadKind,
    name: Option<&str>,
) -> Result<String, String> {
    match (kind.file_name(), name) {
        (None, Some(offset))
            if offset.len() == 12 && offset.bytes().all(|b| b.is_ascii_digit()) =>
        {
            Ok(format!("{}{offset}.log", log_prefix(job_id)))
        }
        (None, _) => Err("a log chunk's name is its start offset: exactly 12 digits".into()),
        (Some(file), None) => Ok(format!("{}{file}", artifact_prefix(job_id))),
        (Some(file), Some(given)) if given == file => {
            Ok(format!("{}{file}", artifact_prefix(job_id)))
        }
        (Some(file), Some(_)) => Err(format!(
            "{} {} upload is named `{file}` (or not named)",
            crate::job::a_or_an(kind.as_str()),
            kind.as_str()
        )),
    }
}

/// `logs/<job id>/`: where a job's log chunks live.
pub fn log_prefix(job_id: &crate::JobId) -> String {
    format!("logs/{job_id}/")
}

/// `artifacts/<job id>/`: where a job's plan, summary and outputs live.
pub fn artifact_prefix(job_id: &crate::JobId) -> String {
    format!("artifacts/{job_id}/")
}

/// The log chunk key for bytes starting at `offset`.
pub fn log_chunk_key(prefix: &str, offset: u64) -> String {
    format!("{prefix}{offset:012}.log")
}

/// The start offset encoded in a log chunk key, if it is one.
pub fn log_chunk_offset(prefix: &str, key: &str) -> Option<u64> {
    key.strip_prefix(prefix)?.strip_suffix(".log")?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_access_debug_never_shows_the_token() {
        let access = SourceAccess {
            url: "https://api.github.com/repos/o/r/tarball/abc".into(),
            token: "ghs_secret_installation_token".into(),
            expires_at: DateTime::parse_from_rfc3339("2030-01-01T00:00:00Z")
                .unwrap()
                .with_timezone(&Utc),
            revoke_url: None,
        };
        let shown = format!("{access:?}");
        assert!(!shown.contains("ghs_secret_installation_token"), "{shown}");
        assert!(
            shown.contains("(not shown)") && shown.contains("tarball/abc"),
            "{shown}"
        );
    }

    #[test]
    fn a_spec_without_the_new_fields_reads_as_before_and_writes_none_of_them() {
        let doc = serde_json::json!({
            "job_id": "01jnx6v4k2m8q9r3s5t7w0y1za",
            "environment": "acme/web/prod",
            "operation": "plan",
            "source": {"type": "inline"},
            "state_storage": {"type": "local", "directory": "/tmp/state"},
        });
        let spec: JobSpec = serde_json::from_value(doc).unwrap();
        assert!(!spec.speculative);
        assert_eq!(spec.source_access, None);
        let back = serde_json::to_value(&spec).unwrap();
        assert!(back.get("speculative").is_none(), "{back}");
        assert!(back.get("source_access").is_none(), "{back}");

        let mut spec = spec;
        spec.speculative = true;
        spec.source = Source::Github {
            repository: "acme/infra".into(),
            commit: "0123456789abcdef0123456789abcdef01234567".into(),
            path: "stacks/app".into(),
        };
        spec.source_access = Some(SourceAccess {
            url: "https://api.github.com/repos/acme/infra/tarball/0123456789abcdef0123456789abcdef01234567".into(),
            token: "ghs_t".into(),
            expires_at: DateTime::parse_from_rfc3339("2030-01-01T00:00:00Z")
                .unwrap()
                .with_timezone(&Utc),
            revoke_url: None,
        });
        let json = serde_json::to_value(&spec).unwrap();
        assert_eq!(json["speculative"], true);
        assert_eq!(json["source"]["type"], "github");
        assert_eq!(json["source_access"]["expires_at"], "2030-01-01T00:00:00Z");
        assert!(json["source_access"].get("revoke_url").is_none(), "{json}");
        let again: JobSpec = serde_json::from_value(json).unwrap();
        assert_eq!(again, spec);
        // A GitLab token is the job's alone: the pilot is told where to revoke it.
        let mut with = spec.clone();
        if let Some(access) = with.source_access.as_mut() {
            access.revoke_url =
                Some("https://gitlab.example.com/api/v4/personal_access_tokens/self".into());
        }
        let json = serde_json::to_value(&with).unwrap();
        assert_eq!(
            json["source_access"]["revoke_url"],
            "https://gitlab.example.com/api/v4/personal_access_tokens/self"
        );
        assert_eq!(serde_json::from_value::<JobSpec>(json).unwrap(), with);
    }

    #[test]
    fn chunk_keys_sort_by_offset_and_round_trip() {
        let a = log_chunk_key("logs/j/", 9);
        let b = log_chunk_key("logs/j/", 10);
        assert!(a < b, "lexicographic order is offset order");
        assert_eq!(log_chunk_offset("logs/j/", &b), Some(10));
        assert_eq!(log_chunk_offset("logs/j/", "logs/j/done"), None);
    }

    #[test]
    fn upload_keys_stay_under_the_jobs_own_prefixes() {
        let id = crate::JobId::from("01JOB".to_string());
        assert_eq!(
            upload_key(&id, UploadKind::Log, Some("000000000042")),
            Ok("logs/01JOB/000000000042.log".into())
        );
        assert_eq!(
            upload_key(&id, UploadKind::Plan, None),
            Ok("artifacts/01JOB/plan.tfplan".into())
        );
        assert_eq!(
            upload_key(&id, UploadKind::Summary, Some("summary.json")),
            Ok("artifacts/01JOB/summary.json".into())
        );
        for (kind, name) in [
            (UploadKind::Log, None),
            (UploadKind::Log, Some("42")),
            (UploadKind::Log, Some("../../x/00000")),
            (UploadKind::Log, Some("00000000004x")),
            (UploadKind::Plan, Some("../other/plan.tfplan")),
            (UploadKind::Outputs, Some("state.tfstate")),
        ] {
            assert!(upload_key(&id, kind, name).is_err(), "{kind:?} {name:?}");
        }
        assert_eq!(
            log_chunk_key(&log_prefix(&id), 42),
            upload_key(&id, UploadKind::Log, Some("000000000042")).unwrap()
        );
    }
}
