//! Everything the double knows (Jobs, Pods, requests, queued failures) and how it answers
//! each endpoint.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use serde_json::{json, Value};

use super::rules::*;
use super::{KubeRequest, JOB_ID_LABEL};

/// A failure queued by [`KubeDouble::fail_next`](super::KubeDouble::fail_next).
#[derive(Debug, Clone)]
pub(super) struct Failure {
    pub(super) method: String,
    pub(super) path_prefix: String,
    pub(super) status: u16,
    pub(super) message: String,
}

/// Everything the double knows.
#[derive(Debug, Default)]
pub(super) struct State {
    pub(super) requests: Vec<KubeRequest>,
    /// Jobs by (namespace, name).
    pub(super) jobs: BTreeMap<(String, String), Value>,
    /// Pods with their namespace, in the order added.
    pub(super) pods: Vec<(String, Value)>,
    /// (verb, resource) pairs SelfSubjectAccessReviews deny.
    pub(super) denied: HashSet<(String, String)>,
    pub(super) failures: Vec<Failure>,
    pub(super) delay: Duration,
    /// The last resourceVersion handed out.
    pub(super) version: u64,
}

pub(super) type Answer = (u16, Value);

impl State {
    pub(super) fn next_version(&mut self) -> String {
        self.version += 1;
        self.version.to_string()
    }

    /// The status and body answering `request`.
    pub(super) fn answer(&mut self, request: &KubeRequest) -> Answer {
        if !authenticated(request) {
            return failure(
                401,
                "Unauthorized",
                "Unauthorized: a bearer token k8s-aws-v1.<base64url> is required",
                None,
            );
        }
        if let Some(at) = self.failures.iter().position(|f| {
            f.method.eq_ignore_ascii_case(&request.method)
                && request.path.starts_with(&f.path_prefix)
        }) {
            let queued = self.failures.remove(at);
            return failure(
                queued.status,
                reason_for(queued.status),
                &queued.message,
                None,
            );
        }
        let segments: Vec<&str> = request.path.trim_start_matches('/').split('/').collect();
        let method = request.method.as_str();
        match segments.as_slice() {
            ["apis", "batch", "v1", "namespaces", ns, "jobs"] => match method {
                "POST" => self.create_job(ns, request),
                "GET" => self.list_jobs(ns, request),
                _ => method_not_allowed(request),
            },
            ["apis", "batch", "v1", "namespaces", ns, "jobs", name] => match method {
                "GET" => self.get_job(ns, name),
                "DELETE" => self.delete_job(ns, name, request),
                _ => method_not_allowed(request),
            },
            ["api", "v1", "namespaces", ns, "pods"] => match method {
                "GET" => self.list_pods(ns, request),
                _ => method_not_allowed(request),
            },
            ["apis", "authorization.k8s.io", "v1", "selfsubjectaccessreviews"] => match method {
                "POST" => self.review_access(request),
                _ => method_not_allowed(request),
            },
            _ => failure(
                404,
                "NotFound",
                "the server could not find the requested resource",
                None,
            ),
        }
    }

