//! Webhook deliveries as GitHub sends them: signed, with GitHub's headers, and payloads
//! shaped like GitHub's documented examples, built from the double's state
//! (<https://docs.github.com/en/webhooks/webhook-events-and-payloads>).

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};

use super::server::{pull_json, repo_json, timestamp, user_json};
use super::{rules, GithubDouble};

/// `sha256=` and the HMAC-SHA256 hex digest of `body` under `secret`: the
/// `X-Hub-Signature-256` header
/// (<https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries>).
pub fn signature(secret: &str, body: &[u8]) -> String {
    let key = aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, secret.as_bytes());
    let tag = aws_lc_rs::hmac::sign(&key, body);
    format!("sha256={}", super::server::hex(tag.as_ref()))
}

/// A new delivery id: a random GUID, as `X-GitHub-Delivery` carries.
fn delivery_id() -> String {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).expect("the OS random source");
    let h = super::server::hex(&b);
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

/// POSTs `payload` to `url` as GitHub delivers event `event`: the exact JSON body signed
/// with `secret` (`X-Hub-Signature-256`), `X-GitHub-Event`, a unique `X-GitHub-Delivery`,
/// `X-GitHub-Hook-ID`, `User-Agent: GitHub-Hookshot/…` and `Content-Type:
/// application/json`. Returns the receiver's status and body (status 0 when it could not
/// be reached).
pub async fn send_webhook(url: &str, secret: &str, event: &str, payload: &Value) -> (u16, String) {
    let body = serde_json::to_vec(payload).unwrap_or_default();
    let request = hyper::Request::post(url)
        .header("content-type", "application/json")
        .header("user-agent", rules::HOOKSHOT_USER_AGENT)
        .header("x-github-event", event)
        .header("x-github-delivery", delivery_id())
        .header("x-github-hook-id", "1")
        .header("x-github-hook-installation-target-type", "integration")
        .header("x-hub-signature-256", signature(secret, &body))
        .body(Full::new(Bytes::from(body)));
    let Ok(request) = request else {
        return (0, "not a valid request".into());
    };
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    match tokio::time::timeout(std::time::Duration::from_secs(30), client.request(request)).await {
        Ok(Ok(response)) => {
            let status = response.status().as_u16();
            let body = response
                .into_body()
                .collect()
                .await
                .map(|b| String::from_utf8_lossy(&b.to_bytes()).into_owned())
                .unwrap_or_default();
            (status, body)
        }
        Ok(Err(e)) => (0, e.to_string()),
        Err(_) => (0, "no answer within 30 s".into()),
    }
}

/// Builds delivery payloads from the double's state (what GitHub would send now).
pub struct WebhookPayloads<'a> {
    double: &'a GithubDouble,
}

impl GithubDouble {
    /// Payloads built from this double's repositories and pull requests.
    pub fn payloads(&self) -> WebhookPayloads<'_> {
        WebhookPayloads { double: self }
    }
}

