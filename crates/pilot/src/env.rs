//! The pilot's environment: what the launcher (ECS RunTask, a Kubernetes Job
//! or the local launcher) tells it.
//!
//! | variable | required | meaning |
//! |---|---|---|
//! | `SORTIE_API_URL` | yes | the API's base URL, `http://` or `https://` |
//! | `SORTIE_JOB_ID` | yes | the job to run |
//! | `SORTIE_JOB_TOKEN` | yes | the job token (never logged, never passed to terraform or git) |
//! | `SORTIE_WORK_DIR` | no | where to lay out the job (default: a new directory under the system temp dir) |
//! | `SORTIE_TERRAFORM` | no | the Terraform/OpenTofu binary (default, when the job names no tool or version: the newest `tofu`, else the newest `terraform`, in `SORTIE_TOOLS_DIR` and on `PATH`); when the job asks for a tool or version, one candidate among the others |
//! | `SORTIE_TOOLS_DIR` | no | a directory of extra versions, named `terraform-X.Y.Z` or `tofu-X.Y.Z` (also `terraform`, `tofu`), searched with `PATH` when the job asks for a tool or version (default: `/opt/sortie/tools`; ignored when it does not exist) |
//! | `SORTIE_GIT_CREDENTIALS` | no | the resolved value of a git source's `credentials_secret`: `token` or `username:token` |
//! | `AWS_ENDPOINT_URL` | no | a local AWS (moto): S3 clients use path-style addressing and the state backend is pointed at it |

use std::fmt;
use std::path::PathBuf;

use crate::error::PilotError;

/// `SORTIE_API_URL`.
pub const API_URL: &str = "SORTIE_API_URL";
/// `SORTIE_JOB_ID`.
pub const JOB_ID: &str = "SORTIE_JOB_ID";
/// `SORTIE_JOB_TOKEN`.
pub const JOB_TOKEN: &str = "SORTIE_JOB_TOKEN";
/// `SORTIE_WORK_DIR`.
pub const WORK_DIR: &str = "SORTIE_WORK_DIR";
/// `SORTIE_TERRAFORM`.
pub const TERRAFORM: &str = "SORTIE_TERRAFORM";
/// `SORTIE_TOOLS_DIR`.
pub const TOOLS_DIR: &str = "SORTIE_TOOLS_DIR";
/// Where extra Terraform and OpenTofu versions are looked for when `SORTIE_TOOLS_DIR` is unset.
pub const DEFAULT_TOOLS_DIR: &str = "/opt/sortie/tools";
/// `SORTIE_GIT_CREDENTIALS`.
pub const GIT_CREDENTIALS: &str = "SORTIE_GIT_CREDENTIALS";
/// `AWS_ENDPOINT_URL`.
pub const AWS_ENDPOINT_URL: &str = "AWS_ENDPOINT_URL";

/// Variables the pilot reads but never hands to terraform or git.
pub const PRIVATE_VARS: &[&str] = &[JOB_TOKEN, GIT_CREDENTIALS];

/// A secret value whose `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The value itself: only for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// Everything the pilot reads from its environment.
#[derive(Debug, Clone)]
pub struct PilotEnv {
    /// The API's base URL, without a trailing `/`.
    pub api_url: String,
    /// The job to run.
    pub job_id: String,
    /// The job token.
    pub token: Secret,
    /// `SORTIE_WORK_DIR`, when set.
    pub work_dir: Option<PathBuf>,
    /// `SORTIE_TERRAFORM`, when set.
    pub terraform: Option<PathBuf>,
    /// `SORTIE_TOOLS_DIR`, else [`DEFAULT_TOOLS_DIR`].
    pub tools_dir: PathBuf,
    /// `AWS_ENDPOINT_URL`, when set: a local AWS.
    pub aws_endpoint: Option<String>,
    /// `SORTIE_GIT_CREDENTIALS`, when set.
    pub git_credentials: Option<Secret>,
}

