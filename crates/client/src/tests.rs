//! The client against its document, a loopback API, and its encoding.

use std::time::Duration;

use axum::http::HeaderMap;
use axum::routing::get;
use proptest::prelude::*;

use super::*;
use crate::retry::{retrying, Failure, RetryPolicy};

/// Percent-decodes `s` (the inverse of [`segment`]).
fn decode(s: &str) -> Vec<u8> {
    let bytes = s.as_bytes();
    let mut out = vec![];
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            out.push(u8::from_str_radix(&s[i + 1..i + 3], 16).unwrap());
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out
}

proptest! {
    /// Any value becomes one segment (no `/`, `?`, `#` or `%` left bare) that decodes back
    /// to itself.
    #[test]
    fn a_parameter_is_one_segment_that_decodes_to_itself(value in "\\PC{0,24}") {
        let encoded = segment(&value);
        prop_assert!(!encoded.contains(['/', '?', '#', ' ']), "{}", encoded);
        prop_assert_eq!(decode(&encoded), value.as_bytes());
    }
}

#[test]
fn endpoints_fill_their_templates_with_encoded_parameters() {
    assert_eq!(
        endpoints::get_environment("acme/payments/prod"),
        Call::new(
            http::Method::GET,
            "/v1/environments/acme%2Fpayments%2Fprod".into()
        )
    );
    assert_eq!(
        endpoints::list_runners(group("")).path,
        "/v1/groups/-/-/runners"
    );
    assert_eq!(
        endpoints::agent_exit("p 1", "01J").describe(),
        "POST /v1/agent-pools/p%201/jobs/01J/exit"
    );
    assert_eq!(
        endpoints::list_jobs("a/b")
            .query([("limit", Some("5")), ("cursor", None), ("q", Some("x&y"))])
            .path,
        "/v1/environments/a%2Fb/-/jobs?limit=5&q=x%26y"
    );
    assert_eq!(endpoints::health().path, "/v1/health");
    // Every operation of the document has its function: the table is the document's.
    let doc: serde_json::Value = serde_json::from_str(include_str!("../openapi.json")).unwrap();
    let mut in_doc = 0;
    for (template, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let id = op["operationId"].as_str().unwrap();
            in_doc += 1;
            assert!(
                endpoints::OPERATIONS.iter().any(|o| o.id == id
                    && o.template == template
                    && o.method.eq_ignore_ascii_case(method)),
                "{method} {template} ({id}) has no endpoint"
            );
        }
    }
    assert_eq!(in_doc, endpoints::OPERATIONS.len());
}

/// `crates/console/assets/endpoints.js` is [`console_module`]'s rendering of the committed
/// document. `SORTIE_BLESS_OPENAPI=1` writes it.
#[test]
fn the_console_module_is_rendered_from_the_document() {
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../console/assets/endpoints.js"
    );
    let rendered = console_module();
    if std::env::var_os("SORTIE_BLESS_OPENAPI").is_some() {
        std::fs::write(file, &rendered).unwrap();
    }
    let committed = std::fs::read_to_string(file).unwrap_or_default();
    assert!(
        committed == rendered,
        "crates/console/assets/endpoints.js is not rendered from crates/client/openapi.json: run `SORTIE_BLESS_OPENAPI=1 cargo test -p sortie-client` and commit it"
    );
    for op in endpoints::OPERATIONS {
        assert!(
            committed.contains(&format!("export const {} = (", op.id)),
            "{}",
            op.id
        );
    }
}

/// A loopback API: `/v1/health` echoes the bearer token and sends an ETag; `/slow`
/// answers after 2 s; `/html` answers a page that is not JSON.
async fn loopback() -> String {
    let app = axum::Router::new()
        .route(
            "/v1/health",
            get(|headers: HeaderMap| async move {
                let token = headers
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_string();
                let agent = headers
                    .get("user-agent")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_string();
                (
                    [("etag", "\"7\"")],
                    axum::Json(serde_json::json!({"authorization": token, "agent": agent})),
                )
            }),
        )
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(2)).await;
                "late"
            }),
        )
        .route(
            "/html",
            get(|| async { (axum::http::StatusCode::BAD_GATEWAY, "<html>gateway</html>") }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}/")
}

