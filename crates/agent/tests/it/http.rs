//! The pool API client on the wire, and the binary, against a scripted HTTP server on
//! loopback (one answer per request, in order; each connection serves one request).

use crate::support;

use std::collections::VecDeque;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use sortie_agent::api::{ExitReply, Heartbeat, HttpPoolApi, PoolApi};
use sortie_agent::credential::{Credential, CredentialSource, Secret};
use sortie_agent::AgentError;
use sortie_core::protocol::agent::{AgentAction, AgentExit, ClaimRequest, HeartbeatRequest};
use sortie_core::JobId;
use support::{claim, eventually, POOL};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// One request as the server read it.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    authorization: Option<String>,
    body: Value,
}

#[derive(Default)]
struct Script {
    answers: VecDeque<(u16, String)>,
    seen: Vec<Seen>,
}

struct Server {
    url: String,
    script: Arc<Mutex<Script>>,
}

impl Server {
    async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let script = Arc::new(Mutex::new(Script::default()));
        let served = Arc::clone(&script);
        tokio::spawn(async move {
            loop {
                let Ok((mut socket, _)) = listener.accept().await else {
                    return;
                };
                let script = Arc::clone(&served);
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    let head_end = loop {
                        let n = socket.read(&mut chunk).await.unwrap_or(0);
                        if n == 0 {
                            return;
                        }
                        buf.extend_from_slice(&chunk[..n]);
                        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            break i + 4;
                        }
                    };
                    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
                    let mut lines = head.lines();
                    let mut first = lines.next().unwrap().split(' ');
                    let (method, path) = (
                        first.next().unwrap().to_string(),
                        first.next().unwrap().to_string(),
                    );
                    let header = |name: &str| {
                        head.lines().find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
                        })
                    };
                    let length: usize = header("content-length")
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(0);
                    while buf.len() < head_end + length {
                        let n = socket.read(&mut chunk).await.unwrap_or(0);
                        if n == 0 {
                            break;
                        }
                        buf.extend_from_slice(&chunk[..n]);
                    }
                    let body = serde_json::from_slice(&buf[head_end..]).unwrap_or(Value::Null);
                    let (status, answer) = {
                        let mut s = script.lock().unwrap();
                        s.seen.push(Seen {
                            method,
                            path,
                            authorization: header("authorization"),
                            body,
                        });
                        s.answers.pop_front().unwrap_or((204, String::new()))
                    };
                    let response = format!(
                        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
                        answer.len()
                    );
                    let _ = socket.write_all(response.as_bytes()).await;
                    let _ = socket.shutdown().await;
                });
            }
        });
        Self { url, script }
    }

    fn answer(&self, status: u16, body: Value) {
        let text = if body.is_null() {
            String::new()
        } else {
            body.to_string()
        };
        self.script
            .lock()
            .unwrap()
            .answers
            .push_back((status, text));
    }

    fn seen(&self) -> Vec<Seen> {
        self.script.lock().unwrap().seen.clone()
    }
}

fn api(server: &Server, source: CredentialSource) -> HttpPoolApi {
    HttpPoolApi::new(
        &format!("{}/", server.url),
        POOL,
        Arc::new(Credential::new(source)),
    )
    .unwrap()
}

#[tokio::test]
async fn the_three_calls_on_the_wire() {
    let server = Server::start().await;
    let api = api(
        &server,
        CredentialSource::Token(Secret::new("sortie-pool-abc")),
    );
    let request = ClaimRequest {
        agent: "agent-1".into(),
        running: 0,
        wait_seconds: Some(1),
    };
    server.answer(204, Value::Null);
    assert_eq!(api.claim(&request).await.unwrap(), None);
    let offered = claim("01jobhttp00000000000000001", 10);
    server.answer(200, serde_json::to_value(&offered).unwrap());
    assert_eq!(api.claim(&request).await.unwrap(), Some(offered));

    let job = JobId::new("01jobhttp00000000000000001");
    let beat = HeartbeatRequest {
        agent: "agent-1".into(),
        attempt: 1,
    };
    server.answer(
        200,
        json!({"action": "stop", "reason": "sortie: canceled by alice"}),
    );
    let Heartbeat::Answer(answer) = api.heartbeat(&job, &beat).await.unwrap() else {
        panic!("an answer")
    };
    assert_eq!(answer.action, AgentAction::Stop);
    server.answer(409, json!({"error": "conflict", "message": "not held"}));
    assert_eq!(
        api.heartbeat(&job, &beat).await.unwrap(),
        Heartbeat::NotHeld
    );

    let report = AgentExit {
        agent: "agent-1".into(),
        attempt: 1,
        exit_code: Some(0),
        reason: None,
        handed_back: false,
    };
    server.answer(200, json!({"state": "succeeded"}));
    assert!(matches!(
        api.exit(&job, &report).await.unwrap(),
        ExitReply::Recorded(_)
    ));
    server.answer(409, json!({"message": "already ended"}));
    assert_eq!(api.exit(&job, &report).await.unwrap(), ExitReply::NotHeld);

    let seen = server.seen();
    let paths: Vec<&str> = seen.iter().map(|s| s.path.as_str()).collect();
    let claims = format!("/v1/agent-pools/{POOL}/claims");
    let heartbeat = format!("/v1/agent-pools/{POOL}/jobs/{job}/heartbeat");
    let exit = format!("/v1/agent-pools/{POOL}/jobs/{job}/exit");
    assert_eq!(
        paths,
        [&claims, &claims, &heartbeat, &heartbeat, &exit, &exit]
    );
    assert!(seen.iter().all(
        |s| s.method == "POST" && s.authorization.as_deref() == Some("Bearer sortie-pool-abc")
    ));
    assert_eq!(
        seen[0].body,
        json!({"agent": "agent-1", "running": 0, "wait_seconds": 1})
    );
    assert_eq!(seen[2].body, json!({"agent": "agent-1", "attempt": 1}));
    assert_eq!(
        seen[4].body,
        json!({"agent": "agent-1", "attempt": 1, "exit_code": 0, "handed_back": false})
    );
}

