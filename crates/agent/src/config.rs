//! The agent's configuration: the options as given (flags with environment fallbacks, read
//! by the binary), checked into an [`AgentConfig`].

use std::path::{Path, PathBuf};
use std::time::Duration;

use sortie_core::agent_pool::{agent_id_problem, pool_id_problem};
use sortie_core::protocol::agent::MAX_CLAIM_WAIT_SECONDS;

use crate::credential::{CredentialSource, Secret};
use crate::AgentError;

/// The pilot binary's name, looked for next to the agent and on `PATH`.
pub const PILOT_BINARY: &str = "sortie-pilot";
/// The default drain timeout, in seconds.
pub const DEFAULT_DRAIN_TIMEOUT_SECONDS: u64 = 3600;
/// The longest agent id (see [`agent_id_problem`]).
const AGENT_ID_MAX: usize = 64;

/// The options as given, before any check.
#[derive(Debug, Clone, Default)]
pub struct AgentOptions {
    /// Sortie's API URL (`https://…`; plain `http://` only to a loopback host, for local tests).
    pub api_url: String,
    /// The agent pool's id (`apool-…`).
    pub pool: String,
    /// A fixed credential.
    pub token: Option<Secret>,
    /// A file holding the credential.
    pub token_file: Option<PathBuf>,
    /// A command printing the credential.
    pub token_command: Option<String>,
    /// The agent's id; a default is made from the host name when absent.
    pub name: Option<String>,
    /// How many jobs the agent runs at once.
    pub max_jobs: u32,
    /// How long each claim waits for a job, in seconds.
    pub wait_seconds: u32,
    /// How long a drain waits for running jobs, in seconds.
    pub drain_timeout_seconds: u64,
    /// The `sortie-pilot` binary (local mode).
    pub runner_binary: Option<PathBuf>,
    /// Where job logs and launch records go (local mode).
    pub work_dir: Option<PathBuf>,
    /// Run jobs as Kubernetes Jobs in the agent's own cluster.
    pub kubernetes: bool,
}

/// How jobs are run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// `sortie-pilot` as a child process group of the agent.
    Local {
        /// The pilot binary.
        runner_binary: PathBuf,
        /// Per-job logs (`<job id>.log`) and launch records.
        work_dir: PathBuf,
    },
    /// One Kubernetes Job per job, in the cluster the agent runs in.
    Kubernetes,
}

/// A checked configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentConfig {
    /// Sortie's API URL, without a trailing `/`.
    pub api_url: String,
    /// The agent pool's id.
    pub pool: String,
    /// Where the credential comes from.
    pub credential: CredentialSource,
    /// The agent's id.
    pub name: String,
    /// How many jobs the agent runs at once (at least 1).
    pub max_jobs: u32,
    /// How long each claim waits for a job, in seconds (1 to 20).
    pub wait_seconds: u32,
    /// How long a drain waits for running jobs before handing them back.
    pub drain_timeout: Duration,
    /// How jobs are run.
    pub mode: Mode,
}

impl AgentOptions {
    /// Checks the options; every problem is named with the flag that sets it.
    pub fn resolve(self) -> Result<AgentConfig, AgentError> {
        let api_url = self.api_url.trim().trim_end_matches('/').to_string();
        // Judged by the parsed host (issue 25, item 13): the pool token travels to it, so
        // plain http only to a loopback host.
        if let Err(problem) = sortie_core::urls::web_url(&api_url) {
            return Err(AgentError::Config(format!(
                "--api-url (SORTIE_API_URL) must be an https:// URL (plain http:// only to a \
                 loopback host), not `{}` ({problem})",
                api_url.escape_debug()
            )));
        }
        let pool = self.pool.trim().to_string();
        if let Some(problem) = pool_id_problem(&pool) {
            return Err(AgentError::Config(format!(
                "--pool (SORTIE_AGENT_POOL) {problem}"
            )));
        }
        let credential = CredentialSource::from_options(
            self.token.map(|t| t.expose().to_string()),
            self.token_file,
            self.token_command,
        )?;
        let name = match self.name.filter(|n| !n.is_empty()) {
            Some(n) => n,
            None => default_name(&hostname()),
        };
        if let Some(problem) = agent_id_problem(&name) {
            return Err(AgentError::Config(format!("--name `{name}` {problem}")));
        }
        if self.max_jobs == 0 || self.max_jobs > sortie_core::agent_pool::MAX_CONCURRENT_JOBS {
            return Err(AgentError::Config(format!(
                "--max-jobs must be 1 to {}",
                sortie_core::agent_pool::MAX_CONCURRENT_JOBS
            )));
        }
        if !(1..=MAX_CLAIM_WAIT_SECONDS).contains(&self.wait_seconds) {
            return Err(AgentError::Config(format!(
                "--wait-seconds must be 1 to {MAX_CLAIM_WAIT_SECONDS}"
            )));
        }
        let mode = if self.kubernetes {
            Mode::Kubernetes
        } else {
            Mode::Local {
                runner_binary: self.runner_binary.unwrap_or_else(default_pilot_binary),
                work_dir: self
                    .work_dir
                    .unwrap_or_else(|| std::env::temp_dir().join(format!("sortie-agent-{name}"))),
            }
        };
        Ok(AgentConfig {
            api_url,
            pool,
            credential,
            name,
            max_jobs: self.max_jobs,
            wait_seconds: self.wait_seconds,
            drain_timeout: Duration::from_secs(self.drain_timeout_seconds),
            mode,
        })
    }
}

/// This host's name (in Kubernetes, the pod's name), or `sortie-agent`.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "sortie-agent".into())
}

