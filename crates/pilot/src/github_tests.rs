//! Tests of the `github` source's download against a fake GitHub on loopback: redirects
//! (and where the token goes), limits, errors, and the token never in an error.

use std::time::Duration;

use chrono::{DateTime, Utc};
use proptest::prelude::*;

use super::*;
use crate::github_fake::{access, github_tarball, FakeGithub, Reply};

/// Quick retries for tests.
const QUICK: RetryPolicy = RetryPolicy {
    attempts: 3,
    first_delay: Duration::from_millis(10),
    timeout: Duration::from_secs(20),
};

fn client(url: &str) -> TarballClient {
    TarballClient::with_limits(url, QUICK, MAX_ARCHIVE_BYTES).unwrap()
}

const TARBALL: &str = "/repos/acme/infra/tarball/0123456789abcdef0123456789abcdef01234567";

#[tokio::test]
async fn a_redirect_to_another_port_is_followed_without_the_token() {
    let api = FakeGithub::start().await;
    let codeload = FakeGithub::start().await;
    let tarball = github_tarball(&[("acme-infra-0123456/main.tf", "# hi\n")]);
    codeload.at(
        "/acme/infra/legacy.tar.gz/abc",
        Reply::Body(tarball.clone()),
    );
    api.at(
        TARBALL,
        Reply::Redirect(codeload.url("/acme/infra/legacy.tar.gz/abc?token=codeload-own")),
    );
    let token = "ghs_installation_token_1";
    let bytes = client(&api.base)
        .download(&access(&api.url(TARBALL), token))
        .await
        .unwrap();
    assert_eq!(bytes, tarball);

    let first = &api.seen()[0];
    assert_eq!(
        first.authorization.as_deref(),
        Some("Bearer ghs_installation_token_1")
    );
    assert_eq!(first.user_agent.as_deref(), Some(USER_AGENT));
    assert_eq!(first.accept.as_deref(), Some(ACCEPT_GITHUB));
    let seen = codeload.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(
        seen[0].authorization, None,
        "the token went to another port"
    );
    assert_eq!(seen[0].user_agent.as_deref(), Some(USER_AGENT));
}

#[tokio::test]
async fn a_same_origin_redirect_keeps_the_token() {
    let api = FakeGithub::start().await;
    let tarball = github_tarball(&[("acme-infra-0123456/main.tf", "# hi\n")]);
    api.at(TARBALL, Reply::Redirect("/download/abc".into()))
        .at("/download/abc", Reply::Body(tarball.clone()));
    let bytes = client(&api.base)
        .download(&access(&api.url(TARBALL), "ghs_same_origin"))
        .await
        .unwrap();
    assert_eq!(bytes, tarball);
    let seen = api.seen();
    assert_eq!(seen.len(), 2);
    assert!(seen
        .iter()
        .all(|s| s.authorization.as_deref() == Some("Bearer ghs_same_origin")));
}

#[tokio::test]
async fn three_redirects_are_followed_and_a_fourth_fails() {
    let api = FakeGithub::start().await;
    let tarball = github_tarball(&[("acme-infra-0123456/main.tf", "# hi\n")]);
    for i in 0..MAX_REDIRECTS {
        api.at(&format!("/ok{i}"), Reply::Redirect(format!("/ok{}", i + 1)));
    }
    api.at(&format!("/ok{MAX_REDIRECTS}"), Reply::Body(tarball.clone()));
    let bytes = client(&api.base)
        .download(&access(&api.url("/ok0"), "ghs_t"))
        .await
        .unwrap();
    assert_eq!(bytes, tarball);

    for i in 0..=MAX_REDIRECTS {
        api.at(
            &format!("/loop{i}"),
            Reply::Redirect(format!("/loop{}", i + 1)),
        );
    }
    api.at(
        &format!("/loop{}", MAX_REDIRECTS + 1),
        Reply::Body(tarball.clone()),
    );
    let before = api.seen().len();
    let err = client(&api.base)
        .download(&access(&api.url("/loop0"), "ghs_t"))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("redirected more than 3 times"), "{err}");
    // Never retried, and the fifth URL never asked for.
    let asked: Vec<String> = api.seen()[before..]
        .iter()
        .map(|s| s.path.clone())
        .collect();
    assert_eq!(asked, ["/loop0", "/loop1", "/loop2", "/loop3"]);
}

#[tokio::test]
async fn a_404_quotes_githubs_message_and_is_not_retried() {
    let api = FakeGithub::start().await;
    api.at(
        TARBALL,
        Reply::Status(
            404,
            r#"{"message":"Not Found","documentation_url":"https://docs.github.com/rest/repos/contents#download-a-repository-archive-tar","status":"404"}"#.into(),
        ),
    );
    let err = client(&api.base)
        .download(&access(&api.url(TARBALL), "ghs_t"))
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, PilotError::Source(_)), "{err:?}");
    assert!(text.contains("404 Not Found: Not Found"), "{text}");
    assert!(text.contains(TARBALL), "{text}");
    assert!(text.contains("cannot read it"), "{text}");
    assert_eq!(api.seen().len(), 1, "a 404 is final");
}

