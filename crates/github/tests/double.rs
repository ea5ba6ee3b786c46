//! sortie-github against the GitHub double of sortie-testkit, which enforces what GitHub
//! documents (crates/testkit/src/github/rules.rs).

use std::time::Duration;

use base64::Engine;
use chrono::Utc;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use sortie_github::webhook::{self, Event, PullRequestAction, ReviewAction};
use sortie_github::{
    AppCredentials, CheckConclusion, CheckOutput, CheckRunBody, CheckStatus, Conditional, Github,
    GithubError, Permissions,
};
use sortie_testkit::github::{FileChange, GithubDouble, PullSpec, TokenKind};

mod common;

use common::{client, one_pull, repo, REPO};

fn calls_of(github: &Github, call: &str) -> u64 {
    github.calls().get(call).copied().unwrap_or(0)
}

const MINT: &str = "POST /app/installations/{installation_id}/access_tokens";
const GET_PULL: &str = "GET /repos/{owner}/{repo}/pulls/{pull_number}";
const LIST_FILES: &str = "GET /repos/{owner}/{repo}/pulls/{pull_number}/files";

/// A raw GET with a bearer token (what another program holding the token could do).
async fn raw_get(url: &str, token: &str) -> (u16, Option<String>, Vec<u8>) {
    let request = hyper::Request::get(url)
        .header("authorization", format!("Bearer {token}"))
        .header("user-agent", "test")
        .body(Full::new(Bytes::new()))
        .unwrap();
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let response = client.request(request).await.unwrap();
    let status = response.status().as_u16();
    let location = response
        .headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body = response
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes()
        .to_vec();
    (status, location, body)
}

#[tokio::test]
async fn one_token_is_minted_for_many_calls() {
    let (double, github) = one_pull().await;
    for _ in 0..5 {
        assert_eq!(github.pull(&repo(REPO), 1).await.unwrap().head_sha, "h1");
    }
    github.pull_files(&repo(REPO), 1).await.unwrap();
    github.reviews(&repo(REPO), 1).await.unwrap();
    assert_eq!(calls_of(&github, MINT), 1, "{:?}", github.calls());
    assert_eq!(
        calls_of(&github, "GET /repos/{owner}/{repo}/installation"),
        1
    );
    assert_eq!(double.tokens_minted(), 1);
    // Another permission set is another token, scoped to what that call needs.
    github
        .create_comment(&repo(REPO), 1, "hello")
        .await
        .unwrap();
    assert_eq!(double.tokens_minted(), 2);
    // Clones share the cache.
    github.clone().pull(&repo(REPO), 1).await.unwrap();
    assert_eq!(double.tokens_minted(), 2);
}

#[tokio::test]
async fn a_token_for_one_repository_is_refused_on_another() {
    let double = GithubDouble::start().await;
    double.install(REPO);
    double.install("acme/other");
    double.add_pull(REPO, PullSpec::new("alice", "h1"));
    double.add_pull("acme/other", PullSpec::new("bob", "h2"));
    let github = client(&double);
    let token = github
        .repository_token(&repo(REPO), &Permissions::PULLS_READ)
        .await
        .unwrap();
    let (own, _, _) = raw_get(
        &format!("{}/repos/{REPO}/pulls/1", double.url()),
        &token.token,
    )
    .await;
    assert_eq!(own, 200);
    let (other, _, _) = raw_get(
        &format!("{}/repos/acme/other/pulls/1", double.url()),
        &token.token,
    )
    .await;
    assert_eq!(
        other, 404,
        "the double hides a repository the token does not cover"
    );
    // The client itself mints a separate token for the other repository.
    assert_eq!(
        github.pull(&repo("acme/other"), 1).await.unwrap().head_sha,
        "h2"
    );
    // A repository the app is not installed on: the installation lookup's 404, named.
    let err = github.pull(&repo("acme/stranger"), 1).await.unwrap_err();
    assert!(
        matches!(err, GithubError::Refused { status: 404, call, .. } if call == "GET /repos/{owner}/{repo}/installation"),
        "{err}"
    );
}

#[tokio::test]
async fn an_installation_without_a_permission_refuses_the_token() {
    let double = GithubDouble::start().await;
    double.install_with(REPO, &[("pull_requests", "read")]);
    double.add_pull(REPO, PullSpec::new("alice", "h1"));
    let github = client(&double);
    github.pull(&repo(REPO), 1).await.unwrap();
    let err = github
        .create_comment(&repo(REPO), 1, "hi")
        .await
        .unwrap_err();
    match err {
        GithubError::Refused {
            status: 422,
            call,
            message,
        } => {
            assert_eq!(call, MINT);
            assert!(message.contains("not granted"), "{message}");
        }
        other => panic!("{other}"),
    }
}

