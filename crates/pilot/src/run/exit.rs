//! How a run ends: the process exit code, the exit report the API gets, and the log's last
//! line.

use sortie_core::protocol::pilot::{JobSpec, PilotExit, PILOT_EXIT_REASON_MAX};
use sortie_core::{ChangeSummary, JobPhase, Operation};

use crate::api::{ApiClient, ExitReported};
use crate::error::PilotError;
use crate::log::LogSink;
use crate::summary;

/// Every line the pilot writes itself starts with this.
pub const PREFIX: &str = "sortie-pilot:";

/// The process exit code of a failed run (a successful one exits 0).
pub const FAILURE_EXIT_CODE: u8 = 1;

/// The process exit code for `result`: 0, or [`FAILURE_EXIT_CODE`].
pub fn exit_code<T>(result: &Result<T, PilotError>) -> u8 {
    match result {
        Ok(_) => 0,
        Err(_) => FAILURE_EXIT_CODE,
    }
}

/// The final callback's body for `result`: the exit code the process is about to
/// return and, on failure, the reason on one line (no control characters; scrubbed of
/// the process's secrets by [`PilotError::reason`]: it quotes Terraform's first error, which
/// may quote a value, and the API stores it on the job and in its events), cut to
/// [`PILOT_EXIT_REASON_MAX`] bytes, ending with `…` when cut.
pub fn pilot_exit<T>(result: &Result<T, PilotError>) -> PilotExit {
    PilotExit {
        exit_code: i32::from(exit_code(result)),
        reason: result.as_ref().err().map(|e| {
            let reason: String = e.reason().chars().filter(|c| !c.is_control()).collect();
            if reason.len() <= PILOT_EXIT_REASON_MAX {
                reason
            } else {
                format!("{}…", clip(&reason, PILOT_EXIT_REASON_MAX - '…'.len_utf8()))
            }
        }),
    }
}

/// `text` cut to at most `max` bytes, on a character boundary.
pub fn clip(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The last line of a failed job's log.
pub fn failure_line(error: &PilotError) -> String {
    format!("{PREFIX} {}", error.reason())
}

/// Prints a failure that happened before the job's log exists (bad environment,
/// the spec refused) as the last line of stdout.
pub fn report_early_failure(error: &PilotError) {
    tracing::error!(reason = %error.reason(), "job failed before it started");
    let sink = LogSink::new(true);
    sink.line(&failure_line(error));
    sink.end();
}

/// The final callback, when `spec` asks for it. Its failure is logged (the platform's
/// own view of the pod, polled by the sweeper, still ends the job), never returned.
pub(super) async fn report_exit(
    api: &ApiClient,
    spec: &JobSpec,
    result: &Result<ChangeSummary, PilotError>,
) {
    if !spec.report_exit {
        return;
    }
    let exit = pilot_exit(result);
    match api.report_exit(&exit).await {
        Ok(ExitReported::Recorded) => {
            tracing::info!(exit_code = exit.exit_code, "exit reported to the API")
        }
        Ok(ExitReported::Conflict(detail)) => tracing::info!(
            exit_code = exit.exit_code,
            detail,
            "the API answered the exit report with 409 Conflict: the job is not running (its launch is not recorded yet); the sweeper ends it from the pod's status"
        ),
        Err(e) => tracing::error!(
            exit_code = exit.exit_code,
            error = %e.reason(),
            "could not report the exit to the API; the job ends when the platform reports the pod"
        ),
    }
}

/// The job as the log names it: `apply`, `apply (plan phase)`, `plan (drift check)`,
/// `plan (speculative: no state lock)`.
pub fn job_label(spec: &JobSpec) -> String {
    let operation = spec.operation.as_str();
    if spec.speculative {
        return format!("{operation} (speculative: no state lock)");
    }
    match (spec.phase, spec.detailed_exitcode) {
        (Some(phase), _) => format!("{operation} ({} phase)", phase.as_str()),
        (None, true) => format!("{operation} (drift check)"),
        (None, false) => operation.to_string(),
    }
}

/// The log's last line of a successful job (after the prefix): what it did and the counts,
/// as a plan's (`1 to add, ...`) when it only planned.
pub fn success_line(spec: &JobSpec, summary: &ChangeSummary) -> String {
    let planned_only = spec.operation == Operation::Plan || spec.phase == Some(JobPhase::Plan);
    let counted_as = if planned_only {
        Operation::Plan
    } else {
        spec.operation
    };
    let changes = match summary.has_changes {
        Some(true) => "; changes present",
        Some(false) => "; no changes",
        None => "",
    };
    format!(
        "{} succeeded: {}{changes}",
        job_label(spec),
        summary::describe(summary, counted_as)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exit_report_carries_the_exit_code_and_a_one_line_reason() {
        let ok: Result<ChangeSummary, PilotError> = Ok(ChangeSummary::default());
        assert_eq!(
            pilot_exit(&ok),
            PilotExit {
                exit_code: 0,
                reason: None
            }
        );
        let failed: Result<(), PilotError> = Err(PilotError::Source(
            "git clone failed:\n  fatal: not found".into(),
        ));
        assert_eq!(
            pilot_exit(&failed),
            PilotExit {
                exit_code: i32::from(FAILURE_EXIT_CODE),
                reason: Some("git clone failed: fatal: not found".into())
            }
        );
        assert_eq!(exit_code(&failed), 1);
        let colored: Result<(), PilotError> = Err(PilotError::Source(
            "\u{1b}[31mError\u{1b}[0m: bad\u{7}".into(),
        ));
        assert_eq!(
            pilot_exit(&colored).reason.as_deref(),
            Some("[31mError[0m: bad")
        );
    }

    #[test]
    fn a_long_reason_is_cut_on_a_character_boundary() {
        // 'é' is two bytes: 1023 bytes of 'x' then 'é' would straddle the limit.
        let reason = format!("{}é and more", "x".repeat(PILOT_EXIT_REASON_MAX - 1));
        let failed: Result<(), PilotError> = Err(PilotError::Workspace(reason));
        let exit = pilot_exit(&failed);
        let cut = exit.reason.unwrap();
        assert_eq!(cut, format!("{}…", "x".repeat(PILOT_EXIT_REASON_MAX - 3)));
        assert_eq!(cut.len(), PILOT_EXIT_REASON_MAX);
        assert_eq!(clip("ééé", 5), "éé");
        assert_eq!(clip("short", PILOT_EXIT_REASON_MAX), "short");
        assert_eq!(clip("", 0), "");
    }
}
