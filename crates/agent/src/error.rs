//! The library's one error type.

/// What went wrong in the agent. Every message is one line and never holds a token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AgentError {
    /// The agent's configuration is not usable (a flag, a file, the in-cluster set-up).
    #[error("{0}")]
    Config(String),
    /// The credential could not be read (token file, token command).
    #[error("{0}")]
    Credential(String),
    /// 401: Sortie refused the credential.
    #[error("{0}")]
    Unauthorized(String),
    /// 404 on a claim: the pool is unknown to this credential.
    #[error("{0}")]
    PoolNotFound(String),
    /// Worth trying again: no connection, a timeout, 429 or 5xx.
    #[error("{0}")]
    Transient(String),
    /// Any other refusal (400, 403, ...) or an answer the agent cannot read.
    #[error("{0}")]
    Refused(String),
    /// A job could not be started (its exit is reported with this reason).
    #[error("{0}")]
    Launch(String),
    /// A call to the executor's platform (a process, the Kubernetes API) failed.
    #[error("{0}")]
    Executor(String),
}

impl AgentError {
    /// True when the same call may succeed later unchanged: transport errors, 429 and 5xx,
    /// and a refused credential (it may be rotated in the meantime).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Self::Transient(_) | Self::Unauthorized(_) | Self::Credential(_)
        )
    }
}
