//! Issue 32: the document as a generated client reads it. Every operation declares
//! its error responses with the error envelope, `links` chain each create to what it
//! made (and a job's submit to the job's routes), and the group and environment path
//! parameters name the percent-encoded form as the canonical one.

use std::collections::BTreeSet;

use serde_json::Value;

fn doc() -> Value {
    sortie_api::openapi()
}

/// Every operation: (method, path, operation).
fn operations(doc: &Value) -> Vec<(String, String, Value)> {
    let mut out = vec![];
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            if ["get", "post", "put", "patch", "delete"].contains(&method.as_str()) {
                out.push((method.clone(), path.clone(), op.clone()));
            }
        }
    }
    out
}

fn by_operation_id(doc: &Value, id: &str) -> Option<(String, String, Value)> {
    operations(doc)
        .into_iter()
        .find(|(_, _, op)| op["operationId"] == id)
}

fn path_params(path: &str) -> BTreeSet<String> {
    path.split('/')
        .filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
        .map(str::to_string)
        .collect()
}

#[test]
fn every_operation_declares_an_error_response_with_the_error_envelope() {
    let doc = doc();
    for (method, path, op) in operations(&doc) {
        let errors: Vec<(&String, &Value)> = op["responses"]
            .as_object()
            .unwrap()
            .iter()
            .filter(|(status, _)| *status == "default" || !status.starts_with('2'))
            .collect();
        assert!(!errors.is_empty(), "{method} {path}: no error response");
        for (status, response) in errors {
            assert_eq!(
                response["content"]["application/json"]["schema"]["$ref"],
                "#/components/schemas/ErrorBody",
                "{method} {path} {status}"
            );
        }
    }
    for path in ["/v1/health", "/v1/openapi.json"] {
        assert!(
            doc["paths"][path]["get"]["responses"]["default"].is_object(),
            "{path}"
        );
    }
}

