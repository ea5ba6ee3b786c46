//! The built-in environment of every job's runner container, as Tharsis gives its jobs:
//! which group and environment the job runs against, what it does and who asked for it.
//! Built here once ([`builtin`]); every launcher (ECS overrides, the Kubernetes Job, the
//! local process, an agent's run) sets exactly these.

use crate::job::Job;

/// The environment's group path (`acme/platform`).
pub const GROUP: &str = "SORTIE_GROUP";
/// The environment's path (`acme/platform/dev`).
pub const ENVIRONMENT: &str = "SORTIE_ENVIRONMENT";
/// `plan`, `apply` or `destroy`.
pub const OPERATION: &str = "SORTIE_OPERATION";
/// The subject of the principal who submitted the job (`sortie:drift` for a scheduled one).
pub const REQUESTED_BY: &str = "SORTIE_REQUESTED_BY";

/// Every built-in variable's name, in the order [`builtin`] gives them.
pub const NAMES: [&str; 4] = [GROUP, ENVIRONMENT, OPERATION, REQUESTED_BY];

/// The built-in variables of `job`'s container, by name, in [`NAMES`] order.
pub fn builtin(job: &Job) -> Vec<(&'static str, String)> {
    vec![
        (GROUP, job.environment.group().as_str().to_string()),
        (ENVIRONMENT, job.environment.to_string()),
        (OPERATION, job.request.operation.as_str().to_string()),
        (REQUESTED_BY, job.requested_by.clone()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_names_its_group_environment_operation_and_requester() {
        let request =
            crate::JobRequest::parse(r#"{"operation":"destroy","files":{"a.tf":""}}"#).unwrap();
        let env = crate::EnvPath::parse("acme/platform/dev").unwrap();
        let job = Job::new(
            "01job".to_string(),
            env,
            crate::RunnerId::parse("acme/fargate").unwrap(),
            request,
            "alice@example.com".into(),
            chrono::Utc::now(),
        );
        assert_eq!(
            builtin(&job),
            vec![
                (GROUP, "acme/platform".to_string()),
                (ENVIRONMENT, "acme/platform/dev".to_string()),
                (OPERATION, "destroy".to_string()),
                (REQUESTED_BY, "alice@example.com".to_string()),
            ]
        );
        let names: Vec<&str> = builtin(&job).into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, NAMES);
    }
}
