//! The agent's credential: a pool token or an OIDC token, from a flag, a file re-read on
//! every call (a rotated secret or a projected service account token), or a command whose
//! output is cached for a minute.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::AgentError;

/// A token command's output is used this long before the command is run again.
pub const COMMAND_TOKEN_TTL: Duration = Duration::from_secs(60);
/// How long a token command may run.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// A secret string: never printed (its `Debug` is redacted), read with [`Secret::expose`].
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself: only to put it where it is sent, never into a message.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// Where the credential comes from: exactly one of `--token`, `--token-file`,
/// `--token-command`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CredentialSource {
    /// A fixed token.
    Token(Secret),
    /// A file holding the token, re-read on every call.
    File(PathBuf),
    /// A shell command whose standard output is the token.
    Command(String),
}

impl CredentialSource {
    /// The source the options give, which must be exactly one.
    pub fn from_options(
        token: Option<String>,
        file: Option<PathBuf>,
        command: Option<String>,
    ) -> Result<Self, AgentError> {
        let token = token.filter(|t| !t.trim().is_empty());
        let file = file.filter(|f| !f.as_os_str().is_empty());
        let command = command.filter(|c| !c.trim().is_empty());
        let given = usize::from(token.is_some())
            + usize::from(file.is_some())
            + usize::from(command.is_some());
        if given != 1 {
            return Err(AgentError::Config(format!(
                "give exactly one credential: --token (SORTIE_AGENT_TOKEN), --token-file (SORTIE_AGENT_TOKEN_FILE) or --token-command (SORTIE_AGENT_TOKEN_COMMAND); {given} given"
            )));
        }
        Ok(match (token, file, command) {
            (Some(t), _, _) => Self::Token(Secret::new(t.trim())),
            (_, Some(f), _) => Self::File(f),
            (_, _, Some(c)) => Self::Command(c),
            _ => unreachable!("exactly one is given"),
        })
    }

    /// Where it comes from, in words (never the token).
    pub fn describe(&self) -> String {
        match self {
            Self::Token(_) => "a token".into(),
            Self::File(p) => format!("the token file {}", p.display()),
            Self::Command(_) => "a token command".into(),
        }
    }
}

/// The credential, read from its source when needed.
#[derive(Debug)]
pub struct Credential {
    source: CredentialSource,
    cached: tokio::sync::Mutex<Option<(Secret, Instant)>>,
}

impl Credential {
    /// A credential read from `source`.
    pub fn new(source: CredentialSource) -> Self {
        Self {
            source,
            cached: tokio::sync::Mutex::new(None),
        }
    }

    /// The token to send now.
    pub async fn current(&self) -> Result<Secret, AgentError> {
        match &self.source {
            CredentialSource::Token(t) => Ok(t.clone()),
            CredentialSource::File(path) => {
                let text = tokio::fs::read_to_string(path).await.map_err(|e| {
                    AgentError::Credential(format!(
                        "could not read the token file {}: {e}",
                        path.display()
                    ))
                })?;
                let token = text.trim();
                if token.is_empty() {
                    return Err(AgentError::Credential(format!(
                        "the token file {} is empty",
                        path.display()
                    )));
                }
                Ok(Secret::new(token))
            }
            CredentialSource::Command(command) => {
                let mut cached = self.cached.lock().await;
                if let Some((token, at)) = cached.as_ref() {
                    if at.elapsed() < COMMAND_TOKEN_TTL {
                        return Ok(token.clone());
                    }
                }
                let token = run_token_command(command).await?;
                *cached = Some((token.clone(), Instant::now()));
                Ok(token)
            }
        }
    }

    /// Sortie refused the token (401): a command's token is fetched afresh next time.
    pub async fn refused(&self) {
        *self.cached.lock().await = None;
    }
}

/// Runs `command` with `sh -c`; its trimmed standard output is the token. Errors quote
/// the exit status and standard error, never standard output.
async fn run_token_command(command: &str) -> Result<Secret, AgentError> {
    let child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| AgentError::Credential(format!("could not run the token command: {e}")))?;
    let output = tokio::time::timeout(COMMAND_TIMEOUT, child.wait_with_output())
        .await
        .map_err(|_| {
            AgentError::Credential(format!(
                "the token command did not finish within {} s",
                COMMAND_TIMEOUT.as_secs()
            ))
        })?
        .map_err(|e| AgentError::Credential(format!("the token command failed: {e}")))?;
    if !output.status.success() {
        let stderr: String = String::from_utf8_lossy(&output.stderr)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .chars()
            .take(300)
            .collect();
        return Err(AgentError::Credential(format!(
            "the token command failed ({}): {stderr}",
            output.status
        )));
    }
    let token = String::from_utf8(output.stdout)
        .map_err(|_| AgentError::Credential("the token command's output is not UTF-8".into()))?;
    let token = token.trim();
    if token.is_empty() {
        return Err(AgentError::Credential(
            "the token command printed nothing".into(),
        ));
    }
    Ok(Secret::new(token))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exactly_one_source() {
        assert!(CredentialSource::from_options(None, None, None).is_err());
        assert!(
            CredentialSource::from_options(Some("t".into()), Some(PathBuf::from("/f")), None)
                .is_err()
        );
        assert!(
            CredentialSource::from_options(Some("t".into()), None, Some("echo t".into())).is_err()
        );
        // Empty values count as absent (an empty environment variable).
        assert_eq!(
            CredentialSource::from_options(Some(" ".into()), Some(PathBuf::from("/f")), None),
            Ok(CredentialSource::File(PathBuf::from("/f")))
        );
        assert_eq!(
            CredentialSource::from_options(Some(" tok \n".into()), None, None),
            Ok(CredentialSource::Token(Secret::new("tok")))
        );
    }

    #[test]
    fn a_secret_is_never_printed() {
        let s = Secret::new("sortie-pool-abc");
        assert!(!format!("{s:?}").contains("abc"));
        let src = CredentialSource::Token(s);
        assert!(!format!("{src:?}").contains("abc"));
        assert!(!src.describe().contains("abc"));
    }

    #[tokio::test]
    async fn a_token_file_is_read_on_every_call() {
        let dir = std::env::temp_dir().join(format!("sortie-agent-cred-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("token");
        std::fs::write(&file, "one\n").unwrap();
        let c = Credential::new(CredentialSource::File(file.clone()));
        assert_eq!(c.current().await.unwrap().expose(), "one");
        std::fs::write(&file, "two").unwrap();
        assert_eq!(c.current().await.unwrap().expose(), "two");
        std::fs::write(&file, "  ").unwrap();
        assert!(matches!(c.current().await, Err(AgentError::Credential(_))));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn a_token_command_is_cached_until_refused() {
        let dir = std::env::temp_dir().join(format!("sortie-agent-cmd-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let counter = dir.join("n");
        let command = format!(
            "echo x >> {0}; printf 'tok-%s' $(wc -l < {0} | tr -d ' ')",
            counter.display()
        );
        let c = Credential::new(CredentialSource::Command(command));
        assert_eq!(c.current().await.unwrap().expose(), "tok-1");
        assert_eq!(c.current().await.unwrap().expose(), "tok-1");
        c.refused().await;
        assert_eq!(c.current().await.unwrap().expose(), "tok-2");
        let failing = Credential::new(CredentialSource::Command(
            "echo secret-out; echo oops >&2; exit 3".into(),
        ));
        let e = failing.current().await.unwrap_err().to_string();
        assert!(e.contains("oops") && !e.contains("secret-out"), "{e}");
        let _ = std::fs::remove_dir_all(dir);
    }
}
