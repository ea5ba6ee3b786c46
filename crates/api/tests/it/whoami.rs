//! `GET /v1/whoami`'s `organisations`: the caller's organisations from the membership
//! index, granted and revoked through the API, in the fast tier and on moto.

use crate::common::{seed_org, Api};
use serde_json::{json, Value};
use sortie_client::endpoints;

async fn grant(api: &Api, group: &str, grantee: Value) -> String {
    let r = api
        .admin(
            endpoints::grant_membership(group),
            Some(&json!({"role": "viewer", "grantee": grantee}).to_string()),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    r.body["id"].as_str().unwrap().to_string()
}

async fn organisations(api: &Api, who: &str) -> Value {
    let r = api.send(Some(who), endpoints::whoami(), None, &[]).await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.body["organisations"].clone()
}

/// Grants alice roles in two organisations: whoami lists both (once each, sorted); a
/// revoke takes one away at once; claim-pattern grants and other subjects' grants never
/// show; a caller with nothing gets an empty list.
async fn organisations_follow_grants_and_revokes(api: Api) {
    seed_org(&api, "acme").await;
    seed_org(&api, "globex").await;
    let alice = json!({"kind": "subject", "subject": "alice"});
    let acme = grant(&api, "acme/payments", alice.clone()).await;
    grant(&api, "globex", alice.clone()).await;
    grant(&api, "globex", alice).await;
    grant(
        &api,
        "initech",
        json!({"kind": "claim_pattern", "claim": "sub", "pattern": "ali*"}),
    )
    .await;
    grant(
        &api,
        "umbrella",
        json!({"kind": "subject", "subject": "bob"}),
    )
    .await;
    assert_eq!(
        organisations(&api, "alice").await,
        json!(["acme", "globex"])
    );
    assert_eq!(organisations(&api, "carol").await, json!([]));

    let r = api
        .admin(endpoints::revoke_membership("acme/payments", &acme), None)
        .await;
    assert_eq!(r.status, 204, "{}", r.body);
    assert_eq!(organisations(&api, "alice").await, json!(["globex"]));
    // `?org=` still reads that organisation's memberships, and the list is unchanged.
    let r = api
        .send(
            Some("alice"),
            endpoints::whoami().query([("org", Some("globex"))]),
            None,
            &[],
        )
        .await;
    assert_eq!(r.body["memberships"].as_array().map(Vec::len), Some(2));
    assert_eq!(r.body["organisations"], json!(["globex"]));
}

#[tokio::test]
async fn whoami_lists_the_callers_organisations_and_forgets_a_revoked_one() {
    organisations_follow_grants_and_revokes(Api::new().await).await;
}

#[tokio::test]
async fn whoami_lists_the_callers_organisations_on_dynamodb() {
    let aws = sortie_testkit::require_aws!();
    organisations_follow_grants_and_revokes(Api::aws(&aws).await).await;
}
