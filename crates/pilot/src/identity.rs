//! The job's own cloud identity: a token per phase, kept fresh in a file only Terraform's
//! process reads, and the variables that point each cloud's SDK at it.
//!
//! When the spec carries the runner's `identity` block, the pilot asks the API for a token
//! of the phase a step runs in (`init` and the plan: `plan`; the apply: `apply`), writes it
//! to `<job dir>/identity/token.jwt` (mode 0600, in a 0700 directory, replaced by rename so
//! a reader never sees half a token), and gives Terraform the variables of
//! [`sortie_core::identity::token_setup`]. A background task writes a fresh token once
//! two-thirds of the current one's life has passed ([`refresh_due`]), for as long as the
//! job runs: a cloud SDK reads the file again when its credentials near their end, so an
//! apply of many hours never meets an expired token.
//!
//! The token is a secret: it joins the scrubbed values before it is written anywhere, and
//! it is never logged, put in an error or passed in a variable (only its path is).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use chrono::Utc;
use sortie_core::identity::{refresh_due, token_setup, JobIdentityClaims, Phase, RunnerIdentity};

use crate::api::ApiClient;
use crate::error::PilotError;
use crate::log::LogSink;
use crate::run::PREFIX;

/// How often the refresher looks at the token's age.
const TICK: Duration = Duration::from_secs(1);

/// The variables that would make the AWS SDKs use other credentials than the web identity.
pub const STATIC_AWS_CREDENTIALS: [&str; 4] = [
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
];

/// The token file's name in the identity directory.
pub const TOKEN_FILE: &str = "token.jwt";

/// The phase Terraform acts in now, and the claims of its current token.
struct Current {
    phase: Phase,
    claims: JobIdentityClaims,
}

/// What the token's writer and the refresher share.
struct Shared {
    api: Arc<ApiClient>,
    sink: LogSink,
    dir: PathBuf,
    current: Mutex<Option<Current>>,
}

/// A job's identity while it runs: dropping it stops the refresher.
pub struct JobIdentity {
    shared: Arc<Shared>,
    identity: RunnerIdentity,
    session: String,
    refresher: tokio::task::JoinHandle<()>,
}

impl JobIdentity {
    /// Starts the job's identity in `job_dir` when the spec has an `identity` block (else
    /// `None`: Terraform acts with the runner's own credentials).
    pub fn start(
        api: Arc<ApiClient>,
        identity: Option<&RunnerIdentity>,
        job_id: &str,
        job_dir: &Path,
        sink: &LogSink,
    ) -> Result<Option<Self>, PilotError> {
        let Some(identity) = identity else {
            return Ok(None);
        };
        let dir = job_dir.join("identity");
        create_private_dir(&dir)?;
        let shared = Arc::new(Shared {
            api,
            sink: sink.clone(),
            dir,
            current: Mutex::new(None),
        });
        let refresher = tokio::spawn(refresh(shared.clone()));
        Ok(Some(Self {
            shared,
            identity: identity.clone(),
            session: job_id.to_string(),
            refresher,
        }))
    }

    /// The variables to set and to take away for a step that runs in `phase`, its token
    /// written first (a fresh one when the phase changes). A token that cannot be had fails
    /// the job. With an `aws` identity, static credentials in the pilot's own environment
    /// are taken away from Terraform's: the SDKs read them before a web identity, and the
    /// phase's role would silently not be used.
    pub async fn enter(
        &self,
        phase: Phase,
    ) -> Result<(Vec<(String, String)>, Vec<String>), PilotError> {
        let same = self
            .shared
            .current
            .lock()
            .expect("identity lock")
            .as_ref()
            .is_some_and(|c| c.phase == phase);
        if !same {
            let claims = self.shared.mint(phase).await.map_err(|e| {
                PilotError::Api(format!(
                    "could not get the job's identity token for its {phase} phase: {}",
                    e.reason()
                ))
            })?;
            *self.shared.current.lock().expect("identity lock") = Some(Current { phase, claims });
            self.shared.sink.line(&format!(
                "{PREFIX} identity: Terraform acts as this job's {phase} phase ({})",
                clouds(&self.identity)
            ));
        }
        let dir = self.shared.dir.to_string_lossy().to_string();
        let token = self
            .shared
            .dir
            .join(TOKEN_FILE)
            .to_string_lossy()
            .to_string();
        let setup = token_setup(&self.identity, phase, &token, &dir, &self.session);
        for (path, contents) in &setup.files {
            write_private(Path::new(path), contents.as_bytes())?;
        }
        let remove = if self.identity.aws.is_some() {
            STATIC_AWS_CREDENTIALS
                .iter()
                .map(|v| v.to_string())
                .collect()
        } else {
            Vec::new()
        };
        Ok((setup.env, remove))
    }
}

impl Drop for JobIdentity {
    /// Stops the refresher and removes the token and its directory: nothing of the job's
    /// identity outlives the job, even in a work directory that does (an agent's).
    fn drop(&mut self) {
        self.refresher.abort();
        let _ = std::fs::remove_dir_all(&self.shared.dir);
    }
}