#[tokio::test]
async fn a_pull_request_reads_whole_with_forks_and_renames() {
    let double = GithubDouble::start().await;
    double.install(REPO);
    let mut files: Vec<FileChange> = (0..249)
        .map(|i| FileChange::modified(&format!("envs/e{i}/main.tf")))
        .collect();
    files.push(FileChange::renamed("old/main.tf", "new/main.tf"));
    double.add_pull(
        REPO,
        PullSpec::new("mallory", "f00d")
            .files(files)
            .from_fork("mallory/infra")
            .mergeable(None)
            .draft(),
    );
    let github = client(&double);
    let pull = github.pull(&repo(REPO), 1).await.unwrap();
    assert!(pull.is_from_fork());
    assert_eq!(pull.head_repo_full_name.as_deref(), Some("mallory/infra"));
    assert_eq!(pull.mergeable, None);
    assert!(pull.draft);
    assert_eq!(pull.user_login, "mallory");
    assert_eq!(pull.base_ref, "main");
    let files = github.pull_files(&repo(REPO), 1).await.unwrap();
    assert_eq!(files.len(), 250);
    let renamed = files.iter().find(|f| f.status == "renamed").unwrap();
    assert_eq!(renamed.previous_filename.as_deref(), Some("old/main.tf"));
    assert_eq!(calls_of(&github, LIST_FILES), 3, "pages of 100");
}

#[tokio::test]
async fn a_huge_pull_request_stops_at_githubs_3000_files() {
    let double = GithubDouble::start().await;
    double.install(REPO);
    let files: Vec<FileChange> = (0..3500)
        .map(|i| FileChange::added(&format!("f{i}.tf")))
        .collect();
    double.add_pull(REPO, PullSpec::new("alice", "h1").files(files));
    let github = client(&double);
    let files = github.pull_files(&repo(REPO), 1).await.unwrap();
    assert_eq!(files.len(), sortie_github::MAX_PULL_FILES);
    assert_eq!(calls_of(&github, LIST_FILES), 30);
}

#[tokio::test]
async fn an_unchanged_list_is_not_modified_and_free() {
    let double = GithubDouble::start().await;
    double.install(REPO);
    double.add_pull(REPO, PullSpec::new("alice", "h1"));
    double.add_pull(REPO, PullSpec::new("bob", "h2").base("dev"));
    let github = client(&double);
    let Conditional::Modified { value, etag } =
        github.open_pulls(&repo(REPO), "main", None).await.unwrap()
    else {
        panic!("the first read is a list")
    };
    assert_eq!(value.len(), 1, "only pull requests into main");
    let etag = etag.expect("lists carry an ETag");
    assert_eq!(
        github
            .open_pulls(&repo(REPO), "main", Some(&etag))
            .await
            .unwrap(),
        Conditional::NotModified
    );
    let last = double.requests().pop().unwrap();
    assert!(last.conditional && last.status == 304);
    double.push(REPO, 1, "h3", None);
    let Conditional::Modified { value, .. } = github
        .open_pulls(&repo(REPO), "main", Some(&etag))
        .await
        .unwrap()
    else {
        panic!("a changed list is read again")
    };
    assert_eq!(value[0].head_sha, "h3");
}

