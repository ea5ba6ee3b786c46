//! Ctrl-C while following a job (`run --wait`, `job logs -f`): following stops, the job
//! goes on. The first Ctrl-C prints what happened and what to do; a second within
//! [`AGAIN_WITHIN`] offers to cancel the job, as Terraform's remote runs do: on a
//! terminal it asks `Cancel job <id>? [y/N]`, elsewhere it prints the cancel command.
//! The process then exits 130.

use std::io::{BufRead, IsTerminal, Write};
use std::time::Duration;

use crate::client::Api;
use crate::exit::CliError;

/// How long after the first Ctrl-C a second one offers to cancel.
pub const AGAIN_WITHIN: Duration = Duration::from_secs(2);

/// A listener of Ctrl-C, installed when following starts (so a Ctrl-C then no longer
/// kills the process), buffering each press until it is read.
pub struct Interrupts {
    #[cfg(unix)]
    signal: Option<tokio::signal::unix::Signal>,
}

impl Interrupts {
    /// Starts listening.
    pub fn listen() -> Self {
        Self {
            #[cfg(unix)]
            signal: tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()).ok(),
        }
    }

    /// Resolves at the next Ctrl-C (never, when no listener could be installed).
    pub async fn next(&mut self) {
        #[cfg(unix)]
        match &mut self.signal {
            Some(signal) => {
                if signal.recv().await.is_some() {
                    return;
                }
                std::future::pending::<()>().await
            }
            None => std::future::pending::<()>().await,
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// The line printed at the first Ctrl-C.
pub fn stopped_message(id: &str) -> String {
    format!(
        "stopped following; job {id} is still running. Follow again: sortie job logs -f {id} · Cancel: sortie job cancel {id}"
    )
}

/// What a second Ctrl-C does: ask on a terminal, else say how to cancel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offer {
    /// Ask `Cancel job <id>? [y/N]` on standard error and read the answer on standard input.
    Ask,
    /// Print the cancel command only.
    Hint,
}

/// [`Offer::Ask`] when both standard input and standard error are terminals.
pub fn offer(stdin_terminal: bool, stderr_terminal: bool) -> Offer {
    if stdin_terminal && stderr_terminal {
        Offer::Ask
    } else {
        Offer::Hint
    }
}

/// True for a yes to `[y/N]`: `y` or `yes`, in any case; anything else is no.
pub fn is_yes(answer: &str) -> bool {
    matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

/// After the first Ctrl-C (spinner already cleared): prints the message, waits
/// [`AGAIN_WITHIN`] for a second Ctrl-C and, if it comes, offers to cancel. Always
/// [`CliError::Interrupted`] (exit 130).
pub async fn stop_following(api: &Api, id: &str, interrupts: &mut Interrupts) -> CliError {
    let mut err = std::io::stderr();
    let _ = writeln!(err, "\n{}", stopped_message(id));
    let _ = writeln!(
        err,
        "(press Ctrl-C again within {} s to cancel the job)",
        AGAIN_WITHIN.as_secs()
    );
    if tokio::time::timeout(AGAIN_WITHIN, interrupts.next())
        .await
        .is_err()
    {
        return CliError::Interrupted;
    }
    match offer(std::io::stdin().is_terminal(), err.is_terminal()) {
        Offer::Hint => {
            let _ = writeln!(err, "to cancel the job: sortie job cancel {id}");
        }
        Offer::Ask => {
            let _ = write!(err, "Cancel job {id}? [y/N] ");
            let _ = err.flush();
            // A thread of its own: a pending read must not hold the process at exit.
            let (tx, rx) = tokio::sync::oneshot::channel();
            std::thread::spawn(move || {
                let mut line = String::new();
                let _ = std::io::stdin().lock().read_line(&mut line);
                let _ = tx.send(line);
            });
            let answer = tokio::select! {
                line = rx => line.unwrap_or_default(),
                // A third Ctrl-C is a no.
                () = interrupts.next() => String::new(),
            };
            if is_yes(&answer) {
                match api
                    .send(&sortie_client::endpoints::cancel_job(id), None, &[])
                    .await
                {
                    Ok(_) => {
                        let _ = writeln!(
                            err,
                            "job {id}: cancel requested; it ends `canceled` (see it with `sortie job get {id}`)"
                        );
                    }
                    Err(e) => {
                        let _ = writeln!(err, "could not cancel job {id}: {e}");
                    }
                }
            } else {
                let _ = writeln!(
                    err,
                    "\nnot canceled; job {id} is still running (cancel it with `sortie job cancel {id}`)"
                );
            }
        }
    }
    CliError::Interrupted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_says_what_happened_and_the_two_commands() {
        assert_eq!(
            stopped_message("01abc"),
            "stopped following; job 01abc is still running. Follow again: sortie job logs -f 01abc · Cancel: sortie job cancel 01abc"
        );
        assert_eq!(CliError::Interrupted.exit_code(), 130);
    }

    #[test]
    fn only_a_terminal_is_asked_and_only_yes_cancels() {
        assert_eq!(offer(true, true), Offer::Ask);
        assert_eq!(offer(false, true), Offer::Hint);
        assert_eq!(offer(true, false), Offer::Hint);
        for yes in ["y", "Y\n", " yes ", "YES"] {
            assert!(is_yes(yes), "{yes:?}");
        }
        for no in ["", "\n", "n", "no", "yep", "y es"] {
            assert!(!is_yes(no), "{no:?}");
        }
    }
}
