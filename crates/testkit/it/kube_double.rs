//! The Kubernetes API double (`sortie_testkit::kube`) and the moto set-up that points an EKS
//! cluster at it (patch 3 of `scripts/moto_server.py`), held to what the `eks` runner's
//! tests rely on: DescribeCluster names the double's URL and CA, the double's TLS verifies
//! against that CA and no other, and its Jobs API answers as the brief of each endpoint
//! says, recording every request.

use aws_sdk_eks::types::VpcConfigRequest;
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::Request;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use serde_json::{json, Value};
use sortie_testkit::kube::{KubeDouble, JOB_ID_LABEL};
use sortie_testkit::{sdk_config, unique};

const TOKEN: &str = "k8s-aws-v1.abc";
const NS: &str = "sortie-ci";

type HttpsClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// A hyper-util legacy client (the stack the `eks` runner uses) trusting only `ca_pem`.
fn client_trusting(ca_pem: &str) -> HttpsClient {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots
            .add(cert.expect("a PEM certificate"))
            .expect("a usable CA");
    }
    assert_eq!(roots.len(), 1, "one CA in {ca_pem}");
    let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_only()
        .enable_http1()
        .build();
    Client::builder(TokioExecutor::new()).build(connector)
}

/// One request; the status and the JSON answer.
async fn call(
    client: &HttpsClient,
    url: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> (u16, Value) {
    let mut request = Request::builder()
        .method(method)
        .uri(format!("{url}{path}"));
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    let body = match body {
        Some(body) => {
            request = request.header("content-type", "application/json");
            Full::new(Bytes::from(body.to_string()))
        }
        None => Full::new(Bytes::new()),
    };
    let response = client
        .request(request.body(body).expect("a request"))
        .await
        .unwrap_or_else(|e| panic!("{method} {path}: {e:?}"));
    let status = response.status().as_u16();
    assert_eq!(
        response.headers().get("content-type").map(|v| v.as_bytes()),
        Some(&b"application/json"[..])
    );
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("the body")
        .to_bytes();
    let value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|e| panic!("{method} {path}: not JSON ({e}): {bytes:?}"));
    (status, value)
}

fn job_manifest(metadata: Value, job_id: &str) -> Value {
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": {JOB_ID_LABEL: job_id}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "runner", "image": "sortie/runner:test"}],
                },
            },
        },
    })
}

fn assert_status(answer: &(u16, Value), code: u16, reason: &str) {
    let (status, body) = answer;
    assert_eq!(*status, code, "{body}");
    assert_eq!(body["kind"], "Status", "{body}");
    assert_eq!(body["apiVersion"], "v1", "{body}");
    assert_eq!(body["status"], "Failure", "{body}");
    assert_eq!(body["reason"], reason, "{body}");
    assert_eq!(body["code"], code, "{body}");
}

#[tokio::test]
async fn an_eks_cluster_created_with_the_test_tags_describes_the_doubles_endpoint_and_ca() {
    sortie_testkit::require_aws!();
    let kube = KubeDouble::start();
    let eks = aws_sdk_eks::Client::new(&sdk_config().await);
    let vpc = || {
        VpcConfigRequest::builder()
            .subnet_ids("subnet-0a1b2c3d")
            .subnet_ids("subnet-4e5f6a7b")
            .build()
    };
    let name = unique("kube-double");
    eks.create_cluster()
        .name(&name)
        .role_arn("arn:aws:iam::123456789012:role/eks")
        .resources_vpc_config(vpc())
        .tags("sortie-test/endpoint", kube.url())
        .tags("sortie-test/ca-data", kube.ca_data())
        .send()
        .await
        .expect("CreateCluster");

    let described = eks
        .describe_cluster()
        .name(&name)
        .send()
        .await
        .expect("DescribeCluster");
    let cluster = described.cluster().expect("a cluster");
    assert_eq!(cluster.endpoint(), Some(kube.url().as_str()));
    let data = cluster
        .certificate_authority()
        .and_then(|ca| ca.data())
        .expect("certificateAuthority.data");
    assert_eq!(data, kube.ca_data());
    let pem = STANDARD.decode(data).expect("base64");
    assert_eq!(String::from_utf8(pem).expect("UTF-8"), kube.ca_pem());

    // A cluster without the tags keeps moto's own (unverifiable) values.
    let plain = unique("kube-plain");
    eks.create_cluster()
        .name(&plain)
        .role_arn("arn:aws:iam::123456789012:role/eks")
        .resources_vpc_config(vpc())
        .send()
        .await
        .expect("CreateCluster without the tags");
    let described = eks
        .describe_cluster()
        .name(&plain)
        .send()
        .await
        .expect("DescribeCluster");
    let cluster = described.cluster().expect("a cluster");
    assert_ne!(cluster.endpoint(), Some(kube.url().as_str()));
    assert_ne!(
        cluster.certificate_authority().and_then(|ca| ca.data()),
        Some(kube.ca_data().as_str())
    );
}

