//! What went wrong, and the exit code that tells the kinds of failure apart, for scripts:
//!
//! | code | meaning |
//! |---|---|
//! | 0 | success |
//! | 1 | the request was refused as invalid (400, 401, 403, 413, 415), or another error |
//! | 2 | usage: bad flags or arguments (clap's own code) |
//! | 3 | not found (404) |
//! | 4 | conflict (409, 412: a busy environment, a stale ETag, a name taken) |
//! | 5 | the server failed (5xx), could not be reached, or is not a Sortie API |
//! | 6 | the job ended failed, canceled, timed out or discarded (`run --wait`, `job logs -f`) |
//! | 7 | `policy test`: a mandatory or review policy set denied the plan |
//! | 8 | the followed job waits for a person's approval (`run --wait`, `job logs -f`) |
//! | 130 | interrupted (Ctrl-C) while following a job, which goes on running |

/// A failure of a command, with the exit code of its kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CliError {
    /// Bad arguments that clap could not see (a malformed `--set`, an unreadable file).
    #[error("{0}")]
    Usage(String),
    /// The API refused the request as invalid; each field problem on its own line.
    #[error("{0}")]
    Invalid(String),
    /// The API does not know the resource; the message may suggest a command.
    #[error("{0}")]
    NotFound(String),
    /// The API refused because of the resource's state.
    #[error("{0}")]
    Conflict(String),
    /// The API failed (5xx), or could not be reached (the message names the URL).
    #[error("{0}")]
    Server(String),
    /// The job ended, but not `succeeded`.
    #[error("the job ended {state}: {reason}")]
    JobFailed {
        /// `failed`, `canceled`, `timed_out` or `discarded`.
        state: String,
        /// Why, as the job records it.
        reason: String,
    },
    /// The followed job waits for a person's approval (`run --wait`, `job logs -f`): what
    /// and how to approve was already printed. Not a failure, and not the job's end.
    #[error("the job awaits approval")]
    AwaitingApproval,
    /// `policy test`: a mandatory or review set denied (the results were already printed).
    #[error("{0}")]
    PolicyDenied(String),
    /// Ctrl-C while following a job: what happened and what to do was already printed.
    #[error("interrupted")]
    Interrupted,
    /// Anything else.
    #[error("{0}")]
    Other(String),
}

impl CliError {
    /// The process exit code for this kind of failure (see the module documentation).
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Invalid(_) | Self::Other(_) => 1,
            Self::Usage(_) => 2,
            Self::NotFound(_) => 3,
            Self::Conflict(_) => 4,
            Self::Server(_) => 5,
            Self::JobFailed { .. } => 6,
            Self::PolicyDenied(_) => 7,
            Self::AwaitingApproval => 8,
            Self::Interrupted => 130,
        }
    }
}