#[tokio::test]
async fn a_request_carries_its_token_and_agent_and_reads_the_whole_answer() {
    let base = loopback().await;
    let api = Transport::new(&base, "sortie-test/1").unwrap();
    assert_eq!(api.base_url(), base.trim_end_matches('/'));
    let reply = api
        .send(&endpoints::health(), Outgoing::new().bearer(Some("t0k")))
        .await
        .unwrap();
    assert!(reply.is_success() && !reply.is_transient());
    assert_eq!(reply.etag.as_deref(), Some("\"7\""));
    let body: serde_json::Value = reply.json().unwrap();
    assert_eq!(body["authorization"], "Bearer t0k");
    assert_eq!(body["agent"], "sortie-test/1");

    let html = api
        .send(
            &Call::new(http::Method::GET, "/html".into()),
            Outgoing::new(),
        )
        .await
        .unwrap();
    assert!(html.is_transient());
    assert_eq!(html.value(), serde_json::json!("<html>gateway</html>"));

    let slow = api
        .send(
            &Call::new(http::Method::GET, "/slow".into()),
            Outgoing::new().timeout(Duration::from_millis(200)),
        )
        .await
        .unwrap_err();
    assert!(matches!(slow, TransportError::Timeout { .. }) && slow.is_transient());
    assert!(
        slow.to_string().ends_with("/slow: no answer within 0 s"),
        "{slow}"
    );
}

#[tokio::test]
async fn an_unreachable_api_and_a_bad_base_url_are_said_so() {
    // A port nothing listens on.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let api = Transport::new(&format!("http://127.0.0.1:{port}"), "t").unwrap();
    let e = api
        .send(&endpoints::health(), Outgoing::new().bearer(Some("secret")))
        .await
        .unwrap_err();
    assert!(matches!(e, TransportError::Unreachable { .. }), "{e}");
    assert!(
        e.to_string().starts_with(&format!(
            "could not reach http://127.0.0.1:{port}/v1/health: "
        )),
        "{e}"
    );
    assert!(!e.to_string().contains("secret"));
    let outgoing = Outgoing::new()
        .bearer(Some("secret"))
        .header(http::header::IF_MATCH, "\"secret-etag\"");
    let shown = format!("{outgoing:?}");
    assert!(
        !shown.contains("secret") && shown.contains("<redacted>") && shown.contains("if-match"),
        "{shown}"
    );
    for (base, says) in [
        ("ftp://x", "must start with https:// or http://"),
        ("http://", "must start with https:// or http://"),
        ("http://a b", "is not a URL"),
        ("http://x/?a=b", "must not have a query"),
        ("x", "must start with"),
    ] {
        let e = Transport::new(base, "t").unwrap_err();
        assert!(e.to_string().contains(says), "{base}: {e}");
        assert!(!e.is_transient());
    }
}

#[tokio::test]
async fn retries_are_bounded_and_a_final_failure_ends_at_once() {
    let policy = RetryPolicy {
        attempts: 3,
        first_delay: Duration::from_millis(10),
        timeout: Duration::from_secs(1),
    };
    let mut tries = 0;
    let e = retrying(&policy, "GET /x", || {
        tries += 1;
        async { Err::<(), _>(Failure::Transient("503".into())) }
    })
    .await
    .unwrap_err();
    assert_eq!((tries, e.as_str()), (3, "503 (gave up after 3 attempts)"));
    let mut tries = 0;
    let e = retrying(&policy, "GET /x", || {
        tries += 1;
        async { Err::<(), _>(Failure::Fatal("404".into())) }
    })
    .await
    .unwrap_err();
    assert_eq!((tries, e.as_str()), (1, "404"));
}

