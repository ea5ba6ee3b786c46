//! The container variables every job's runner container gets, as Tharsis gives its jobs:
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

/// Whether a variable of the host that starts a job's process is withheld from the job:
/// every `TF_` and `TOFU_` one (Terraform's and OpenTofu's settings, such as
/// `TF_CLI_CONFIG_FILE`, `TF_LOG`, `TF_WORKSPACE`, `TF_CLI_ARGS`, `TF_DATA_DIR`, and
/// values as `TF_VAR_<name>`). A job's Terraform reads the runner's declared variables, the
/// job's secrets and these built-in ones, never what the host of a local or agent runner
/// happens to have: a developer's `TF_WORKSPACE` or `TF_VAR_region` would change what a
/// plan does without anyone seeing why.
pub fn withheld_from_host(name: &str) -> bool {
    name.starts_with("TF_") || name.starts_with("TOFU_")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terraform_settings_of_the_host_are_withheld_and_nothing_else() {
        for name in [
            "TF_CLI_CONFIG_FILE",
            "TF_VAR_region",
            "TF_WORKSPACE",
            "TF_LOG",
            "TOFU_X",
        ] {
            assert!(withheld_from_host(name), "{name}");
        }
        for name in [
            "PATH",
            "HOME",
            "AWS_REGION",
            "SSL_CERT_FILE",
            "XTF_LOG",
            "tf_log",
        ] {
            assert!(!withheld_from_host(name), "{name}");
        }
    }

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