#[tokio::test]
async fn refusals_are_classified_and_a_refused_command_token_is_fetched_again() {
    let server = Server::start().await;
    let dir = std::env::temp_dir().join(format!("sortie-agent-http-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let n = dir.join("n");
    let command = format!(
        "echo x >> {0}; printf 'oidc-%s' $(wc -l < {0} | tr -d ' ')",
        n.display()
    );
    let api = api(&server, CredentialSource::Command(command));
    let request = ClaimRequest {
        agent: "agent-1".into(),
        running: 0,
        wait_seconds: Some(1),
    };
    server.answer(401, json!({"message": "token expired"}));
    let e = api.claim(&request).await.unwrap_err();
    assert!(matches!(e, AgentError::Unauthorized(_)), "{e:?}");
    assert!(!e.to_string().contains("oidc-1"), "{e}");
    server.answer(404, json!({"message": "no such pool"}));
    assert!(matches!(
        api.claim(&request).await.unwrap_err(),
        AgentError::PoolNotFound(_)
    ));
    server.answer(503, Value::Null);
    assert!(api.claim(&request).await.unwrap_err().is_retryable());
    server.answer(429, Value::Null);
    assert!(api.claim(&request).await.unwrap_err().is_retryable());
    server.answer(400, json!({"message": "bad agent"}));
    assert!(matches!(
        api.claim(&request).await.unwrap_err(),
        AgentError::Refused(_)
    ));
    let bearers: Vec<String> = server
        .seen()
        .iter()
        .map(|s| s.authorization.clone().unwrap())
        .collect();
    assert_eq!(bearers[0], "Bearer oidc-1");
    assert_eq!(bearers[1], "Bearer oidc-2", "a new token after the 401");
    assert_eq!(bearers[2], "Bearer oidc-2", "then cached");
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn the_binary_refuses_a_bad_configuration_without_printing_the_token() {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_sortie-agent"))
        .args(["--api-url", "https://sortie.example", "--pool", "pool-1"])
        .env("SORTIE_AGENT_TOKEN", "sortie-pool-very-secret")
        .env_remove("SORTIE_AGENT_TOKEN_FILE")
        .env_remove("SORTIE_AGENT_TOKEN_COMMAND")
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("--pool"), "{text}");
    assert!(!text.contains("very-secret"), "{text}");
    let help = tokio::process::Command::new(env!("CARGO_BIN_EXE_sortie-agent"))
        .arg("--help")
        .env("SORTIE_AGENT_TOKEN", "sortie-pool-very-secret")
        .output()
        .await
        .unwrap();
    assert!(help.status.success());
    assert!(!String::from_utf8_lossy(&help.stdout).contains("very-secret"));
}

#[tokio::test]
async fn the_binary_long_polls_and_exits_0_on_sigterm() {
    let server = Server::start().await;
    let dir = std::env::temp_dir().join(format!("sortie-agent-bin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let token = dir.join("token");
    std::fs::write(&token, "sortie-pool-from-file\n").unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_sortie-agent"))
        .args([
            "--api-url",
            &server.url,
            "--pool",
            POOL,
            "--name",
            "agent-bin",
        ])
        .arg("--token-file")
        .arg(&token)
        .args(["--wait-seconds", "1", "--runner-binary", "/bin/true"])
        .arg("--work-dir")
        .arg(dir.join("work"))
        .env_remove("SORTIE_AGENT_TOKEN")
        .env_remove("SORTIE_AGENT_TOKEN_COMMAND")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    eventually("two claims", Duration::from_secs(20), || {
        server.seen().len() >= 2
    })
    .await;
    let seen = server.seen();
    assert_eq!(seen[0].body["agent"], "agent-bin");
    assert_eq!(
        seen[0].authorization.as_deref(),
        Some("Bearer sortie-pool-from-file")
    );
    let pid = child.id().unwrap().to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("the agent exits after SIGTERM")
        .unwrap();
    assert!(status.success(), "{status}");
    let mut logs = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut logs)
        .await
        .unwrap();
    assert!(logs.contains("sortie-agent started"), "{logs}");
    assert!(logs.contains("SIGTERM"), "{logs}");
    assert!(!logs.contains("sortie-pool-from-file"), "{logs}");
    let _ = std::fs::remove_dir_all(dir);
}
