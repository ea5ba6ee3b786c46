//! `runner check`: a preflight of a runner's configuration, made without launching
//! anything. Each check says what was looked at and how it went, in the platform's words.

use serde::{Deserialize, Serialize};

/// How one check went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum CheckStatus {
    /// What was checked is as a launch needs it.
    Passed,
    /// A launch on this runner would fail for the reason in the check's detail.
    Failed,
    /// Not checked, because a check it needs failed (the detail names it).
    Skipped,
}

/// One check of a runner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = RunnerCheckView))]
pub struct RunnerCheck {
    /// What was checked: one of the `CHECK_*` names.
    pub name: String,
    /// How it went.
    pub status: CheckStatus,
    /// What was found, with the platform's error quoted when it failed.
    pub detail: String,
}

/// The runner's launcher role was assumed, with the ExternalId and the session tags.
pub const CHECK_ASSUME_ROLE: &str = "assume_role";
/// The ECS (or EKS) cluster exists and is ACTIVE; for EKS, its API answers over TLS
/// verified against the cluster's CA.
pub const CHECK_CLUSTER: &str = "cluster";
/// `eks`: the runner's Job can be built (its `pod_template` overlay and secrets).
pub const CHECK_JOB_TEMPLATE: &str = "job_template";
/// `eks`: the launcher role may create, get, list and delete Jobs and list pods in the
/// runner's namespace (SelfSubjectAccessReview).
pub const CHECK_KUBERNETES_ACCESS: &str = "kubernetes_access";
/// The capacity providers the runner's jobs use are associated with the cluster.
pub const CHECK_CAPACITY_PROVIDER: &str = "capacity_provider";
/// The task definition exists, is ACTIVE, runs on Fargate and has the runner container.
pub const CHECK_TASK_DEFINITION: &str = "task_definition";
/// The subnets and security groups exist and are all in one VPC.
pub const CHECK_NETWORK: &str = "network";
/// The launcher role may pass the task's execution and task roles to ECS.
pub const CHECK_PASS_ROLE: &str = "pass_role";
/// This deployment has a launcher for the runner's type.
pub const CHECK_LAUNCHER: &str = "launcher";

impl RunnerCheck {
    /// A passed check.
    pub fn passed(name: &str, detail: impl Into<String>) -> Self {
        Self::new(name, CheckStatus::Passed, detail)
    }

    /// A failed check.
    pub fn failed(name: &str, detail: impl Into<String>) -> Self {
        Self::new(name, CheckStatus::Failed, detail)
    }

    /// A check not made because `needs` did not pass.
    pub fn skipped(name: &str, needs: &str) -> Self {
        Self::new(
            name,
            CheckStatus::Skipped,
            format!("not checked: `{needs}` did not pass"),
        )
    }

    fn new(name: &str, status: CheckStatus, detail: impl Into<String>) -> Self {
        Self {
            name: name.to_string(),
            status,
            detail: detail.into(),
        }
    }

    /// True when this check passed.
    pub fn is_passed(&self) -> bool {
        self.status == CheckStatus::Passed
    }
}

/// True when there is at least one check and every check passed (a skipped one did not).
pub fn all_passed(checks: &[RunnerCheck]) -> bool {
    !checks.is_empty() && checks.iter().all(RunnerCheck::is_passed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_passes_only_when_every_check_passed() {
        let ok = RunnerCheck::passed(CHECK_CLUSTER, "ACTIVE");
        let skipped = RunnerCheck::skipped(CHECK_NETWORK, CHECK_ASSUME_ROLE);
        assert!(all_passed(std::slice::from_ref(&ok)));
        assert!(!all_passed(&[]));
        assert!(!all_passed(&[ok.clone(), skipped.clone()]));
        assert!(!all_passed(&[ok, RunnerCheck::failed(CHECK_CLUSTER, "x")]));
        assert_eq!(skipped.detail, "not checked: `assume_role` did not pass");
        assert_eq!(serde_json::to_value(&skipped).unwrap()["status"], "skipped");
    }
}
