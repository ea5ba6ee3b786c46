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

use std::collections::{BTreeMap, HashSet};
use std::convert::Infallible;
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::{json, Value};
use tokio::sync::oneshot;

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
        let (ca_cert, ca_issuer) = new_ca("Sortie tests: KubeDouble CA");
        let mut server_params =
            CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
                .expect("server certificate parameters");
        server_params.distinguished_name = common_name("kube-double");
        server_params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        server_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let server_key = KeyPair::generate().expect("generate the server key");
        let server_cert = server_params
            .signed_by(&server_key, &ca_issuer)
            .expect("sign the server certificate");
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(server_key.serialize_der()));
        let tls = server_tls(server_cert.der().clone(), key);

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
            ca_pem: ca_cert.pem(),
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

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    // A panicking test thread must not take the double down with it.
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn common_name(name: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, name);
    dn
}

fn new_ca(name: &str) -> (rcgen::Certificate, Issuer<'static, KeyPair>) {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
    params.distinguished_name = common_name(name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let key = KeyPair::generate().expect("generate the CA key");
    let cert = params.self_signed(&key).expect("self-sign the CA");
    (cert, Issuer::new(params, key))
}

fn server_tls(cert: CertificateDer<'static>, key: PrivateKeyDer<'static>) -> rustls::ServerConfig {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS protocol versions")
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .expect("the server certificate and key");
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config
}

/// The server thread: accepts connections until told to stop.
fn serve(
    listener: TcpListener,
    tls: rustls::ServerConfig,
    state: Arc<Mutex<State>>,
    mut stop: oneshot::Receiver<()>,
) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("the KubeDouble runtime");
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener).expect("a tokio listener");
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
        loop {
            let tcp = tokio::select! {
                _ = &mut stop => break,
                accepted = listener.accept() => match accepted {
                    Ok((tcp, _)) => tcp,
                    Err(_) => {
                        // E.g. out of file descriptors: wait instead of spinning.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
            };
            let acceptor = acceptor.clone();
            let state = Arc::clone(&state);
            tokio::spawn(async move {
                // A client that refuses the certificate ends here.
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = service_fn(move |request| handle(Arc::clone(&state), request));
                let _ = http1::Builder::new()
                    .keep_alive(true)
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    // Dropping the runtime drops every connection still open.
}

async fn handle(
    state: Arc<Mutex<State>>,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let (parts, body) = request.into_parts();
    let bytes = body
        .collect()
        .await
        .map(|collected| collected.to_bytes())
        .unwrap_or_default();
    let body = if bytes.is_empty() {
        None
    } else {
        Some(
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned())),
        )
    };
    let recorded = KubeRequest {
        method: parts.method.as_str().to_string(),
        path: parts.uri.path().to_string(),
        query: parse_query(parts.uri.query().unwrap_or_default()),
        headers: parts
            .headers
            .iter()
            .map(|(name, value)| {
                (
                    name.as_str().to_ascii_lowercase(),
                    String::from_utf8_lossy(value.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body,
    };
    let ((status, answer), delay) = {
        let mut state = lock(&state);
        state.requests.push(recorded.clone());
        (state.answer(&recorded), state.delay)
    };
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let mut response = Response::new(Full::new(Bytes::from(answer.to_string())));
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    Ok(response)
}

/// A failure queued by [`KubeDouble::fail_next`].
#[derive(Debug, Clone)]
struct Failure {
    method: String,
    path_prefix: String,
    status: u16,
    message: String,
}

/// Everything the double knows.
#[derive(Debug, Default)]
struct State {
    requests: Vec<KubeRequest>,
    /// Jobs by (namespace, name).
    jobs: BTreeMap<(String, String), Value>,
    /// Pods with their namespace, in the order added.
    pods: Vec<(String, Value)>,
    /// (verb, resource) pairs SelfSubjectAccessReviews deny.
    denied: HashSet<(String, String)>,
    failures: Vec<Failure>,
    delay: Duration,
    /// The last resourceVersion handed out.
    version: u64,
}

type Answer = (u16, Value);

impl State {
    fn next_version(&mut self) -> String {
        self.version += 1;
        self.version.to_string()
    }

    /// The status and body answering `request`.
    fn answer(&mut self, request: &KubeRequest) -> Answer {
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

    fn create_job(&mut self, ns: &str, request: &KubeRequest) -> Answer {
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

    fn list_jobs(&mut self, ns: &str, request: &KubeRequest) -> Answer {
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

    fn get_job(&mut self, ns: &str, name: &str) -> Answer {
        match self.jobs.get(&(ns.to_string(), name.to_string())) {
            Some(job) => (200, job.clone()),
            None => job_not_found(name),
        }
    }

    fn delete_job(&mut self, ns: &str, name: &str, request: &KubeRequest) -> Answer {
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

    fn list_pods(&mut self, ns: &str, request: &KubeRequest) -> Answer {
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

    fn review_access(&mut self, request: &KubeRequest) -> Answer {
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

/// Whether the request carries `Authorization: Bearer k8s-aws-v1.<base64url, no padding>`.
fn authenticated(request: &KubeRequest) -> bool {
    request
        .bearer()
        .and_then(|token| token.strip_prefix(TOKEN_PREFIX))
        .is_some_and(|rest| !rest.is_empty() && URL_SAFE_NO_PAD.decode(rest).is_ok())
}

/// A Kubernetes `Status` failure.
fn failure(code: u16, reason: &str, message: &str, details: Option<Value>) -> Answer {
    let mut status = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    });
    if let Some(details) = details {
        status["details"] = details;
    }
    (code, status)
}

fn bad_request(message: &str) -> Answer {
    failure(400, "BadRequest", message, None)
}

fn invalid(name: &str, message: &str) -> Answer {
    failure(
        422,
        "Invalid",
        message,
        Some(json!({"name": name, "group": "batch", "kind": "Job"})),
    )
}

fn job_not_found(name: &str) -> Answer {
    failure(
        404,
        "NotFound",
        &format!("jobs.batch \"{name}\" not found"),
        Some(json!({"name": name, "group": "batch", "kind": "jobs"})),
    )
}

fn method_not_allowed(request: &KubeRequest) -> Answer {
    failure(
        405,
        "MethodNotAllowed",
        &format!(
            "the server does not allow this method on the requested resource ({} {})",
            request.method, request.path
        ),
        None,
    )
}

/// The `reason` Kubernetes gives with an HTTP status.
fn reason_for(code: u16) -> &'static str {
    match code {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        406 => "NotAcceptable",
        409 => "Conflict",
        410 => "Expired",
        415 => "UnsupportedMediaType",
        422 => "Invalid",
        429 => "TooManyRequests",
        500 => "InternalError",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "Unknown",
    }
}

/// An equality label selector: every (key, value) must be a label of the object.
type Selector = Vec<(String, String)>;

/// The request's `labelSelector`, or the `400` answering one the double does not support.
fn selector_of(request: &KubeRequest) -> Result<Selector, Answer> {
    let text = request
        .query
        .get("labelSelector")
        .map(String::as_str)
        .unwrap_or_default();
    parse_selector(text).map_err(|message| bad_request(&message))
}

/// Parses `k=v,k2==v2` (equality terms only; the double supports no other syntax).
fn parse_selector(text: &str) -> Result<Selector, String> {
    let mut terms = Vec::new();
    if text.trim().is_empty() {
        return Ok(terms);
    }
    for term in text.split(',') {
        let term = term.trim();
        let unsupported = || {
            format!(
                "unable to parse requirement {term:?}: the KubeDouble supports only equality \
                 selectors (k=v, k==v)"
            )
        };
        if term.contains("!=") {
            return Err(unsupported());
        }
        let (key, value) = term
            .split_once("==")
            .or_else(|| term.split_once('='))
            .ok_or_else(unsupported)?;
        let (key, value) = (key.trim(), value.trim());
        let key_ok = !key.is_empty()
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
        let value_ok = value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if !key_ok || !value_ok {
            return Err(unsupported());
        }
        terms.push((key.to_string(), value.to_string()));
    }
    Ok(terms)
}

/// Whether `object`'s `metadata.labels` carry every term of `selector`.
fn matches(selector: &Selector, object: &Value) -> bool {
    let labels = object.pointer("/metadata/labels");
    selector.iter().all(|(key, value)| {
        labels
            .and_then(|labels| labels.get(key))
            .and_then(Value::as_str)
            == Some(value.as_str())
    })
}

/// A label name or value: at most 63 of `[A-Za-z0-9_.-]`, starting and ending alphanumeric
/// (a value may also be empty). Kubernetes, "Labels and Selectors", syntax and character
/// set: <https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#syntax-and-character-set>.
fn is_label_text(s: &str) -> bool {
    let alnum = |c: char| c.is_ascii_alphanumeric();
    s.len() <= 63
        && s.chars().all(|c| alnum(c) || matches!(c, '-' | '_' | '.'))
        && (s.is_empty() || (s.starts_with(alnum) && s.ends_with(alnum)))
}

/// Why the API server would refuse `labels` (a `metadata.labels` object), as its own words,
/// or `None`: each key an optional DNS-1123 subdomain prefix (at most 253) and `/`, then a
/// non-empty name; each value a string that is empty or a valid name.
fn labels_problem(labels: &Value) -> Option<String> {
    let Some(labels) = labels.as_object() else {
        return Some("must be a map of strings".into());
    };
    for (key, value) in labels {
        let (prefix, name) = match key.rsplit_once('/') {
            Some((p, n)) => (Some(p), n),
            None => (None, key.as_str()),
        };
        let prefix_ok = prefix
            .is_none_or(|p| !p.is_empty() && p.len() <= 253 && p.split('.').all(is_dns1123_label));
        if !prefix_ok || name.is_empty() || !is_label_text(name) {
            return Some(format!(
                "Invalid value: \"{key}\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character, at most 63 characters, with an optional DNS subdomain prefix and '/'"
            ));
        }
        let Some(text) = value.as_str() else {
            return Some(format!(
                "Invalid value: {value}: label values must be strings"
            ));
        };
        if !is_label_text(text) {
            return Some(format!(
                "Invalid value: \"{text}\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character, at most 63 characters"
            ));
        }
    }
    None
}

/// A label value Kubernetes accepts: empty, or at most 63 of `[-_.A-Za-z0-9]` starting
/// and ending alphanumeric (<https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#syntax-and-character-set>).
fn is_label_value(v: &str) -> bool {
    let alnum = |c: char| c.is_ascii_alphanumeric();
    v.is_empty()
        || (v.len() <= 63
            && v.chars().all(|c| alnum(c) || matches!(c, '-' | '_' | '.'))
            && v.starts_with(alnum)
            && v.ends_with(alnum))
}

/// The first label of the Job or its pod template whose value Kubernetes refuses, in the
/// API server's words (`metadata.labels: Invalid value: ...`).
fn invalid_label(job: &Value) -> Option<String> {
    let places = [
        ("metadata.labels", &job["metadata"]["labels"]),
        (
            "spec.template.metadata.labels",
            &job["spec"]["template"]["metadata"]["labels"],
        ),
    ];
    places.into_iter().find_map(|(path, labels)| {
        labels.as_object()?.values().find_map(|v| {
            let v = v.as_str().unwrap_or_default();
            (!is_label_value(v)).then(|| {
                format!(
                    "{path}: Invalid value: \"{v}\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
                )
            })
        })
    })
}

/// A DNS-1123 label: 1 to 63 of `[a-z0-9-]`, starting and ending alphanumeric.
fn is_dns1123_label(name: &str) -> bool {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    !name.is_empty()
        && name.len() <= 63
        && name.chars().all(|c| alnum(c) || c == '-')
        && name.starts_with(alnum)
        && name.ends_with(alnum)
}

fn parse_query(query: &str) -> BTreeMap<String, String> {
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(key), percent_decode(value))
        })
        .collect()
}

/// Decodes `%XX` escapes and `+` (a space), as Go's `url.ParseQuery` does.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let hex = |b: u8| (b as char).to_digit(16);
    let mut i = 0;
    while i < bytes.len() {
        let high = bytes.get(i + 1).copied().and_then(hex);
        let low = bytes.get(i + 2).copied().and_then(hex);
        match (bytes[i], high, low) {
            (b'%', Some(high), Some(low)) => {
                out.push((high * 16 + low) as u8);
                i += 3;
            }
            (b'+', _, _) => {
                out.push(b' ');
                i += 1;
            }
            (byte, _, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn random_bytes<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).expect("random bytes");
    bytes
}

/// `len` random characters of `[a-z0-9]`, like the suffix of a generated name.
fn random_suffix(len: usize) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    random_bytes::<16>()
        .iter()
        .take(len)
        .map(|b| ALPHABET[usize::from(*b) % ALPHABET.len()] as char)
        .collect()
}

/// A random UUID (version 4), as Kubernetes gives every object.
fn random_uid() -> String {
    let mut b = random_bytes::<16>();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|byte| format!("{byte:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
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

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "Bearer k8s-aws-v1.abc";

    fn request(method: &str, target: &str, body: Option<Value>) -> KubeRequest {
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        KubeRequest {
            method: method.to_string(),
            path: path.to_string(),
            query: parse_query(query),
            headers: vec![
                ("authorization".to_string(), TOKEN.to_string()),
                ("content-type".to_string(), "application/json".to_string()),
            ],
            body,
        }
    }

    fn job(name: Value, id: &str) -> Value {
        json!({
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"generateName": "sortie-", "name": name, "labels": {JOB_ID_LABEL: id}},
            "spec": {"template": {"metadata": {"labels": {JOB_ID_LABEL: id}}}},
        })
    }

    #[test]
    fn queries_are_percent_decoded() {
        let query = parse_query("labelSelector=sortie.dev%2Fjob-id%3Dj1%2Ca%3D%3Db&x=a+b&y");
        assert_eq!(query["labelSelector"], "sortie.dev/job-id=j1,a==b");
        assert_eq!(query["x"], "a b");
        assert_eq!(query["y"], "");
        assert_eq!(percent_decode("100%"), "100%");
    }

    #[test]
    fn selectors_are_equality_terms_only() {
        assert_eq!(
            parse_selector("a=1, b==2").unwrap(),
            vec![("a".into(), "1".into()), ("b".into(), "2".into())]
        );
        assert_eq!(parse_selector("").unwrap(), vec![]);
        for bad in ["a!=1", "a in (1,2)", "!a", "a", "=1", "a=1=2"] {
            assert!(parse_selector(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn generated_names_and_uids_have_kubernetes_shapes() {
        let suffix = random_suffix(5);
        assert_eq!(suffix.len(), 5);
        assert!(is_dns1123_label(&format!("sortie-{suffix}")));
        let uid = random_uid();
        assert_eq!(uid.len(), 36);
        assert_eq!(&uid[14..15], "4");
        assert!(!is_dns1123_label("Upper"));
        assert!(!is_dns1123_label("-x"));
        assert!(!is_dns1123_label(&"a".repeat(64)));
        assert!(is_label_value("") && is_label_value("acme.web.prod"));
        assert!(!is_label_value("acme/web") && !is_label_value(&"a".repeat(64)));
        assert!(!is_label_value("-a") && !is_label_value("a."));
    }

    #[test]
    fn a_job_with_a_label_kubernetes_refuses_is_invalid() {
        let mut state = State::default();
        let path = "/apis/batch/v1/namespaces/ci/jobs";
        let env = "acme/payments/prod";
        for (pointer, labels) in [
            // A path is not a label value: `/` is refused, so is a value over 63.
            ("/metadata/labels", json!({"sortie.dev/env": env})),
            (
                "/metadata/labels",
                json!({"sortie.dev/runner": "r".repeat(64)}),
            ),
            (
                "/spec/template/metadata/labels",
                json!({"sortie.dev/env": "-x"}),
            ),
            ("/metadata/labels", json!({"Bad_Prefix/x": "v"})),
            ("/metadata/labels", json!({"sortie.dev/n": 1})),
        ] {
            let mut body = job(Value::Null, "j1");
            *body.pointer_mut(pointer).unwrap() = labels.clone();
            let (status, answer) = state.answer(&request("POST", path, Some(body)));
            assert_eq!(
                (status, answer["reason"].clone()),
                (422, json!("Invalid")),
                "{labels}"
            );
        }
        let mut ok = job(Value::Null, "j1");
        ok["metadata"]["labels"] = json!({
            "sortie.dev/env": "acme.payments.prod",
            "sortie.dev/org": "acme",
            "sortie.dev/runner": "acme.fargate",
            "empty": "",
        });
        assert_eq!(state.answer(&request("POST", path, Some(ok))).0, 201);
        assert_eq!(state.jobs.len(), 1, "only the valid Job was stored");
    }

    #[test]
    fn jobs_are_created_listed_and_deleted_with_their_pods() {
        let mut state = State::default();
        let path = "/apis/batch/v1/namespaces/ci/jobs";
        let (status, created) = state.answer(&request("POST", path, Some(job(Value::Null, "j1"))));
        assert_eq!(status, 201, "{created}");
        let name = created["metadata"]["name"].as_str().unwrap().to_string();
        assert!(name.starts_with("sortie-") && name.len() == 12, "{name}");
        assert_eq!(created["metadata"]["namespace"], "ci");
        assert_eq!(created["status"], json!({}));

        let (status, body) = state.answer(&request("POST", path, Some(job(json!(name), "j1"))));
        assert_eq!(
            (status, body["reason"].clone()),
            (409, json!("AlreadyExists"))
        );

        let (_, list) = state.answer(&request(
            "GET",
            &format!("{path}?labelSelector=sortie.dev/job-id%3Dj1"),
            None,
        ));
        assert_eq!(list["items"].as_array().unwrap().len(), 1);
        let (_, list) = state.answer(&request(
            "GET",
            &format!("{path}?labelSelector=sortie.dev/job-id%3Dj2"),
            None,
        ));
        assert_eq!(list["items"], json!([]));

        state.pods.push((
            "ci".into(),
            json!({"metadata": {"name": "p1", "labels": {JOB_ID_LABEL: "j1"}}}),
        ));
        let target = format!("{path}/{name}?propagationPolicy=Background");
        let (status, body) = state.answer(&request("DELETE", &target, None));
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["details"]["uid"], created["metadata"]["uid"]);
        assert!(state.pods.is_empty());
        let (status, body) = state.answer(&request("GET", &format!("{path}/{name}"), None));
        assert_eq!(status, 404);
        assert_eq!(body["message"], format!("jobs.batch \"{name}\" not found"));
    }

    #[test]
    fn requests_without_the_eks_token_are_unauthorized() {
        let mut state = State::default();
        let mut unsigned = request("GET", "/apis/batch/v1/namespaces/ci/jobs", None);
        for header in [
            None,
            Some("Bearer abc"),
            Some("Bearer k8s-aws-v1."),
            Some("Bearer k8s-aws-v1.a=b"),
        ] {
            unsigned.headers = header
                .map(|h| vec![("authorization".to_string(), h.to_string())])
                .unwrap_or_default();
            let (status, body) = state.answer(&unsigned);
            assert_eq!(
                (status, body["reason"].clone()),
                (401, json!("Unauthorized")),
                "{header:?}"
            );
        }
    }
}