impl WebhookPayloads<'_> {
    fn with_repo<T>(&self, repo: &str, f: impl FnOnce(&super::World, &super::Repo) -> T) -> T {
        let world = self.double.world();
        let found = world
            .repos
            .get(&repo.to_ascii_lowercase())
            .unwrap_or_else(|| panic!("no repository {repo} in the double"));
        f(&world, found)
    }

    fn envelope(repo: &super::Repo, sender: &str) -> Value {
        let mut value = json!({
            "repository": repo_json(repo),
            "organization": {"login": repo.owner},
            "sender": user_json(sender, "User"),
        });
        if let Some(id) = repo.installation {
            value["installation"] =
                json!({"id": id, "node_id": format!("MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9u{id}")});
        }
        value
    }

    /// A `pull_request` delivery for pull request `number` with `action` (`opened`,
    /// `synchronize`, `reopened`, `closed`...).
    pub fn pull_request(&self, repo: &str, number: u64, action: &str) -> Value {
        self.with_repo(repo, |world, r| {
            let pull = r
                .pulls
                .get(&number)
                .unwrap_or_else(|| panic!("no pull request {repo}#{number}"));
            let mut value = Self::envelope(r, &pull.spec.author);
            value["action"] = json!(action);
            value["number"] = json!(number);
            value["pull_request"] = pull_json(&world.base_url, r, pull);
            if action == "synchronize" {
                value["before"] = json!(format!("{:0>40}", "be"));
                value["after"] = json!(pull.spec.head_sha);
            }
            value
        })
    }

    /// An `issue_comment` `created` delivery: `login` wrote `body` on pull request `number`.
    pub fn issue_comment(
        &self,
        repo: &str,
        number: u64,
        comment_id: u64,
        login: &str,
        body: &str,
    ) -> Value {
        self.with_repo(repo, |world, r| {
            let mut value = Self::envelope(r, login);
            value["action"] = json!("created");
            value["issue"] = json!({
                "number": number,
                "title": format!("Change {number}"),
                "state": "open",
                "user": user_json(login, "User"),
                "pull_request": {
                    "url": format!("{}/repos/{}/pulls/{number}", world.base_url, r.full_name()),
                    "html_url": format!("https://github.com/{}/pull/{number}", r.full_name()),
                },
            });
            value["comment"] = json!({
                "id": comment_id,
                "body": body,
                "user": user_json(login, "User"),
                "created_at": timestamp(world.now()),
                "author_association": "MEMBER",
            });
            value
        })
    }

    /// A `pull_request_review` delivery (`submitted` or `dismissed`) of review `review_id`
    /// of pull request `number`.
    pub fn pull_request_review(
        &self,
        repo: &str,
        number: u64,
        review_id: u64,
        action: &str,
    ) -> Value {
        self.with_repo(repo, |world, r| {
            let pull = r
                .pulls
                .get(&number)
                .unwrap_or_else(|| panic!("no pull request {repo}#{number}"));
            let review = pull
                .reviews
                .iter()
                .find(|v| v.id == review_id)
                .unwrap_or_else(|| panic!("no review {review_id} on {repo}#{number}"));
            let mut value = Self::envelope(r, &review.user);
            value["action"] = json!(action);
            value["review"] = json!({
                "id": review.id,
                "user": user_json(&review.user, "User"),
                // Payloads spell review states in lowercase.
                "state": if action == "dismissed" { "dismissed".to_string() } else { review.state.to_ascii_lowercase() },
                "commit_id": review.commit_id,
                "submitted_at": timestamp(world.now()),
            });
            value["pull_request"] = pull_json(&world.base_url, r, pull);
            value
        })
    }

    /// A `push` delivery of `git_ref` (`refs/heads/main`) from `before` to `after`.
    pub fn push(&self, repo: &str, git_ref: &str, before: &str, after: &str) -> Value {
        self.with_repo(repo, |_, r| {
            let mut value = Self::envelope(r, "octocat");
            value["ref"] = json!(git_ref);
            value["before"] = json!(before);
            value["after"] = json!(after);
            value["base_ref"] = Value::Null;
            value["created"] = json!(before.chars().all(|c| c == '0'));
            value["deleted"] = json!(after.chars().all(|c| c == '0'));
            value["forced"] = json!(false);
            value["pusher"] = json!({"name": "octocat", "email": "octocat@github.com"});
            value["head_commit"] = json!({"id": after, "message": "Change"});
            value["commits"] = json!([{"id": after, "message": "Change"}]);
            value
        })
    }

    /// A `ping` delivery.
    pub fn ping(&self) -> Value {
        json!({"zen": "Keep it logically awesome.", "hook_id": 1, "hook": {"type": "App", "id": 1, "events": ["pull_request", "push"]}})
    }

    /// An `installation` delivery (`created`, `deleted`...) for `repo`'s installation.
    pub fn installation(&self, repo: &str, action: &str) -> Value {
        self.with_repo(repo, |world, r| {
            json!({
                "action": action,
                "installation": {
                    "id": r.installation.unwrap_or_default(),
                    "account": user_json(&r.owner, "Organization"),
                    "app_id": world.app_id,
                    "repository_selection": "selected",
                },
                "repositories": [{"id": r.id, "name": r.name, "full_name": r.full_name(), "private": true}],
                "sender": user_json("octocat", "User"),
            })
        })
    }
}