#[tokio::test]
async fn a_server_error_is_retried_a_bounded_number_of_times() {
    let api = FakeGithub::start().await;
    let tarball = github_tarball(&[("acme-infra-0123456/main.tf", "# hi\n")]);
    api.at(
        "/flaky",
        Reply::FailFirst(2, Box::new(Reply::Body(tarball.clone()))),
    );
    let bytes = client(&api.base)
        .download(&access(&api.url("/flaky"), "ghs_t"))
        .await
        .unwrap();
    assert_eq!(bytes, tarball);

    api.at(
        "/down",
        Reply::FailFirst(u32::MAX, Box::new(Reply::Body(tarball))),
    );
    let before = api.seen().len();
    let err = client(&api.base)
        .download(&access(&api.url("/down"), "ghs_t"))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("503") && err.contains("gave up after 3 attempts"),
        "{err}"
    );
    assert_eq!(api.seen().len() - before, QUICK.attempts as usize);
}

#[tokio::test]
async fn a_rate_limit_is_final() {
    let api = FakeGithub::start().await;
    api.at(
        "/limited",
        Reply::Status(429, r#"{"message":"API rate limit exceeded"}"#.into()),
    );
    let err = client(&api.base)
        .download(&access(&api.url("/limited"), "ghs_t"))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("API rate limit exceeded"), "{err}");
    assert_eq!(api.seen().len(), 1, "never asked again at once");
}

#[tokio::test]
async fn an_echoed_token_never_reaches_the_error() {
    let api = FakeGithub::start().await;
    api.at(TARBALL, Reply::EchoAuthorization(401))
        .at("/server-echo", Reply::EchoAuthorization(500));
    let token = "ghs_echoed_secret_0123456789";
    for path in [TARBALL, "/server-echo"] {
        let err = client(&api.base)
            .download(&access(&api.url(path), token))
            .await
            .unwrap_err();
        for text in [err.to_string(), format!("{err:?}"), err.reason()] {
            assert!(!text.contains(token), "{path}: {text}");
            assert!(text.contains(crate::scrub::MARKER), "{path}: {text}");
        }
    }
}

#[tokio::test]
async fn a_tarball_over_the_limit_is_refused_with_or_without_a_length() {
    let api = FakeGithub::start().await;
    let big = vec![7u8; 5_000];
    api.at("/sized", Reply::Body(big.clone()))
        .at("/chunked", Reply::Streamed(big.clone()));
    let small = TarballClient::with_limits(&api.base, QUICK, 4_096).unwrap();
    for path in ["/sized", "/chunked"] {
        let err = small
            .download(&access(&api.url(path), "ghs_t"))
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("over the 4096-byte limit"), "{path}: {err}");
    }
    let roomy = TarballClient::with_limits(&api.base, QUICK, 5_000).unwrap();
    for path in ["/sized", "/chunked"] {
        let bytes = roomy
            .download(&access(&api.url(path), "ghs_t"))
            .await
            .unwrap();
        assert_eq!(bytes.len(), 5_000, "{path}: exactly the limit is allowed");
    }
}

#[test]
fn https_never_redirects_to_http_and_the_token_follows_only_its_origin() {
    let start = Url::parse("https://api.github.com/repos/o/r/tarball/x").unwrap();
    let err = next_hop(&start, &start, "http://api.github.com/x")
        .err()
        .unwrap();
    assert!(
        matches!(err, Failure::Fatal(ref m) if m.contains("only https")),
        "{err:?}"
    );
    let err = next_hop(&start, &start, "file:///etc/passwd")
        .err()
        .unwrap();
    assert!(matches!(err, Failure::Fatal(_)), "{err:?}");
    let codeload = next_hop(
        &start,
        &start,
        "https://codeload.github.com/o/r/legacy.tar.gz/x?token=t",
    )
    .unwrap();
    assert!(!codeload.authorized);
    let same = next_hop(&start, &start, "/repos/o/r/tarball/y").unwrap();
    assert!(same.authorized);
    assert_eq!(
        same.url.as_str(),
        "https://api.github.com/repos/o/r/tarball/y"
    );
    // From another host back to the origin: the token again.
    let back = next_hop(&start, &codeload.url, "https://api.github.com/z").unwrap();
    assert!(back.authorized);
    let explicit_port = next_hop(&start, &start, "https://API.github.com:443/z").unwrap();
    assert!(explicit_port.authorized);
    let other_port = next_hop(&start, &start, "https://api.github.com:8443/z").unwrap();
    assert!(!other_port.authorized);
}

