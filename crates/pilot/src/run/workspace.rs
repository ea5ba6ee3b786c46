//! The job's workspace: the source (inline, an S3 archive, git, a GitHub commit), the
//! job's secrets and the state storage's directory.

use std::path::Path;

use sortie_core::protocol::pilot::JobSpec;
use sortie_core::runner::LocalStorage;
use sortie_core::{Source, StateStorageConfiguration};

use chrono::Utc;

use super::{blocking, PREFIX};
use crate::api::without_query;
use crate::env::{check_env_name, PilotEnv, PRIVATE_VARS};
use crate::error::PilotError;
use crate::github;
use crate::log::LogSink;
use crate::objects::{ObjectRef, ObjectStore};
use crate::scrub::Secrets;
use crate::source;
use crate::terraform::{self, ToolEnv};

/// The names of the job's secrets, checked, split into those the environment holds
/// (`is_set`) and those it does not.
pub(super) fn secret_names(
    spec: &JobSpec,
    is_set: impl Fn(&str) -> bool,
) -> Result<(Vec<String>, Vec<String>), PilotError> {
    let mut present = vec![];
    let mut missing = vec![];
    for name in spec.secret_refs.keys() {
        check_env_name(name).map_err(PilotError::Config)?;
        if is_set(name) {
            present.push(name.clone());
        } else {
            missing.push(name.clone());
        }
    }
    Ok((present, missing))
}

/// The secrets the job's runner injected into this process's environment
/// ([`JobSpec::runner_secret_env`]), by name.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct RunnerSecrets {
    /// Named by the spec and set in the environment: their values are in the secret set.
    pub present: Vec<String>,
    /// Named by the spec but not set here (or not a variable name): noted by name only.
    pub missing: Vec<String>,
}

/// Reads the value (`value_of`) of every variable the spec says the runner injects as a
/// secret and adds it to `secrets`, the one set every exit scrubs, before anything could
/// print it. Fail closed: a name the environment does not hold is noted, never an error.
pub(crate) fn add_runner_secrets(
    spec: &JobSpec,
    value_of: impl Fn(&str) -> Option<String>,
    secrets: &Secrets,
) -> RunnerSecrets {
    let mut found = RunnerSecrets::default();
    for name in &spec.runner_secret_env {
        let value = check_env_name(name).ok().and_then(|()| value_of(name));
        match value {
            Some(value) => {
                secrets.add([value.as_str()]);
                found.present.push(name.clone());
            }
            None => found.missing.push(name.clone()),
        }
    }
    found
}

/// Adds the token of the spec's `source_access` (a `github` source's) to `secrets`, the one
/// set every exit scrubs: called as soon as the spec arrives, before anything is logged.
pub(crate) fn add_source_secrets(spec: &JobSpec, secrets: &Secrets) {
    if let Some(access) = &spec.source_access {
        secrets.add([access.token.as_str()]);
    }
}

/// The storage with a relative `local` directory made absolute (terraform runs
/// in the configuration directory, not where the pilot started).
pub(super) fn absolute_storage(
    storage: &StateStorageConfiguration,
) -> Result<StateStorageConfiguration, PilotError> {
    match storage {
        StateStorageConfiguration::Local(local) if Path::new(&local.directory).is_relative() => {
            let cwd = std::env::current_dir().map_err(|e| {
                PilotError::Workspace(format!("could not read the current directory: {e}"))
            })?;
            Ok(StateStorageConfiguration::Local(LocalStorage {
                directory: cwd.join(&local.directory).to_string_lossy().into_owned(),
            }))
        }
        other => Ok(other.clone()),
    }
}

