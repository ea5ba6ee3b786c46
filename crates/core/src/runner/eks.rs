//! Decoding of the `eks` runner type's configuration and its Kubernetes `job` block.

use std::collections::BTreeMap;

use serde_json::Value;

use super::decode::{check_field, decode_access, decode_env, decode_timeout, no_space_or_control};
use super::*;
use crate::problems::{index, join, key_path, type_name, Fields, Problems};

pub(super) fn decode_eks(f: &mut Fields<'_>, p: &mut Problems) -> Option<EksRunner> {
    let access = decode_access(f, p);
    let cluster = f.required_str("cluster", p);
    check_field(
        f,
        "cluster",
        cluster.as_ref(),
        |c| {
            (!limits::is_eks_cluster_name(c)).then(|| {
            format!("must be an EKS cluster name: 1 to {} letters, digits, `_` and `-`, starting with a letter or digit", limits::EKS_CLUSTER_NAME_MAX)
        })
        },
        p,
    );
    let job = match f.raw("job") {
        Some(v) => decode_eks_job(v, &f.path_of("job"), p),
        None => {
            p.push(f.path_of("job"), "is required");
            None
        }
    };
    let timeout_seconds = decode_timeout(f, p);
    Some(EksRunner {
        access: access?,
        cluster: cluster?,
        job: job?,
        timeout_seconds,
    })
}

/// An `eks` runner's secrets: environment variable names, and Kubernetes Secret keys
/// (`<secret>/<key>`), not AWS ARNs: a pod reads Kubernetes Secrets, not Secrets Manager.
fn check_k8s_secrets(secrets: &BTreeMap<String, String>, path: &str, p: &mut Problems) {
    super::decode::check_env_names(secrets.keys(), path, p);
    for (name, value) in secrets {
        if k8s_secret_key_ref(value).is_none() {
            let hint = if value.starts_with("arn:") {
                "; an eks runner's pod reads Kubernetes Secrets: sync the AWS secret into the namespace (External Secrets, or the Secrets Store CSI driver) and name its Secret here"
            } else {
                ""
            };
            p.push(
                key_path(path, name),
                format!(
                    "`{}` is not a Kubernetes Secret key reference, `<secret name>/<key>`{hint}",
                    value.escape_debug()
                ),
            );
        }
    }
}

/// The shortest `ttl_seconds_after_finished`: a finished Job must outlive a few sweeps.
pub const MIN_TTL_SECONDS_AFTER_FINISHED: u32 = 300;

pub(super) fn dns_label_problem(v: &str) -> Option<String> {
    (!limits::is_dns_label(v)).then(|| {
        format!(
            "`{}` is not a Kubernetes DNS label ([a-z0-9] and `-`, starting and ending with a letter or digit, at most {})",
            v.escape_debug(),
            limits::DNS_LABEL_MAX
        )
    })
}

/// Checks a map of Kubernetes labels (node selector): qualified keys, label values.
fn check_k8s_labels(map: &BTreeMap<String, String>, path: &str, p: &mut Problems) {
    for (k, v) in map {
        if !limits::is_label_key(k) {
            p.push(key_path(path, k), "is not a Kubernetes label key ([prefix/]name, the name at most 63 of [A-Za-z0-9-_.], starting and ending alphanumeric)");
        } else if !limits::is_label_value(v) {
            p.push(key_path(path, k), format!("`{}` is not a Kubernetes label value (empty, or at most {} of [A-Za-z0-9-_.], starting and ending alphanumeric)", v.escape_debug(), limits::LABEL_VALUE_MAX));
        }
    }
}