    pub(super) fn create_job(&mut self, ns: &str, request: &KubeRequest) -> Answer {
        let json = request
            .header("content-type")
            .and_then(|v| v.split(';').next())
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"));
        if !json {
            return bad_request("the body of a Job must be sent as content-type application/json");
        }
        let Some(mut job) = request.body.clone().filter(Value::is_object) else {
            return bad_request("the body is not a JSON object");
        };
        if job.get("apiVersion") != Some(&json!("batch/v1"))
            || job.get("kind") != Some(&json!("Job"))
        {
            return bad_request("the body must be a Job: apiVersion batch/v1, kind Job");
        }
        match job.get("metadata") {
            None => job["metadata"] = json!({}),
            Some(Value::Object(_)) => {}
            Some(_) => return bad_request("metadata must be an object"),
        }
        if let Some(given) = job["metadata"].get("namespace") {
            if given != &json!(ns) {
                return bad_request(&format!(
                    "the namespace of the provided object ({given}) does not match the namespace sent on the request ({ns})"
                ));
            }
        }
        let named = job["metadata"].get("name").and_then(Value::as_str);
        let name = match (named, job["metadata"].get("generateName").and_then(Value::as_str)) {
            (Some(name), _) if !name.is_empty() => name.to_string(),
            (_, Some(prefix)) if !prefix.is_empty() => {
                // Kubernetes keeps at most 58 characters of the prefix, then adds 5.
                let prefix: String = prefix.chars().take(58).collect();
                format!("{prefix}{}", random_suffix(5))
            }
            _ => {
                return invalid(
                    "",
                    "Job.batch \"\" is invalid: metadata.name: Required value: name or generateName is required",
                )
            }
        };
        if !is_dns1123_label(&name) {
            return invalid(
                &name,
                &format!(
                    "Job.batch \"{name}\" is invalid: metadata.name: Invalid value: \"{name}\": \
                     must be no more than 63 lowercase alphanumeric characters or '-', \
                     starting and ending with an alphanumeric character"
                ),
            );
        }
        for (path, pointer) in [
            ("metadata.labels", "/metadata/labels"),
            (
                "spec.template.metadata.labels",
                "/spec/template/metadata/labels",
            ),
        ] {
            if let Some(problem) = job.pointer(pointer).and_then(labels_problem) {
                return invalid(
                    &name,
                    &format!("Job.batch \"{name}\" is invalid: {path}: {problem}"),
                );
            }
        }
        if let Some(bad) = invalid_label(&job) {
            return invalid(&name, &format!("Job.batch \"{name}\" is invalid: {bad}"));
        }
        let key = (ns.to_string(), name.clone());
        if self.jobs.contains_key(&key) {
            return failure(
                409,
                "AlreadyExists",
                &format!("jobs.batch \"{name}\" already exists"),
                Some(json!({"name": name, "group": "batch", "kind": "jobs"})),
            );
        }
        let version = self.next_version();
        let metadata = &mut job["metadata"];
        metadata["name"] = json!(name);
        metadata["namespace"] = json!(ns);
        metadata["uid"] = json!(random_uid());
        metadata["creationTimestamp"] =
            json!(chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
        metadata["resourceVersion"] = json!(version);
        if job.get("status").is_none_or(Value::is_null) {
            job["status"] = json!({});
        }
        self.jobs.insert(key, job.clone());
        (201, job)
    }

    pub(super) fn list_jobs(&mut self, ns: &str, request: &KubeRequest) -> Answer {
        let selector = match selector_of(request) {
            Ok(selector) => selector,
            Err(answer) => return answer,
        };
        let items: Vec<Value> = self
            .jobs
            .iter()
            .filter(|((namespace, _), job)| namespace == ns && matches(&selector, job))
            .map(|(_, job)| job.clone())
            .collect();
        (
            200,
            json!({
                "apiVersion": "batch/v1",
                "kind": "JobList",
                "metadata": {"resourceVersion": self.version.to_string()},
                "items": items,
            }),
        )
    }

    pub(super) fn get_job(&mut self, ns: &str, name: &str) -> Answer {
        match self.jobs.get(&(ns.to_string(), name.to_string())) {
            Some(job) => (200, job.clone()),
            None => job_not_found(name),
        }
    }

    pub(super) fn delete_job(&mut self, ns: &str, name: &str, request: &KubeRequest) -> Answer {
        if let Some(body) = &request.body {
            let is_options = body.get("kind").is_none_or(|k| k == "DeleteOptions");
            if !body.is_object() || !is_options {
                return bad_request("the body of a DELETE must be a DeleteOptions object");
            }
        }
        let policy = request.propagation_policy();
        if let Some(policy) = policy {
            if !matches!(policy, "Orphan" | "Background" | "Foreground") {
                return bad_request(&format!(
                    "propagationPolicy: Unsupported value: \"{policy}\": supported values: \"Foreground\", \"Background\", \"Orphan\""
                ));
            }
        }
        let Some(job) = self.jobs.remove(&(ns.to_string(), name.to_string())) else {
            return job_not_found(name);
        };
        if matches!(policy, Some("Background" | "Foreground")) {
            let job_id = job
                .pointer("/spec/template/metadata/labels")
                .and_then(|labels| labels.get(JOB_ID_LABEL))
                .and_then(Value::as_str);
            self.pods.retain(|(namespace, pod)| {
                let label = |key: &str| {
                    pod.pointer("/metadata/labels")
                        .and_then(|labels| labels.get(key))
                        .and_then(Value::as_str)
                };
                let owned = label("job-name") == Some(name)
                    || label("batch.kubernetes.io/job-name") == Some(name)
                    || (job_id.is_some() && label(JOB_ID_LABEL) == job_id);
                namespace != ns || !owned
            });
        }
        self.next_version();
        (
            200,
            json!({
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "details": {
                    "name": name,
                    "group": "batch",
                    "kind": "jobs",
                    "uid": job.pointer("/metadata/uid").cloned().unwrap_or(Value::Null),
                },
            }),
        )
    }

    pub(super) fn list_pods(&mut self, ns: &str, request: &KubeRequest) -> Answer {
        let selector = match selector_of(request) {
            Ok(selector) => selector,
            Err(answer) => return answer,
        };
        let items: Vec<Value> = self
            .pods
            .iter()
            .filter(|(namespace, pod)| namespace == ns && matches(&selector, pod))
            .map(|(_, pod)| pod.clone())
            .collect();
        (
            200,
            json!({
                "apiVersion": "v1",
                "kind": "PodList",
                "metadata": {"resourceVersion": self.version.to_string()},
                "items": items,
            }),
        )
    }

    pub(super) fn review_access(&mut self, request: &KubeRequest) -> Answer {
        let Some(mut review) = request.body.clone().filter(Value::is_object) else {
            return bad_request("the body is not a JSON object");
        };
        if review.get("apiVersion") != Some(&json!("authorization.k8s.io/v1"))
            || review.get("kind") != Some(&json!("SelfSubjectAccessReview"))
        {
            return bad_request(
                "the body must be a SelfSubjectAccessReview: apiVersion authorization.k8s.io/v1",
            );
        }
        let attribute = |key: &str| {
            review
                .pointer(&format!("/spec/resourceAttributes/{key}"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let (verb, resource) = (attribute("verb"), attribute("resource"));
        review["status"] = if self.denied.contains(&(verb.clone(), resource.clone())) {
            json!({
                "allowed": false,
                "reason": format!("the KubeDouble was told to deny {verb} on {resource}"),
            })
        } else {
            json!({"allowed": true})
        };
        (201, review)
    }
}