/// Fetches the source into `root` and returns the configuration's path inside it.
pub(super) async fn fetch_source(
    env: &PilotEnv,
    spec: &JobSpec,
    sink: &LogSink,
    objects: &dyn ObjectStore,
    work: &Path,
    root: &Path,
) -> Result<String, PilotError> {
    match &spec.source {
        Source::Inline { .. } => {
            std::fs::create_dir_all(root).map_err(|e| {
                PilotError::Workspace(format!("could not create {}: {e}", root.display()))
            })?;
            sink.line(&format!(
                "{PREFIX} inline source: {} file(s)",
                spec.files.len()
            ));
            Ok(String::new())
        }
        Source::S3 {
            bucket,
            key,
            sha256,
            path,
        } => {
            let object = ObjectRef::new(None, bucket, key);
            sink.line(&format!("{PREFIX} fetching {object}"));
            let bytes = objects.get(&object).await.map_err(|e| {
                PilotError::Source(format!("could not fetch the source archive: {e}"))
            })?;
            source::verify_checksum(&bytes, sha256, bucket, key)?;
            sink.line(&format!(
                "{PREFIX} sha256 {} verified; extracting",
                sha256.trim().to_ascii_lowercase()
            ));
            let dest = root.to_path_buf();
            blocking(move || source::extract_tar_gz(&bytes, &dest)).await?;
            Ok(path.clone())
        }
        // GitHub's tarball and GitLab's archive alike: one top directory over the commit's
        // files, fetched with the job's read-only token as a bearer token (GitLab takes
        // an access token so: https://docs.gitlab.com/api/rest/authentication/).
        Source::Github { path, .. } | Source::Gitlab { path, .. } => {
            let access = github::usable_access(spec.source_access.as_ref(), Utc::now())?;
            // Already there since the spec arrived; again here, so that this function
            // never logs before its token is a secret.
            sink.secrets().add([access.token.as_str()]);
            sink.line(&format!(
                "{PREFIX} fetching {} ({})",
                spec.source.label(),
                without_query(&access.url)
            ));
            let client = github::TarballClient::new(&access.url)?;
            let downloaded = client.download(access).await;
            // The token is the job's alone (GitLab's): revoked before anything else runs,
            // whether the download worked or not. Sortie revokes it at the job's end too.
            if access.revoke_url.is_some() {
                match client.revoke(access).await {
                    Ok(()) => sink.line(&format!("{PREFIX} source token revoked")),
                    Err(e) => sink.line(&format!(
                        "{PREFIX} note: {e}; Sortie revokes it when the job ends"
                    )),
                }
            }
            let bytes = downloaded?;
            sink.line(&format!(
                "{PREFIX} {} bytes, sha256 {}; extracting",
                bytes.len(),
                source::sha256_hex(&bytes)
            ));
            let (scratch, dest) = (work.join(GITHUB_SCRATCH), root.to_path_buf());
            blocking(move || source::extract_github_tarball(&bytes, &scratch, &dest)).await?;
            Ok(path.clone())
        }
        Source::Git {
            url,
            git_ref,
            path,
            credentials_secret,
        } => {
            let credentials = match (credentials_secret, &env.git_credentials) {
                (Some(_), Some(value)) => Some(value.expose().to_string()),
                (Some(arn), None) => {
                    sink.line(&format!(
                        "{PREFIX} note: source.credentials_secret {arn} is set but {} is not; cloning without credentials",
                        crate::env::GIT_CREDENTIALS
                    ));
                    None
                }
                (None, _) => None,
            };
            let askpass = work.join(".sortie-askpass");
            if credentials.is_some() {
                write_askpass(&askpass)?;
            }
            let git_env = ToolEnv {
                set: source::git_env(credentials.as_deref(), &askpass),
                remove: PRIVATE_VARS.iter().map(|v| v.to_string()).collect(),
            };
            let dest = root.to_string_lossy().into_owned();
            for args in source::git_steps(url, git_ref.as_deref(), &dest) {
                let shown: Vec<String> = args
                    .iter()
                    .map(|a| {
                        if a == url {
                            source::redact_url(a)
                        } else {
                            a.clone()
                        }
                    })
                    .collect();
                sink.line(&format!("{PREFIX} $ git {}", shown.join(" ")));
                let subcommand = args
                    .iter()
                    .find(|a| *a == "clone" || *a == "checkout")
                    .cloned()
                    .unwrap_or_else(|| "command".into());
                let (work, env, sink) = (work.to_path_buf(), git_env.clone(), sink.clone());
                let finished = blocking(move || {
                    terraform::run_logged(Path::new("git"), &args, &work, &env, &sink)
                })
                .await?;
                if !finished.success {
                    let detail = terraform::first_error(&finished.output)
                        .map(|l| format!(": {l}"))
                        .unwrap_or_default();
                    return Err(PilotError::Source(format!(
                        "git {subcommand} of {} failed with exit code {}{detail}",
                        source::redact_url(url),
                        finished.code
                    )));
                }
            }
            Ok(path.clone())
        }
    }
}

/// Where a GitHub tarball is unpacked, inside the job's directory, before its one
/// top-level directory becomes the source's root.
const GITHUB_SCRATCH: &str = "github-tarball";

fn write_askpass(path: &Path) -> Result<(), PilotError> {
    std::fs::write(path, source::ASKPASS_SCRIPT).map_err(|e| {
        PilotError::Workspace(format!("could not write the git askpass helper: {e}"))
    })?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700)).map_err(|e| {
            PilotError::Workspace(format!(
                "could not make the git askpass helper executable: {e}"
            ))
        })?;
    }
    Ok(())
}

#[cfg(test)]
#[path = "workspace_tests.rs"]
mod tests;
