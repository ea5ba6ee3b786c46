//! Expiry through the HTTP API (fast tier): `ttl` and `expires_at` checked on create and
//! update against the shortest TTL and the maximum inherited from the groups (400 naming
//! the field and the limit), and `POST …/-/extend` (needs `deploy`) up to the maximum
//! (409 naming it). Every answer is checked against the OpenAPI document.

use crate::common;

use chrono::{DateTime, Duration, Utc};
use common::{seed_org, Api, Reply};
use serde_json::json;
use sortie_client::{endpoints, Call};
use sortie_core::expiry::ExpiryLimits;
use sortie_core::{GroupPath, Role};

async fn post(api: &Api, who: &str, call: &Call, body: serde_json::Value) -> Reply {
    let body = body.to_string();
    api.send(Some(who), call.clone(), Some(&body), &[]).await
}

async fn with_max(max_days: u64) -> Api {
    let api = Api::new().await;
    seed_org(&api, "acme").await;
    api.store
        .set_group_expiry(
            &GroupPath::parse("acme").unwrap(),
            &ExpiryLimits {
                max_ttl_seconds: Some(max_days * 86_400),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    api
}

fn time(r: &Reply, field: &str) -> DateTime<Utc> {
    r.body[field]
        .as_str()
        .unwrap_or_else(|| panic!("no {field}: {}", r.body))
        .parse()
        .unwrap()
}

#[tokio::test]
async fn ttl_and_expires_at_are_checked_against_the_inherited_maximum() {
    let api = with_max(7).await;
    let create = endpoints::create_environment("acme/pay");
    let over = post(
        &api,
        "admin",
        &create,
        json!({"name": "a", "env_type": "dev", "ttl": "8d"}),
    )
    .await;
    assert_eq!(over.status, 400, "{}", over.body);
    assert_eq!(over.body["error"]["fields"][0]["path"], "ttl");
    let problem = over.body["error"]["fields"][0]["problem"].as_str().unwrap();
    assert!(problem.contains("7d"), "{problem}");

    let short = post(
        &api,
        "admin",
        &create,
        json!({"name": "a", "env_type": "dev", "ttl": "5m"}),
    )
    .await;
    assert_eq!(short.status, 400, "{}", short.body);
    assert!(short.body["error"]["fields"][0]["problem"]
        .as_str()
        .unwrap()
        .contains("1h"));

    let bad = post(
        &api,
        "admin",
        &create,
        json!({"name": "a", "env_type": "dev", "ttl": "3 weeks"}),
    )
    .await;
    assert_eq!(bad.status, 400, "{}", bad.body);
    assert_eq!(bad.body["error"]["fields"][0]["path"], "ttl");

    let far = (Utc::now() + Duration::days(30)).to_rfc3339();
    let r = post(
        &api,
        "admin",
        &create,
        json!({"name": "a", "env_type": "dev", "expires_at": far}),
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.body["error"]["fields"][0]["path"], "expires_at");

    let ok = post(
        &api,
        "admin",
        &create,
        json!({"name": "a", "env_type": "dev", "ttl": "72h"}),
    )
    .await;
    assert_eq!(ok.status, 201, "{}", ok.body);
    let env = api
        .admin(endpoints::get_environment("acme/pay/a"), None)
        .await;
    assert_eq!(env.body["ttl"], "3d", "{}", env.body);

    let patch = json!({"ttl": "30d"}).to_string();
    let r = api
        .admin(endpoints::update_environment("acme/pay/a"), Some(&patch))
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.body["error"]["fields"][0]["path"], "ttl");
}

#[tokio::test]
async fn extend_moves_the_end_up_to_the_maximum_and_needs_deploy() {
    let api = with_max(7).await;
    api.grant("acme", Role::Deployer, "alice").await;
    api.grant("acme", Role::Viewer, "vera").await;
    let at = Utc::now() + Duration::days(2);
    let r = post(
        &api,
        "admin",
        &endpoints::create_environment("acme/pay"),
        json!({"name": "a", "env_type": "dev", "expires_at": at.to_rfc3339()}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let extend = endpoints::extend_environment("acme/pay/a");

    let r = post(&api, "vera", &extend, json!({"by": "24h"})).await;
    assert_eq!(r.status, 403, "{}", r.body);
    let r = post(&api, "alice", &extend, json!({"by": "soon"})).await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.body["error"]["fields"][0]["path"], "by");

    let r = post(&api, "alice", &extend, json!({"by": "24h"})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let end = time(&r, "expires_at");
    assert!(
        (end - (at + Duration::days(1))).num_seconds().abs() <= 1,
        "{end} vs {at}"
    );
    let env = api
        .admin(endpoints::get_environment("acme/pay/a"), None)
        .await;
    assert_eq!(time(&env, "expires_at"), end, "{}", env.body);

    // 3 days + 5 days is past now + 7 days: refused, naming the maximum.
    let r = post(&api, "alice", &extend, json!({"by": "5d"})).await;
    assert_eq!(r.status, 409, "{}", r.body);
    assert_eq!(r.body["error"]["code"], "over_maximum");
    assert!(
        r.body["error"]["message"].as_str().unwrap().contains("7d"),
        "{}",
        r.body
    );

    // An environment that does not expire has nothing to extend.
    api.create_env("acme/pay", "forever", "dev").await;
    let r = post(
        &api,
        "alice",
        &endpoints::extend_environment("acme/pay/forever"),
        json!({"by": "1d"}),
    )
    .await;
    assert_eq!(r.status, 409, "{}", r.body);
}

#[tokio::test]
async fn a_groups_expiry_limits_are_set_with_manage_read_and_inherited() {
    let api = with_max(14).await;
    api.grant("acme", Role::Deployer, "alice").await;
    let put = |who: &'static str, call: &Call, body: serde_json::Value| {
        let (api, call) = (&api, call.clone());
        async move {
            let body = body.to_string();
            api.send(Some(who), call, Some(&body), &[]).await
        }
    };
    // A deployer may not set them.
    let r = put(
        "alice",
        &endpoints::set_group_expiry("acme/team"),
        json!({"max_ttl": "7d"}),
    )
    .await;
    assert_eq!(r.status, 403, "{}", r.body);
    // Field problems are 400s naming the field.
    let r = put(
        "admin",
        &endpoints::set_group_expiry("acme/team"),
        json!({"max_ttl": "soon"}),
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.body["error"]["fields"][0]["path"], "max_ttl");
    let r = put(
        "admin",
        &endpoints::set_group_expiry("acme/team"),
        json!({"default_ttl": "10d", "max_ttl": "7d"}),
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.body["error"]["fields"][0]["path"], "default_ttl");
    let r = put(
        "admin",
        &endpoints::set_group_expiry("acme/team"),
        json!({"ttl": "1d"}),
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.body);

    // An environment below with no TTL of its own gets the new default when asked.
    let r = post(
        &api,
        "admin",
        &endpoints::create_environment("acme/team"),
        json!({"name": "web", "env_type": "dev"}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let r = put(
        "admin",
        &endpoints::set_group_expiry("acme/team"),
        json!({"default_ttl": "3d", "max_ttl": "30d", "apply_to_existing": true}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["change"]["sooner"], 1, "{}", r.body);
    assert_eq!(r.body["default_ttl"], "3d");
    assert_eq!(r.body["max_ttl"], "30d");
    // The organisation's 14 days hold below it: the smallest maximum wins.
    assert_eq!(r.body["inherited"]["max_ttl"], "14d");
    assert_eq!(r.body["inherited"]["default_ttl"], "3d");
    assert_eq!(r.body["refreshed"], 1);
    let path = sortie_core::EnvPath::parse("acme/team/web").unwrap();
    let entry = sortie_store::ExpiryStore::get_expiry(api.store.as_ref(), &path)
        .await
        .unwrap()
        .expect("on the due list");
    let left = entry.item.expires_at - Utc::now();
    assert!(left <= Duration::days(3) && left > Duration::days(3) - Duration::minutes(1));

    // Anyone who can read the group reads them.
    let r = api
        .send(
            Some("alice"),
            endpoints::get_group_expiry("acme/team"),
            None,
            &[],
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["default_ttl"], "3d");
    assert!(r.body.get("refreshed").is_none());
    let r = api
        .send(
            Some("alice"),
            endpoints::get_group_expiry("acme"),
            None,
            &[],
        )
        .await;
    assert_eq!(r.body["max_ttl"], "14d", "{}", r.body);
}

#[tokio::test]
async fn an_environment_marked_destroyed_refuses_jobs_until_extended() {
    let api = with_max(7).await;
    let at = Utc::now() + Duration::days(2);
    let r = post(
        &api,
        "admin",
        &endpoints::create_environment("acme/pay"),
        json!({"name": "a", "env_type": "dev", "expires_at": at.to_rfc3339()}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let path = sortie_core::EnvPath::parse("acme/pay/a").unwrap();
    let mark = sortie_core::expiry::Destroyed {
        at: Utc::now(),
        job_id: Some("01destroy".into()),
        expired_at: at,
    };
    sortie_store::ExpiryStore::mark_destroyed(api.store.as_ref(), &path, Some(&mark))
        .await
        .unwrap();
    let env = api
        .admin(endpoints::get_environment("acme/pay/a"), None)
        .await;
    assert_eq!(env.body["destroyed"]["job_id"], "01destroy", "{}", env.body);
    let job = json!({"operation": "plan", "files": {"main.tf": ""}});
    let r = post(
        &api,
        "admin",
        &endpoints::submit_job("acme/pay/a"),
        job.clone(),
    )
    .await;
    assert_eq!(r.status, 409, "{}", r.body);
    assert_eq!(r.body["error"]["code"], "destroyed");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("extend"),
        "{}",
        r.body
    );
    let r = post(
        &api,
        "admin",
        &endpoints::extend_environment("acme/pay/a"),
        json!({"by": "1d"}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let env = api
        .admin(endpoints::get_environment("acme/pay/a"), None)
        .await;
    assert!(env.body.get("destroyed").is_none(), "{}", env.body);
}

/// The environment's due-list end, if it is on the list.
async fn due(api: &Api, path: &str) -> Option<DateTime<Utc>> {
    let path = sortie_core::EnvPath::parse(path).unwrap();
    sortie_store::ExpiryStore::get_expiry(api.store.as_ref(), &path)
        .await
        .unwrap()
        .map(|e| e.item.expires_at)
}

/// Issue 47 item 2: a group's default TTL used to schedule every existing environment
/// below it for destruction, silently, shown nowhere, and kept by an extension after the
/// default was removed.
#[tokio::test]
async fn a_group_default_reaches_existing_environments_only_when_asked_and_takes_back_what_it_gave()
{
    let api = with_max(30).await;
    let put = |body: serde_json::Value| {
        let api = &api;
        async move {
            let body = body.to_string();
            api.send(
                Some("admin"),
                endpoints::set_group_expiry("acme/team"),
                Some(&body),
                &[],
            )
            .await
        }
    };
    let get_env = |name: &'static str| {
        let api = &api;
        async move {
            let r = api
                .send(
                    Some("admin"),
                    endpoints::get_environment(&format!("acme/team/{name}")),
                    None,
                    &[],
                )
                .await;
            assert_eq!(r.status, 200, "{}", r.body);
            r.body
        }
    };
    let create = endpoints::create_environment("acme/team");
    for name in ["a", "b", "c"] {
        let r = post(
            &api,
            "admin",
            &create,
            json!({"name": name, "env_type": "dev"}),
        )
        .await;
        assert_eq!(r.status, 201, "{}", r.body);
    }
    let r = post(
        &api,
        "admin",
        &create,
        json!({"name": "own", "env_type": "dev", "ttl": "5d"}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);

    // A new default: the existing environments keep their ends (none), and are counted.
    let r = put(json!({"default_ttl": "3d"})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["change"]["sooner"], 0, "{}", r.body);
    assert_eq!(r.body["change"]["kept"], 3, "{}", r.body);
    assert!(r.body["default_since"].is_string(), "{}", r.body);
    for name in ["a", "b", "c"] {
        assert_eq!(
            due(&api, &format!("acme/team/{name}")).await,
            None,
            "{name} was scheduled"
        );
        assert!(get_env(name).await.get("expiry").is_none());
    }
    // Its own TTL is shown as its own.
    let own = get_env("own").await;
    assert_eq!(own["expiry"]["source"], "ttl", "{own}");
    assert_eq!(own["expiry"]["ttl"], "5d", "{own}");
    // An environment created from now on gets the default, and says whose it is.
    let r = post(
        &api,
        "admin",
        &create,
        json!({"name": "new", "env_type": "dev"}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let new = get_env("new").await;
    assert_eq!(new["expiry"]["source"], "group_default", "{new}");
    assert_eq!(new["expiry"]["group"], "acme/team", "{new}");
    assert_eq!(new["expiry"]["ttl"], "3d", "{new}");
    assert!(due(&api, "acme/team/new").await.is_some());

    // A dry run says which would expire, and writes nothing.
    let r = put(json!({"default_ttl": "3d", "apply_to_existing": true, "dry_run": true})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["change"]["dry_run"], true);
    assert_eq!(r.body["change"]["sooner"], 3, "{}", r.body);
    let named: Vec<&str> = r.body["change"]["environments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["environment"].as_str().unwrap())
        .collect();
    assert_eq!(named, ["acme/team/a", "acme/team/b", "acme/team/c"]);
    assert!(r.body.get("refreshed").is_none(), "{}", r.body);
    assert_eq!(due(&api, "acme/team/a").await, None, "a dry run wrote");

    // Asked: they are scheduled, and their views say by what.
    let r = put(json!({"default_ttl": "3d", "apply_to_existing": true})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["change"]["sooner"], 3, "{}", r.body);
    assert!(r.body.get("default_since").is_none(), "{}", r.body);
    let a = get_env("a").await;
    assert_eq!(a["expiry"]["source"], "group_default", "{a}");
    let scheduled = due(&api, "acme/team/a").await.expect("scheduled");
    assert_eq!(
        a["expiry"]["at"]
            .as_str()
            .unwrap()
            .parse::<DateTime<Utc>>()
            .unwrap(),
        scheduled
    );

    // An extension of the default's end is shown as one, and pins nothing.
    let r = post(
        &api,
        "admin",
        &endpoints::extend_environment("acme/team/a"),
        json!({"by": "2d"}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let a = get_env("a").await;
    assert_eq!(a["expiry"]["extended"], true, "{a}");
    assert!(
        a.get("expires_at").is_none(),
        "the extension became its own end: {a}"
    );
    assert!(due(&api, "acme/team/a").await.unwrap() > scheduled);

    // Removing the default takes back every end it gave, the extended one's too.
    let r = put(json!({})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["change"]["later"], 4, "{}", r.body);
    for name in ["a", "b", "c", "new"] {
        assert_eq!(
            due(&api, &format!("acme/team/{name}")).await,
            None,
            "{name} still expires"
        );
        assert!(get_env(name).await.get("expiry").is_none());
    }
    assert!(
        due(&api, "acme/team/own").await.is_some(),
        "its own TTL went too"
    );
}
