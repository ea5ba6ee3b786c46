//! What the integration tests share: a GitLab double with one project in nested groups, and
//! a client for it holding a Maintainer's personal access token (`api` scope), as Sortie's
//! connection would.

#![allow(dead_code)]

use sortie_gitlab::{Gitlab, ProjectPath, Secret};
use sortie_testkit::gitlab::{AccessLevel, GitlabDouble};

/// The project the tests work on: two levels of groups.
pub const PROJECT: &str = "acme/platform/infra";
/// The user Sortie's token belongs to.
pub const BOT: &str = "sortie-bot";

/// A 40-digit SHA made of `digit`.
pub fn sha(digit: char) -> String {
    std::iter::repeat_n(digit, 40).collect()
}

/// The project's path.
pub fn project() -> ProjectPath {
    ProjectPath::parse(PROJECT).unwrap()
}

/// A double with [`PROJECT`], the token of [`BOT`] (a Maintainer) and a client holding it.
pub async fn setup() -> (GitlabDouble, Gitlab, String) {
    let double = GitlabDouble::start().await;
    double.add_project(PROJECT);
    let token = double.issue_token(PROJECT, BOT, AccessLevel::Maintainer, &["api"]);
    let client = Gitlab::new(double.url(), Secret::new(token.clone())).unwrap();
    (double, client, token)
}

/// How many requests `client` made to `call` (`METHOD /path/:template`).
pub fn calls_of(client: &Gitlab, call: &str) -> u64 {
    client.calls().get(call).copied().unwrap_or(0)
}

/// A plain-HTTP server on 127.0.0.1 answering each request with `answer(method, path and
/// query)`: (status, extra headers, body). One request per connection. For what the double
/// does not serve (an instance older than GitLab 15.7, a proxy dropping headers).
pub async fn scripted(
    answer: impl Fn(&str, &str) -> (u16, Vec<(&'static str, String)>, String) + Send + Sync + 'static,
) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let answer = std::sync::Arc::new(answer);
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let answer = answer.clone();
            tokio::spawn(async move {
                let mut data = Vec::new();
                let mut buf = [0u8; 4096];
                while !data.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => data.extend_from_slice(&buf[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&data).to_string();
                let mut words = head.split_whitespace();
                let method = words.next().unwrap_or("").to_string();
                let target = words.next().unwrap_or("").to_string();
                let (status, headers, body) = answer(&method, &target);
                let mut response = format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
                    body.len()
                );
                for (name, value) in headers {
                    response.push_str(&format!("{name}: {value}\r\n"));
                }
                response.push_str("\r\n");
                response.push_str(&body);
                let _ = stream.write_all(response.as_bytes()).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    url
}
