//! The Kubernetes Job of a Sortie job, built with `k8s-openapi` types. Pure: no I/O.
//!
//! The generated Job:
//!
//! - `metadata.generateName: sortie-<short job id>-`, in the runner's namespace, labelled
//!   `sortie.dev/job-id`, `sortie.dev/attempt`, `sortie.dev/env` and `sortie.dev/runner`
//!   (the environment path and runner id with `/` as `.`, made label values) and
//!   `sortie.dev/org`, annotated `sortie.dev/env` and `sortie.dev/runner` with the paths
//!   themselves;
//! - `backoffLimit: 0` (one pod, never retried: a Terraform apply is not rerun blindly),
//!   `ttlSecondsAfterFinished` and `activeDeadlineSeconds` from the runner;
//! - one container, [`RUNNER_CONTAINER`], with the runner's image, pull policy, resources and
//!   environment; Sortie's own variables (`SORTIE_JOB_ID`, `SORTIE_JOB_TOKEN`,
//!   `SORTIE_API_URL`) are set last and cannot be overridden; each secret is a
//!   `valueFrom.secretKeyRef`, never a value;
//! - hardened by default: `restartPolicy: Never`, `automountServiceAccountToken: false`
//!   unless the runner asks for it or keeps its state in `kubernetes` (the backend reads
//!   and writes its Secret with the pod's service account), `runAsNonRoot: true`, `allowPrivilegeEscalation: false`,
//!   capabilities drop `ALL`, the `RuntimeDefault` seccomp profile.
//!
//! The runner's `pod_template` is then merged over the generated pod template with
//! [`k8s_openapi::DeepMerge`], which follows the Kubernetes schema's list and map types (the
//! rules of server-side apply):
//!
//! - mappings merge key by key, recursively; a scalar in the overlay replaces the generated one;
//! - lists the schema keys by a field are merged item by item on that key: `containers`,
//!   `initContainers`, `imagePullSecrets`, `volumes` and a container's `env` by `name`, a
//!   container's `volumeMounts` by `mountPath`, `ports` by `containerPort` and `protocol`;
//!   an item with a new key is appended;
//! - every other list (`tolerations`, `args`, `command`, ...) and `nodeSelector` are atomic:
//!   the overlay's replaces the generated one;
//! - so the container named [`RUNNER_CONTAINER`] in the overlay changes the runner container
//!   (its image, say), and a container with another name is added beside it (a sidecar).
//!
//! After the merge Sortie sets again what the job depends on: its labels, `restartPolicy:
//! Never`, and its own variables in the runner container. An overlay may loosen the
//! hardened defaults: the runner's owner (who needs `manage` on the group) decides that.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{Job as KubeJob, JobSpec as KubeJobSpec};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, EnvVar, EnvVarSource, LocalObjectReference, PodSecurityContext,
    PodSpec, PodTemplateSpec, ResourceRequirements, SeccompProfile, SecretKeySelector,
    SecurityContext, Toleration,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::DeepMerge;
use sortie_core::runner::{k8s_secret_key_ref, EksRunner};
use sortie_core::{EnvPath, Job};

use crate::ecs::git_credentials_secret;
use crate::{LaunchError, LaunchSpec};

/// The runner container's name in every generated pod; an overlay container of this name
/// changes it.
pub const RUNNER_CONTAINER: &str = sortie_core::runner::EKS_RUNNER_CONTAINER;
/// The label holding the Sortie job id, on the Job and its pod: how a Job is found again.
pub const JOB_ID_LABEL: &str = "sortie.dev/job-id";
/// The label holding the launch attempt.
pub const ATTEMPT_LABEL: &str = "sortie.dev/attempt";
/// The label (and annotation) holding the environment.
pub const ENV_LABEL: &str = "sortie.dev/env";
/// The label holding the organisation (an organisation name is already a label value).
pub const ORG_LABEL: &str = "sortie.dev/org";
/// The label (and annotation) holding the runner id.
pub const RUNNER_LABEL: &str = "sortie.dev/runner";

/// The environment path as a label value ([`label_value`]).
pub fn env_label(env: &EnvPath) -> String {
    label_value(&env.to_string())
}

/// A Sortie path (an environment, a runner id) as a label value: `/` becomes `.`; a path
/// longer than a label value allows is cut and ends with 8 hexadecimal digits of its
/// SHA-256. The annotation of the same key holds the path itself.
pub fn label_value(path: &str) -> String {
    let text = path.replace('/', ".");
    let clean: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect();
    if clean.len() <= sortie_core::limits::LABEL_VALUE_MAX {
        return clean;
    }
    use sha2::Digest;
    let hash: String = sha2::Sha256::digest(path.as_bytes())
        .iter()
        .take(4)
        .map(|b| format!("{b:02x}"))
        .collect();
    let keep = sortie_core::limits::LABEL_VALUE_MAX - hash.len() - 1;
    let head = clean[..keep].trim_end_matches(['-', '_', '.']);
    format!("{head}-{hash}")
}