fn decode_tolerations(f: &mut Fields<'_>, p: &mut Problems) -> Vec<Toleration> {
    let path = f.path_of("tolerations");
    let list = match f.raw("tolerations") {
        None => return Vec::new(),
        Some(Value::Array(list)) => list,
        Some(other) => {
            p.push(path, format!("must be a list, but is {}", type_name(other)));
            return Vec::new();
        }
    };
    let mut out = Vec::new();
    for (i, item) in list.iter().enumerate() {
        let tpath = index(&path, i);
        let Some(mut t) = Fields::new(item, &tpath, p) else {
            continue;
        };
        let toleration = Toleration {
            key: t.optional("key", p),
            operator: t.optional("operator", p),
            value: t.optional("value", p),
            effect: t.optional("effect", p),
            toleration_seconds: t.optional("toleration_seconds", p),
        };
        t.finish(p);
        if let Some(k) = toleration.key.as_deref().filter(|k| !k.is_empty()) {
            if !limits::is_label_key(k) {
                p.push(format!("{tpath}.key"), "is not a Kubernetes label key");
            }
        } else if toleration.operator.as_deref() != Some("Exists") {
            p.push(
                format!("{tpath}.key"),
                "is required unless operator is Exists",
            );
        }
        match toleration.operator.as_deref() {
            None | Some("Equal") | Some("Exists") => {}
            Some(o) => p.push(
                format!("{tpath}.operator"),
                format!("`{}` is not Equal or Exists", o.escape_debug()),
            ),
        }
        if toleration.operator.as_deref() == Some("Exists") && toleration.value.is_some() {
            p.push(
                format!("{tpath}.value"),
                "must be empty when operator is Exists",
            );
        } else if let Some(v) = &toleration.value {
            if !limits::is_label_value(v) {
                p.push(format!("{tpath}.value"), "is not a Kubernetes label value");
            }
        }
        match toleration.effect.as_deref() {
            None | Some("NoSchedule") | Some("PreferNoSchedule") | Some("NoExecute") => {}
            Some(e) => p.push(
                format!("{tpath}.effect"),
                format!(
                    "`{}` is not NoSchedule, PreferNoSchedule or NoExecute",
                    e.escape_debug()
                ),
            ),
        }
        out.push(toleration);
    }
    out
}