#[test]
fn links_chain_each_create_to_its_get_update_and_delete_and_a_submit_to_the_job() {
    let doc = doc();
    let links_of = |method: &str, path: &str, status: &str| -> BTreeSet<String> {
        doc["paths"][path][method]["responses"][status]["links"]
            .as_object()
            .map(|l| {
                l.values()
                    .map(|v| v["operationId"].as_str().unwrap().to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    let want = |ids: &[&str]| ids.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    let cases: &[(&str, &str, &str, &[&str])] = &[
        (
            "post",
            "/v1/groups/{group}/-/runners/{name}",
            "201",
            &["get_runner", "update_runner", "delete_runner"],
        ),
        (
            "post",
            "/v1/groups/{group}/-/rules",
            "201",
            &["get_rule", "update_rule", "delete_rule"],
        ),
        (
            "post",
            "/v1/groups/{group}/-/environments",
            "201",
            &[
                "get_environment",
                "update_environment",
                "delete_environment",
            ],
        ),
        (
            "post",
            "/v1/groups/{group}/-/memberships",
            "201",
            &["revoke_membership"],
        ),
        (
            "post",
            "/v1/agent-pools",
            "201",
            &["get_agent_pool", "delete_agent_pool"],
        ),
        (
            "post",
            "/v1/environments/{environment}/-/jobs",
            "201",
            &[
                "get_job",
                "cancel_job",
                "get_job_logs",
                "approve_job",
                "get_job_outputs",
            ],
        ),
    ];
    for (method, path, status, targets) in cases {
        let got = links_of(method, path, status);
        assert!(
            got.is_superset(&want(targets)),
            "{method} {path} {status}: links to {got:?}, want {targets:?}"
        );
    }
    // Every link names an operation of the document, sets exactly that operation's
    // path parameters, and reads them from the source's request path or answer body.
    let mut count = 0;
    for (method, path, op) in operations(&doc) {
        for (status, response) in op["responses"].as_object().unwrap() {
            let Some(links) = response["links"].as_object() else {
                continue;
            };
            for (name, link) in links {
                count += 1;
                let at = format!("{method} {path} {status} link {name}");
                let target = link["operationId"].as_str().unwrap();
                let (_, target_path, _) = by_operation_id(&doc, target)
                    .unwrap_or_else(|| panic!("{at}: no operation {target}"));
                let params = link["parameters"].as_object().unwrap();
                assert_eq!(
                    params
                        .keys()
                        .filter(|k| *k != "header.If-Match")
                        .cloned()
                        .collect::<BTreeSet<_>>(),
                    path_params(&target_path),
                    "{at}"
                );
                for (param, expression) in params {
                    let expression = expression.as_str().unwrap();
                    if param == "header.If-Match" {
                        // The source's ETag, to a target that takes `If-Match`.
                        assert_eq!(expression, "$response.header.ETag", "{at}");
                        assert!(response["headers"]["etag"].is_object(), "{at}");
                        let (_, _, target_op) = by_operation_id(&doc, target).unwrap();
                        assert!(
                            target_op["parameters"]
                                .as_array()
                                .into_iter()
                                .flatten()
                                .any(|p| p["in"] == "header" && p["name"] == "If-Match"),
                            "{at}"
                        );
                    } else if let Some(source) = expression.strip_prefix("$request.path.") {
                        assert!(path_params(&path).contains(source), "{at}: {param}");
                    } else {
                        assert!(
                            expression.starts_with("$response.body#/"),
                            "{at}: {param} = {expression}"
                        );
                    }
                }
            }
        }
    }
    assert!(count >= 20, "{count} links");
}

#[test]
fn links_to_an_update_or_delete_pass_the_created_etag_as_if_match() {
    let doc = doc();
    let cases: &[(&str, &str)] = &[
        ("/v1/groups/{group}/-/runners/{name}", "UpdateRunner"),
        ("/v1/groups/{group}/-/runners/{name}", "DeleteRunner"),
        ("/v1/groups/{group}/-/rules", "UpdateRule"),
        ("/v1/groups/{group}/-/rules", "DeleteRule"),
        ("/v1/groups/{group}/-/environments", "UpdateEnvironment"),
        ("/v1/groups/{group}/-/environments", "DeleteEnvironment"),
    ];
    for (path, link) in cases {
        assert_eq!(
            doc["paths"][path]["post"]["responses"]["201"]["links"][link]["parameters"]
                ["header.If-Match"],
            "$response.header.ETag",
            "{path} {link}"
        );
    }
    // A get takes no If-Match: its link passes none.
    assert!(
        doc["paths"]["/v1/groups/{group}/-/rules"]["post"]["responses"]["201"]["links"]["GetRule"]
            ["parameters"]
            .get("header.If-Match")
            .is_none()
    );
}

#[test]
fn nested_path_parameters_name_the_encoded_form_as_canonical() {
    let doc = doc();
    let mut seen = 0;
    for (method, path, op) in operations(&doc) {
        for p in op["parameters"].as_array().into_iter().flatten() {
            if p["in"] == "path" && (p["name"] == "group" || p["name"] == "environment") {
                seen += 1;
                let text = p["description"].as_str().unwrap_or_default();
                assert!(
                    text.contains("%2F") && text.contains("canonical"),
                    "{method} {path} {}: {text}",
                    p["name"]
                );
            }
        }
    }
    assert!(seen >= 20, "{seen} nested path parameters");
}

#[test]
fn the_approval_timeout_states_the_bounds_the_api_enforces() {
    use sortie_core::environment::{APPROVAL_TIMEOUT_MAX_SECONDS, APPROVAL_TIMEOUT_MIN_SECONDS};
    let doc = doc();
    for schema in ["EnvironmentCreate", "EnvironmentPatch"] {
        let field = &doc["components"]["schemas"][schema]["properties"]["approval_timeout_seconds"];
        assert_eq!(field["minimum"], APPROVAL_TIMEOUT_MIN_SECONDS, "{schema}");
        assert_eq!(field["maximum"], APPROVAL_TIMEOUT_MAX_SECONDS, "{schema}");
    }
}