/// The labels every Job and pod of `job` carries, for this launch attempt: the job, the
/// attempt, the environment, the organisation and the runner (the launcher-role session is
/// shared by many jobs and names none of them).
pub fn job_labels(job: &Job, attempt: u32) -> BTreeMap<String, String> {
    BTreeMap::from([
        (JOB_ID_LABEL.to_string(), job.id.to_string()),
        (ATTEMPT_LABEL.to_string(), attempt.to_string()),
        (ENV_LABEL.to_string(), env_label(&job.environment)),
        (ORG_LABEL.to_string(), label_value(job.environment.org())),
        (
            RUNNER_LABEL.to_string(),
            label_value(&job.runner_id.to_string()),
        ),
    ])
}

/// The runner's annotations, then the environment path and the runner id in full.
fn job_annotations(c: &EksRunner, job: &Job) -> BTreeMap<String, String> {
    let mut annotations = c.job.annotations.clone();
    annotations.insert(ENV_LABEL.to_string(), job.environment.to_string());
    annotations.insert(RUNNER_LABEL.to_string(), job.runner_id.to_string());
    annotations
}

/// The secrets the runner container reads, by variable name, as Kubernetes Secret keys: the
/// job's `secret_refs`, then the runner's `secrets` (which win), then a git source's
/// credentials as `SORTIE_GIT_CREDENTIALS`. Each must be `<secret>/<key>`: an AWS ARN cannot
/// be read by a pod, so it fails the launch, saying what to do.
pub fn pod_secrets(
    c: &EksRunner,
    job: &Job,
) -> Result<BTreeMap<String, (String, String)>, LaunchError> {
    let mut all: BTreeMap<String, String> = job.request.secret_refs.clone();
    all.extend(c.job.secrets.clone());
    if let Some(reference) = git_credentials_secret(job) {
        all.insert(
            crate::ecs::GIT_CREDENTIALS.to_string(),
            reference.to_string(),
        );
    }
    let mut out = BTreeMap::new();
    for (name, reference) in all {
        let (secret, key) = k8s_secret_key_ref(&reference).ok_or_else(|| {
            LaunchError::Fatal(format!(
                "secret `{name}` is `{reference}`, but an eks runner's pod reads Kubernetes Secrets: give it as `<secret name>/<key>` of a Secret in namespace `{}` (sync an AWS secret there with External Secrets or the Secrets Store CSI driver)",
                c.job.namespace
            ))
        })?;
        out.insert(name, (secret.to_string(), key.to_string()));
    }
    Ok(out)
}

fn quantities(map: &BTreeMap<String, String>) -> Option<BTreeMap<String, Quantity>> {
    (!map.is_empty()).then(|| {
        map.iter()
            .map(|(k, v)| (k.clone(), Quantity(v.clone())))
            .collect()
    })
}

/// Sortie's own variables and the job's built-in ones ([`sortie_core::container_env`]): set last
/// in the runner container, whatever the runner or an overlay says.
fn sortie_env(spec: &LaunchSpec<'_>) -> Vec<EnvVar> {
    [
        ("SORTIE_JOB_ID", spec.job.id.to_string()),
        ("SORTIE_JOB_TOKEN", spec.token.to_string()),
        ("SORTIE_API_URL", spec.api_url.to_string()),
    ]
    .into_iter()
    .chain(sortie_core::container_env::builtin(spec.job))
    .map(|(name, value)| EnvVar {
        name: name.to_string(),
        value: Some(value),
        value_from: None,
    })
    .collect()
}

fn runner_container(c: &EksRunner, spec: &LaunchSpec<'_>) -> Result<Container, LaunchError> {
    let secrets = pod_secrets(c, spec.job)?;
    let mut env: Vec<EnvVar> = c
        .job
        .env
        .iter()
        .filter(|(name, _)| !secrets.contains_key(*name))
        .map(|(name, value)| EnvVar {
            name: name.clone(),
            value: Some(value.clone()),
            value_from: None,
        })
        .collect();
    env.extend(secrets.into_iter().map(|(name, (secret, key))| EnvVar {
        name,
        value: None,
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: secret,
                key,
                optional: Some(false),
            }),
            ..Default::default()
        }),
    }));
    env.extend(sortie_env(spec));
    let resources = &c.job.resources;
    Ok(Container {
        name: RUNNER_CONTAINER.to_string(),
        image: Some(c.job.image.clone()),
        image_pull_policy: c.job.image_pull_policy.clone(),
        env: Some(env),
        resources: (!resources.requests.is_empty() || !resources.limits.is_empty()).then(|| {
            ResourceRequirements {
                requests: quantities(&resources.requests),
                limits: quantities(&resources.limits),
                ..Default::default()
            }
        }),
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            run_as_non_root: Some(true),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".to_string()]),
                add: None,
            }),
            ..Default::default()
        }),
        ..Default::default()
    })
}

