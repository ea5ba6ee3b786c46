//! The double's own rules, each proven with raw HTTP (no sortie-github).

use std::io::Read;

use chrono::{DateTime, Utc};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};

use super::*;

const REPO: &str = "acme/infra";

struct Answer {
    status: u16,
    headers: hyper::HeaderMap,
    body: Vec<u8>,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
    fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    }
}

async fn call(
    double: &GithubDouble,
    method: &str,
    path: &str,
    bearer: Option<&str>,
    body: Option<Value>,
    extra: &[(&str, &str)],
) -> Answer {
    let url = if path.starts_with("http") {
        path.to_string()
    } else {
        format!("{}{path}", double.url())
    };
    let mut request = hyper::Request::builder().method(method).uri(url);
    if let Some(token) = bearer {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    for (k, v) in extra {
        request = request.header(*k, *v);
    }
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let request = request.body(Full::new(Bytes::from(body))).unwrap();
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let response = client.request(request).await.expect("the double answers");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes()
        .to_vec();
    Answer {
        status,
        headers,
        body,
    }
}

/// A double with the app installed on [`REPO`], one pull request, and a token with all of
/// the installation's permissions.
async fn one_pull(spec: PullSpec) -> (GithubDouble, String) {
    let double = GithubDouble::start().await;
    let installation = double.install(REPO);
    double.add_pull(REPO, spec);
    let token = token_for(&double, installation, json!({})).await;
    (double, token)
}

async fn send(
    double: &GithubDouble,
    method: &str,
    path: &str,
    bearer: &str,
    body: Value,
) -> Answer {
    call(double, method, path, Some(bearer), Some(body), &[]).await
}

async fn get(double: &GithubDouble, path: &str, bearer: &str) -> Answer {
    call(double, "GET", path, Some(bearer), None, &[]).await
}

fn jwt(app_id: Value, iat: i64, exp: i64) -> String {
    let key = jsonwebtoken::EncodingKey::from_rsa_der(&app_keys().pkcs1_der);
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256),
        &json!({"iat": iat, "exp": exp, "iss": app_id}),
        &key,
    )
    .unwrap()
}

fn good_jwt(double: &GithubDouble) -> String {
    let now = Utc::now().timestamp();
    jwt(json!(double.app_id()), now - 60, now + 540)
}

async fn mint(double: &GithubDouble, installation: u64, body: Value) -> Answer {
    let jwt = good_jwt(double);
    call(
        double,
        "POST",
        &format!("/app/installations/{installation}/access_tokens"),
        Some(&jwt),
        Some(body),
        &[],
    )
    .await
}

