//! The OpenAPI document itself: no operation has an untyped body, every error is
//! the error body, and every operation declares its parameters and its security.

use serde_json::Value;
use sortie_api::Route;

fn doc() -> Value {
    sortie_api::openapi()
}

/// Follows a local `$ref`.
fn deref<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(r) => {
            let name = r
                .strip_prefix("#/components/schemas/")
                .unwrap_or_else(|| panic!("non-local $ref {r}"));
            doc["components"]["schemas"]
                .get(name)
                .unwrap_or_else(|| panic!("dangling $ref {r}"))
        }
        None => schema,
    }
}

/// Why a body schema says nothing about its shape, if it does not.
fn untyped(doc: &Value, schema: &Value) -> Option<String> {
    let s = deref(doc, schema);
    let typed = s.get("properties").is_some()
        || s.get("allOf").is_some()
        || s.get("oneOf").is_some()
        || s.get("anyOf").is_some()
        || s.get("enum").is_some()
        || (s.get("type") == Some(&Value::from("array")) && s.get("items").is_some());
    (!typed).then(|| format!("untyped body schema {s}"))
}

fn operations(doc: &Value) -> Vec<(String, String, &Value)> {
    let mut out = vec![];
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            if ["get", "post", "put", "patch", "delete"].contains(&method.as_str()) {
                out.push((method.to_uppercase(), path.clone(), op));
            }
        }
    }
    out
}

fn route_of(method: &str, path: &str) -> Route {
    *Route::ALL
        .iter()
        .find(|r| r.method_and_path().0.as_str() == method && r.method_and_path().1 == path)
        .unwrap_or_else(|| panic!("{method} {path} is not in the route table"))
}