#[tokio::test]
async fn server_errors_are_retried_a_bounded_number_of_times() {
    let (double, github) = one_pull().await;
    github.pull(&repo(REPO), 1).await.unwrap();
    double.fail_next(2, 502);
    assert_eq!(github.pull(&repo(REPO), 1).await.unwrap().head_sha, "h1");
    assert_eq!(calls_of(&github, GET_PULL), 4, "1 + 2 failures + 1");
    double.fail_until_cleared(503);
    let err = github.pull(&repo(REPO), 1).await.unwrap_err();
    assert!(
        matches!(
            err,
            GithubError::ServerError {
                status: 503,
                attempts: 4,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.is_transient());
    double.clear_faults();
    // A refusal is final: one request, GitHub's message quoted.
    let before = calls_of(&github, GET_PULL);
    let err = github.pull(&repo(REPO), 99).await.unwrap_err();
    assert!(
        matches!(&err, GithubError::Refused { status: 404, message, .. } if message == "Not Found"),
        "{err}"
    );
    assert!(!err.is_transient());
    assert_eq!(calls_of(&github, GET_PULL), before + 1);
}

#[tokio::test]
async fn a_connection_that_never_answers_is_bounded_too() {
    // A port nothing listens on: every attempt is refused.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let double = GithubDouble::start().await;
    let github = Github::new(
        &url,
        AppCredentials {
            app_id: double.app_id(),
            private_key_pem: double.app_private_key_pem(),
        },
    )
    .unwrap();
    let err = github.pull(&repo(REPO), 1).await.unwrap_err();
    assert!(
        matches!(err, GithubError::Unreachable { attempts: 4, .. }),
        "{err}"
    );
}

#[tokio::test]
async fn rate_limits_are_waited_out_only_when_short() {
    let (double, github) = one_pull().await;
    github.pull(&repo(REPO), 1).await.unwrap();
    double.secondary_rate_limit(1, 1);
    assert_eq!(github.pull(&repo(REPO), 1).await.unwrap().number, 1);
    double.secondary_rate_limit(1, 120);
    let err = github.pull(&repo(REPO), 1).await.unwrap_err();
    match err {
        GithubError::RateLimited { retry_after, call } => {
            assert_eq!(retry_after, Duration::from_secs(120));
            assert_eq!(call, GET_PULL);
        }
        other => panic!("{other}"),
    }
    double.exhaust_rate_limit(Duration::from_secs(900));
    let err = github.pull(&repo(REPO), 1).await.unwrap_err();
    assert!(
        matches!(err, GithubError::RateLimited { retry_after, .. } if retry_after > Duration::from_secs(800)),
        "{err}"
    );
}

#[tokio::test]
async fn an_expired_token_is_minted_again_once() {
    let (double, github) = one_pull().await;
    github.pull(&repo(REPO), 1).await.unwrap();
    double.expire_tokens();
    github.pull(&repo(REPO), 1).await.unwrap();
    assert_eq!(double.tokens_minted(), 2);
}

#[tokio::test]
async fn a_comment_over_githubs_limit_is_refused_by_the_double() {
    let (double, github) = one_pull().await;
    let err = github
        .create_comment(&repo(REPO), 1, &"x".repeat(65_537))
        .await
        .unwrap_err();
    match err {
        GithubError::Refused {
            status: 422,
            message,
            call,
        } => {
            assert!(message.contains("too long"), "{message}");
            assert_eq!(
                call,
                "POST /repos/{owner}/{repo}/issues/{issue_number}/comments"
            );
        }
        other => panic!("{other}"),
    }
    assert!(double.comments(REPO, 1).is_empty());
    github
        .create_comment(&repo(REPO), 1, &"x".repeat(65_536))
        .await
        .unwrap();
}

#[tokio::test]
async fn the_sticky_comment_is_found_and_updated() {
    let double = GithubDouble::start().await;
    double.install(REPO);
    double.add_pull(REPO, PullSpec::new("alice", "h1"));
    let marker = "<!-- sortie:plan -->";
    let github = client(&double);
    assert_eq!(
        github.find_comment(&repo(REPO), 1, marker).await.unwrap(),
        None
    );
    // A person quoting the marker is not Sortie's comment.
    double.add_user_comment(REPO, 1, "alice", &format!("> {marker} why?"));
    for i in 0..120 {
        double.add_user_comment(REPO, 1, "bob", &format!("noise {i}"));
    }
    let id = github
        .create_comment(&repo(REPO), 1, &format!("{marker}\nplan: 1 to add"))
        .await
        .unwrap();
    assert_eq!(
        github.find_comment(&repo(REPO), 1, marker).await.unwrap(),
        Some(id)
    );
    github
        .update_comment(&repo(REPO), id, &format!("{marker}\nplan: 2 to add"))
        .await
        .unwrap();
    let ours: Vec<_> = double
        .comments(REPO, 1)
        .into_iter()
        .filter(|c| c.id == id)
        .collect();
    assert_eq!(ours[0].body, format!("{marker}\nplan: 2 to add"));
    assert_eq!(ours[0].history, vec![format!("{marker}\nplan: 1 to add")]);
    assert_eq!(ours[0].author, double.app_bot_login());
    let err = github.find_comment(&repo(REPO), 1, " ").await.unwrap_err();
    assert!(err.to_string().contains("marker"), "{err}");
}

#[tokio::test]
async fn check_runs_are_created_and_updated_with_their_history() {
    let (double, github) = one_pull().await;
    let mut body = CheckRunBody {
        name: "sortie/plan: prod".into(),
        head_sha: "h1".into(),
        status: CheckStatus::InProgress,
        conclusion: None,
        details_url: Some("https://sortie.example/jobs/j1".into()),
        external_id: Some("j1".into()),
        output: None,
    };
    let id = github.create_check_run(&repo(REPO), &body).await.unwrap();
    body.status = CheckStatus::Completed;
    body.conclusion = Some(CheckConclusion::Success);
    body.output = Some(CheckOutput {
        title: "1 to add".into(),
        summary: "plan".into(),
        text: None,
    });
    github
        .update_check_run(&repo(REPO), id, &body)
        .await
        .unwrap();
    let runs = double.check_runs(REPO);
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].history.len(), 2);
    assert_eq!(runs[0].conclusion.as_deref(), Some("success"));
    assert_eq!(runs[0].external_id.as_deref(), Some("j1"));
    assert!(
        runs[0].history[1].get("head_sha").is_none(),
        "an update sends no head_sha"
    );
    // The summary limit is GitHub's, enforced by the double.
    body.output = Some(CheckOutput {
        title: "t".into(),
        summary: "s".repeat(65_536),
        text: None,
    });
    let err = github
        .update_check_run(&repo(REPO), id, &body)
        .await
        .unwrap_err();
    assert!(
        matches!(err, GithubError::Refused { status: 422, .. }),
        "{err}"
    );
    // A commit the repository does not have.
    body.head_sha = "nope".into();
    body.output = None;
    assert!(github.create_check_run(&repo(REPO), &body).await.is_err());
    // The checks of the head, from check runs and statuses.
    double.set_status(REPO, "h1", "ci/test", "pending");
    double.set_status(REPO, "h1", "ci/lint", "failure");
    let mut checks = github.head_checks(&repo(REPO), "h1").await.unwrap();
    checks.sort();
    assert_eq!(
        checks,
        vec![
            ("ci/lint".to_string(), Some(false)),
            ("ci/test".to_string(), None),
            ("sortie/plan: prod".to_string(), Some(true)),
        ]
    );
}

