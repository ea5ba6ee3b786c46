//! The CLI's grammar and its errors, as the real binary prints them: the help grouped by
//! resource with the global options once, `dev --help` with only dev's flags, a closed
//! pipe, a 401 that names the credential used, a URL that is not a Sortie API, and the
//! notes of a variable overriding the current context. The API is a loopback double.

use std::io::Read;
use std::process::{Command, Stdio};

use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use axum::Json;
use serde_json::json;

use crate::common;

use common::Out;

/// Runs `sortie ARGS` with `env`, no user config, no terminal.
fn sortie(args: &[&str], env: &[(&str, &str)]) -> Out {
    let mut cmd = Command::new(sortie_tests::sortie());
    cmd.args(args)
        .env_remove("SORTIE_API_URL")
        .env_remove("SORTIE_TOKEN")
        .env("SORTIE_CONFIG", "/nonexistent/sortie-grammar.yaml")
        .stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    Out::from(cmd.output().unwrap())
}

/// Serves `app` on a loopback port from a thread of its own; its base URL.
fn serve(app: axum::Router) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                axum::serve(listener, app).await.unwrap();
            });
    });
    url
}

/// A Sortie-shaped API that accepts only the token `good`.
fn sortie_double() -> String {
    serve(
        axum::Router::new()
            .route(
                "/v1/health",
                get(|| async { Json(json!({"status": "ok"})) }),
            )
            .route(
                "/v1/whoami",
                get(|headers: HeaderMap| async move {
                    let bearer = headers.get("authorization").and_then(|v| v.to_str().ok());
                    if bearer == Some("Bearer good") {
                        (
                            StatusCode::OK,
                            Json(json!({"subject": "alice", "issuer": "https://idp",
                                "memberships": [{"group": "acme", "role": "deployer"}],
                                "organisations": ["acme", "beta"]})),
                        )
                    } else if bearer == Some("Bearer newcomer") {
                        (
                            StatusCode::OK,
                            Json(json!({"subject": "nina", "issuer": "https://idp",
                                "memberships": [], "organisations": []})),
                        )
                    } else {
                        (
                            StatusCode::UNAUTHORIZED,
                            Json(json!({"error": {"code": "invalid_token",
                                "message": "the bearer token was not verified"}})),
                        )
                    }
                }),
            ),
    )
}