#[test]
fn no_operation_has_an_untyped_body() {
    let doc = doc();
    std::fs::write(
        std::env::temp_dir().join("sortie-openapi.json"),
        serde_json::to_string_pretty(&doc).unwrap(),
    )
    .ok();
    let mut problems = vec![];
    for (method, path, op) in operations(&doc) {
        let at = format!("{method} {path}");
        if let Some(body) = op.get("requestBody") {
            let content = body["content"].as_object().expect("request content");
            assert!(!content.is_empty(), "{at}: a request body without content");
            for (ctype, media) in content {
                match media.get("schema") {
                    None => problems.push(format!("{at} request {ctype}: no schema")),
                    Some(s) => {
                        if let Some(p) = untyped(&doc, s) {
                            problems.push(format!("{at} request {ctype}: {p}"));
                        }
                    }
                }
            }
        }
        let responses = op["responses"].as_object().expect("responses");
        assert!(!responses.is_empty(), "{at}: no responses");
        for (status, response) in responses {
            // `default` (the meta routes' "any error") is an error like the numbered ones.
            let code: u16 = match status.as_str() {
                "default" => 500,
                status => status
                    .parse()
                    .unwrap_or_else(|_| panic!("{at}: status {status}")),
            };
            let content = response.get("content").and_then(Value::as_object);
            if code == 204 {
                assert!(content.is_none(), "{at} {status}: a 204 has no body");
                continue;
            }
            let Some(content) = content.filter(|c| !c.is_empty()) else {
                problems.push(format!(
                    "{at} {status}: a body is sent but no content is declared"
                ));
                continue;
            };
            for (ctype, media) in content {
                let Some(schema) = media.get("schema") else {
                    problems.push(format!("{at} {status} {ctype}: no schema"));
                    continue;
                };
                if let Some(p) = untyped(&doc, schema) {
                    problems.push(format!("{at} {status} {ctype}: {p}"));
                }
                if code >= 400 && schema["$ref"] != "#/components/schemas/ErrorBody" {
                    problems.push(format!("{at} {status}: an error that is not the ErrorBody"));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_error_body_keeps_its_shape() {
    let doc = doc();
    let schemas = &doc["components"]["schemas"];
    let required = |name: &str| -> Vec<String> {
        let mut r: Vec<String> = schemas[name]["required"]
            .as_array()
            .unwrap_or_else(|| panic!("{name}: {}", schemas[name]))
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect();
        r.sort();
        r
    };
    assert_eq!(required("ErrorBody"), ["error"]);
    assert_eq!(required("ErrorDetail"), ["code", "fields", "message"]);
    assert_eq!(required("FieldProblem"), ["path", "problem"]);
}

#[test]
fn every_operation_declares_its_parameters_and_security() {
    let doc = doc();
    let schemes = doc["components"]["securitySchemes"].as_object().unwrap();
    assert_eq!(schemes["bearerAuth"]["scheme"], "bearer");
    assert_eq!(schemes["bearerAuth"]["bearerFormat"], "JWT");
    assert_eq!(schemes["jobToken"]["scheme"], "bearer");
    assert!(
        doc.get("security").is_none(),
        "no global security: each operation says"
    );
    for (method, path, op) in operations(&doc) {
        let at = format!("{method} {path}");
        let route = route_of(&method, &path);
        let security: Vec<String> = op
            .get("security")
            .and_then(Value::as_array)
            .map(|reqs| {
                reqs.iter()
                    .flat_map(|r| r.as_object().unwrap().keys().cloned())
                    .collect()
            })
            .unwrap_or_default();
        let want: Vec<String> = if route.is_public() {
            vec![]
        } else if route.uses_job_token() {
            vec!["jobToken".into()]
        } else if route.uses_agent_credential() {
            vec!["agentToken".into()]
        } else {
            vec!["bearerAuth".into()]
        };
        assert_eq!(security, want, "{at}");
        let params = op
            .get("parameters")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for name in path
            .split('/')
            .filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
        {
            let p = params
                .iter()
                .find(|p| p["name"] == name && p["in"] == "path")
                .unwrap_or_else(|| panic!("{at}: path parameter {name} is not declared"));
            assert_eq!(p["required"], true, "{at} {name}");
            assert_eq!(p["schema"]["type"], "string", "{at} {name}");
        }
        for p in &params {
            assert!(
                p.get("schema").is_some(),
                "{at}: parameter {} has no schema",
                p["name"]
            );
        }
        if op.get("requestBody").is_some() {
            assert!(
                op["responses"].get("415").is_some(),
                "{at}: 415 not declared"
            );
        }
        if let Some(r) = op["responses"].get("401") {
            assert!(
                r["headers"].get("www-authenticate").is_some(),
                "{at}: 401 without its WWW-Authenticate"
            );
        }
        if let Some(r) = op["responses"].get("503") {
            assert!(
                r["headers"].get("retry-after").is_some(),
                "{at}: 503 without its Retry-After"
            );
        }
        if !route.is_public() {
            for status in ["400", "401"] {
                if route.uses_job_token() && status == "400" && method == "GET" {
                    continue;
                }
                assert!(
                    op["responses"].get(status).is_some(),
                    "{at}: {status} not declared"
                );
            }
        }
    }
    // The queries are typed.
    let param = |method: &str, path: &str, name: &str| -> Value {
        doc["paths"][path][method]["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("{method} {path}: no {name}"))["schema"]
            .clone()
    };
    let ty = |s: Value| s["type"].clone();
    assert!(ty(param("get", "/v1/jobs/{id}/logs", "offset"))
        .to_string()
        .contains("integer"));
    assert!(ty(param(
        "get",
        "/v1/environments/{environment}/-/jobs",
        "limit"
    ))
    .to_string()
    .contains("integer"));
    assert!(ty(param(
        "post",
        "/v1/environments/{environment}/-/refresh-runner",
        "dry_run"
    ))
    .to_string()
    .contains("boolean"));
}

/// The schemas' descriptions come from the real types' rustdoc: a link into the code
/// (`` [`crate::job::JobPhase`] ``) is written as plain code, never served as is.
#[test]
fn no_description_links_into_the_code() {
    fn walk(v: &Value, at: &str, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    match x {
                        Value::String(t) if k == "description" && t.contains("[`") => {
                            out.push(format!("{at}: {t}"))
                        }
                        _ => walk(x, &format!("{at}/{k}"), out),
                    }
                }
            }
            Value::Array(items) => {
                for (i, x) in items.iter().enumerate() {
                    walk(x, &format!("{at}/{i}"), out)
                }
            }
            _ => {}
        }
    }
    let doc = doc();
    let mut found = vec![];
    walk(&doc["components"], "components", &mut found);
    assert!(found.is_empty(), "{}", found.join("\n"));
}