/// `<host>-<6 random hex digits>`, the host name made a valid agent id (other characters
/// become `-`, cut so that the whole fits in 64).
pub fn default_name(host: &str) -> String {
    let clean: String = host
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .take(AGENT_ID_MAX - 7)
        .collect();
    let clean = if clean.is_empty() {
        "sortie-agent".to_string()
    } else {
        clean
    };
    let mut bytes = [0u8; 3];
    if getrandom::fill(&mut bytes).is_err() {
        // No randomness: the process id and the time still tell two agents apart.
        let n = std::process::id()
            ^ std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or_default();
        bytes.copy_from_slice(&n.to_le_bytes()[..3]);
    }
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("{clean}-{hex}")
}

/// `sortie-pilot` next to the agent's own executable, else the first on `PATH`, else the
/// bare name (a launch then fails, reporting that it is missing).
pub fn default_pilot_binary() -> PathBuf {
    if let Some(beside) = std::env::current_exe()
        .ok()
        .map(|exe| exe.with_file_name(PILOT_BINARY))
        .filter(|p| is_executable(p))
    {
        return beside;
    }
    find_executable(Path::new(PILOT_BINARY)).unwrap_or_else(|| PathBuf::from(PILOT_BINARY))
}

/// The executable `binary` names: itself when it holds a `/`, else the first match on
/// `PATH`.
pub fn find_executable(binary: &Path) -> Option<PathBuf> {
    if binary.components().count() > 1 || binary.is_absolute() {
        return is_executable(binary).then(|| binary.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(binary))
        .find(|p| is_executable(p))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const POOL: &str = "apool-01jnx6v4k2m8q9r3s5t7w0y1za";

    fn options() -> AgentOptions {
        AgentOptions {
            api_url: "https://sortie.example.com/".into(),
            pool: POOL.into(),
            token: Some(Secret::new("sortie-pool-x")),
            name: Some("agent-1".into()),
            max_jobs: 1,
            wait_seconds: 20,
            drain_timeout_seconds: DEFAULT_DRAIN_TIMEOUT_SECONDS,
            ..Default::default()
        }
    }

    #[test]
    fn a_good_configuration_resolves() {
        let c = options().resolve().unwrap();
        assert_eq!(c.api_url, "https://sortie.example.com");
        assert_eq!(c.name, "agent-1");
        assert_eq!(c.drain_timeout, Duration::from_secs(3600));
        assert!(matches!(c.mode, Mode::Local { .. }));
        let k = AgentOptions {
            kubernetes: true,
            ..options()
        };
        assert_eq!(k.resolve().unwrap().mode, Mode::Kubernetes);
    }

    #[test]
    fn plain_http_is_only_for_a_real_loopback_api() {
        for bad in [
            "http://127.0.0.1.evil.com",
            "http://localhost@evil.com",
            "http://localhost.evil.com",
            "http://sortie.example.com",
        ] {
            let e = AgentOptions {
                api_url: bad.into(),
                ..options()
            }
            .resolve()
            .unwrap_err();
            assert!(e.to_string().contains("--api-url"), "{bad}: {e}");
        }
        for good in [
            "http://127.0.0.1:8080",
            "http://localhost:8080",
            "http://[::1]:1",
        ] {
            let c = AgentOptions {
                api_url: good.into(),
                ..options()
            };
            assert!(c.resolve().is_ok(), "{good}");
        }
    }

    #[test]
    fn every_bad_option_is_named() {
        let cases: Vec<(AgentOptions, &str)> = vec![
            (
                AgentOptions {
                    api_url: "sortie.example.com".into(),
                    ..options()
                },
                "--api-url",
            ),
            (
                AgentOptions {
                    pool: "pool-1".into(),
                    ..options()
                },
                "--pool",
            ),
            (
                AgentOptions {
                    token: None,
                    ..options()
                },
                "exactly one credential",
            ),
            (
                AgentOptions {
                    token_command: Some("echo t".into()),
                    ..options()
                },
                "exactly one credential",
            ),
            (
                AgentOptions {
                    name: Some("a b".into()),
                    ..options()
                },
                "--name",
            ),
            (
                AgentOptions {
                    max_jobs: 0,
                    ..options()
                },
                "--max-jobs",
            ),
            (
                AgentOptions {
                    wait_seconds: 21,
                    ..options()
                },
                "--wait-seconds",
            ),
            (
                AgentOptions {
                    wait_seconds: 0,
                    ..options()
                },
                "--wait-seconds",
            ),
        ];
        for (o, want) in cases {
            let e = o.resolve().unwrap_err().to_string();
            assert!(e.contains(want), "{e} should name {want}");
            assert!(!e.contains("sortie-pool-x"), "{e}");
        }
    }

    #[test]
    fn the_default_name_is_a_valid_agent_id() {
        for host in [
            "ip-10-0-0-1.ec2.internal",
            "pod_name",
            "weird host/name!",
            "",
            &"h".repeat(200),
        ] {
            let name = default_name(host);
            assert_eq!(agent_id_problem(&name), None, "{name}");
            let (_, hex) = name.rsplit_once('-').unwrap();
            assert_eq!(hex.len(), 6);
            assert!(hex.chars().all(|c| c.is_ascii_hexdigit()));
        }
        assert!(default_name("build-7").starts_with("build-7-"));
        assert_ne!(default_name("h"), default_name("h"));
        assert_eq!(agent_id_problem(&default_name(&hostname())), None);
    }

    #[test]
    fn executables_are_found_on_the_path() {
        assert!(find_executable(Path::new("sh")).is_some());
        assert!(find_executable(Path::new("/bin/sh")).is_some());
        assert!(find_executable(Path::new("no-such-binary-for-sure")).is_none());
        assert!(find_executable(Path::new("/nonexistent/sortie-pilot")).is_none());
    }
}
