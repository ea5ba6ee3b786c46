//! Issue 32: a group or environment path parameter in both forms, raw
//! (`/v1/environments/acme/payments/prod`) and percent-encoded as a generated client
//! sends it (`/v1/environments/acme%2Fpayments%2Fprod`), decoded once with the same
//! answer; and what stays refused (400 naming the parameter): double encoding, `.`
//! and `..` segments, an encoded `-` separator and empty segments. Against DynamoDB
//! and SQS on moto, each answer checked against the OpenAPI document.

use crate::common;

use common::{seed_org, Api};

/// The status, the first field named and the error message of an answer.
fn refusal(r: &common::Reply) -> (u16, Option<&str>, &str) {
    (
        r.status.as_u16(),
        r.body["error"]["fields"][0]["path"].as_str(),
        r.body["error"]["fields"][0]["problem"]
            .as_str()
            .unwrap_or_default(),
    )
}

#[tokio::test]
async fn raw_and_encoded_paths_give_the_same_answer() {
    let api = Api::new().await;
    seed_org(&api, "acme").await;
    // Created through the encoded form, read through both.
    let r = api
        .as_admin(
            "POST",
            "/v1/groups/acme%2Fpayments/-/environments",
            Some(r#"{"name":"prod","env_type":"production"}"#),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(
        (r.body["group"].as_str(), r.body["name"].as_str()),
        (Some("acme/payments"), Some("prod")),
        "{}",
        r.body
    );
    let raw = api
        .as_admin("GET", "/v1/environments/acme/payments/prod", None)
        .await;
    assert_eq!(raw.status, 200, "{}", raw.body);
    for path in [
        "/v1/environments/acme%2Fpayments%2Fprod",
        "/v1/environments/acme%2fpayments%2fprod",
        "/v1/environments/acme%2Fpayments/prod",
        "/v1/environments/ac%6De%2Fpayments%2Fprod",
    ] {
        let r = api.as_admin("GET", path, None).await;
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        assert_eq!(r.body, raw.body, "{path}");
        assert_eq!(r.etag, raw.etag, "{path}");
    }
    // Group routes: the runner list of acme/payments, raw and encoded.
    let raw = api
        .as_admin("GET", "/v1/groups/acme/payments/-/runners", None)
        .await;
    let encoded = api
        .as_admin("GET", "/v1/groups/acme%2Fpayments/-/runners", None)
        .await;
    assert_eq!((raw.status, &raw.body), (encoded.status, &encoded.body));
    assert_eq!(encoded.body["runners"][0]["id"], "acme/local");
    // The root group's parameter is `-`: `/v1/groups/-/-/runners` as a generated
    // client writes it, `/v1/groups/-/runners` by hand.
    let by_hand = api.as_admin("GET", "/v1/groups/-/runners", None).await;
    let generated = api.as_admin("GET", "/v1/groups/-/-/runners", None).await;
    assert_eq!(by_hand.status, 200, "{}", by_hand.body);
    assert_eq!(
        (generated.status.as_u16(), &generated.body),
        (200, &by_hand.body)
    );
    // A job submitted through the encoded path, listed through the raw one.
    let job = api
        .as_admin(
            "POST",
            "/v1/environments/acme%2Fpayments%2Fprod/-/jobs",
            Some(r#"{"operation":"plan","files":{"main.tf":""}}"#),
        )
        .await;
    assert_eq!(job.status, 201, "{}", job.body);
    assert_eq!(
        job.body["environment"], "acme/payments/prod",
        "{}",
        job.body
    );
    let listed = api
        .as_admin("GET", "/v1/environments/acme/payments/prod/-/jobs", None)
        .await;
    assert_eq!(
        listed.body["jobs"][0]["id"], job.body["id"],
        "{}",
        listed.body
    );
    // Deleted through the encoded form: gone in both.
    api.create_env("acme/payments", "dev", "development").await;
    let r = api
        .as_admin("DELETE", "/v1/environments/acme%2Fpayments%2Fdev", None)
        .await;
    assert_eq!(r.status, 204, "{}", r.body);
    let r = api
        .as_admin("GET", "/v1/environments/acme/payments/dev", None)
        .await;
    assert_eq!(r.status, 404, "{}", r.body);
}

#[tokio::test]
async fn double_encoding_dot_segments_an_encoded_separator_and_empty_segments_are_400() {
    let api = Api::new().await;
    seed_org(&api, "acme").await;
    api.create_env("acme/payments", "prod", "production").await;
    for (path, field, says) in [
        // Double encoding: `%252F` is `%2F` once decoded, never `/`.
        (
            "/v1/environments/acme%252Fpayments%252Fprod",
            "environment",
            "encoded twice",
        ),
        (
            "/v1/groups/acme%252Fpayments/-/runners",
            "group",
            "encoded twice",
        ),
        (
            "/v1/environments/acme/payments/pr%2525od",
            "environment",
            "encoded twice",
        ),
        // `.` and `..`, raw or encoded.
        ("/v1/environments/acme/./prod", "environment", "`.` segment"),
        (
            "/v1/environments/acme/payments/../prod",
            "environment",
            "`..` segment",
        ),
        (
            "/v1/environments/acme%2F..%2Fprod",
            "environment",
            "`..` segment",
        ),
        (
            "/v1/environments/acme%2F%2E%2Fprod",
            "environment",
            "`.` segment",
        ),
        ("/v1/groups/acme/../-/runners", "group", "`..` segment"),
        (
            "/v1/groups/acme%2F..%2Fpayments/-/rules",
            "group",
            "`..` segment",
        ),
        // The `-` separator, encoded, is never a segment of the path.
        ("/v1/groups/%2D/-/runners", "group", "separator"),
        (
            "/v1/groups/acme%2F-%2Fpayments/-/runners",
            "group",
            "separator",
        ),
        (
            "/v1/environments/acme%2F%2D%2Fprod",
            "environment",
            "separator",
        ),
        (
            "/v1/environments/acme%2Fpayments%2F-%2Fprod/-/jobs",
            "environment",
            "separator",
        ),
        // Empty segments, raw or encoded, and a trailing encoded slash.
        (
            "/v1/environments/acme//prod",
            "environment",
            "empty segment",
        ),
        (
            "/v1/environments/acme%2F%2Fprod",
            "environment",
            "empty segment",
        ),
        (
            "/v1/environments/acme%2Fprod%2F",
            "environment",
            "empty segment",
        ),
        ("/v1/groups/acme%2F/-/runners", "group", "empty segment"),
        ("/v1/groups/%2Facme/-/runners", "group", "empty segment"),
    ] {
        let r = api.as_admin("GET", path, None).await;
        let (status, named, problem) = refusal(&r);
        assert_eq!((status, named), (400, Some(field)), "{path}: {}", r.body);
        assert!(problem.contains(says), "{path}: {problem}");
    }
}
