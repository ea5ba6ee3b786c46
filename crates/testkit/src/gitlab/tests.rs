//! The double's own rules, each proven with raw HTTP (no sortie-gitlab).

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};

use super::*;

mod access;
mod hooks;
mod writes;

pub(super) const PROJECT: &str = "acme/platform/infra";
pub(super) const ENCODED: &str = "acme%2Fplatform%2Finfra";

pub(super) struct Answer {
    pub(super) status: u16,
    pub(super) headers: hyper::HeaderMap,
    pub(super) body: Vec<u8>,
}

impl Answer {
    pub(super) fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
    pub(super) fn header(&self, name: &str) -> String {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    }
}

/// `method` on `path` (under the instance URL), with `headers` and a JSON `body`.
pub(super) async fn call(
    double: &GitlabDouble,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> Answer {
    let mut request = hyper::Request::builder()
        .method(method)
        .uri(format!("{}{path}", double.url()));
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    if body.is_some() {
        request = request.header("content-type", "application/json");
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

pub(super) async fn get(double: &GitlabDouble, path: &str, token: &str) -> Answer {
    call(double, "GET", path, &[("private-token", token)], None).await
}

pub(super) async fn send(
    double: &GitlabDouble,
    method: &str,
    path: &str,
    token: &str,
    body: Value,
) -> Answer {
    call(
        double,
        method,
        path,
        &[("private-token", token)],
        Some(body),
    )
    .await
}

pub(super) fn api(rest: &str) -> String {
    format!("/api/v4/projects/{ENCODED}{rest}")
}

/// A double with [`PROJECT`], merge request 1 by alice at `h1`, and a Maintainer's `api`
/// token.
pub(super) async fn one_mr(spec: MergeRequestSpec) -> (GitlabDouble, String) {
    let double = GitlabDouble::start().await;
    double.add_project(PROJECT);
    double.add_merge_request(PROJECT, spec);
    let token = double.issue_token(PROJECT, "sortie", AccessLevel::Maintainer, &["api"]);
    (double, token)
}

#[tokio::test]
async fn credentials_are_checked_as_gitlab_documents() {
    let (double, token) = one_mr(MergeRequestSpec::new("alice", "h1")).await;
    let ok = call(
        &double,
        "GET",
        &api(""),
        &[("authorization", &format!("Bearer {token}"))],
        None,
    )
    .await;
    assert_eq!(ok.status, 200, "Authorization: Bearer is accepted");
    assert_eq!(get(&double, &api(""), &token).await.status, 200);
    let unknown = get(&double, &api(""), "glpat-nope").await;
    assert_eq!(
        (unknown.status, unknown.json()),
        (401, json!({"message": "401 Unauthorized"}))
    );
    // No token: the private project is not found on reads, writes need authentication.
    let anonymous = call(&double, "GET", &api(""), &[], None).await;
    assert_eq!(
        anonymous.json(),
        json!({"message": "404 Project Not Found"})
    );
    let anonymous = call(
        &double,
        "POST",
        &api("/statuses/h1"),
        &[],
        Some(json!({"state": "running"})),
    )
    .await;
    assert_eq!(anonymous.status, 401);
    // A scope too narrow for the endpoint.
    let repo_only = double.personal_token("sortie", &["read_repository"]);
    let refused = get(&double, &api("/merge_requests/1"), &repo_only).await;
    assert_eq!(refused.status, 403);
    assert_eq!(refused.json()["error"], "insufficient_scope");
    assert_eq!(refused.json()["scope"], "api read_api");
    let read_only = double.personal_token("sortie", &["read_api"]);
    assert_eq!(
        get(&double, &api("/merge_requests/1"), &read_only)
            .await
            .status,
        200
    );
    let write = send(
        &double,
        "POST",
        &api("/merge_requests/1/notes"),
        &read_only,
        json!({"body": "x"}),
    )
    .await;
    assert_eq!(
        (write.status, write.json()["scope"].clone()),
        (403, json!("api"))
    );
    // A project the token's user is no member of.
    double.add_project("acme/secret");
    let hidden = get(&double, "/api/v4/projects/acme%2Fsecret", &token).await;
    assert_eq!(
        (hidden.status, hidden.json()),
        (404, json!({"message": "404 Project Not Found"}))
    );
    // Expired and revoked tokens.
    let expiring = double.personal_token("sortie", &["api"]);
    double.expire_token(&expiring);
    let expired = get(&double, &api(""), &expiring).await;
    assert_eq!(
        (expired.status, expired.json()["error"].clone()),
        (401, json!("invalid_token"))
    );
    double.revoke_token(&token);
    let revoked = get(&double, &api(""), &token).await;
    assert_eq!(revoked.status, 401);
    assert_eq!(revoked.json()["error_description"], rules::REVOKED_TOKEN);
    // Too low a role: a Reporter may not post statuses.
    let reporter = double.issue_token(PROJECT, "rita", AccessLevel::Reporter, &["api"]);
    let status = send(
        &double,
        "POST",
        &api("/statuses/h1"),
        &reporter,
        json!({"state": "running"}),
    )
    .await;
    assert_eq!(status.status, 403);
}

#[tokio::test]
async fn projects_are_named_by_id_or_encoded_path() {
    let (double, token) = one_mr(MergeRequestSpec::new("alice", "h1")).await;
    let id = double.project_id(PROJECT);
    let by_id = get(&double, &format!("/api/v4/projects/{id}"), &token).await;
    assert_eq!(by_id.json()["path_with_namespace"], PROJECT);
    let by_path = get(&double, &api(""), &token).await;
    assert_eq!(by_path.json()["id"], id);
    assert_eq!(by_path.json()["default_branch"], "main");
    assert_eq!(
        by_path.json()["web_url"],
        format!("{}/{PROJECT}", double.url())
    );
    let unencoded = get(&double, &format!("/api/v4/projects/{PROJECT}"), &token).await;
    assert_eq!(
        (unencoded.status, unencoded.json()),
        (404, json!({"error": "404 Not Found"}))
    );
    let unencoded = get(
        &double,
        &format!("/api/v4/projects/{PROJECT}/merge_requests/1"),
        &token,
    )
    .await;
    assert_eq!(unencoded.status, 404);
    assert_eq!(
        get(&double, "/api/v4/projects/acme%2Fnope", &token)
            .await
            .json()["message"],
        "404 Project Not Found"
    );
}

#[tokio::test]
async fn merge_request_lists_page_to_the_end() {
    let double = GitlabDouble::start().await;
    double.add_project(PROJECT);
    for i in 0..145 {
        let spec = MergeRequestSpec::new("alice", &format!("h{i}")).source(&format!("b{i}"));
        let spec = if i % 5 == 0 {
            spec.target("release")
        } else {
            spec
        };
        double.add_merge_request(PROJECT, spec);
    }
    double.close(PROJECT, 2);
    let token = double.issue_token(PROJECT, "sortie", AccessLevel::Developer, &["read_api"]);
    let default = get(&double, &api("/merge_requests"), &token).await;
    assert_eq!(
        default.json().as_array().unwrap().len(),
        20,
        "per_page is 20 by default"
    );
    assert_eq!(default.json()[0]["iid"], 145, "newest first");
    assert_eq!(default.header("x-total"), "145");
    assert_eq!(default.header("x-total-pages"), "8");
    let clamped = get(&double, &api("/merge_requests?per_page=500"), &token).await;
    assert_eq!(clamped.json().as_array().unwrap().len(), 100);
    assert_eq!(clamped.header("x-per-page"), "100");
    assert!(
        clamped.header("link").contains("rel=\"next\""),
        "{}",
        clamped.header("link")
    );
    // Walk the pages by the headers until x-next-page is empty.
    let mut seen = Vec::new();
    let mut page = "1".to_string();
    while !page.is_empty() {
        let answer = get(
            &double,
            &api(&format!(
                "/merge_requests?state=opened&per_page=30&page={page}"
            )),
            &token,
        )
        .await;
        assert_eq!(answer.header("x-page"), page);
        seen.extend(
            answer
                .json()
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m["iid"].as_u64().unwrap()),
        );
        page = answer.header("x-next-page");
        if page.is_empty() {
            let link = answer.header("link");
            assert!(
                !link.contains("rel=\"next\"") && link.contains("rel=\"prev\""),
                "{link}"
            );
        }
    }
    assert_eq!(
        seen.len(),
        144,
        "every open merge request, the closed one left out"
    );
    let release = get(
        &double,
        &api("/merge_requests?target_branch=release&per_page=100"),
        &token,
    )
    .await;
    assert_eq!(release.json().as_array().unwrap().len(), 29);
    let past = get(&double, &api("/merge_requests?page=99"), &token).await;
    assert_eq!(past.json(), json!([]));
    assert_eq!(
        get(&double, &api("/merge_requests?state=open"), &token)
            .await
            .status,
        400
    );
}

#[tokio::test]
async fn a_merge_request_reports_refs_and_detailed_status() {
    let (double, token) =
        one_mr(MergeRequestSpec::new("alice", "h1").change(DiffChange::modified("main.tf"))).await;
    let mr = get(&double, &api("/merge_requests/1"), &token).await.json();
    assert_eq!(mr["state"], "opened");
    assert_eq!(mr["sha"], "h1");
    assert_eq!(mr["author"]["username"], "alice");
    assert_eq!(mr["detailed_merge_status"], "mergeable");
    assert_eq!(mr["has_conflicts"], false);
    assert_eq!(mr["diff_refs"]["head_sha"], "h1");
    assert_eq!(mr["source_project_id"], mr["target_project_id"]);
    assert!(mr.get("diverged_commits_count").is_none());
    double.set_branch(PROJECT, "main", "m2");
    double.set_merge_method(PROJECT, "ff");
    let with = get(
        &double,
        &api("/merge_requests/1?include_diverged_commits_count=true"),
        &token,
    )
    .await
    .json();
    assert_eq!(with["diverged_commits_count"], 1);
    assert_eq!(with["detailed_merge_status"], "need_rebase");
    double.set_approvals_required(PROJECT, 1);
    assert_eq!(double.detailed_merge_status(PROJECT, 1), "not_approved");
    double.set_pipeline_must_succeed(PROJECT, true);
    assert_eq!(double.detailed_merge_status(PROJECT, 1), "ci_must_pass");
    double.set_conflicts(PROJECT, 1, true);
    let conflicted = get(&double, &api("/merge_requests/1"), &token).await.json();
    assert_eq!(
        (
            conflicted["detailed_merge_status"].clone(),
            conflicted["has_conflicts"].clone()
        ),
        (json!("conflict"), json!(true))
    );
    double.set_draft(PROJECT, 1, true);
    assert_eq!(double.detailed_merge_status(PROJECT, 1), "draft_status");
    double.merge(PROJECT, 1, "m3");
    let merged = get(&double, &api("/merge_requests/1"), &token).await.json();
    assert_eq!(
        (merged["state"].clone(), merged["merge_commit_sha"].clone()),
        (json!("merged"), json!("m3"))
    );
    let fork = double.add_merge_request(
        PROJECT,
        MergeRequestSpec::new("bob", "f1").from_fork("bob/infra"),
    );
    let forked = get(&double, &api(&format!("/merge_requests/{fork}")), &token)
        .await
        .json();
    assert_ne!(forked["source_project_id"], forked["target_project_id"]);
    assert_eq!(
        get(&double, &api("/merge_requests/99"), &token)
            .await
            .json(),
        json!({"message": "404 Not found"})
    );
}

#[tokio::test]
async fn diffs_page_at_most_100_files() {
    let changes: Vec<DiffChange> = (0..150)
        .map(|i| DiffChange::added(&format!("f{i}.tf")))
        .collect();
    let (double, token) = one_mr(
        MergeRequestSpec::new("alice", "h1")
            .changes(changes)
            .change(DiffChange::renamed("a.tf", "b.tf")),
    )
    .await;
    let first = get(&double, &api("/merge_requests/1/diffs"), &token).await;
    assert_eq!(first.json().as_array().unwrap().len(), 20);
    assert_eq!(first.json()[0]["new_file"], true);
    let last = get(
        &double,
        &api("/merge_requests/1/diffs?per_page=1000&page=2"),
        &token,
    )
    .await;
    let files = last.json();
    assert_eq!(files.as_array().unwrap().len(), 51);
    assert_eq!(files[50]["old_path"], "a.tf");
    assert_eq!(files[50]["renamed_file"], true);
    assert_eq!(last.header("x-next-page"), "");
}

#[tokio::test]
async fn approvals_reset_when_commits_are_pushed() {
    let (double, token) = one_mr(MergeRequestSpec::new("alice", "h1")).await;
    double.set_approvals_required(PROJECT, 1);
    let dev = double.issue_token(PROJECT, "dana", AccessLevel::Developer, &["api"]);
    let stale = send(
        &double,
        "POST",
        &api("/merge_requests/1/approve"),
        &dev,
        json!({"sha": "h0"}),
    )
    .await;
    assert_eq!(stale.status, 409);
    assert_eq!(
        stale.json()["message"],
        "SHA does not match HEAD of source branch: h1"
    );
    let approved = send(
        &double,
        "POST",
        &api("/merge_requests/1/approve"),
        &dev,
        json!({"sha": "h1"}),
    )
    .await;
    assert_eq!(approved.status, 201);
    assert_eq!(
        approved.json()["approved_by"][0]["user"]["username"],
        "dana"
    );
    let twice = send(
        &double,
        "POST",
        &api("/merge_requests/1/approve"),
        &dev,
        json!({}),
    )
    .await;
    assert_eq!(twice.status, 401);
    let guest = double.issue_token(PROJECT, "gus", AccessLevel::Guest, &["api"]);
    assert_eq!(
        send(
            &double,
            "POST",
            &api("/merge_requests/1/approve"),
            &guest,
            json!({})
        )
        .await
        .status,
        403,
        "a Guest may not approve"
    );
    let state = get(&double, &api("/merge_requests/1/approvals"), &token)
        .await
        .json();
    assert_eq!(
        (state["approved"].clone(), state["approvals_left"].clone()),
        (json!(true), json!(0))
    );
    double.push(PROJECT, 1, "h2", None);
    let reset = get(&double, &api("/merge_requests/1/approvals"), &token)
        .await
        .json();
    assert_eq!(reset["approved_by"], json!([]));
    assert_eq!(
        (reset["approved"].clone(), reset["approvals_left"].clone()),
        (json!(false), json!(1))
    );
    assert_eq!(double.detailed_merge_status(PROJECT, 1), "not_approved");
    // With the setting off, an approval survives a push (and still names its head and time).
    double.set_reset_approvals_on_push(PROJECT, false);
    double.approve(PROJECT, 1, "dana", "h2");
    let given = double.approvals(PROJECT, 1)[0].approved_at;
    double.push(PROJECT, 1, "h3", None);
    assert_eq!(
        double.approvals(PROJECT, 1),
        vec![ApprovalRecord {
            username: "dana".into(),
            sha: "h2".into(),
            approved_at: given,
        }]
    );
}

#[tokio::test]
async fn versions_and_approvals_are_dated_on_the_doubles_clock() {
    let (double, token) = one_mr(MergeRequestSpec::new("alice", "h1")).await;
    double.set_reset_approvals_on_push(PROJECT, false);
    let time = |value: &Value| -> chrono::DateTime<chrono::Utc> {
        value.as_str().unwrap().parse().unwrap()
    };
    // One version as the merge request opens.
    let opened = get(&double, &api("/merge_requests/1/versions"), &token).await;
    assert_eq!(opened.status, 200);
    let opened = opened.json();
    assert_eq!(opened.as_array().unwrap().len(), 1);
    let first = &opened[0];
    assert_eq!(first["head_commit_sha"], "h1");
    assert_eq!(first["state"], "collected");
    assert_eq!(first["real_size"], "0", "real_size is a string");
    let mr = get(&double, &api("/merge_requests/1"), &token).await.json();
    assert_eq!(first["merge_request_id"], mr["id"]);
    assert_eq!(first["base_commit_sha"], mr["diff_refs"]["base_sha"]);
    assert_eq!(first["start_commit_sha"], mr["diff_refs"]["start_sha"]);
    for field in ["id", "created_at", "patch_id_sha"] {
        assert!(!first[field].is_null(), "{field}");
    }

    // An approval an hour later carries its own time, not the time it is listed.
    double.advance_clock(std::time::Duration::from_secs(3600));
    let dev = double.issue_token(PROJECT, "dana", AccessLevel::Developer, &["api"]);
    let approved = send(
        &double,
        "POST",
        &api("/merge_requests/1/approve"),
        &dev,
        json!({"sha": "h1"}),
    )
    .await
    .json();
    let approved_at = time(&approved["approved_by"][0]["approved_at"]);
    assert_eq!(approved_at, double.approvals(PROJECT, 1)[0].approved_at);
    assert!(approved_at >= time(&first["created_at"]) + chrono::Duration::minutes(59));

    // A push an hour after that: a second version, listed first, with the new head and
    // the target's head then; the approval keeps its time.
    double.advance_clock(std::time::Duration::from_secs(3600));
    double.set_branch(PROJECT, "main", "m2");
    double.push(
        PROJECT,
        1,
        "h2",
        Some(vec![
            DiffChange::modified("a.tf"),
            DiffChange::added("b.tf"),
        ]),
    );
    let versions = get(&double, &api("/merge_requests/1/versions"), &token)
        .await
        .json();
    let versions = versions.as_array().unwrap();
    assert_eq!(versions.len(), 2);
    let (newest, oldest) = (&versions[0], &versions[1]);
    assert_eq!(
        (
            newest["head_commit_sha"].clone(),
            oldest["head_commit_sha"].clone()
        ),
        (json!("h2"), json!("h1"))
    );
    assert!(newest["id"].as_u64() > oldest["id"].as_u64());
    assert_eq!(newest["start_commit_sha"], "m2");
    assert_eq!(newest["base_commit_sha"], oldest["base_commit_sha"]);
    assert_eq!(newest["real_size"], "2");
    assert!(time(&newest["created_at"]) > approved_at);
    let listed = get(&double, &api("/merge_requests/1/approvals"), &token)
        .await
        .json();
    assert_eq!(time(&listed["approved_by"][0]["approved_at"]), approved_at);

    // Paged like every list; an unknown merge request is 404.
    let page = get(
        &double,
        &api("/merge_requests/1/versions?per_page=1&page=2"),
        &token,
    )
    .await;
    assert_eq!(page.json()[0]["head_commit_sha"], "h1");
    assert_eq!(page.header("x-total"), "2");
    let missing = get(&double, &api("/merge_requests/9/versions"), &token).await;
    assert_eq!(
        (missing.status, missing.json()),
        (404, json!({"message": "404 Not found"}))
    );
}

#[test]
fn recorded_histories_keep_the_newest_within_their_bound() {
    let mut list = Vec::new();
    for i in 0..10 {
        push_bounded(&mut list, i, 3);
    }
    assert_eq!(list, vec![7, 8, 9]);
}
