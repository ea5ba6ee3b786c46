//! Environment locks and group freezes through the HTTP API (fast tier): a locked
//! environment refuses a job with 409 naming who, when and why; the permissions (`deploy`
//! to lock an environment, `manage` to freeze or unfreeze a group); a freeze holds for
//! every environment below its group and none beside it. Every answer is checked against
//! the OpenAPI document (`common::conforms`).

use crate::common;

use common::{seed_org, Api, Reply};
use serde_json::json;
use sortie_client::{endpoints, Call};
use sortie_core::Role;

async fn submit(api: &Api, who: &str, env: &str) -> Reply {
    api.send(
        Some(who),
        endpoints::submit_job(env),
        Some(&json!({"operation": "plan", "files": {"main.tf": ""}}).to_string()),
        &[],
    )
    .await
}

async fn post(api: &Api, who: &str, call: &Call, body: Option<serde_json::Value>) -> Reply {
    let body = body.map(|b| b.to_string());
    api.send(Some(who), call.clone(), body.as_deref(), &[])
        .await
}

fn field<'a>(r: &'a Reply, path: &str) -> &'a str {
    r.body["error"]["fields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == path)
        .and_then(|f| f["problem"].as_str())
        .unwrap_or_else(|| panic!("no field {path}: {}", r.body))
}

#[tokio::test]
async fn a_locked_environment_refuses_a_job_with_409_naming_who_when_and_why() {
    let api = Api::new().await;
    seed_org(&api, "acme").await;
    api.create_env("acme/pay", "prod", "production").await;
    api.grant("acme", Role::Deployer, "alice").await;
    api.grant("acme", Role::Viewer, "vera").await;
    let lock = endpoints::lock_environment("acme/pay/prod");

    // A viewer may not lock; a deployer may.
    let r = post(&api, "vera", &lock, Some(json!({"reason": "incident 42"}))).await;
    assert_eq!(r.status, 403, "{}", r.body);
    let r = post(&api, "alice", &lock, Some(json!({}))).await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.body["error"]["fields"][0]["path"], "reason");
    let r = post(&api, "alice", &lock, Some(json!({"reason": "incident 42"}))).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["locked"], true);
    assert_eq!(r.body["lock"]["by"], "alice");
    let at = r.body["lock"]["at"].as_str().unwrap().to_string();

    // The same lock again (a retry) answers the lock held, first time and all (issue 47
    // item 16: schemathesis saw a second identical request answer otherwise).
    let retry = post(&api, "alice", &lock, Some(json!({"reason": "incident 42"}))).await;
    assert_eq!(retry.status, 200, "{}", retry.body);
    assert_eq!(retry.body["lock"]["at"], at.as_str(), "{}", retry.body);
    // Another reason, even the same subject's, is another lock: refused.
    let other = post(&api, "alice", &lock, Some(json!({"reason": "incident 43"}))).await;
    assert_eq!(other.status, 409, "{}", other.body);

    // A second lock by someone else is refused, naming the first.
    let again = post(&api, "admin", &lock, Some(json!({"reason": "release"}))).await;
    assert_eq!(again.status, 409, "{}", again.body);
    assert!(again.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("incident 42"));

    // The environment shows its lock.
    let env = api
        .admin(endpoints::get_environment("acme/pay/prod"), None)
        .await;
    assert_eq!(env.body["lock"]["reason"], "incident 42", "{}", env.body);

    let refused = submit(&api, "alice", "acme/pay/prod").await;
    assert_eq!(refused.status, 409, "{}", refused.body);
    assert_eq!(refused.body["error"]["code"], "locked");
    let message = refused.body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("alice") && message.contains("incident 42"),
        "{message}"
    );
    assert_eq!(field(&refused, "lock.by"), "alice");
    assert_eq!(field(&refused, "lock.reason"), "incident 42");
    assert_eq!(
        chrono::DateTime::parse_from_rfc3339(field(&refused, "lock.at")).unwrap(),
        chrono::DateTime::parse_from_rfc3339(&at).unwrap()
    );

    // Unlock needs deploy too; then jobs run again.
    let unlock = endpoints::unlock_environment("acme/pay/prod");
    assert_eq!(post(&api, "vera", &unlock, None).await.status, 403);
    let r = post(&api, "alice", &unlock, None).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        (r.body["locked"].as_bool(), r.body["lock"]["by"].as_str()),
        (Some(false), Some("alice"))
    );
    let r = post(&api, "alice", &unlock, None).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.get("lock").is_none(), "{}", r.body);
    assert_eq!(submit(&api, "alice", "acme/pay/prod").await.status, 201);
}

#[tokio::test]
async fn a_group_freeze_refuses_jobs_below_it_and_unfreezing_takes_manage() {
    let api = Api::new().await;
    seed_org(&api, "acme").await;
    api.create_env("acme/pay", "prod", "production").await;
    api.create_env("acme/pay/eu", "stage", "staging").await;
    api.create_env("acme/payments", "prod", "production").await;
    api.grant("acme", Role::Deployer, "alice").await;
    api.grant("acme", Role::Maintainer, "mia").await;
    let lock = endpoints::freeze_group("acme/pay");
    let unlock = endpoints::unfreeze_group("acme/pay");

    // A deployer may not freeze a group; a maintainer (manage) may.
    let r = post(
        &api,
        "alice",
        &lock,
        Some(json!({"reason": "release freeze"})),
    )
    .await;
    assert_eq!(r.status, 403, "{}", r.body);
    let r = post(
        &api,
        "mia",
        &lock,
        Some(json!({"reason": "release freeze"})),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    // Freezing again for the same reason is a retry: the freeze held, not a 409.
    let retry = post(
        &api,
        "mia",
        &lock,
        Some(json!({"reason": "release freeze"})),
    )
    .await;
    assert_eq!(retry.status, 200, "{}", retry.body);
    assert_eq!(
        retry.body["lock"]["at"], r.body["lock"]["at"],
        "{}",
        retry.body
    );

    for env in ["acme/pay/prod", "acme/pay/eu/stage"] {
        let refused = submit(&api, "alice", env).await;
        assert_eq!(refused.status, 409, "{env}: {}", refused.body);
        assert_eq!(field(&refused, "lock.group"), "acme/pay");
        assert_eq!(field(&refused, "lock.by"), "mia");
        assert!(refused.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("release freeze"));
    }
    // A sibling whose name starts alike is not below it.
    assert_eq!(
        submit(&api, "alice", "acme/payments/prod").await.status,
        201
    );

    // Unfreezing takes manage.
    assert_eq!(post(&api, "alice", &unlock, None).await.status, 403);
    let r = post(&api, "mia", &unlock, None).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["lock"]["reason"], "release freeze");
    assert_eq!(submit(&api, "alice", "acme/pay/eu/stage").await.status, 201);

    // The root group cannot be frozen.
    let r = post(
        &api,
        "admin",
        &endpoints::freeze_group("-"),
        Some(json!({"reason": "x"})),
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.body);
}
