//! Ctrl-C while following a job (`sortie job logs -f`), in a real pseudo-terminal: the
//! first Ctrl-C stops following with what happened and what to do (exit 130); a second
//! within 2 s asks `Cancel job <id>? [y/N]` and cancels on `y`. The API is a loopback
//! double that serves one job that never ends (following only reads the job and its
//! log), and records whether the job was canceled.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::routing::{get, post};
use axum::Json;
use portable_pty::CommandBuilder;
use serde_json::{json, Value};

use crate::common;

use common::Terminal;

const ID: &str = "01jobinterrupt";

/// The job as the API would answer it: running, never ending.
fn running_job() -> Value {
    json!({
        "id": ID,
        "environment": "acme/prod",
        "runner_id": "acme/local",
        "operation": "apply",
        "source": {"type": "inline"},
        "requested_by": "local-dev",
        "state": "running",
        "transitions": [
            {"from": null, "to": "queued", "at": "2026-11-25T12:00:00Z", "reason": "submitted"},
            {"from": "queued", "to": "running", "at": "2026-11-25T12:00:01Z", "reason": "launched"}
        ],
        "updated_at": "2026-11-25T12:00:01Z"
    })
}

/// A loopback API: `GET /v1/jobs/ID`, its logs, and its cancel (counted). Its base URL.
fn double(cancels: Arc<AtomicUsize>) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let app = axum::Router::new()
                .route(&format!("/v1/jobs/{ID}"), get(|| async { Json(running_job()) }))
                .route(
                    &format!("/v1/jobs/{ID}/logs"),
                    get(|| async {
                        Json(json!({"offset": 0, "next_offset": 11, "data": "planning..\n", "more": true}))
                    }),
                )
                .route(
                    &format!("/v1/jobs/{ID}/cancel"),
                    post(|State(c): State<Arc<AtomicUsize>>| async move {
                        c.fetch_add(1, Ordering::SeqCst);
                        let mut job = running_job();
                        job["cancel_requested_by"] = json!("local-dev");
                        (axum::http::StatusCode::ACCEPTED, Json(job))
                    }),
                )
                .with_state(cancels);
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    url
}

/// `sortie job logs -f ID` in a pty, with what it printed so far.
fn follow(url: &str) -> Terminal {
    let mut cmd = CommandBuilder::new(sortie_tests::sortie());
    cmd.args(["job", "logs", "-f", ID]);
    cmd.env("SORTIE_API_URL", url);
    cmd.env("SORTIE_TOKEN", "test-token");
    cmd.env("SORTIE_CONFIG", "/nonexistent/sortie-config.yaml");
    cmd.env("TERM", "dumb");
    Terminal::start(cmd, 200, Duration::from_secs(30))
}

#[test]
fn the_served_job_is_one_the_cli_reads() {
    // If the job view changes shape, this double must too.
    serde_json::from_value::<sortie_api::model::JobView>(running_job()).unwrap();
}

#[test]
fn one_ctrl_c_stops_following_says_what_to_do_and_exits_130_leaving_the_job() {
    let cancels = Arc::new(AtomicUsize::new(0));
    let url = double(cancels.clone());
    let mut following = follow(&url);
    following.expect("planning..");
    let pressed = Instant::now();
    following.send(b"\x03");
    following.expect(&format!(
        "stopped following; job {ID} is still running. Follow again: sortie job logs -f {ID} · Cancel: sortie job cancel {ID}"
    ));
    assert_eq!(following.exit_code(Duration::from_secs(10)), 130);
    assert!(
        pressed.elapsed() >= Duration::from_secs(2),
        "it waits 2 s for a second Ctrl-C"
    );
    let text = following.text();
    assert!(!text.contains("Cancel job"), "{text}");
    assert!(!text.contains("panicked"), "{text}");
    assert_eq!(cancels.load(Ordering::SeqCst), 0, "the job goes on");
}

#[test]
fn a_second_ctrl_c_within_2_s_asks_and_y_cancels_the_job() {
    let cancels = Arc::new(AtomicUsize::new(0));
    let url = double(cancels.clone());
    let mut following = follow(&url);
    following.expect("planning..");
    following.send(b"\x03");
    following.expect("stopped following");
    following.send(b"\x03");
    following.expect(&format!("Cancel job {ID}? [y/N]"));
    following.send(b"y\r");
    following.expect("cancel requested");
    assert_eq!(following.exit_code(Duration::from_secs(10)), 130);
    assert_eq!(cancels.load(Ordering::SeqCst), 1);

    // `n` (or just Enter) leaves the job running.
    let mut following = follow(&url);
    following.expect("planning..");
    following.send(b"\x03");
    following.expect("stopped following");
    following.send(b"\x03");
    following.expect("[y/N]");
    following.send(b"\r");
    following.expect("not canceled");
    assert_eq!(following.exit_code(Duration::from_secs(10)), 130);
    assert_eq!(cancels.load(Ordering::SeqCst), 1);
}