pub(super) fn decode_eks_job(value: &Value, path: &str, p: &mut Problems) -> Option<EksJob> {
    let mut f = Fields::new(value, path, p)?;
    let namespace = f.required_str("namespace", p);
    check_field(&f, "namespace", namespace.as_ref(), dns_label_problem, p);
    let service_account = f.required_str("service_account", p);
    check_field(
        &f,
        "service_account",
        service_account.as_ref(),
        |v| {
            (!limits::is_dns_subdomain(v)).then(|| {
            format!("`{}` is not a Kubernetes service account name (a DNS subdomain: [a-z0-9.-], at most {})", v.escape_debug(), limits::DNS_SUBDOMAIN_MAX)
        })
        },
        p,
    );
    let image: Option<String> = f.optional("image", p);
    check_field(&f, "image", image.as_ref(), no_space_or_control, p);
    let image_pull_policy: Option<String> = f.optional("image_pull_policy", p);
    check_field(
        &f,
        "image_pull_policy",
        image_pull_policy.as_ref(),
        |v| {
            (!matches!(v, "Always" | "IfNotPresent" | "Never")).then(|| {
                format!(
                    "`{}` is not Always, IfNotPresent or Never",
                    v.escape_debug()
                )
            })
        },
        p,
    );
    let image_pull_secrets: Vec<String> = f.optional("image_pull_secrets", p).unwrap_or_default();
    let ipath = f.path_of("image_pull_secrets");
    for (i, name) in image_pull_secrets.iter().enumerate() {
        if !limits::is_dns_subdomain(name) {
            p.push(
                index(&ipath, i),
                format!(
                    "`{}` is not a Kubernetes Secret name (a DNS subdomain: [a-z0-9.-], at most {})",
                    name.escape_debug(),
                    limits::DNS_SUBDOMAIN_MAX
                ),
            );
        }
    }
    let automount_service_account_token: bool = f
        .optional("automount_service_account_token", p)
        .unwrap_or(false);
    let node_selector: BTreeMap<String, String> =
        f.optional("node_selector", p).unwrap_or_default();
    check_k8s_labels(&node_selector, &f.path_of("node_selector"), p);
    let tolerations = decode_tolerations(&mut f, p);
    let annotations: BTreeMap<String, String> = f.optional("annotations", p).unwrap_or_default();
    let apath = f.path_of("annotations");
    for k in annotations.keys() {
        if !limits::is_label_key(k) {
            p.push(key_path(&apath, k), "is not a Kubernetes annotation key ([prefix/]name, the name at most 63 characters)");
        }
    }
    let total: usize = annotations.iter().map(|(k, v)| k.len() + v.len()).sum();
    if total > limits::ANNOTATIONS_TOTAL_MAX {
        p.push(
            &apath,
            format!(
                "total {total} bytes is over Kubernetes' {}-byte limit",
                limits::ANNOTATIONS_TOTAL_MAX
            ),
        );
    }
    let resources: Resources = f.optional("resources", p).unwrap_or_default();
    for (block, map) in [
        ("requests", &resources.requests),
        ("limits", &resources.limits),
    ] {
        let rpath = join(&f.path_of("resources"), block);
        for (k, v) in map {
            if !limits::is_label_key(k) {
                p.push(key_path(&rpath, k), "is not a Kubernetes resource name");
            } else if v.is_empty() || limits::has_space_or_control(v) {
                p.push(
                    key_path(&rpath, k),
                    "must be a Kubernetes quantity such as 500m or 1Gi",
                );
            }
        }
    }
    let pod_template = match f.raw("pod_template") {
        None => None,
        Some(v @ Value::Object(_)) => Some(v.clone()),
        // The Humanitec drivers take pod_template as a YAML string: accept that too.
        Some(Value::String(s)) => match serde_norway::from_str::<Value>(s) {
            Ok(v @ Value::Object(_)) => Some(v),
            _ => {
                p.push(
                    f.path_of("pod_template"),
                    "must be a mapping (a partial PodTemplateSpec), or YAML text of one",
                );
                None
            }
        },
        Some(other) => {
            p.push(
                f.path_of("pod_template"),
                format!("must be a mapping, but is {}", type_name(other)),
            );
            None
        }
    };
    if let Some(t) = &pod_template {
        limits::check_dynamodb_value(
            t,
            &f.path_of("pod_template"),
            limits::POD_TEMPLATE_ENCLOSING_LEVELS,
            p,
        );
    }
    let ttl_seconds_after_finished: Option<u32> = f.optional("ttl_seconds_after_finished", p);
    if ttl_seconds_after_finished.is_some_and(|t| t < MIN_TTL_SECONDS_AFTER_FINISHED) {
        p.push(
            f.path_of("ttl_seconds_after_finished"),
            format!("must be at least {MIN_TTL_SECONDS_AFTER_FINISHED}: the sweeper polls every minute and must read a finished Job before Kubernetes deletes it"),
        );
    }
    let active_deadline_seconds: Option<u32> = f.optional("active_deadline_seconds", p);
    if active_deadline_seconds == Some(0) {
        p.push(
            f.path_of("active_deadline_seconds"),
            "must be greater than 0",
        );
    }
    let env = decode_env(&mut f, p);
    let secrets: BTreeMap<String, String> = f.optional("secrets", p).unwrap_or_default();
    check_k8s_secrets(&secrets, &f.path_of("secrets"), p);
    f.finish(p);
    Some(EksJob {
        namespace: namespace?,
        service_account: service_account?,
        image: image.unwrap_or_else(default_eks_image),
        image_pull_policy,
        image_pull_secrets,
        automount_service_account_token,
        node_selector,
        tolerations,
        annotations,
        resources,
        pod_template,
        ttl_seconds_after_finished,
        active_deadline_seconds,
        env,
        secrets,
    })
}