impl PilotEnv {
    /// Reads the process environment.
    pub fn from_env() -> Result<Self, PilotError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads the variables through `get` (empty values count as unset).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, PilotError> {
        let get = |name: &str| get(name).filter(|v| !v.trim().is_empty());
        let required =
            |name: &str| get(name).ok_or_else(|| PilotError::Config(format!("{name} is not set")));
        let api_url = required(API_URL)?.trim().trim_end_matches('/').to_string();
        if !(api_url.starts_with("http://") || api_url.starts_with("https://")) {
            return Err(PilotError::Config(format!(
                "{API_URL} must be an http:// or https:// URL, not `{api_url}`"
            )));
        }
        let job_id = required(JOB_ID)?.trim().to_string();
        if !job_id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        {
            return Err(PilotError::Config(format!(
                "{JOB_ID} `{job_id}` may hold only letters, digits, `-`, `_` and `.`"
            )));
        }
        let token = Secret::new(required(JOB_TOKEN)?.trim());
        Ok(Self {
            api_url,
            job_id,
            token,
            work_dir: get(WORK_DIR).map(PathBuf::from),
            terraform: get(TERRAFORM).map(PathBuf::from),
            tools_dir: PathBuf::from(get(TOOLS_DIR).unwrap_or_else(|| DEFAULT_TOOLS_DIR.into())),
            aws_endpoint: get(AWS_ENDPOINT_URL).map(|v| v.trim().to_string()),
            git_credentials: get(GIT_CREDENTIALS).map(Secret::new),
        })
    }
}

/// A valid, non-reserved environment variable name: `[A-Za-z_][A-Za-z0-9_]*`,
/// not starting with `SORTIE_`.
pub fn check_env_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let valid = matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid {
        return Err(format!(
            "secret reference name `{name}` is not a valid environment variable name"
        ));
    }
    if name.starts_with(sortie_core::runner::RESERVED_ENV_PREFIX) {
        return Err(format!(
            "secret reference name `{name}` uses the reserved prefix SORTIE_"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn lookup(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn reads_the_required_and_optional_variables() {
        let env = PilotEnv::from_lookup(lookup(&[
            (API_URL, "http://127.0.0.1:8080/"),
            (JOB_ID, "01JOB"),
            (JOB_TOKEN, "tok"),
            (TERRAFORM, "/opt/terraform"),
            (AWS_ENDPOINT_URL, "http://127.0.0.1:5000"),
        ]))
        .unwrap();
        assert_eq!(env.api_url, "http://127.0.0.1:8080");
        assert_eq!(env.job_id, "01JOB");
        assert_eq!(env.token.expose(), "tok");
        assert_eq!(env.terraform, Some(PathBuf::from("/opt/terraform")));
        assert_eq!(env.work_dir, None);
        assert_eq!(env.tools_dir, PathBuf::from(DEFAULT_TOOLS_DIR));
        assert_eq!(env.aws_endpoint.as_deref(), Some("http://127.0.0.1:5000"));
        let env = PilotEnv::from_lookup(lookup(&[
            (API_URL, "http://127.0.0.1:8080"),
            (JOB_ID, "01JOB"),
            (JOB_TOKEN, "tok"),
            (TOOLS_DIR, "/srv/tools"),
        ]))
        .unwrap();
        assert_eq!(env.tools_dir, PathBuf::from("/srv/tools"));
    }

    #[test]
    fn the_token_never_shows_in_debug_output() {
        let env = PilotEnv::from_lookup(lookup(&[
            (API_URL, "https://api.example"),
            (JOB_ID, "j"),
            (JOB_TOKEN, "super-secret-token"),
        ]))
        .unwrap();
        let debug = format!("{env:?}");
        assert!(!debug.contains("super-secret-token"), "{debug}");
    }

    #[test]
    fn missing_or_malformed_variables_are_named() {
        let err = PilotEnv::from_lookup(lookup(&[(API_URL, "http://x")])).unwrap_err();
        assert!(err.to_string().contains(JOB_ID), "{err}");
        let err = PilotEnv::from_lookup(lookup(&[
            (API_URL, "ftp://x"),
            (JOB_ID, "j"),
            (JOB_TOKEN, "t"),
        ]))
        .unwrap_err();
        assert!(err.to_string().contains(API_URL), "{err}");
        let err = PilotEnv::from_lookup(lookup(&[
            (API_URL, "http://x"),
            (JOB_ID, "../etc"),
            (JOB_TOKEN, "t"),
        ]))
        .unwrap_err();
        assert!(err.to_string().contains(JOB_ID), "{err}");
    }

    #[test]
    fn secret_names_must_be_plain_and_unreserved() {
        assert!(check_env_name("A_1").is_ok());
        assert!(check_env_name("1A").is_err());
        assert!(check_env_name("A-B").is_err());
        assert!(check_env_name("SORTIE_X").is_err());
    }
}
