//! Input that leaked or broke on real AWS (issue 41): a git URL carrying a token as its
//! user name, and a membership whose index key passes DynamoDB's 2,048-byte partition
//! key limit. Against DynamoDB on moto (which enforces the key limit on writes), each
//! is a 400 naming the field, with the API's `nosniff`/`no-store` headers.

use crate::common;

use common::{seed_org, Api};
use serde_json::json;
use sortie_client::endpoints;

fn first_field(r: &common::Reply) -> (u16, Option<&str>) {
    (
        r.status.as_u16(),
        r.body["error"]["fields"][0]["path"].as_str(),
    )
}

fn api_headers(r: &common::Reply) -> (Option<&str>, Option<&str>) {
    let get = |name: &str| r.headers.get(name).map(|v| v.to_str().unwrap());
    (get("x-content-type-options"), get("cache-control"))
}

#[tokio::test]
async fn a_git_url_with_credentials_is_refused_naming_the_field() {
    let api = Api::new().await;
    seed_org(&api, "acme").await;
    api.create_env("acme", "prod", "production").await;
    let submit =
        |url: &str| json!({"operation": "plan", "source": {"type": "git", "url": url}}).to_string();
    for url in [
        "https://ghp_0123456789abcdefghij@github.com/acme/infra.git",
        "https://user:pass@github.com/acme/infra.git",
        "ssh://git:pass@github.com/acme/infra.git",
    ] {
        let r = api
            .admin(endpoints::submit_job("acme/prod"), Some(&submit(url)))
            .await;
        assert_eq!(
            first_field(&r),
            (400, Some("source.url")),
            "{url}: {}",
            r.body
        );
        assert!(!r.body.to_string().contains("ghp_0123"), "{}", r.body);
        assert_eq!(api_headers(&r), (Some("nosniff"), Some("no-store")));
    }
    for url in [
        "https://github.com/acme/infra.git",
        "ssh://git@github.com/acme/infra.git",
        "git@github.com:acme/infra.git",
    ] {
        let r = api
            .admin(endpoints::submit_job("acme/prod"), Some(&submit(url)))
            .await;
        assert_eq!(r.status, 201, "{url}: {}", r.body);
        assert_eq!(api_headers(&r), (Some("nosniff"), Some("no-store")));
    }
}

#[tokio::test]
async fn a_membership_whose_index_key_passes_2048_bytes_is_a_400_not_a_5xx() {
    let aws = sortie_testkit::require_aws!();
    let api = Api::aws(&aws).await;
    seed_org(&api, "acme").await;
    let grant =
        |grantee: serde_json::Value| json!({"role": "viewer", "grantee": grantee}).to_string();
    let key =
        |issuer: &str, subject: &str| sortie_core::auth::member_index_key(Some(issuer), subject);
    // `#` escapes to three bytes: 1,024 bytes of subject make a key of 2,048 exactly, or 2,050.
    let issuer = "https://idp.example.com/";
    let at_limit = "a".repeat(1024 - 496) + &"#".repeat(496);
    let over = "a".repeat(1024 - 497) + &"#".repeat(497);
    assert_eq!(
        (key(issuer, &at_limit).len(), key(issuer, &over).len()),
        (2048, 2050)
    );
    let cases = [
        (
            json!({"kind": "subject", "subject": "x".repeat(3000)}),
            "grantee.subject",
        ),
        (
            json!({"kind": "subject", "subject": over, "issuer": issuer}),
            "grantee.subject",
        ),
        (
            json!({"kind": "subject", "subject": "alice", "issuer": "i".repeat(2100)}),
            "grantee.issuer",
        ),
    ];
    for (grantee, field) in cases {
        let r = api
            .admin(endpoints::grant_membership("acme"), Some(&grant(grantee)))
            .await;
        assert_eq!(first_field(&r), (400, Some(field)), "{}", r.body);
        assert_eq!(api_headers(&r), (Some("nosniff"), Some("no-store")));
    }
    // Exactly at the limit: DynamoDB (moto) stores it.
    let r = api
        .admin(
            endpoints::grant_membership("acme"),
            Some(&grant(
                json!({"kind": "subject", "subject": at_limit, "issuer": issuer}),
            )),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
}