#[tokio::test]
async fn the_double_serves_tls_that_only_its_ca_verifies() {
    let kube = KubeDouble::start();
    assert!(kube.url().starts_with("https://127.0.0.1:"));
    assert!(!kube.url().ends_with('/'));
    assert_eq!(
        STANDARD.decode(kube.ca_data()).expect("base64"),
        kube.ca_pem().into_bytes()
    );

    let trusted = client_trusting(&kube.ca_pem());
    let (status, list) = call(
        &trusted,
        &kube.url(),
        "GET",
        &format!("/apis/batch/v1/namespaces/{NS}/jobs"),
        Some(TOKEN),
        None,
    )
    .await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(list["kind"], "JobList");
    assert_eq!(list["items"], json!([]));

    // The certificate also names localhost.
    let port = kube.url().rsplit(':').next().expect("a port").to_string();
    let (status, _) = call(
        &trusted,
        &format!("https://localhost:{port}"),
        "GET",
        &format!("/api/v1/namespaces/{NS}/pods"),
        Some(TOKEN),
        None,
    )
    .await;
    assert_eq!(status, 200);

    let other_pem = String::from_utf8(
        STANDARD
            .decode(KubeDouble::other_ca_data())
            .expect("base64"),
    )
    .expect("UTF-8");
    assert_ne!(other_pem, kube.ca_pem());
    let untrusting = client_trusting(&other_pem);
    let request = Request::get(format!("{}/apis/batch/v1/namespaces/{NS}/jobs", kube.url()))
        .header("authorization", format!("Bearer {TOKEN}"))
        .body(Full::new(Bytes::new()))
        .expect("a request");
    let error = untrusting
        .request(request)
        .await
        .expect_err("a client trusting another CA must refuse the double");
    // hyper-util wraps io::Errors wrapping the rustls error; io::Error::source skips the
    // error it wraps, so step into those with get_ref.
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&error);
    let mut tls_error = None;
    while let Some(e) = cause {
        if let Some(found) = e.downcast_ref::<rustls::Error>() {
            tls_error = Some(found.clone());
        }
        cause = match e.downcast_ref::<std::io::Error>() {
            Some(io) => io
                .get_ref()
                .map(|inner| inner as &(dyn std::error::Error + 'static)),
            None => e.source(),
        };
    }
    assert_eq!(
        tls_error,
        Some(rustls::Error::InvalidCertificate(
            rustls::CertificateError::UnknownIssuer
        )),
        "{error:?}"
    );
    // The refused handshake never reached HTTP: only the trusted requests are recorded.
    assert_eq!(kube.requests().len(), 2);
}

#[tokio::test]
async fn the_double_creates_lists_gets_and_deletes_jobs_by_label_and_records_every_request() {
    let kube = KubeDouble::start();
    let client = client_trusting(&kube.ca_pem());
    let url = kube.url();
    let jobs = format!("/apis/batch/v1/namespaces/{NS}/jobs");
    let pods = format!("/api/v1/namespaces/{NS}/pods");

    // Without the EKS token: 401, recorded all the same.
    let answer = call(&client, &url, "GET", &jobs, None, None).await;
    assert_status(&answer, 401, "Unauthorized");
    let answer = call(&client, &url, "GET", &jobs, Some("not-an-eks-token"), None).await;
    assert_status(&answer, 401, "Unauthorized");
    let recorded = kube.requests();
    assert_eq!(recorded.len(), 2);
    assert_eq!(recorded[0].bearer(), None);
    assert_eq!(recorded[1].bearer(), Some("not-an-eks-token"));
    kube.clear();
    assert!(kube.requests().is_empty());

    // generateName: the prefix and 5 of [a-z0-9].
    let (status, created) = call(
        &client,
        &url,
        "POST",
        &jobs,
        Some(TOKEN),
        Some(job_manifest(
            json!({"generateName": "sortie-", "labels": {JOB_ID_LABEL: "j1"}}),
            "j1",
        )),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let name = created["metadata"]["name"]
        .as_str()
        .expect("a name")
        .to_string();
    let suffix = name.strip_prefix("sortie-").expect("the prefix");
    assert_eq!(suffix.len(), 5, "{name}");
    assert!(suffix
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()));
    let metadata = &created["metadata"];
    assert_eq!(metadata["namespace"], NS);
    assert!(metadata["uid"].as_str().is_some_and(|u| u.len() == 36));
    assert!(metadata["resourceVersion"].is_string());
    let created_at = metadata["creationTimestamp"].as_str().expect("a timestamp");
    chrono::DateTime::parse_from_rfc3339(created_at).expect("RFC 3339");
    assert!(created_at.ends_with('Z'), "{created_at}");
    assert_eq!(created["status"], json!({}));
    assert_eq!(kube.jobs(NS), vec![created.clone()]);

    // A named Job, another label; then the same name again: 409.
    let named = job_manifest(
        json!({"name": "sortie-j2", "namespace": NS, "labels": {JOB_ID_LABEL: "j2"}}),
        "j2",
    );
    let (status, second) = call(
        &client,
        &url,
        "POST",
        &jobs,
        Some(TOKEN),
        Some(named.clone()),
    )
    .await;
    assert_eq!(status, 201, "{second}");
    let answer = call(&client, &url, "POST", &jobs, Some(TOKEN), Some(named)).await;
    assert_status(&answer, 409, "AlreadyExists");
    // Not a Job, or another namespace: 400.
    let answer = call(
        &client,
        &url,
        "POST",
        &jobs,
        Some(TOKEN),
        Some(json!({"kind": "Pod"})),
    )
    .await;
    assert_status(&answer, 400, "BadRequest");
    let elsewhere = job_manifest(json!({"name": "x", "namespace": "other"}), "x");
    let answer = call(&client, &url, "POST", &jobs, Some(TOKEN), Some(elsewhere)).await;
    assert_status(&answer, 400, "BadRequest");

    // Listing by label selector: `=` and `==`, escaped or not; other syntax: 400.
    for selector in ["sortie.dev/job-id=j1", "sortie.dev%2Fjob-id%3D%3Dj1"] {
        let (status, list) = call(
            &client,
            &url,
            "GET",
            &format!("{jobs}?labelSelector={selector}"),
            Some(TOKEN),
            None,
        )
        .await;
        assert_eq!(status, 200, "{list}");
        assert_eq!(list["apiVersion"], "batch/v1");
        assert_eq!(list["kind"], "JobList");
        assert!(list["metadata"]["resourceVersion"].is_string());
        assert_eq!(list["items"], json!([created.clone()]), "{selector}");
    }
    let (_, all) = call(&client, &url, "GET", &jobs, Some(TOKEN), None).await;
    assert_eq!(all["items"].as_array().map(Vec::len), Some(2));
    let answer = call(
        &client,
        &url,
        "GET",
        &format!("{jobs}?labelSelector=sortie.dev%2Fjob-id%21%3Dj1"),
        Some(TOKEN),
        None,
    )
    .await;
    assert_status(&answer, 400, "BadRequest");

    // Get, and the status the test sets.
    let one = format!("{jobs}/{name}");
    let (status, got) = call(&client, &url, "GET", &one, Some(TOKEN), None).await;
    assert_eq!((status, &got), (200, &created));
    kube.set_job_status(NS, &name, json!({"active": 1}));
    let (_, got) = call(&client, &url, "GET", &one, Some(TOKEN), None).await;
    assert_eq!(got["status"], json!({"active": 1}));
    let answer = call(
        &client,
        &url,
        "GET",
        &format!("{jobs}/absent"),
        Some(TOKEN),
        None,
    )
    .await;
    assert_status(&answer, 404, "NotFound");
    assert_eq!(answer.1["message"], "jobs.batch \"absent\" not found");

    // Pods, by label.
    kube.add_pod(
        NS,
        json!({"metadata": {"name": format!("{name}-abcde"), "labels": {JOB_ID_LABEL: "j1", "job-name": name}}, "status": {"phase": "Running"}}),
    );
    kube.add_pod(
        NS,
        json!({"metadata": {"name": "sortie-j2-fghij", "labels": {JOB_ID_LABEL: "j2", "batch.kubernetes.io/job-name": "sortie-j2"}}, "status": {"phase": "Pending"}}),
    );
    let (status, listed) = call(
        &client,
        &url,
        "GET",
        &format!("{pods}?labelSelector={JOB_ID_LABEL}%3Dj1"),
        Some(TOKEN),
        None,
    )
    .await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["apiVersion"], "v1");
    assert_eq!(listed["kind"], "PodList");
    let items = listed["items"].as_array().expect("items");
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["status"]["phase"], "Running");
    assert_eq!(items[0]["metadata"]["namespace"], NS);

    // Delete with Background propagation (DeleteOptions body): the Job and its pod go.
    let (status, deleted) = call(
        &client,
        &url,
        "DELETE",
        &one,
        Some(TOKEN),
        Some(
            json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}),
        ),
    )
    .await;
    assert_eq!(status, 200, "{deleted}");
    assert_eq!(
        deleted,
        json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": {"name": name, "group": "batch", "kind": "jobs", "uid": created["metadata"]["uid"]},
        })
    );
    let delete = kube.requests().pop().expect("the DELETE");
    assert_eq!(delete.method, "DELETE");
    assert_eq!(delete.propagation_policy(), Some("Background"));
    assert_eq!(kube.jobs(NS).len(), 1);
    assert_eq!(kube.pods(NS).len(), 1);
    let (_, listed) = call(&client, &url, "GET", &pods, Some(TOKEN), None).await;
    assert_eq!(listed["items"][0]["metadata"]["name"], "sortie-j2-fghij");
    let answer = call(&client, &url, "DELETE", &one, Some(TOKEN), None).await;
    assert_status(&answer, 404, "NotFound");
    // The query parameter works too.
    let (status, _) = call(
        &client,
        &url,
        "DELETE",
        &format!("{jobs}/sortie-j2?propagationPolicy=Background"),
        Some(TOKEN),
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert!(kube.jobs(NS).is_empty());
    assert!(kube.pods(NS).is_empty());

    // SelfSubjectAccessReviews: allowed unless denied.
    let review = |verb: &str| {
        json!({
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"namespace": NS, "verb": verb, "group": "batch", "resource": "jobs"}},
        })
    };
    let ssar = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
    kube.deny("delete", "jobs");
    let (status, allowed) = call(
        &client,
        &url,
        "POST",
        ssar,
        Some(TOKEN),
        Some(review("create")),
    )
    .await;
    assert_eq!(status, 201, "{allowed}");
    assert_eq!(allowed["status"], json!({"allowed": true}));
    assert_eq!(allowed["spec"], review("create")["spec"]);
    let (status, denied) = call(
        &client,
        &url,
        "POST",
        ssar,
        Some(TOKEN),
        Some(review("delete")),
    )
    .await;
    assert_eq!(status, 201);
    assert_eq!(denied["status"]["allowed"], false);
    assert!(denied["status"]["reason"]
        .as_str()
        .is_some_and(|r| !r.is_empty()));

    // fail_next: once, for the matching method and path only.
    kube.fail_next("POST", &jobs, 500, "etcdserver: request timed out");
    let (status, _) = call(&client, &url, "GET", &jobs, Some(TOKEN), None).await;
    assert_eq!(status, 200);
    let manifest = job_manifest(json!({"name": "sortie-j3"}), "j3");
    let answer = call(
        &client,
        &url,
        "POST",
        &jobs,
        Some(TOKEN),
        Some(manifest.clone()),
    )
    .await;
    assert_status(&answer, 500, "InternalError");
    assert_eq!(answer.1["message"], "etcdserver: request timed out");
    assert!(kube.jobs(NS).is_empty());
    let (status, _) = call(&client, &url, "POST", &jobs, Some(TOKEN), Some(manifest)).await;
    assert_eq!(status, 201);

    // Anything else: 404.
    let answer = call(
        &client,
        &url,
        "GET",
        "/api/v1/namespaces",
        Some(TOKEN),
        None,
    )
    .await;
    assert_status(&answer, 404, "NotFound");

    // Every request was recorded, with its headers, decoded query and body.
    let recorded = kube.requests();
    let methods: Vec<&str> = recorded.iter().map(|r| r.method.as_str()).collect();
    assert_eq!(
        methods,
        [
            "POST", "POST", "POST", "POST", "POST", "GET", "GET", "GET", "GET", "GET", "GET",
            "GET", "GET", "DELETE", "GET", "DELETE", "DELETE", "POST", "POST", "GET", "POST",
            "POST", "GET"
        ]
    );
    assert!(recorded.iter().all(|r| r.bearer() == Some(TOKEN)));
    assert_eq!(recorded[0].path, jobs);
    assert_eq!(recorded[0].header("Content-Type"), Some("application/json"));
    assert_eq!(
        recorded[0].body.as_ref().map(|b| &b["kind"]),
        Some(&json!("Job"))
    );
    assert_eq!(
        recorded[6].query.get("labelSelector").map(String::as_str),
        Some("sortie.dev/job-id==j1")
    );

    // set_delay holds every answer back.
    let delay = std::time::Duration::from_millis(300);
    kube.set_delay(delay);
    let started = std::time::Instant::now();
    let (status, _) = call(&client, &url, "GET", &jobs, Some(TOKEN), None).await;
    assert_eq!(status, 200);
    assert!(started.elapsed() >= delay, "{:?}", started.elapsed());
}
