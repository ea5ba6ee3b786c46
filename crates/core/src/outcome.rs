//! How a stopped task becomes a job's outcome. Pure: the ECS (or Kubernetes, or
//! local process) specifics are reduced to a [`TaskStop`] first.

use serde::{Deserialize, Serialize};

use crate::job::{JobState, Operation};

/// Prefix of every stop reason Sortie gives a task it stops itself.
pub const STOP_REASON_PREFIX: &str = "sortie: ";
/// Stop reason prefix for a cancel: `sortie: canceled by <principal>`.
pub const CANCELED_BY: &str = "sortie: canceled by ";
/// Stop reason prefix for a timeout: `sortie: timed out after <n>s`.
pub const TIMED_OUT_AFTER: &str = "sortie: timed out after ";
/// The ECS-like stop code of a job whose agent stopped heartbeating.
pub const AGENT_LOST: &str = "AgentLost";
/// The stop code of a job an agent handed back (a drain that could not wait for it).
pub const AGENT_HANDED_BACK: &str = "AgentHandedBack";
/// The stop code of a stop the agent never confirmed within the grace.
pub const AGENT_STOP_UNCONFIRMED: &str = "AgentStopUnconfirmed";

/// What is known about a stopped task.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskStop {
    /// ECS `stopCode`: `EssentialContainerExited`, `TaskFailedToStart`, `SpotInterruption`,
    /// `UserInitiated`, `ServiceSchedulerInitiated`, `TerminationNotice`.
    pub stop_code: Option<String>,
    /// ECS `stoppedReason`.
    pub stopped_reason: Option<String>,
    /// The runner container's exit code, if it ran.
    pub exit_code: Option<i32>,
    /// The runner container's `reason`, such as `OutOfMemoryError: Container killed due to memory usage`.
    pub container_reason: Option<String>,
}

/// A job's fate after its task stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    /// The state to move to: a terminal state, or `queued` to run again.
    pub state: JobState,
    /// Why, in words, quoting what AWS said.
    pub reason: String,
}

impl Outcome {
    fn new(state: JobState, reason: impl Into<String>) -> Self {
        Self {
            state,
            reason: reason.into(),
        }
    }
}

fn is_oom(stop: &TaskStop) -> bool {
    let says_oom = |s: &Option<String>| {
        s.as_deref()
            .is_some_and(|r| r.contains("OutOfMemory") || r.contains("OOMKilled"))
    };
    says_oom(&stop.container_reason) || says_oom(&stop.stopped_reason)
}