impl Shared {
    /// A token for `phase` from the API, written to the token file; its claims.
    async fn mint(&self, phase: Phase) -> Result<JobIdentityClaims, PilotError> {
        let answer = self.api.identity_token(phase).await?;
        // A secret before anything could print it.
        self.sink.secrets().add([answer.token.as_str()]);
        let claims = claims_of(&answer.token).ok_or_else(|| {
            PilotError::Api("the API answered an identity token this runner cannot read".into())
        })?;
        write_private(&self.dir.join(TOKEN_FILE), answer.token.as_bytes())?;
        Ok(claims)
    }
}

/// Writes a fresh token whenever the current one is two-thirds through its life. A failed
/// refresh is said in the log (never with the token) and tried again at the next tick, while
/// the current token still works.
async fn refresh(shared: Arc<Shared>) {
    let mut failing = false;
    loop {
        tokio::time::sleep(TICK).await;
        let due = {
            let current = shared.current.lock().expect("identity lock");
            current
                .as_ref()
                .filter(|c| refresh_due(&c.claims, Utc::now()))
                .map(|c| c.phase)
        };
        let Some(phase) = due else { continue };
        match shared.mint(phase).await {
            Ok(claims) => {
                let mut current = shared.current.lock().expect("identity lock");
                // The phase may have changed meanwhile: its own token is newer then.
                if let Some(c) = current.as_mut().filter(|c| c.phase == phase) {
                    c.claims = claims;
                }
                if failing {
                    shared
                        .sink
                        .line(&format!("{PREFIX} identity: the token is fresh again"));
                }
                failing = false;
            }
            Err(e) => {
                if !failing {
                    shared.sink.line(&format!(
                        "{PREFIX} warning: identity: could not refresh the {phase} token (trying again each second while the current one works): {}",
                        e.reason()
                    ));
                }
                failing = true;
                tracing::warn!(error = %e.reason(), "identity token refresh failed");
            }
        }
    }
}

/// The claims of a JWT, read (not verified: the API just signed it) for its times.
fn claims_of(token: &str) -> Option<JobIdentityClaims> {
    let payload = token.split('.').nth(1)?;
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).ok()?).ok()
}

/// The clouds an identity block names, for the log.
fn clouds(identity: &RunnerIdentity) -> String {
    let mut names = Vec::new();
    if identity.aws.is_some() {
        names.push("AWS web identity");
    }
    if identity.gcp.is_some() {
        names.push("Google workload identity federation");
    }
    if identity.azure.is_some() {
        names.push("Azure federated credential");
    }
    names.join(", ")
}

fn create_private_dir(dir: &Path) -> Result<(), PilotError> {
    let failed = |e: std::io::Error| {
        PilotError::Workspace(format!(
            "could not create the identity directory {}: {e}",
            dir.display()
        ))
    };
    std::fs::create_dir_all(dir).map_err(failed)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(failed)?;
    }
    Ok(())
}

/// Writes `contents` to `path` with mode 0600, through a temporary file renamed over it, so
/// a reader sees the old file or the new one, never half of one.
fn write_private(path: &Path, contents: &[u8]) -> Result<(), PilotError> {
    let failed = |e: std::io::Error| {
        PilotError::Workspace(format!("could not write {}: {e}", path.display()))
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let temporary = path.with_file_name(format!(".{name}.new"));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut file = options.open(&temporary).map_err(failed)?;
    file.write_all(contents).map_err(failed)?;
    file.sync_all().map_err(failed)?;
    std::fs::rename(&temporary, path).map_err(failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_private_file_is_replaced_whole_and_readable_by_its_owner_only() {
        let dir = std::env::temp_dir().join(format!("sortie-identity-test-{}", std::process::id()));
        create_private_dir(&dir).unwrap();
        let path = dir.join(TOKEN_FILE);
        write_private(&path, b"first").unwrap();
        write_private(&path, b"second").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"second");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&path), 0o600);
            assert_eq!(mode(&dir), 0o700);
        }
        let leftovers: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temporary file is left");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_claims_are_read_from_the_token_and_garbage_is_not() {
        let claims = serde_json::json!({
            "iss": "https://api.sortie.example.com", "aud": "sts.amazonaws.com",
            "sub": "org:acme:env:acme/web/dev:op:apply:phase:plan", "iat": 100, "nbf": 100,
            "exp": 160, "jti": "j", "organisation": "acme", "group": "acme/web",
            "environment": "acme/web/dev", "job_id": "j", "requested_by": "alice",
            "operation": "apply", "phase": "plan",
        });
        let token = format!("e30.{}.c2ln", URL_SAFE_NO_PAD.encode(claims.to_string()));
        let read = claims_of(&token).unwrap();
        assert_eq!((read.iat, read.exp, read.phase), (100, 160, Phase::Plan));
        assert!(claims_of("not a token").is_none());
        assert!(claims_of("a.!!!.c").is_none());
    }
}