proptest! {
    /// The token goes to a URL exactly when its scheme, host and port are the start's.
    #[test]
    fn the_token_follows_exactly_the_origin(
        scheme in prop::sample::select(vec!["http", "https"]),
        host in prop::sample::select(vec!["api.github.com", "codeload.github.com", "127.0.0.1"]),
        port in prop::option::of(prop::sample::select(vec![80u16, 443, 8080])),
        path in "/[a-z]{0,8}",
    ) {
        let start = Url::parse("https://api.github.com/repos/o/r/tarball/x").unwrap();
        let location = match port {
            Some(port) => format!("{scheme}://{host}:{port}{path}"),
            None => format!("{scheme}://{host}{path}"),
        };
        match next_hop(&start, &start, &location) {
            Ok(hop) => {
                let effective = port.unwrap_or(if scheme == "https" { 443 } else { 80 });
                let expected = scheme == "https" && host == "api.github.com" && effective == 443;
                prop_assert_eq!(hop.authorized, expected, "{}", location);
            }
            Err(_) => prop_assert_eq!(scheme, "http", "{}", location),
        }
    }
}

#[test]
fn access_must_be_there_and_unexpired() {
    let now: DateTime<Utc> = DateTime::parse_from_rfc3339("2030-01-01T12:00:00Z")
        .unwrap()
        .with_timezone(&Utc);
    let err = usable_access(None, now).unwrap_err().to_string();
    assert!(err.contains("no source_access"), "{err}");
    let mut a = access("https://api.github.com/x", "ghs_t");
    a.expires_at = now;
    let err = usable_access(Some(&a), now).unwrap_err().to_string();
    assert!(
        err.contains("expired at 2030-01-01T12:00:00+00:00"),
        "{err}"
    );
    a.expires_at = now + chrono::Duration::seconds(1);
    assert!(usable_access(Some(&a), now).is_ok());
    a.token = " ".into();
    assert!(usable_access(Some(&a), now).is_err());
}

#[tokio::test]
async fn a_token_of_the_job_alone_is_revoked_at_its_origin_and_a_revoked_one_is_done() {
    let gitlab = FakeGithub::start().await;
    gitlab.at(
        "/api/v4/personal_access_tokens/self",
        Reply::Status(204, String::new()),
    );
    let mut with = access(
        &gitlab.url("/api/v4/projects/1/repository/archive.tar.gz"),
        "glpat-job",
    );
    with.revoke_url = Some(gitlab.url("/api/v4/personal_access_tokens/self"));
    client(&gitlab.base).revoke(&with).await.unwrap();
    let seen = gitlab.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].method, "DELETE");
    assert_eq!(seen[0].authorization.as_deref(), Some("Bearer glpat-job"));

    // Already revoked (or expired): GitLab answers 401, and that is done too.
    gitlab.at(
        "/api/v4/personal_access_tokens/self",
        Reply::Status(401, r#"{"message":"401 Unauthorized"}"#.into()),
    );
    client(&gitlab.base).revoke(&with).await.unwrap();

    // No revoke URL (GitHub's shared token): no call.
    let before = gitlab.seen().len();
    client(&gitlab.base)
        .revoke(&access(&with.url, "ghs_shared"))
        .await
        .unwrap();
    assert_eq!(gitlab.seen().len(), before);
}

#[tokio::test]
async fn the_token_goes_to_no_other_origin_and_a_refusal_never_quotes_it() {
    let gitlab = FakeGithub::start().await;
    let elsewhere = FakeGithub::start().await;
    let token = "glpat-secret-of-the-job";
    let mut with = access(
        &gitlab.url("/api/v4/projects/1/repository/archive.tar.gz"),
        token,
    );
    with.revoke_url = Some(elsewhere.url("/api/v4/personal_access_tokens/self"));
    let err = client(&gitlab.base)
        .revoke(&with)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("not the origin"), "{err}");
    assert!(
        elsewhere.seen().is_empty(),
        "the token was sent to another port"
    );

    // A refusal that echoes the token: quoted, scrubbed.
    with.revoke_url = Some(gitlab.url("/api/v4/personal_access_tokens/self"));
    gitlab.at(
        "/api/v4/personal_access_tokens/self",
        Reply::EchoAuthorization(403),
    );
    let err = client(&gitlab.base)
        .revoke(&with)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("403"), "{err}");
    assert!(!err.contains(token), "{err}");

    // A 5xx is tried again within the policy.
    gitlab.at(
        "/api/v4/personal_access_tokens/self",
        Reply::FailFirst(2, Box::new(Reply::Status(204, String::new()))),
    );
    let before = gitlab.seen().len();
    client(&gitlab.base).revoke(&with).await.unwrap();
    assert_eq!(gitlab.seen().len() - before, 3);
}