/// Maps a stopped task to the job's outcome.
///
/// In order: a stop Sortie asked for (`sortie: canceled by …`, `sortie: timed out after …`)
/// wins over everything; a task that failed to start fails with AWS's reason
/// (such as `CannotPullContainerError`); a Spot interruption, a lost agent or a job its
/// agent handed back requeues a plan and fails a state writer; an OOM kill is named; otherwise the runner container's exit code decides.
pub fn task_outcome(operation: Operation, stop: &TaskStop) -> Outcome {
    let reason = stop.stopped_reason.clone().unwrap_or_default();
    if let Some(who) = reason.strip_prefix(CANCELED_BY) {
        return Outcome::new(JobState::Canceled, format!("canceled by {who}"));
    }
    if reason.starts_with(TIMED_OUT_AFTER) {
        return Outcome::new(
            JobState::TimedOut,
            reason.trim_start_matches(STOP_REASON_PREFIX).to_string(),
        );
    }
    match stop.stop_code.as_deref() {
        Some("TaskFailedToStart") => {
            return Outcome::new(
                JobState::Failed,
                format!(
                    "task failed to start: \"{}\"",
                    if reason.is_empty() {
                        "no reason given"
                    } else {
                        &reason
                    }
                ),
            );
        }
        Some("SpotInterruption") | Some("TerminationNotice") => {
            return if operation.writes_state() {
                Outcome::new(JobState::Failed, format!("the {} was interrupted on Fargate Spot (\"{reason}\") and is not re-run blindly: check the state, then submit it again", operation.as_str()))
            } else {
                Outcome::new(
                    JobState::Queued,
                    format!("plan interrupted on Fargate Spot (\"{reason}\"); requeued"),
                )
            };
        }
        // A lost agent, or a job its agent handed back: like a Spot interruption, a plan
        // runs again elsewhere; a state writer may have written half its state, so it fails.
        Some(AGENT_LOST) | Some(AGENT_HANDED_BACK) => {
            return if operation.writes_state() {
                Outcome::new(JobState::Failed, format!("{reason}; the {} is not re-run blindly: check the state, then submit it again", operation.as_str()))
            } else {
                Outcome::new(JobState::Queued, format!("{reason}; the plan is requeued"))
            };
        }
        _ => {}
    }
    if is_oom(stop) {
        let detail = stop
            .container_reason
            .clone()
            .or(stop.stopped_reason.clone())
            .unwrap_or_default();
        return Outcome::new(JobState::Failed, format!("the runner was killed for running out of memory (\"{detail}\"); give the runner more memory"));
    }
    match stop.exit_code {
        Some(0) => Outcome::new(JobState::Succeeded, "the runner exited with code 0"),
        Some(code) => {
            let mut r = format!("the runner exited with code {code}");
            if let Some(c) = stop.container_reason.as_deref().filter(|c| !c.is_empty()) {
                r.push_str(&format!(" (\"{c}\")"));
            }
            Outcome::new(JobState::Failed, r)
        }
        None => Outcome::new(
            JobState::Failed,
            format!(
                "the task stopped before the runner exited: \"{}\"",
                if reason.is_empty() {
                    "no reason given"
                } else {
                    &reason
                }
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stop(
        code: Option<&str>,
        reason: Option<&str>,
        exit: Option<i32>,
        container: Option<&str>,
    ) -> TaskStop {
        TaskStop {
            stop_code: code.map(Into::into),
            stopped_reason: reason.map(Into::into),
            exit_code: exit,
            container_reason: container.map(Into::into),
        }
    }

    #[test]
    fn exit_codes_decide_ordinary_stops() {
        let ok = task_outcome(
            Operation::Apply,
            &stop(
                Some("EssentialContainerExited"),
                Some("Essential container in task exited"),
                Some(0),
                None,
            ),
        );
        assert_eq!(ok.state, JobState::Succeeded);
        let bad = task_outcome(
            Operation::Apply,
            &stop(
                Some("EssentialContainerExited"),
                None,
                Some(1),
                Some("terraform apply failed"),
            ),
        );
        assert_eq!(bad.state, JobState::Failed);
        assert!(bad.reason.contains("code 1") && bad.reason.contains("terraform apply failed"));
    }

    #[test]
    fn failed_to_start_quotes_aws() {
        let o = task_outcome(
            Operation::Plan,
            &stop(
                Some("TaskFailedToStart"),
                Some("CannotPullContainerError: pull image manifest has been retried 5 time(s)"),
                None,
                None,
            ),
        );
        assert_eq!(o.state, JobState::Failed);
        assert!(
            o.reason
                .contains("\"CannotPullContainerError: pull image manifest"),
            "{}",
            o.reason
        );
    }

    #[test]
    fn spot_requeues_a_plan_but_fails_an_apply() {
        let s = stop(
            Some("SpotInterruption"),
            Some("Your Spot Task was interrupted."),
            Some(143),
            None,
        );
        assert_eq!(task_outcome(Operation::Plan, &s).state, JobState::Queued);
        let apply = task_outcome(Operation::Apply, &s);
        assert_eq!(apply.state, JobState::Failed);
        assert!(apply.reason.contains("not re-run blindly"));
        assert_eq!(task_outcome(Operation::Destroy, &s).state, JobState::Failed);
    }

    #[test]
    fn oom_is_named() {
        let o = task_outcome(
            Operation::Apply,
            &stop(
                Some("EssentialContainerExited"),
                None,
                Some(137),
                Some("OutOfMemoryError: Container killed due to memory usage"),
            ),
        );
        assert_eq!(o.state, JobState::Failed);
        assert!(o.reason.contains("out of memory"), "{}", o.reason);
    }

    #[test]
    fn stops_sortie_asked_for_are_canceled_or_timed_out() {
        let c = task_outcome(
            Operation::Apply,
            &stop(
                Some("UserInitiated"),
                Some("sortie: canceled by alice"),
                Some(143),
                None,
            ),
        );
        assert_eq!(
            (c.state, c.reason.as_str()),
            (JobState::Canceled, "canceled by alice")
        );
        let t = task_outcome(
            Operation::Apply,
            &stop(
                Some("UserInitiated"),
                Some("sortie: timed out after 7200s"),
                Some(143),
                None,
            ),
        );
        assert_eq!(t.state, JobState::TimedOut);
        assert!(t.reason.contains("7200s"));
        let other_user = task_outcome(
            Operation::Plan,
            &stop(
                Some("UserInitiated"),
                Some("stopped by an operator"),
                Some(143),
                None,
            ),
        );
        assert_eq!(
            other_user.state,
            JobState::Failed,
            "a stop Sortie did not ask for is a failure, with its exit code"
        );
    }

    #[test]
    fn no_exit_code_fails_with_the_reason() {
        let o = task_outcome(
            Operation::Plan,
            &stop(None, Some("Task stopped"), None, None),
        );
        assert_eq!(o.state, JobState::Failed);
        assert!(o.reason.contains("Task stopped"));
    }
}