#[test]
fn the_help_groups_commands_by_resource_and_lists_global_options_once() {
    let out = sortie(&["--help"], &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let help = out.stdout;
    for heading in ["Resources", "Jobs:", "Access:", "Global options:"] {
        assert!(help.contains(heading), "{heading}: {help}");
    }
    assert!(help.contains("  whoami "), "{help}");
    let out = sortie(&["get", "--help"], &[]);
    assert!(
        out.stdout.contains("job ") && out.stdout.contains("jobs "),
        "{}",
        out.stdout
    );
    let out = sortie(&["run", "--help"], &[]);
    let (own, global) = out.stdout.split_once("Global options:").unwrap();
    assert!(
        own.contains("--wait") && !own.contains("--api-url"),
        "{}",
        out.stdout
    );
    assert!(global.contains("--api-url"), "{}", out.stdout);
    let out = sortie(&["dev", "--help"], &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("--port"), "{}", out.stdout);
    for global in [
        "--api-url",
        "--token",
        "--context",
        "--output",
        "Global options",
    ] {
        assert!(!out.stdout.contains(global), "{global}: {}", out.stdout);
    }
}

#[test]
fn completion_into_a_closed_pipe_exits_0_without_a_panic() {
    let mut child = Command::new(sortie_tests::sortie())
        .args(["completion", "zsh"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // `| head -c 0`: the reader goes away before anything is read.
    drop(child.stdout.take());
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn whoami_names_the_callers_organisations_or_says_how_to_get_a_role_in_one() {
    let url = sortie_double();
    // whoami as `token`: its `organisations:` line, and its `-o json` answer.
    let ask = |token: &str| {
        let out = sortie(&["whoami", "--api-url", &url, "--token", token], &[]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        let line = out
            .stdout
            .lines()
            .find(|l| l.starts_with("organisations:"))
            .unwrap_or_else(|| panic!("no organisations line: {}", out.stdout))
            .to_string();
        let json = ["-o", "json", "whoami", "--api-url", &url, "--token", token];
        let out = sortie(&json, &[]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        let who: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
        (line, who)
    };
    let (line, who) = ask("good");
    assert!(line.ends_with(" acme, beta"), "{line}");
    assert_eq!(who["organisations"], json!(["acme", "beta"]), "{who}");
    // None: said so, with the command an administrator runs to grant this subject a role.
    let (line, who) = ask("newcomer");
    assert!(line.contains("none"), "{line}");
    assert!(
        line.contains("sortie members grant --group ORG --role viewer --subject nina"),
        "{line}"
    );
    assert_eq!(who["organisations"], json!([]), "{who}");
}

#[test]
fn a_401_names_the_credential_used_and_how_to_get_one() {
    let url = sortie_double();
    let out = sortie(&["whoami", "--api-url", &url, "--token", "bad-secret"], &[]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains("the flag --token"), "{}", out.stderr);
    assert!(out.stderr.contains("get a fresh token"), "{}", out.stderr);
    let out = sortie(
        &["whoami"],
        &[("SORTIE_API_URL", &url), ("SORTIE_TOKEN", "bad-secret")],
    );
    assert!(
        out.stderr.contains("the variable SORTIE_TOKEN"),
        "{}",
        out.stderr
    );
    for text in [&out.stderr, &out.stdout] {
        assert!(!text.to_lowercase().contains("header"), "{text}");
        assert!(!text.contains("bad-secret"), "{text}");
    }
    // A context's token_command, by the context's name.
    let dir = std::env::temp_dir().join(format!("sortie-grammar-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("config.yaml");
    std::fs::write(
        &config,
        format!("current_context: prod\ncontexts:\n  prod:\n    api_url: {url}\n    token_command: echo bad-secret\n"),
    )
    .unwrap();
    let config = config.to_string_lossy().into_owned();
    let out = sortie(&["whoami", "--config", &config], &[]);
    assert!(
        out.stderr.contains("context `prod`'s token_command"),
        "{}",
        out.stderr
    );
    // The same context with a good token from SORTIE_TOKEN: whoami, and the override said.
    let out = sortie(
        &["whoami", "--config", &config, "-v"],
        &[("SORTIE_TOKEN", "good")],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains("alice") && out.stdout.contains("deployer"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("the variable SORTIE_TOKEN"),
        "{}",
        out.stdout
    );
    assert!(
        out.stderr
            .contains("SORTIE_TOKEN overrides the token of context `prod`"),
        "-v: {}",
        out.stderr
    );
    let out = sortie(
        &["context", "current", "--config", &config],
        &[("SORTIE_API_URL", "http://elsewhere")],
    );
    assert_eq!(out.stdout.trim(), "prod");
    assert!(
        out.stderr
            .contains("SORTIE_API_URL overrides the API URL of context `prod`"),
        "{}",
        out.stderr
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_url_that_is_not_a_sortie_api_is_said_to_be_so_with_exit_5() {
    let url = serve(
        axum::Router::new()
            .fallback(|| async { (StatusCode::NOT_FOUND, "<html><body>Not Found</body></html>") }),
    );
    let out = sortie(
        &["get", "job", "01abc", "--api-url", &url, "--token", "t"],
        &[],
    );
    assert_eq!(out.code, 5, "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!("{url} is not a Sortie API")),
        "{}",
        out.stderr
    );
    // A Sortie API's own 404 stays a 404 (exit 3).
    let url = serve(
        axum::Router::new()
            .route(
                "/v1/health",
                get(|| async { Json(json!({"status": "ok"})) }),
            )
            .fallback(|| async {
                (
                    StatusCode::NOT_FOUND,
                    Json(
                        json!({"error": {"code": "not_found", "message": "job `01abc` not found"}}),
                    ),
                )
            }),
    );
    let out = sortie(
        &["get", "job", "01abc", "--api-url", &url, "--token", "t"],
        &[],
    );
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert!(
        out.stderr.contains("job `01abc` not found"),
        "{}",
        out.stderr
    );
}
