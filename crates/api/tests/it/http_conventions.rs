//! HTTP conventions every route keeps (405 with `Allow`, HEAD, 401 with
//! `WWW-Authenticate`, 415, 503 with `Retry-After`), bodies read by their content
//! type, and path parameters decoded once: against DynamoDB and SQS on moto, each
//! answer checked against the OpenAPI document.

use crate::common;

use axum::http::Method;
use common::{local_runner, seed_org, Api};
use sortie_api::Route;

const JSON: (&str, &str) = ("content-type", "application/json");
const YAML: (&str, &str) = ("content-type", "application/yaml");

fn code(r: &common::Reply) -> (u16, Option<&str>) {
    (r.status.as_u16(), r.body["error"]["code"].as_str())
}

fn first_field(r: &common::Reply) -> (u16, Option<&str>) {
    (
        r.status.as_u16(),
        r.body["error"]["fields"][0]["path"].as_str(),
    )
}

fn header<'a>(r: &'a common::Reply, name: &str) -> Option<&'a str> {
    r.headers.get(name).map(|v| v.to_str().unwrap())
}

/// A running job of `acme/prod` whose token is `token`.
async fn running_job(api: &Api, token: &str) -> String {
    seed_org(api, "acme").await;
    api.create_env("acme", "prod", "production").await;
    let id = api
        .as_admin(
            "POST",
            "/v1/environments/acme/prod/-/jobs",
            Some(r#"{"operation":"plan","files":{"main.tf":""}}"#),
        )
        .await
        .body["id"]
        .as_str()
        .unwrap()
        .to_string();
    api.launch(&id, token).await;
    id
}

#[tokio::test]
async fn every_405_lists_the_allowed_methods_in_allow() {
    let api = Api::new().await;
    let mut by_template: std::collections::BTreeMap<&str, Vec<Method>> = Default::default();
    for route in Route::ALL {
        let (method, template) = route.method_and_path();
        by_template.entry(template).or_default().push(method);
    }
    for (template, methods) in by_template {
        let path = template
            .replace("{group}", "acme")
            .replace("{environment}", "acme/prod")
            .replace("{name}", "r1")
            .replace("{id}", "x1");
        let wrong = [Method::PATCH, Method::DELETE, Method::POST, Method::PUT]
            .into_iter()
            .find(|m| !methods.contains(m))
            .unwrap();
        let r = api
            .as_admin(wrong.as_str(), &path, Some(r#"{"a":1}"#))
            .await;
        assert_eq!(
            code(&r),
            (405, Some("method_not_allowed")),
            "{wrong} {path}"
        );
        let allow: Vec<&str> = header(&r, "allow")
            .unwrap_or_else(|| panic!("{wrong} {path}: no Allow"))
            .split(',')
            .map(str::trim)
            .collect();
        for m in &methods {
            assert!(allow.contains(&m.as_str()), "{path}: {allow:?} lacks {m}");
        }
        if methods.contains(&Method::GET) {
            assert!(allow.contains(&"HEAD"), "{path}: {allow:?} lacks HEAD");
        }
        assert!(!allow.contains(&wrong.as_str()), "{path}: {allow:?}");
    }
}

#[tokio::test]
async fn head_answers_the_gets_status_and_headers_without_a_body() {
    let api = Api::new().await;
    seed_org(&api, "acme").await;
    for path in [
        "/v1/health",
        "/v1/openapi.json",
        "/v1/groups/acme/-/runners",
        "/v1/groups/acme/-/runners/local",
        "/v1/groups/acme/-/runners/nosuch",
    ] {
        let get = api.as_admin("GET", path, None).await;
        let head = api.as_admin("HEAD", path, None).await;
        assert_eq!(head.status, get.status, "{path}");
        assert!(head.body.is_null(), "{path}: {}", head.body);
        for name in ["content-type", "etag", "content-length"] {
            if let Some(got) = header(&head, name) {
                assert_eq!(Some(got), header(&get, name), "{path}: {name}");
            } else {
                assert!(
                    name == "content-length" || header(&get, name).is_none(),
                    "{path}: {name}"
                );
            }
        }
    }
    let r = api
        .call(None, "HEAD", "/v1/groups/acme/-/runners", None, &[])
        .await;
    assert_eq!(r.status, 401);
    assert_eq!(header(&r, "www-authenticate"), Some("Bearer"));
}

#[tokio::test]
async fn a_401_without_credentials_challenges_with_a_bare_bearer() {
    let api = Api::new().await;
    let r = api
        .call(None, "GET", "/v1/groups/acme/-/runners", None, &[])
        .await;
    assert_eq!(code(&r), (401, Some("unauthenticated")));
    assert_eq!(header(&r, "www-authenticate"), Some("Bearer"));
    let id = running_job(&api, "token-a").await;
    for sent in [None, Some("Basic dG9rZW4tYQ=="), Some("")] {
        let headers: Vec<(&str, &str)> = sent.map(|v| ("authorization", v)).into_iter().collect();
        let r = api
            .call(None, "GET", &format!("/v1/jobs/{id}/spec"), None, &headers)
            .await;
        assert_eq!(r.status, 401, "{sent:?}");
        assert_eq!(header(&r, "www-authenticate"), Some("Bearer"), "{sent:?}");
    }
}

#[tokio::test]
async fn a_401_for_a_token_sent_but_refused_says_invalid_token() {
    let api = Api::new().await;
    let id = running_job(&api, "token-a").await;
    for (path, token) in [
        (format!("/v1/jobs/{id}/spec"), "Bearer wrong"),
        ("/v1/jobs/nosuchjob/spec".to_string(), "Bearer token-a"),
        (format!("/v1/jobs/{id}/spec"), "Bearer "),
    ] {
        let r = api
            .call(None, "GET", &path, None, &[("authorization", token)])
            .await;
        assert_eq!(code(&r), (401, Some("invalid_token")), "{path} {token}");
        assert_eq!(
            header(&r, "www-authenticate"),
            Some(r#"Bearer error="invalid_token""#),
            "{path} {token}"
        );
    }
    // A user route reached with a token nobody verified (no JWT claims).
    let r = api
        .call(
            None,
            "GET",
            "/v1/groups/acme/-/runners",
            None,
            &[("authorization", "Bearer forged")],
        )
        .await;
    assert_eq!(r.status, 401);
    assert_eq!(
        header(&r, "www-authenticate"),
        Some(r#"Bearer error="invalid_token""#)
    );
}

#[tokio::test]
async fn the_bearer_scheme_is_matched_case_insensitively() {
    let api = Api::new().await;
    let id = running_job(&api, "token-a").await;
    for scheme in ["bearer", "BEARER", "Bearer", "bEaReR"] {
        let auth = format!("{scheme} token-a");
        let r = api
            .call(
                None,
                "GET",
                &format!("/v1/jobs/{id}/spec"),
                None,
                &[("authorization", &auth)],
            )
            .await;
        assert_eq!(r.status, 200, "{auth}: {}", r.body);
    }
    let r = api
        .call(
            None,
            "PUT",
            &format!("/v1/jobs/{id}/summary"),
            Some(r#"{"add":1,"change":0,"destroy":0}"#),
            &[("authorization", "bearer  token-a"), JSON],
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
}

#[tokio::test]
async fn a_body_of_another_type_is_415_listing_the_accepted_types() {
    let api = Api::new().await;
    for content_type in [
        "text/plain",
        "application/x-www-form-urlencoded",
        "application/xml",
        "multipart/form-data; boundary=x",
        "json",
    ] {
        let r = api
            .call(
                Some("admin"),
                "POST",
                "/v1/groups/acme/-/runners/r1",
                Some(local_runner()),
                &[("content-type", content_type)],
            )
            .await;
        assert_eq!(
            code(&r),
            (415, Some("unsupported_media_type")),
            "{content_type}: {}",
            r.body
        );
        let message = r.body["error"]["message"].as_str().unwrap();
        for accepted in [
            "application/json",
            "application/yaml",
            "application/x-yaml",
            "text/yaml",
        ] {
            assert!(message.contains(accepted), "{message}");
        }
        assert_eq!(first_field(&r), (415, Some("Content-Type")));
    }
    // The accepted types, parameters and +json suffixes included.
    for (name, content_type) in [
        ("a", "application/yaml"),
        ("b", "application/x-yaml; charset=utf-8"),
        ("c", "Text/YAML"),
    ] {
        let r = api
            .call(
                Some("admin"),
                "POST",
                &format!("/v1/groups/acme/-/runners/{name}"),
                Some(local_runner()),
                &[("content-type", content_type)],
            )
            .await;
        assert_eq!(r.status, 201, "{content_type}: {}", r.body);
    }
    let r = api
        .call(
            Some("admin"),
            "PATCH",
            "/v1/environments/acme/nosuch",
            Some(r#"{"env_type":"x"}"#),
            &[("content-type", "application/merge-patch+json")],
        )
        .await;
    assert_eq!(code(&r), (404, Some("not_found")), "{}", r.body);
}

#[tokio::test]
async fn json_is_read_as_json_only_and_yaml_as_yaml_only() {
    let api = Api::new().await;
    // YAML sent as JSON is not JSON.
    let r = api
        .call(
            Some("admin"),
            "POST",
            "/v1/groups/acme/-/runners/r1",
            Some(local_runner()),
            &[JSON],
        )
        .await;
    assert_eq!(code(&r), (400, Some("invalid_request")), "{}", r.body);
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not valid JSON"),
        "{}",
        r.body
    );
    // Without a Content-Type, JSON text is JSON and anything else YAML.
    let r = api
        .as_admin("POST", "/v1/groups/acme/-/runners/r2", Some(local_runner()))
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
}

#[tokio::test]
async fn a_duplicate_json_key_is_400_naming_its_path() {
    let api = Api::new().await;
    let r = api
        .call(
            Some("admin"),
            "POST",
            "/v1/groups/acme/-/runners/r1",
            Some(r#"{"runner_configuration": {"type": "ecs-fargate", "subnets": ["subnet-1"], "subnets": ["subnet-2"]}, "state_storage_configuration": {"type": "local", "directory": "/x"}}"#),
            &[JSON],
        )
        .await;
    assert_eq!(
        first_field(&r),
        (400, Some("runner_configuration.subnets")),
        "{}",
        r.body
    );
    seed_org(&api, "acme").await;
    let r = api
        .call(
            Some("admin"),
            "POST",
            "/v1/groups/acme/-/environments",
            Some(r#"{"name":"prod","env_type":"production","labels":{"tier":"gold","tier":"silver"}}"#),
            &[JSON],
        )
        .await;
    assert_eq!(first_field(&r), (400, Some("labels.tier")), "{}", r.body);
    // Without a Content-Type, the same.
    let r = api
        .as_admin(
            "POST",
            "/v1/groups/acme/-/rules",
            Some(r#"{"id":"x","id":"y","runner_id":"acme/local"}"#),
        )
        .await;
    assert_eq!(first_field(&r), (400, Some("id")), "{}", r.body);
}

#[tokio::test]
async fn a_yaml_tag_is_400_naming_its_path() {
    let api = Api::new().await;
    for (body, path, tag) in [
        (
            "runner_configuration:\n  type: local\nstate_storage_configuration:\n  type: local\n  directory: !!binary L3RtcA==\n",
            "state_storage_configuration.directory",
            "!!binary",
        ),
        (
            "description: !Ref Name\nrunner_configuration: {type: local}\nstate_storage_configuration: {type: local, directory: /x}\n",
            "description",
            "!Ref",
        ),
    ] {
        for headers in [vec![YAML], vec![]] {
            let r = api
                .call(
                    Some("admin"),
                    "POST",
                    "/v1/groups/acme/-/runners/r1",
                    Some(body),
                    &headers,
                )
                .await;
            assert_eq!(first_field(&r), (400, Some(path)), "{}", r.body);
            assert!(r.body.to_string().contains(tag), "{}", r.body);
        }
    }
}

#[tokio::test]
async fn a_duplicate_yaml_key_is_400_naming_its_path() {
    let api = Api::new().await;
    let body = "runner_configuration:\n  type: local\n  timeout_seconds: 60\n  timeout_seconds: 600\nstate_storage_configuration: {type: local, directory: /x}\n";
    for headers in [vec![YAML], vec![]] {
        let r = api
            .call(
                Some("admin"),
                "POST",
                "/v1/groups/acme/-/runners/r1",
                Some(body),
                &headers,
            )
            .await;
        assert_eq!(
            first_field(&r),
            (400, Some("runner_configuration.timeout_seconds")),
            "{}",
            r.body
        );
    }
}

#[tokio::test]
async fn numbers_out_of_range_are_400_naming_their_exact_path() {
    let api = Api::new().await;
    let yaml = |n: &str| {
        format!("runner_configuration:\n  type: local\n  timeout_seconds: {n}\nstate_storage_configuration: {{type: local, directory: /x}}\n")
    };
    let json = |n: &str| {
        format!(
            r#"{{"runner_configuration": {{"type": "local", "timeout_seconds": {n}}}, "state_storage_configuration": {{"type": "local", "directory": "/x"}}}}"#
        )
    };
    for n in [
        "1e400",
        "99999999999999999999",
        "-1e400",
        "184467440737095516160",
    ] {
        for (body, content_type) in [
            (yaml(n), "application/yaml"),
            (json(n), "application/json"),
            (json(n), "application/vnd.sortie+json"),
        ] {
            let r = api
                .call(
                    Some("admin"),
                    "POST",
                    "/v1/groups/acme/-/runners/r1",
                    Some(&body),
                    &[("content-type", content_type)],
                )
                .await;
            assert_eq!(
                first_field(&r),
                (400, Some("runner_configuration.timeout_seconds")),
                "{n} as {content_type}: {}",
                r.body
            );
            assert!(
                !r.body.to_string().contains("string"),
                "{n} as {content_type} is no string: {}",
                r.body
            );
        }
    }
}

#[tokio::test]
async fn a_store_that_fails_retryably_is_503_with_retry_after_and_otherwise_502() {
    let aws = sortie_testkit::require_aws!();
    let proxy = sortie_testkit::proxy::FaultProxy::start(&aws.endpoint);
    let api = Api::with_dynamodb_endpoint(&aws, &proxy.url()).await;
    // More faults than the SDK's attempts: the throttling outlasts its retries.
    proxy.inject(
        "Query",
        10,
        400,
        "ProvisionedThroughputExceededException",
        "slow down",
    );
    let r = api.as_admin("GET", "/v1/groups/acme/-/runners", None).await;
    assert_eq!(code(&r), (503, Some("unavailable")), "{}", r.body);
    assert_eq!(header(&r, "retry-after"), Some("1"));
    proxy.clear();
    proxy.inject("Query", 10, 500, "InternalServerError", "boom");
    let r = api.as_admin("GET", "/v1/groups/acme/-/runners", None).await;
    assert_eq!(code(&r), (503, Some("unavailable")), "{}", r.body);
    assert_eq!(header(&r, "retry-after"), Some("1"));
    proxy.clear();
    proxy.inject("Query", 10, 400, "AccessDeniedException", "no");
    let r = api.as_admin("GET", "/v1/groups/acme/-/runners", None).await;
    assert_eq!(code(&r), (502, Some("store_error")), "{}", r.body);
    assert_eq!(header(&r, "retry-after"), None);
    proxy.clear();
    assert_eq!(
        api.as_admin("GET", "/v1/groups/acme/-/runners", None)
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn path_parameters_are_percent_decoded_once_and_bad_escapes_are_400() {
    let api = Api::new().await;
    let r = api
        .as_admin("POST", "/v1/groups/acme/-/runners/r1", Some(local_runner()))
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    for path in [
        "/v1/groups/acme/-/runners/r%31",
        "/v1/groups/ac%6De/-/runners/r1",
        "/v1/groups/%61cme/-/runners/%72%31",
    ] {
        let r = api.as_admin("GET", path, None).await;
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        assert_eq!(r.body["id"], "acme/r1", "{path}");
    }
    for (path, param) in [
        ("/v1/groups/acme/-/runners/r%zz", "name"),
        ("/v1/groups/acme/-/runners/r%FF", "name"),
        ("/v1/groups/acme/-/runners/r%", "name"),
        ("/v1/groups/ac%zzme/-/runners/r1", "group"),
        ("/v1/groups/ac%FFme/-/runners/r1", "group"),
        ("/v1/groups/acme%252Fpay/-/runners/r1", "group"),
        ("/v1/environments/acme/pr%FFod", "environment"),
        ("/v1/jobs/x%FF", "id"),
        ("/v1/groups/acme/-/rules/%C3%28", "id"),
    ] {
        let r = api.as_admin("GET", path, None).await;
        assert_eq!(first_field(&r), (400, Some(param)), "{path}: {}", r.body);
    }
}

/// The compiled rule index is reused while the rule-set version stands still: a warm
/// resolution reads no rule scope, and a rule change is seen by the very next one.
#[tokio::test]
async fn a_warm_resolution_reads_no_rules_and_a_rule_change_is_seen_at_once() {
    let aws = sortie_testkit::require_aws!();
    let proxy = sortie_testkit::proxy::FaultProxy::start(&aws.endpoint);
    let api = Api::with_dynamodb_endpoint(&aws, &proxy.url()).await;
    seed_org(&api, "acme").await;
    api.create_env("acme/payments", "prod", "production").await;
    let other = api
        .as_admin(
            "POST",
            "/v1/groups/acme/-/runners/other",
            Some(local_runner()),
        )
        .await;
    assert_eq!(other.status, 201, "{}", other.body);
    let dry_run = || async {
        proxy.clear();
        let r = api
            .as_admin(
                "POST",
                "/v1/environments/acme/payments/prod/-/refresh-runner?dry_run=true",
                None,
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.body);
        (
            r.body["runner_id"].as_str().unwrap().to_string(),
            proxy.count("Query"),
            proxy.count("GetItem"),
        )
    };
    // The runner is compiled once (creating the runner above changed no rule).
    let (first, _, _) = dry_run().await;
    let (warm, warm_queries, warm_gets) = dry_run().await;
    assert_eq!(
        (first.as_str(), warm.as_str()),
        ("acme/local", "acme/local")
    );
    // A rule at the team's group: the next resolution reads the three scopes again.
    let rule = serde_json::json!({"id": "team", "runner_id": "acme/other"}).to_string();
    let r = api
        .as_admin("POST", "/v1/groups/acme/payments/-/rules", Some(&rule))
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let (changed, cold_queries, cold_gets) = dry_run().await;
    assert_eq!(
        changed, "acme/other",
        "the change is seen by the next resolution"
    );
    assert_eq!(
        cold_queries,
        warm_queries + 3,
        "recompiling reads the root's, acme's and acme/payments' rules"
    );
    assert_eq!(cold_gets, warm_gets);
    let (again, queries, gets) = dry_run().await;
    assert_eq!(again, "acme/other");
    assert_eq!((queries, gets), (warm_queries, warm_gets), "warm again");
    println!("warm resolution: {warm_queries} Query, {warm_gets} GetItem; after a rule change: {cold_queries} Query");
}
