//! [`KubeDouble`]: a **test double of the Kubernetes API server. It is not Kubernetes.**
//!
//! There is no Kubernetes API server where the tests run, so the `eks` runner's tests
//! point Sortie at this: a small HTTPS server on `127.0.0.1` that implements exactly the
//! endpoints Sortie calls, keeps Jobs and Pods in memory, and records every request. No
//! controller runs: a Job never starts a Pod and its status never changes unless the test
//! says so ([`KubeDouble::set_job_status`], [`KubeDouble::add_pod`]). There is no RBAC
//! beyond [`KubeDouble::deny`], no admission, no defaulting of a Job's spec, no watch, and
//! no validation of a Job beyond what is listed below.
//!
//! It serves HTTP/1.1 with keep-alive over TLS, with a server certificate for IP
//! `127.0.0.1` and DNS `localhost` signed by a test CA generated at [`KubeDouble::start`]
//! ([`KubeDouble::ca_pem`]; [`KubeDouble::ca_data`] is that PEM base64-encoded, as EKS
//! DescribeCluster's `certificateAuthority.data` carries it). It runs on its own thread
//! with its own tokio runtime, so sync and async tests alike can use it; dropping it
//! stops the server.
//!
//! Every request must carry `Authorization: Bearer k8s-aws-v1.<base64url, no padding>`
//! (the shape of `aws eks get-token`'s token; its content is not checked), else `401`.
//! Then a failure queued by [`KubeDouble::fail_next`] is answered, if one matches. Then:
//!
//! | request | answer |
//! |---------|--------|
//! | `POST /apis/batch/v1/namespaces/{ns}/jobs` | `201` and the stored Job; `409 AlreadyExists` for a taken name; `400 BadRequest` unless `content-type: application/json` and `apiVersion: batch/v1`, `kind: Job`, `metadata.namespace` absent or `{ns}`; `422 Invalid` without a name or generateName, for a name that is not a DNS-1123 label, or for a label key or value (on the Job or its pod template) Kubernetes refuses |
//! | `GET /apis/batch/v1/namespaces/{ns}/jobs[?labelSelector=]` | `JobList` (equality selectors `k=v`, `k==v` only; others `400`) |
//! | `GET /apis/batch/v1/namespaces/{ns}/jobs/{name}` | the Job, or `404 NotFound` |
//! | `DELETE /apis/batch/v1/namespaces/{ns}/jobs/{name}` | `200` `Status` `Success`; `404 NotFound` when absent |
//! | `GET /api/v1/namespaces/{ns}/pods[?labelSelector=]` | `PodList` |
//! | `POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews` | `201`, the review with `status.allowed` |
//! | the paths above with another method | `405 MethodNotAllowed` |
//! | anything else | `404 NotFound` |
//!
//! Every error is a Kubernetes `Status` object. Deleting a Job deletes its Pods (labelled
//! `job-name` or `batch.kubernetes.io/job-name` with the Job's name, or `sortie.dev/job-id`
//! with the value of that label in the Job's pod template) when the propagation policy
//! (a `DeleteOptions` body or the `propagationPolicy` query parameter) is `Background` or
//! `Foreground`; with `Orphan`, or none, they stay, as Kubernetes leaves a `batch/v1`
//! Job's Pods when no policy is given.
//!
//! ```no_run
//! let kube = sortie_testkit::kube::KubeDouble::start();
//! // ... point the code under test at kube.url(), trusting kube.ca_data() ...
//! assert!(kube.jobs("default").is_empty());
//! ```

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde_json::{json, Value};
use tokio::sync::oneshot;

mod rules;
pub(crate) mod server;
mod state;
#[cfg(test)]
mod tests;

use server::{lock, new_ca, serve};
use state::{Failure, State};

/// The prefix of the bearer token `aws eks get-token` makes (and Sortie sends).
pub const TOKEN_PREFIX: &str = "k8s-aws-v1.";

/// The label Sortie puts on a Job's pod template: the Sortie job's id.
pub const JOB_ID_LABEL: &str = "sortie.dev/job-id";

/// One request the double received, authenticated or not.
#[derive(Debug, Clone, PartialEq)]
pub struct KubeRequest {
    /// `GET`, `POST`, `DELETE`, ...
    pub method: String,
    /// The path, without the query, e.g. `/apis/batch/v1/namespaces/ci/jobs`.
    pub path: String,
    /// The query parameters, percent-decoded (`+` as a space); the last of a repeated one.
    pub query: BTreeMap<String, String>,
    /// The headers in the order received, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// The body: its JSON, a JSON string holding the text of a body that is not JSON, or
    /// `None` when empty.
    pub body: Option<Value>,
}

impl KubeRequest {
    /// The value of the first header called `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The token of an `Authorization: Bearer <token>` header.
    pub fn bearer(&self) -> Option<&str> {
        self.header("authorization")?.strip_prefix("Bearer ")
    }

    /// The propagation policy of a DELETE: the body's `propagationPolicy`
    /// (`DeleteOptions`), else the `propagationPolicy` query parameter.
    pub fn propagation_policy(&self) -> Option<&str> {
        self.body
            .as_ref()
            .and_then(|b| b.get("propagationPolicy"))
            .and_then(Value::as_str)
            .or_else(|| self.query.get("propagationPolicy").map(String::as_str))
    }
}

/// A running Kubernetes API double; see the [module documentation](self).
///
/// Dropping it stops the server.
pub struct KubeDouble {
    addr: SocketAddr,
    ca_pem: String,
    state: Arc<Mutex<State>>,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for KubeDouble {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeDouble")
            .field("url", &self.url())
            .finish_non_exhaustive()
    }
}

