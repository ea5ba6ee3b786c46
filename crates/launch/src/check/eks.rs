//! The `eks` checks: the Job a launch would build, and what the launcher role may do in
//! the cluster (SelfSubjectAccessReviews).

use sortie_core::check::*;
use sortie_core::runner::EksRunner;
use sortie_core::{RunnerCheck, RunnerConfiguration};

/// The Job a launch would create can be built from the runner's configuration.
pub(super) fn eks_template_check(c: &EksRunner) -> RunnerCheck {
    let (Ok(environment), Ok(runner_id), Ok(request)) = (
        sortie_core::EnvPath::parse("runner-check/env"),
        sortie_core::RunnerId::parse("runner-check"),
        sortie_core::JobRequest::parse(r#"{"operation":"plan","files":{"main.tf":""}}"#),
    ) else {
        return RunnerCheck::failed(CHECK_JOB_TEMPLATE, "the check's sample job is invalid");
    };
    let mut job = sortie_core::Job::new(
        sortie_core::JobId::new("00000000000000000000000000"),
        environment,
        runner_id,
        request,
        "runner-check".to_string(),
        chrono::Utc::now(),
    );
    job.runner_spec = Some(sortie_core::RunnerSpec {
        tool: None,
        tool_version: None,
        identity: None,
        description: String::new(),
        runner_configuration: RunnerConfiguration::Eks(c.clone()),
        state_storage_configuration: sortie_core::StateStorageConfiguration::Kubernetes(
            sortie_core::runner::KubernetesStorage { namespace: None },
        ),
    });
    let spec = crate::LaunchSpec {
        job: &job,
        token: "check",
        api_url: "https://sortie.invalid",
        attempt: 1,
    };
    match crate::eks::job::build_job(c, &spec) {
        Ok(built) => RunnerCheck::passed(
            CHECK_JOB_TEMPLATE,
            format!(
                "a Job `{}*` in namespace `{}` runs `{}` as service account `{}`",
                built.metadata.generate_name.unwrap_or_default(),
                c.job.namespace,
                built
                    .spec
                    .as_ref()
                    .and_then(|s| s.template.spec.as_ref())
                    .and_then(|p| p
                        .containers
                        .iter()
                        .find(|x| x.name == crate::eks::job::RUNNER_CONTAINER))
                    .and_then(|x| x.image.clone())
                    .unwrap_or_default(),
                c.job.service_account
            ),
        ),
        Err(e) => RunnerCheck::failed(CHECK_JOB_TEMPLATE, e.to_string()),
    }
}

/// One SelfSubjectAccessReview per thing the launcher does in the namespace.
pub(super) async fn eks_access_check(
    client: &crate::eks::client::KubeClient,
    token: &str,
    c: &EksRunner,
) -> (RunnerCheck, RunnerCheck) {
    let wanted = [
        ("create", "batch", "jobs"),
        ("get", "batch", "jobs"),
        ("list", "batch", "jobs"),
        ("delete", "batch", "jobs"),
        ("list", "", "pods"),
    ];
    let mut denied = Vec::new();
    for (i, (verb, group, resource)) in wanted.iter().enumerate() {
        let review = serde_json::json!({
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {
                "namespace": c.job.namespace, "verb": verb, "group": group, "resource": resource,
            }},
        });
        let answer: serde_json::Value = match client
            .call(
                http::Method::POST,
                "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                token,
                Some(&review),
            )
            .await
        {
            Ok(a) => a,
            Err(e) => {
                let words = e.into_launch("SelfSubjectAccessReview", false).to_string();
                // The first call is the first to reach the API: a failure there (TLS, a
                // refused token) is the cluster's.
                return if i == 0 {
                    (
                        RunnerCheck::failed(CHECK_CLUSTER, words),
                        RunnerCheck::skipped(CHECK_KUBERNETES_ACCESS, CHECK_CLUSTER),
                    )
                } else {
                    (
                        RunnerCheck::passed(CHECK_CLUSTER, cluster_words(client, c)),
                        RunnerCheck::failed(CHECK_KUBERNETES_ACCESS, words),
                    )
                };
            }
        };
        let status = &answer["status"];
        if status["allowed"].as_bool() != Some(true) {
            let why = status["reason"]
                .as_str()
                .filter(|r| !r.is_empty())
                .unwrap_or("no reason given");
            let what = if group.is_empty() {
                format!("{verb} {resource}")
            } else {
                format!("{verb} {resource}.{group}")
            };
            denied.push(format!("{what}: {why}"));
        }
    }
    let cluster = RunnerCheck::passed(CHECK_CLUSTER, cluster_words(client, c));
    let access = if denied.is_empty() {
        RunnerCheck::passed(
            CHECK_KUBERNETES_ACCESS,
            format!(
                "the launcher role may create, get, list and delete Jobs and list pods in namespace `{}`",
                c.job.namespace
            ),
        )
    } else {
        RunnerCheck::failed(
            CHECK_KUBERNETES_ACCESS,
            format!(
                "in namespace `{}` the launcher role may not: {}",
                c.job.namespace,
                denied.join("; ")
            ),
        )
    };
    (cluster, access)
}

fn cluster_words(client: &crate::eks::client::KubeClient, c: &EksRunner) -> String {
    format!(
        "EKS cluster `{}` is ACTIVE; its API at {} answers over TLS verified against the cluster's CA",
        c.cluster,
        client.endpoint()
    )
}
