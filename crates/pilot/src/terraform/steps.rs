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
    /// `plan` to [`PLAN_FILE`]; `-destroy` for a destroy, `-detailed-exitcode` for a drift
    /// check, `-lock=false` for a speculative plan.
    Plan {
        /// Plan the destruction of everything.
        destroy: bool,
        /// Exit code 2 means "changes present" (a success).
        detailed_exitcode: bool,
        /// A speculative plan (a pull request's): it holds no environment lock, so it takes
        /// no state lock either (`-lock=false`), and never waits on one an apply holds.
        speculative: bool,
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
                speculative,
            } => {
                if destroy {
                    args.push("-destroy".into());
                }
                if detailed_exitcode {
                    args.push("-detailed-exitcode".into());
                }
                // `plan -lock=false`: "Don't hold a state lock during the operation"
                // (https://developer.hashicorp.com/terraform/cli/commands/plan#lock-false;
                // Terraform 0.9 and later). `init` takes no lock unless it migrates state
                // ("-lock=false: Don't hold a state lock during backend migration",
                // https://developer.hashicorp.com/terraform/cli/commands/init), and the
                // pilot's init never migrates: it starts from an empty directory with
                // `-input=false`, so init is left as it is.
                if speculative {
                    args.push("-lock=false".into());
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
/// `detailed_exitcode` adds `-detailed-exitcode` to the plan, `speculative` adds
/// `-lock=false`. A plan job has no apply phase, and a speculative job is only ever a plan:
/// any other operation or phase is an error (the guard refuses such a spec first:
/// [`crate::guard::spec_refusal`]).
pub fn job_steps(
    operation: Operation,
    phase: Option<JobPhase>,
    detailed_exitcode: bool,
    speculative: bool,
) -> Result<Vec<Step>, PilotError> {
    let plan = Step::Plan {
        destroy: operation == Operation::Destroy,
        detailed_exitcode,
        speculative,
    };
    if speculative && (operation != Operation::Plan || phase == Some(JobPhase::Apply)) {
        return Err(PilotError::Refused(format!(
            "refused: a speculative job may only plan; this spec asks for {} {}",
            sortie_core::job::a_or_an(operation.as_str()),
            operation.as_str()
        )));
    }
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
        let steps = |op, phase, detailed| job_steps(op, phase, detailed, false).unwrap();
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
                let Ok(steps) = job_steps(op, phase, false, false) else {
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
        let steps = |op, phase| args(&job_steps(op, Some(phase), false, false).unwrap());
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
        let err = job_steps(Operation::Plan, Some(JobPhase::Apply), false, false).unwrap_err();
        assert!(err.reason().contains("no apply phase"), "{err}");
    }

    #[test]
    fn a_drift_check_plans_with_detailed_exit_codes_and_takes_2_as_success() {
        let steps = job_steps(Operation::Plan, None, true, false).unwrap();
        assert_eq!(
            args(&steps),
            ["plan -input=false -no-color -detailed-exitcode -out=plan.tfplan"]
        );
        assert_eq!(steps[0].also_succeeds_with(), [2]);
        let plain = job_steps(Operation::Plan, None, false, false).unwrap();
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

    #[test]
    fn a_speculative_plan_takes_no_state_lock_and_init_is_unchanged() {
        let steps = job_steps(Operation::Plan, None, false, true).unwrap();
        assert_eq!(
            args(&steps),
            ["plan -input=false -no-color -lock=false -out=plan.tfplan"]
        );
        let drift = job_steps(Operation::Plan, Some(JobPhase::Plan), true, true).unwrap();
        assert_eq!(
            args(&drift),
            ["plan -input=false -no-color -detailed-exitcode -lock=false -out=plan.tfplan"]
        );
        // Not speculative: the plan locks as always.
        for op in [Operation::Plan, Operation::Apply, Operation::Destroy] {
            let all = args(&job_steps(op, None, false, false).unwrap()).join("\n");
            assert!(!all.contains("-lock"), "{op:?}: {all}");
        }
        // init takes no lock unless it migrates state, which the pilot's never does.
        assert!(!init_args(&[]).iter().any(|a| a.starts_with("-lock")));
    }

    #[test]
    fn a_speculative_job_never_gets_an_apply_step() {
        for (op, phase) in [
            (Operation::Apply, None),
            (Operation::Apply, Some(JobPhase::Plan)),
            (Operation::Apply, Some(JobPhase::Apply)),
            (Operation::Destroy, None),
            (Operation::Destroy, Some(JobPhase::Apply)),
            (Operation::Plan, Some(JobPhase::Apply)),
        ] {
            let err = job_steps(op, phase, false, true).unwrap_err();
            assert!(
                matches!(err, PilotError::Refused(_)) || matches!(err, PilotError::Spec(_)),
                "{op:?} {phase:?}: {err}"
            );
        }
        let err = job_steps(Operation::Apply, None, false, true).unwrap_err();
        assert!(err.reason().contains("speculative"), "{err}");
    }
}
