//! The double's unit tests.

use serde_json::{json, Value};

use super::rules::*;
use super::state::State;
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