/// The pod template before the overlay.
fn generated_template(
    c: &EksRunner,
    spec: &LaunchSpec<'_>,
    labels: &BTreeMap<String, String>,
) -> Result<PodTemplateSpec, LaunchError> {
    let job = spec.job;
    let annotations = job_annotations(c, job);
    Ok(PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(labels.clone()),
            annotations: Some(annotations),
            ..Default::default()
        }),
        spec: Some(PodSpec {
            containers: vec![runner_container(c, spec)?],
            restart_policy: Some("Never".to_string()),
            service_account_name: Some(c.job.service_account.clone()),
            // `kubernetes` state storage is read and written with the pod's service account
            // (the backend's `in_cluster_config`), so its token is mounted then.
            automount_service_account_token: Some(
                c.job.automount_service_account_token || stores_state_in_kubernetes(job),
            ),
            node_selector: (!c.job.node_selector.is_empty()).then(|| c.job.node_selector.clone()),
            tolerations: (!c.job.tolerations.is_empty()).then(|| {
                c.job
                    .tolerations
                    .iter()
                    .map(|t| Toleration {
                        key: t.key.clone(),
                        operator: t.operator.clone(),
                        value: t.value.clone(),
                        effect: t.effect.clone(),
                        toleration_seconds: t.toleration_seconds,
                    })
                    .collect()
            }),
            image_pull_secrets: (!c.job.image_pull_secrets.is_empty()).then(|| {
                c.job
                    .image_pull_secrets
                    .iter()
                    .map(|name| LocalObjectReference { name: name.clone() })
                    .collect()
            }),
            security_context: Some(PodSecurityContext {
                run_as_non_root: Some(true),
                seccomp_profile: Some(SeccompProfile {
                    type_: "RuntimeDefault".to_string(),
                    localhost_profile: None,
                }),
                ..Default::default()
            }),
            ..Default::default()
        }),
    })
}

fn stores_state_in_kubernetes(job: &Job) -> bool {
    matches!(
        job.runner_spec
            .as_ref()
            .map(|s| &s.state_storage_configuration),
        Some(sortie_core::StateStorageConfiguration::Kubernetes(_))
    )
}

/// Merges a runner's `pod_template` overlay (a partial PodTemplateSpec) over `template`,
/// by the rules in this module's documentation. An overlay that is not a PodTemplateSpec
/// fails, quoting the decoder.
pub fn merge_overlay(
    template: &mut PodTemplateSpec,
    overlay: &serde_json::Value,
) -> Result<(), LaunchError> {
    let overlay: PodTemplateSpec = serde_json::from_value(overlay.clone()).map_err(|e| {
        LaunchError::Fatal(format!(
            "the runner's pod_template is not a Kubernetes PodTemplateSpec: {e}"
        ))
    })?;
    template.merge_from(overlay);
    Ok(())
}

/// The Kubernetes Job for one launch attempt of `spec.job` on the `eks` runner `c`.
pub fn build_job(c: &EksRunner, spec: &LaunchSpec<'_>) -> Result<KubeJob, LaunchError> {
    let job = spec.job;
    let labels = job_labels(job, spec.attempt);
    let mut template = generated_template(c, spec, &labels)?;
    if let Some(overlay) = &c.job.pod_template {
        merge_overlay(&mut template, overlay)?;
    }
    // What the job depends on is set again after the overlay.
    let meta = template.metadata.get_or_insert_with(Default::default);
    meta.labels
        .get_or_insert_with(Default::default)
        .extend(labels.clone());
    let pod = template.spec.get_or_insert_with(Default::default);
    pod.restart_policy = Some("Never".to_string());
    let runner = pod
        .containers
        .iter_mut()
        .find(|c| c.name == RUNNER_CONTAINER)
        .ok_or_else(|| {
            LaunchError::Fatal(format!(
                "the pod has no container named `{RUNNER_CONTAINER}`"
            ))
        })?;
    let env = runner.env.get_or_insert_with(Vec::new);
    let own = sortie_env(spec);
    env.retain(|v| !own.iter().any(|o| o.name == v.name));
    env.extend(own);
    if runner.image.as_deref().is_none_or(str::is_empty) {
        return Err(LaunchError::Fatal(format!(
            "the `{RUNNER_CONTAINER}` container has no image"
        )));
    }
    let annotations = job_annotations(c, job);
    Ok(KubeJob {
        metadata: ObjectMeta {
            generate_name: Some(format!("sortie-{}-", job.id.short())),
            namespace: Some(c.job.namespace.clone()),
            labels: Some(labels),
            annotations: Some(annotations),
            ..Default::default()
        },
        spec: Some(KubeJobSpec {
            backoff_limit: Some(0),
            ttl_seconds_after_finished: c.job.ttl_seconds_after_finished.map(i32_of),
            active_deadline_seconds: c.job.active_deadline_seconds.map(i64::from),
            template,
            ..Default::default()
        }),
        status: None,
    })
}

fn i32_of(v: u32) -> i32 {
    i32::try_from(v).unwrap_or(i32::MAX)
}