#[tokio::test]
async fn required_checks_join_protection_and_rulesets() {
    let double = GithubDouble::start().await;
    double.install(REPO);
    double.set_required_checks(REPO, "main", &["ci/test", "sortie/plan"]);
    double.add_ruleset_checks(REPO, "main", &["sortie/plan", "security"]);
    double.add_ruleset_checks(REPO, "release/v1", &["release-gate"]);
    let github = client(&double);
    assert_eq!(
        github.required_checks(&repo(REPO), "main").await.unwrap(),
        vec!["ci/test", "security", "sortie/plan"]
    );
    assert_eq!(
        github
            .required_checks(&repo(REPO), "release/v1")
            .await
            .unwrap(),
        vec!["release-gate"],
        "an unprotected branch (404) with a ruleset; the slash is encoded"
    );
    assert!(github
        .required_checks(&repo(REPO), "dev")
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn reviews_compare_and_tarballs() {
    let double = GithubDouble::start().await;
    double.install(REPO);
    double.set_branch(REPO, "main", "base1");
    double.add_commit(REPO, "h1", &[("main.tf", b"# head")]);
    double.add_pull(REPO, PullSpec::new("alice", "h1"));
    double.add_review(REPO, 1, "bob", "APPROVED", "h1");
    let github = client(&double);
    let reviews = github.reviews(&repo(REPO), 1).await.unwrap();
    assert_eq!(reviews.len(), 1);
    assert_eq!(reviews[0].user_login.as_deref(), Some("bob"));
    assert_eq!(reviews[0].state, "APPROVED");
    assert_eq!(reviews[0].commit_id.as_deref(), Some("h1"));
    let comparison = github.compare(&repo(REPO), "main", "h1").await.unwrap();
    assert_eq!(
        (
            comparison.status.as_str(),
            comparison.ahead_by,
            comparison.behind_by
        ),
        ("ahead", 1, 0)
    );
    // The tarball URL is the API's; a contents token follows it to the archive.
    let url = github.tarball_url(&repo(REPO), "h1");
    assert_eq!(url, format!("{}/repos/{REPO}/tarball/h1", double.url()));
    let token = github
        .repository_token(&repo(REPO), &Permissions::CONTENTS_READ)
        .await
        .unwrap();
    let (status, location, _) = raw_get(&url, &token.token).await;
    assert_eq!(status, 302);
    let (status, _, archive) = raw_get(&location.unwrap(), "unused").await;
    assert_eq!(status, 200);
    assert!(archive.starts_with(&[0x1f, 0x8b]), "a gzip stream");
}

#[tokio::test]
async fn the_app_jwt_follows_githubs_rules_and_either_key_form_works() {
    let double = GithubDouble::start().await;
    let github = client(&double);
    let now = Utc::now();
    let jwt = github.app_jwt(now).unwrap();
    let claims = jwt.split('.').nth(1).unwrap();
    let claims: serde_json::Value = serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(claims)
            .unwrap(),
    )
    .unwrap();
    let iat = claims["iat"].as_i64().unwrap();
    assert_eq!(iat, now.timestamp() - 60);
    assert_eq!(claims["exp"].as_i64().unwrap() - iat, 600);
    assert_eq!(claims["iss"], double.app_id().to_string());
    // The PKCS#8 form of the same key mints as well.
    double.install(REPO);
    double.add_pull(REPO, PullSpec::new("alice", "h1"));
    let pkcs8 = Github::new(
        double.url(),
        AppCredentials {
            app_id: double.app_id(),
            private_key_pem: double.app_private_key_pkcs8_pem(),
        },
    )
    .unwrap();
    pkcs8.pull(&repo(REPO), 1).await.unwrap();
    assert!(double
        .requests()
        .iter()
        .any(|r| r.token == TokenKind::AppJwt));
    // A key that is not one fails at construction, without quoting it.
    let err = Github::new(
        double.url(),
        AppCredentials {
            app_id: 1,
            private_key_pem: "-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----"
                .into(),
        },
    )
    .unwrap_err();
    assert!(matches!(err, GithubError::InvalidKey(_)), "{err}");
    // Another app's id: the double refuses the JWT (401), once, for good.
    let impostor = Github::new(
        double.url(),
        AppCredentials {
            app_id: double.app_id() + 1,
            private_key_pem: double.app_private_key_pem(),
        },
    )
    .unwrap();
    let err = impostor.pull(&repo(REPO), 1).await.unwrap_err();
    assert!(
        matches!(&err, GithubError::Refused { status: 401, message, .. } if message.contains("iss")),
        "{err}"
    );
    assert_eq!(impostor.calls().values().sum::<u64>(), 1);
}

#[tokio::test]
async fn the_doubles_deliveries_parse_as_the_events_they_are() {
    let double = GithubDouble::start().await;
    double.install(REPO);
    double.add_pull(REPO, PullSpec::new("alice", "h1"));
    let review = double.add_review(REPO, 1, "bob", "APPROVED", "h1");
    double.close_pull(REPO, 1, Some("m1"));
    let payloads = double.payloads();
    let parse = |event: &str, value: serde_json::Value| {
        webhook::parse(event, value.to_string().as_bytes()).unwrap()
    };
    let Event::PullRequest(closed) =
        parse("pull_request", payloads.pull_request(REPO, 1, "closed"))
    else {
        panic!("a pull_request")
    };
    assert_eq!(closed.action, PullRequestAction::Closed);
    assert_eq!(closed.pull_request.merged, Some(true));
    assert_eq!(closed.pull_request.merge_commit_sha.as_deref(), Some("m1"));
    let Event::IssueComment(comment) = parse(
        "issue_comment",
        payloads.issue_comment(REPO, 1, 77, "carol", "/sortie apply"),
    ) else {
        panic!("an issue_comment")
    };
    assert!(comment.is_on_pull_request());
    assert_eq!(comment.comment.user.login, "carol");
    let Event::PullRequestReview(submitted) = parse(
        "pull_request_review",
        payloads.pull_request_review(REPO, 1, review, "submitted"),
    ) else {
        panic!("a pull_request_review")
    };
    assert_eq!(submitted.action, ReviewAction::Submitted);
    assert_eq!(submitted.review.state, "approved");
    let Event::Push(push) = parse("push", payloads.push(REPO, "refs/heads/main", "a1", "b2"))
    else {
        panic!("a push")
    };
    assert_eq!((push.branch(), push.after.as_str()), (Some("main"), "b2"));
    assert!(matches!(parse("ping", payloads.ping()), Event::Ping(_)));
    let Event::Installation(installed) =
        parse("installation", payloads.installation(REPO, "created"))
    else {
        panic!("an installation")
    };
    assert_eq!(installed.installation.account.login, "acme");
}