impl KubeDouble {
    /// Generates a test CA and a server certificate it signs, and starts serving on
    /// `127.0.0.1:<free port>` on a thread of its own.
    ///
    /// # Panics
    ///
    /// When no port can be bound or the certificates cannot be made.
    pub fn start() -> KubeDouble {
        let (ca_pem, tls) = server::loopback_tls("kube-double");

        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        listener
            .set_nonblocking(true)
            .expect("make the listener non-blocking");
        let addr = listener.local_addr().expect("the listener's address");
        let state = Arc::new(Mutex::new(State::default()));
        let (shutdown, stop) = oneshot::channel();
        let served = Arc::clone(&state);
        let thread = std::thread::Builder::new()
            .name(format!("kube-double-{}", addr.port()))
            .spawn(move || serve(listener, tls, served, stop))
            .expect("spawn the KubeDouble thread");
        KubeDouble {
            addr,
            ca_pem,
            state,
            shutdown: Some(shutdown),
            thread: Some(thread),
        }
    }

    /// The API server's URL, `https://127.0.0.1:<port>` (no trailing slash).
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.addr.port())
    }

    /// The test CA's certificate, PEM.
    pub fn ca_pem(&self) -> String {
        self.ca_pem.clone()
    }

    /// [`KubeDouble::ca_pem`] base64-encoded (standard alphabet, padded): what EKS
    /// DescribeCluster answers as `cluster.certificateAuthority.data`.
    pub fn ca_data(&self) -> String {
        STANDARD.encode(&self.ca_pem)
    }

    /// Like [`KubeDouble::ca_data`] for a freshly generated CA that did not sign the
    /// double's certificate: a client trusting it must refuse the double.
    pub fn other_ca_data() -> String {
        other_ca_data()
    }

    /// Every request received so far, oldest first.
    pub fn requests(&self) -> Vec<KubeRequest> {
        self.lock().requests.clone()
    }

    /// Forgets the recorded requests (not the Jobs, Pods, denials or queued failures).
    pub fn clear(&self) {
        self.lock().requests.clear();
    }

    /// The Jobs stored in `namespace`, ordered by name.
    pub fn jobs(&self, namespace: &str) -> Vec<Value> {
        self.lock()
            .jobs
            .iter()
            .filter(|((ns, _), _)| ns == namespace)
            .map(|(_, job)| job.clone())
            .collect()
    }

    /// Replaces the `.status` of Job `namespace/name`, as the Job controller would.
    ///
    /// # Panics
    ///
    /// When there is no such Job.
    pub fn set_job_status(&self, namespace: &str, name: &str, status: Value) {
        let mut state = self.lock();
        let version = state.next_version();
        let job = state
            .jobs
            .get_mut(&(namespace.to_string(), name.to_string()))
            .unwrap_or_else(|| panic!("KubeDouble: no Job {namespace}/{name}"));
        job["status"] = status;
        job["metadata"]["resourceVersion"] = Value::String(version);
    }

    /// Stores a Pod in `namespace` as given (tests give `metadata.name`,
    /// `metadata.labels` and `status`); `metadata.namespace` is set to `namespace`.
    pub fn add_pod(&self, namespace: &str, mut pod: Value) {
        if !pod.get("metadata").is_some_and(Value::is_object) {
            pod["metadata"] = json!({});
        }
        pod["metadata"]["namespace"] = Value::String(namespace.to_string());
        self.lock().pods.push((namespace.to_string(), pod));
    }

    /// The Pods stored in `namespace`, in the order added.
    pub fn pods(&self, namespace: &str) -> Vec<Value> {
        self.lock()
            .pods
            .iter()
            .filter(|(ns, _)| ns == namespace)
            .map(|(_, pod)| pod.clone())
            .collect()
    }

    /// Makes SelfSubjectAccessReviews for `verb` on `resource` (e.g. `create`, `jobs`)
    /// answer `allowed: false`, with a reason.
    pub fn deny(&self, verb: &str, resource: &str) {
        self.lock()
            .denied
            .insert((verb.to_string(), resource.to_string()));
    }

    /// Answers the next authenticated request with method `method` and a path starting
    /// with `path_prefix` with `status` and a `Status` body carrying `message`, once.
    /// Failures queue: each call answers one request.
    pub fn fail_next(&self, method: &str, path_prefix: &str, status: u16, message: &str) {
        self.lock().failures.push(Failure {
            method: method.to_ascii_uppercase(),
            path_prefix: path_prefix.to_string(),
            status,
            message: message.to_string(),
        });
    }

    /// Delays every answer by `delay` (the request is recorded when it arrives).
    pub fn set_delay(&self, delay: Duration) {
        self.lock().delay = delay;
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }
}

impl Drop for KubeDouble {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Base64 (standard, padded) of the PEM of a freshly generated CA that signed nothing the
/// double serves; see [`KubeDouble::other_ca_data`].
pub fn other_ca_data() -> String {
    let (cert, _) = new_ca("Sortie tests: another CA");
    STANDARD.encode(cert.pem())
}

/// Creates the EKS cluster `name` in moto whose endpoint and CA are this double's (or
/// `ca_data` instead of the CA, for a wrong-CA test), through moto patch 3's tags.
pub async fn create_eks_cluster(
    config: &aws_config::SdkConfig,
    name: &str,
    endpoint: &str,
    ca_data: &str,
) {
    aws_sdk_eks::Client::new(config)
        .create_cluster()
        .name(name)
        .role_arn("arn:aws:iam::123456789012:role/eks-cluster")
        .resources_vpc_config(
            aws_sdk_eks::types::VpcConfigRequest::builder()
                .subnet_ids("subnet-0123abcd")
                .build(),
        )
        .tags("sortie-test/endpoint", endpoint)
        .tags("sortie-test/ca-data", ca_data)
        .send()
        .await
        .expect("create the EKS cluster in moto");
}
