//! The terraform commands of a job after `init`, by operation and phase.

use sortie_core::{JobPhase, Operation};

use super::PLAN_FILE;
use crate::error::PilotError;

/// `init`'s arguments.
pub fn init_args(backend_args: &[String]) -> Vec<String> {
    let mut args = vec!["init".into(), "-input=false".into(), "-no-color".into()];
    args.extend(backend_args.iter().cloned());
    args
}

/// One terraform command of a job, after `init`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// `plan` to [`PLAN_FILE`]; `-destroy` for a destroy, `-detailed-exitcode` for a drift check.
    Plan {
        /// Plan the destruction of everything.
        destroy: bool,
        /// Exit code 2 means "changes present" (a success).
        detailed_exitcode: bool,
    },
    /// `apply` [`PLAN_FILE`]: exactly the saved plan, never a new one.
    ApplyPlan,
}

impl Step {
    /// The command line's arguments. Works the same on Terraform 0.11 and later.
    pub fn args(&self) -> Vec<String> {
        let mut args: Vec<String> = match self {
            Self::Plan { .. } => vec!["plan".into()],
            Self::ApplyPlan => vec!["apply".into()],
        };
        args.push("-input=false".into());
        args.push("-no-color".into());
        match *self {
            Self::Plan {
                destroy,
                detailed_exitcode,
            } => {
                if destroy {
                    args.push("-destroy".into());
                }
                if detailed_exitcode {
                    args.push("-detailed-exitcode".into());
                }
                args.push(format!("-out={PLAN_FILE}"));
            }
            Self::ApplyPlan => args.push(PLAN_FILE.into()),
        }
        args
    }

    /// Exit codes other than 0 that mean success: 2 ("changes present") for a
    /// `-detailed-exitcode` plan.
    pub fn also_succeeds_with(&self) -> &'static [i32] {
        match self {
            Self::Plan {
                detailed_exitcode: true,
                ..
            } => &[2],
            _ => &[],
        }
    }
}

/// The commands a job runs after `init`:
///
/// | operation | phase | steps |
/// |---|---|---|
/// | plan | none or plan | `plan -out` |
/// | apply | none | `plan -out`, `apply plan.tfplan` |
/// | destroy | none | `plan -destroy -out`, `apply plan.tfplan` |
/// | apply, destroy | plan | `plan -out` (`-destroy` for a destroy) |
/// | apply, destroy | apply | `apply plan.tfplan` (the saved plan, downloaded) |
///
/// `detailed_exitcode` adds `-detailed-exitcode` to the plan. A plan job has no apply phase.
pub fn job_steps(
    operation: Operation,
    phase: Option<JobPhase>,
    detailed_exitcode: bool,
) -> Result<Vec<Step>, PilotError> {
    let plan = Step::Plan {
        destroy: operation == Operation::Destroy,
        detailed_exitcode,
    };
    match (operation, phase) {
        (Operation::Plan, None | Some(JobPhase::Plan)) => Ok(vec![plan]),
        (Operation::Plan, Some(JobPhase::Apply)) => Err(PilotError::Spec(
            "a plan job has no apply phase: the spec asks to apply a plan job".into(),
        )),
        (_, None) => Ok(vec![plan, Step::ApplyPlan]),
        (_, Some(JobPhase::Plan)) => Ok(vec![plan]),
        (_, Some(JobPhase::Apply)) => Ok(vec![Step::ApplyPlan]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(steps: &[Step]) -> Vec<String> {
        steps.iter().map(|s| s.args().join(" ")).collect()
    }

    #[test]
    fn every_apply_and_destroy_applies_exactly_the_plan_it_made() {
        let steps = |op, phase, detailed| job_steps(op, phase, detailed).unwrap();
        assert_eq!(
            args(&steps(Operation::Plan, None, false)),
            ["plan -input=false -no-color -out=plan.tfplan"]
        );
        assert_eq!(
            args(&steps(Operation::Apply, None, false)),
            [
                "plan -input=false -no-color -out=plan.tfplan",
                "apply -input=false -no-color plan.tfplan"
            ]
        );
        assert_eq!(
            args(&steps(Operation::Destroy, None, false)),
            [
                "plan -input=false -no-color -destroy -out=plan.tfplan",
                "apply -input=false -no-color plan.tfplan"
            ]
        );
        for op in [Operation::Plan, Operation::Apply, Operation::Destroy] {
            for phase in [None, Some(JobPhase::Plan), Some(JobPhase::Apply)] {
                let Ok(steps) = job_steps(op, phase, false) else {
                    continue;
                };
                let all = args(&steps).join("\n");
                assert!(!all.contains("-auto-approve"), "{op:?} {phase:?}: {all}");
                assert!(!all.contains("-force"), "{op:?} {phase:?}: {all}");
                assert!(
                    steps
                        .iter()
                        .all(|s| matches!(s.args()[0].as_str(), "plan" | "apply")),
                    "never the destroy command: {all}"
                );
                let plans = steps
                    .iter()
                    .filter(|s| matches!(s, Step::Plan { .. }))
                    .count();
                assert!(plans <= 1, "never a second plan: {all}");
            }
        }
    }

    #[test]
    fn a_reviewed_job_plans_in_its_first_phase_and_applies_in_its_second() {
        let steps = |op, phase| args(&job_steps(op, Some(phase), false).unwrap());
        assert_eq!(
            steps(Operation::Apply, JobPhase::Plan),
            ["plan -input=false -no-color -out=plan.tfplan"]
        );
        assert_eq!(
            steps(Operation::Destroy, JobPhase::Plan),
            ["plan -input=false -no-color -destroy -out=plan.tfplan"]
        );
        for op in [Operation::Apply, Operation::Destroy] {
            assert_eq!(
                steps(op, JobPhase::Apply),
                ["apply -input=false -no-color plan.tfplan"]
            );
        }
        assert_eq!(
            steps(Operation::Plan, JobPhase::Plan),
            ["plan -input=false -no-color -out=plan.tfplan"]
        );
        let err = job_steps(Operation::Plan, Some(JobPhase::Apply), false).unwrap_err();
        assert!(err.reason().contains("no apply phase"), "{err}");
    }

    #[test]
    fn a_drift_check_plans_with_detailed_exit_codes_and_takes_2_as_success() {
        let steps = job_steps(Operation::Plan, None, true).unwrap();
        assert_eq!(
            args(&steps),
            ["plan -input=false -no-color -detailed-exitcode -out=plan.tfplan"]
        );
        assert_eq!(steps[0].also_succeeds_with(), [2]);
        let plain = job_steps(Operation::Plan, None, false).unwrap();
        assert!(plain[0].also_succeeds_with().is_empty());
        assert!(Step::ApplyPlan.also_succeeds_with().is_empty());
        assert_eq!(
            init_args(&["-backend-config=bucket=b".into()]),
            [
                "init",
                "-input=false",
                "-no-color",
                "-backend-config=bucket=b"
            ]
        );
    }
}