async fn token_for(double: &GithubDouble, installation: u64, body: Value) -> String {
    let answer = mint(double, installation, body).await;
    assert_eq!(answer.status, 201, "{}", answer.json());
    answer.json()["token"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn app_jwts_are_held_to_githubs_rules() {
    let double = GithubDouble::start().await;
    double.install(REPO);
    let now = Utc::now().timestamp();
    let path = format!("/repos/{REPO}/installation");
    let id = json!(double.app_id());
    for (token, why) in [
        (jwt(id.clone(), now - 700, now - 100), "expired"),
        (
            jwt(id.clone(), now - 60, now + 900),
            "exp more than 10 minutes ahead",
        ),
        (jwt(id.clone(), now + 300, now + 500), "iat in the future"),
        (jwt(json!(1), now - 60, now + 540), "another app's iss"),
        ("a.b.c".to_string(), "not a JWT"),
    ] {
        let answer = get(&double, &path, &token).await;
        assert_eq!(answer.status, 401, "{why}: {}", answer.json());
    }
    // The app id as a string is accepted too; the answer names the installation.
    let string_iss = jwt(json!(double.app_id().to_string()), now - 60, now + 540);
    let answer = get(&double, &path, &string_iss).await;
    assert_eq!(answer.status, 200);
    assert!(answer.json()["id"].as_u64().is_some());
}

#[tokio::test]
async fn tokens_carry_their_repositories_and_permissions() {
    let double = GithubDouble::start().await;
    let installation = double.install(REPO);
    double.install("acme/other");
    double.add_pull(REPO, PullSpec::new("alice", "h1"));
    double.add_pull("acme/other", PullSpec::new("alice", "h2"));
    let token = token_for(
        &double,
        installation,
        json!({"repositories": ["infra"], "permissions": {"pull_requests": "read"}}),
    )
    .await;
    let ok = get(&double, &format!("/repos/{REPO}/pulls/1"), &token).await;
    assert_eq!(ok.status, 200);
    assert_eq!(ok.json()["head"]["sha"], "h1");
    // Another repository of the same installation: not visible to this token.
    let other = call(
        &double,
        "GET",
        "/repos/acme/other/pulls/1",
        Some(&token),
        None,
        &[],
    )
    .await;
    assert_eq!(other.status, 404);
    // A permission the token lacks.
    let write = send(
        &double,
        "POST",
        &format!("/repos/{REPO}/issues/1/comments"),
        &token,
        json!({"body": "hi"}),
    )
    .await;
    assert_eq!(write.status, 403);
    assert_eq!(write.json()["message"], rules::NOT_ACCESSIBLE);
    // A repository or a permission the installation does not have: 422.
    assert_eq!(
        mint(&double, installation, json!({"repositories": ["nope"]}))
            .await
            .status,
        422
    );
    assert_eq!(
        mint(
            &double,
            installation,
            json!({"permissions": {"workflows": "write"}})
        )
        .await
        .status,
        422
    );
    // An expired token is refused as bad credentials.
    double.expire_tokens();
    let expired = get(&double, &format!("/repos/{REPO}/pulls/1"), &token).await;
    assert_eq!(expired.status, 401);
}

#[tokio::test]
async fn a_token_expires_an_hour_after_it_is_minted() {
    let double = GithubDouble::start().await;
    let installation = double.install(REPO);
    double.add_pull(REPO, PullSpec::new("alice", "h1"));
    let answer = mint(&double, installation, json!({})).await;
    let expires: DateTime<Utc> = answer.json()["expires_at"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let lifetime = expires - Utc::now();
    assert!(
        lifetime <= chrono::Duration::seconds(3600) && lifetime > chrono::Duration::seconds(3500)
    );
    let token = answer.json()["token"].as_str().unwrap().to_string();
    double.advance_clock(Duration::from_secs(3601));
    let late = get(&double, &format!("/repos/{REPO}/pulls/1"), &token).await;
    assert_eq!(late.status, 401);
}

#[tokio::test]
async fn lists_page_with_links_and_clamp_per_page() {
    let files: Vec<FileChange> = (0..250)
        .map(|i| FileChange::modified(&format!("f{i}.tf")))
        .collect();
    let (double, token) = one_pull(PullSpec::new("alice", "h1").files(files)).await;
    let first = get(
        &double,
        &format!("/repos/{REPO}/pulls/1/files?per_page=500"),
        &token,
    )
    .await;
    assert_eq!(
        first.json().as_array().unwrap().len(),
        100,
        "per_page clamps to 100"
    );
    let link = first.header("link").unwrap();
    assert!(
        link.contains("page=2>; rel=\"next\"") && link.contains("page=3>; rel=\"last\""),
        "{link}"
    );
    let default = get(&double, &format!("/repos/{REPO}/pulls/1/files"), &token).await;
    assert_eq!(default.json().as_array().unwrap().len(), 30);
    let last = get(
        &double,
        &format!("/repos/{REPO}/pulls/1/files?per_page=100&page=3"),
        &token,
    )
    .await;
    assert_eq!(last.json().as_array().unwrap().len(), 50);
    let link = last.header("link").unwrap();
    assert!(
        !link.contains("rel=\"next\"") && link.contains("rel=\"prev\""),
        "{link}"
    );
}

#[tokio::test]
async fn a_pull_request_lists_at_most_3000_files() {
    let files: Vec<FileChange> = (0..3500)
        .map(|i| FileChange::added(&format!("f{i}")))
        .collect();
    let (double, token) = one_pull(PullSpec::new("alice", "h1").files(files)).await;
    let last = get(
        &double,
        &format!("/repos/{REPO}/pulls/1/files?per_page=100&page=30"),
        &token,
    )
    .await;
    assert_eq!(last.json().as_array().unwrap().len(), 100);
    assert!(!last.header("link").unwrap().contains("rel=\"next\""));
    let past = get(
        &double,
        &format!("/repos/{REPO}/pulls/1/files?per_page=100&page=31"),
        &token,
    )
    .await;
    assert_eq!(past.json(), json!([]));
}

#[tokio::test]
async fn an_unchanged_list_answers_304_and_costs_no_rate_limit() {
    let (double, token) = one_pull(PullSpec::new("alice", "h1")).await;
    let path = format!("/repos/{REPO}/pulls?state=open&base=main");
    let first = get(&double, &path, &token).await;
    let etag = first.header("etag").unwrap();
    let remaining: u64 = first
        .header("x-ratelimit-remaining")
        .unwrap()
        .parse()
        .unwrap();
    let second = call(
        &double,
        "GET",
        &path,
        Some(&token),
        None,
        &[("if-none-match", &etag)],
    )
    .await;
    assert_eq!(second.status, 304);
    assert!(second.body.is_empty());
    assert_eq!(
        second
            .header("x-ratelimit-remaining")
            .unwrap()
            .parse::<u64>()
            .unwrap(),
        remaining
    );
    double.push(REPO, 1, "h2", None);
    let changed = call(
        &double,
        "GET",
        &path,
        Some(&token),
        None,
        &[("if-none-match", &etag)],
    )
    .await;
    assert_eq!(changed.status, 200);
    assert_eq!(
        changed
            .header("x-ratelimit-remaining")
            .unwrap()
            .parse::<u64>()
            .unwrap(),
        remaining - 1
    );
}

#[tokio::test]
async fn comments_over_the_limit_are_refused_and_edits_kept() {
    let (double, token) = one_pull(PullSpec::new("alice", "h1")).await;
    let path = format!("/repos/{REPO}/issues/1/comments");
    let at_limit = "x".repeat(rules::MAX_COMMENT_CHARS);
    let ok = send(&double, "POST", &path, &token, json!({"body": at_limit})).await;
    assert_eq!(ok.status, 201);
    assert_eq!(ok.json()["user"]["type"], "Bot");
    let over = send(
        &double,
        "POST",
        &path,
        &token,
        json!({"body": format!("{at_limit}x")}),
    )
    .await;
    assert_eq!(over.status, 422);
    assert_eq!(over.json()["errors"][0]["field"], "body");
    let id = ok.json()["id"].as_u64().unwrap();
    let edit = send(
        &double,
        "PATCH",
        &format!("/repos/{REPO}/issues/comments/{id}"),
        &token,
        json!({"body": "short"}),
    )
    .await;
    assert_eq!(edit.status, 200);
    let comments = double.comments(REPO, 1);
    assert_eq!(comments.len(), 1);
    assert_eq!(comments[0].body, "short");
    assert_eq!(comments[0].history.len(), 1);
    assert_eq!(comments[0].author, double.app_bot_login());
    // No such pull request.
    let missing = send(
        &double,
        "POST",
        &format!("/repos/{REPO}/issues/9/comments"),
        &token,
        json!({"body": "x"}),
    )
    .await;
    assert_eq!(missing.status, 404);
}

#[tokio::test]
async fn check_runs_are_validated_and_written_only_by_the_app() {
    let (double, token) = one_pull(PullSpec::new("alice", "h1")).await;
    let path = format!("/repos/{REPO}/check-runs");
    let post = |body: Value| call(&double, "POST", &path, Some(&token), Some(body), &[]);
    let long = "y".repeat(rules::MAX_CHECK_OUTPUT_CHARS + 1);
    for (body, why) in [
        (json!({"head_sha": "h1"}), "no name"),
        (
            json!({"name": "sortie", "head_sha": "nope"}),
            "unknown commit",
        ),
        (
            json!({"name": "sortie", "head_sha": "h1", "status": "completed"}),
            "completed without a conclusion",
        ),
        (
            json!({"name": "sortie", "head_sha": "h1", "conclusion": "great"}),
            "unknown conclusion",
        ),
        (
            json!({"name": "sortie", "head_sha": "h1", "output": {"title": "t", "summary": long}}),
            "summary too long",
        ),
        (
            json!({"name": "sortie", "head_sha": "h1", "output": {"title": "t", "summary": "s", "text": long}}),
            "text too long",
        ),
        (
            json!({"name": "sortie", "head_sha": "h1", "output": {"title": "t", "summary": "s", "annotations": vec![json!({}); 51]}}),
            "51 annotations",
        ),
        (
            json!({"name": "sortie", "head_sha": "h1", "output": {"title": "t"}}),
            "no summary",
        ),
    ] {
        assert_eq!(post(body).await.status, 422, "{why}");
    }
    let created = post(json!({"name": "sortie", "head_sha": "h1", "status": "in_progress", "external_id": "job-1"})).await;
    assert_eq!(created.status, 201);
    let id = created.json()["id"].as_u64().unwrap();
    let updated = send(
        &double,
        "PATCH",
        &format!("{path}/{id}"),
        &token,
        json!({"conclusion": "success", "output": {"title": "t", "summary": "s"}}),
    )
    .await;
    assert_eq!(updated.status, 200);
    assert_eq!(
        updated.json()["status"],
        "completed",
        "a conclusion completes the run"
    );
    let runs = double.check_runs(REPO);
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].history.len(), 2);
    assert_eq!(runs[0].conclusion.as_deref(), Some("success"));
    // A user's token may not write check runs.
    let user = double.user_token("alice", &[REPO]);
    let refused = send(
        &double,
        "POST",
        &path,
        &user,
        json!({"name": "x", "head_sha": "h1"}),
    )
    .await;
    assert_eq!(refused.status, 403);
}

#[tokio::test]
async fn faults_and_rate_limits_answer_as_github_does() {
    let (double, token) = one_pull(PullSpec::new("alice", "h1")).await;
    let path = format!("/repos/{REPO}/pulls/1");
    double.fail_next(2, 502);
    for _ in 0..2 {
        assert_eq!(get(&double, &path, &token).await.status, 502);
    }
    let ok = get(&double, &path, &token).await;
    assert_eq!(ok.status, 200);
    for name in [
        "x-ratelimit-limit",
        "x-ratelimit-remaining",
        "x-ratelimit-used",
        "x-ratelimit-reset",
        "x-ratelimit-resource",
    ] {
        assert!(ok.header(name).is_some(), "{name}");
    }
    double.secondary_rate_limit(1, 90);
    let limited = get(&double, &path, &token).await;
    assert_eq!(limited.status, 403);
    assert_eq!(limited.header("retry-after").as_deref(), Some("90"));
    double.exhaust_rate_limit(Duration::from_secs(600));
    let spent = get(&double, &path, &token).await;
    assert_eq!(spent.status, 403);
    assert_eq!(spent.header("x-ratelimit-remaining").as_deref(), Some("0"));
    double.clear_faults();
    double.fail_until_cleared(500);
    assert_eq!(get(&double, &path, &token).await.status, 500);
    double.clear_faults();
    assert_eq!(get(&double, &path, &token).await.status, 200);
}

#[tokio::test]
async fn a_tarball_redirects_to_an_archive_of_the_commit() {
    let double = GithubDouble::start().await;
    let installation = double.install(REPO);
    let sha = "0123456789abcdef0123456789abcdef01234567";
    double.add_commit(
        REPO,
        sha,
        &[("main.tf", b"# root"), ("modules/net/vpc.tf", b"# vpc")],
    );
    let token = token_for(&double, installation, json!({})).await;
    let redirect = get(&double, &format!("/repos/{REPO}/tarball/{sha}"), &token).await;
    assert_eq!(redirect.status, 302);
    let location = redirect.header("location").unwrap();
    let archive = call(&double, "GET", &location, None, None, &[]).await;
    assert_eq!(archive.status, 200);
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(archive.body.as_slice()));
    let mut files = BTreeMap::new();
    for entry in tar.entries().unwrap() {
        let mut entry = entry.unwrap();
        let path = entry.path().unwrap().to_string_lossy().into_owned();
        let mut contents = String::new();
        entry.read_to_string(&mut contents).unwrap();
        files.insert(path, contents);
    }
    assert_eq!(files["acme-infra-0123456/main.tf"], "# root");
    assert_eq!(files["acme-infra-0123456/modules/net/vpc.tf"], "# vpc");
    assert!(
        files.keys().all(|p| p.starts_with("acme-infra-0123456/")),
        "{files:?}"
    );
    // The link expires after five minutes.
    double.advance_clock(Duration::from_secs(301));
    assert_eq!(
        call(&double, "GET", &location, None, None, &[])
            .await
            .status,
        404
    );
}