proptest! {
    /// Plain http:// is refused to any host that is not loopback, whatever the port,
    /// user info or path; https:// to it is fine.
    #[test]
    fn plain_http_is_refused_to_a_host_that_is_not_loopback(
        a in 0u8..=255, b: u8, c: u8, d: u8,
        port in proptest::option::of(1u16..=65535),
        path in "(/[a-z]{0,5}){0,2}",
        user in proptest::option::of("[a-z]{1,5}(:[a-z]{1,5})?"),
    ) {
        let ip = std::net::Ipv4Addr::new(a, b, c, d);
        let port = port.map(|p| format!(":{p}")).unwrap_or_default();
        let user = user.map(|u| format!("{u}@")).unwrap_or_default();
        let url = format!("http://{user}{ip}{port}{path}");
        prop_assert_eq!(cleartext_problem(&url).is_none(), a == 127, "{}", url);
        let https = format!("https://{user}{ip}{port}{path}");
        prop_assert!(cleartext_problem(&https).is_none(), "{}", https);
        let named = format!("http://{user}api{a}.example.com{port}{path}");
        prop_assert!(cleartext_problem(&named).is_some(), "{}", named);
    }
}

#[test]
fn plain_http_to_loopback_names_is_allowed_and_look_alikes_are_not() {
    for ok in [
        "http://localhost:8080",
        "http://LOCALHOST/v1",
        "http://127.0.0.1:4242",
        "http://127.1.2.3",
        "http://[::1]:4242/",
        "https://api.example.com",
    ] {
        assert_eq!(cleartext_problem(ok), None, "{ok}");
    }
    for refused in [
        "http://api.example.com",
        "http://127.0.0.1.example.com",
        "http://localhost.example.com:80",
        "http://127.0.0.1@evil.example.com",
        "http://[::2]:80",
        "http://[::ffff:10.0.0.1]",
        "http://10.0.0.1:8080",
        "HTTP://api.example.com",
    ] {
        let problem = cleartext_problem(refused).unwrap_or_else(|| panic!("{refused} allowed"));
        assert!(problem.contains("in clear"), "{problem}");
    }
}

/// The non-test lines of a Rust file: before its first `#[cfg(test)]`, comments left out.
fn code_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .take_while(|(_, line)| !line.trim_start().starts_with("#[cfg(test)]"))
        .filter(|(_, line)| !line.trim_start().starts_with("//"))
        .map(|(i, line)| (i + 1, line))
}

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// What in `text` repeats the client's job: an API path spelled out, or a hyper client
/// built; each as `line: text`.
fn client_code(text: &str) -> Vec<String> {
    code_lines(text)
        .filter(|(_, line)| {
            line.contains("\"/v1") || line.contains("Client::builder(TokioExecutor")
        })
        .map(|(n, line)| format!("{n}: {}", line.trim()))
        .collect()
}

#[test]
fn the_scan_finds_paths_and_clients_but_not_tests_or_comments() {
    let text = "let a = format!(\"/v1/jobs/{id}\");\n// \"/v1/x\" in prose\nlet c = Client::builder(TokioExecutor::new());\n#[cfg(test)]\nmod tests { const P: &str = \"/v1/jobs\"; }\n";
    assert_eq!(
        client_code(text),
        vec![
            "1: let a = format!(\"/v1/jobs/{id}\");".to_string(),
            "3: let c = Client::builder(TokioExecutor::new());".to_string()
        ]
    );
}

/// The CLI, the provider, the pilot and the agent reach the API only through this crate:
/// none of their non-test code spells an API path or builds an HTTP client. The server
/// side of `sortie dev` (`cli/src/dev/`) matches request paths and is not a client.
#[test]
fn callers_reach_the_api_only_through_the_client() {
    let crates = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut found = vec![];
    for caller in ["cli", "provider", "pilot", "agent"] {
        let mut files = vec![];
        rust_files(&crates.join(caller).join("src"), &mut files);
        for file in files {
            let shown = file.strip_prefix(&crates).unwrap().display().to_string();
            let name = file.file_name().unwrap().to_string_lossy();
            if shown.starts_with("cli/src/dev/")
                || name == "tests.rs"
                || name.ends_with("_tests.rs")
            {
                continue;
            }
            let text = std::fs::read_to_string(&file).unwrap();
            found.extend(
                client_code(&text)
                    .into_iter()
                    .map(|hit| format!("{shown}:{hit}")),
            );
        }
    }
    assert!(
        found.is_empty(),
        "client code outside sortie-client (call sortie_client::endpoints and Transport instead):\n{}",
        found.join("\n")
    );
}