#[tokio::test]
async fn required_checks_come_from_protection_and_rulesets() {
    let double = GithubDouble::start().await;
    let installation = double.install(REPO);
    double.set_required_checks(REPO, "main", &["ci/test"]);
    double.add_ruleset_checks(REPO, "main", &["sortie/plan"]);
    let token = token_for(&double, installation, json!({})).await;
    let protection = get(
        &double,
        &format!("/repos/{REPO}/branches/main/protection/required_status_checks"),
        &token,
    )
    .await;
    assert_eq!(protection.json()["contexts"], json!(["ci/test"]));
    let unprotected = get(
        &double,
        &format!("/repos/{REPO}/branches/dev/protection/required_status_checks"),
        &token,
    )
    .await;
    assert_eq!(unprotected.status, 404);
    let rules = get(
        &double,
        &format!("/repos/{REPO}/rules/branches/main"),
        &token,
    )
    .await;
    assert_eq!(
        rules.json()[0]["parameters"]["required_status_checks"][0]["context"],
        "sortie/plan"
    );
}

#[tokio::test]
async fn webhooks_are_signed_over_the_exact_body() {
    // The HMAC-SHA256 example of GitHub's validation page: secret "It's a Secret to
    // Everybody", payload "Hello, World!".
    assert_eq!(
        webhook::signature("It's a Secret to Everybody", b"Hello, World!"),
        "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let keep = seen.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(
            move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                let keep = keep.clone();
                async move {
                    let get = |n: &str| {
                        headers
                            .get(n)
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or("")
                            .to_string()
                    };
                    keep.lock().unwrap().push((
                        get("x-github-event"),
                        get("x-github-delivery"),
                        get("x-hub-signature-256"),
                        get("user-agent"),
                        body.to_vec(),
                    ));
                    "ok"
                }
            },
        ),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    let double = GithubDouble::start().await;
    double.install(REPO);
    double.add_pull(REPO, PullSpec::new("alice", "h1"));
    let payload = double.payloads().pull_request(REPO, 1, "opened");
    assert_eq!(payload["pull_request"]["head"]["sha"], "h1");
    assert!(payload["installation"]["id"].as_u64().is_some());
    let (status, body) = send_webhook(&url, "s3cret", "pull_request", &payload).await;
    assert_eq!((status, body.as_str()), (200, "ok"));
    send_webhook(&url, "s3cret", "ping", &double.payloads().ping()).await;
    let seen = seen.lock().unwrap();
    let (event, delivery, signature, agent, body) = &seen[0];
    assert_eq!(event, "pull_request");
    assert_eq!(signature, &webhook::signature("s3cret", body));
    assert!(agent.starts_with("GitHub-Hookshot/"));
    assert_ne!(delivery, &seen[1].1, "each delivery has its own id");
}

#[test]
fn recorded_histories_keep_the_newest_within_their_bound() {
    let mut list = Vec::new();
    for i in 0..10 {
        push_bounded(&mut list, i, 3);
    }
    assert_eq!(list, vec![7, 8, 9]);
}
