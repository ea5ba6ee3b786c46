//! Policy sets over HTTP: CRUD with ETags, a 400 naming the module, line and column of
//! Rego that does not compile, 404, 412 on a stale ETag, and who may write.

use serde_json::json;
use sortie_core::Role;

use crate::common::Api;
use sortie_client::endpoints;

fn set(enforcement: &str, rego: &str) -> String {
    json!({
        "description": "no deletes in production",
        "enforcement": enforcement,
        "criteria": {"env_types": ["production"]},
        "modules": [
            {"name": "ok.rego", "rego": "package ok\n\nwarn contains \"hello\" if { true }\n"},
            {"name": "deletes.rego", "rego": rego},
        ],
    })
    .to_string()
}

const GOOD: &str = "package deletes\n\ndeny contains msg if {\n  some rc in input.plan.resource_changes\n  \"delete\" in rc.change.actions\n  msg := sprintf(\"%s would be deleted\", [rc.address])\n}\n";

#[tokio::test]
async fn policy_sets_are_created_read_listed_updated_and_deleted() {
    let api = Api::new().await;
    let created = api
        .admin(
            endpoints::create_policy_set("acme", "no-deletes"),
            Some(&set("mandatory", GOOD)),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    assert_eq!(created.etag.as_deref(), Some("\"1\""));
    assert_eq!(created.body["name"], "no-deletes");
    assert_eq!(created.body["on_unavailable"], "fail");

    let again = api
        .admin(
            endpoints::create_policy_set("acme", "no-deletes"),
            Some(&set("mandatory", GOOD)),
        )
        .await;
    assert_eq!(again.status, 409, "{}", again.body);

    let got = api
        .admin(endpoints::get_policy_set("acme", "no-deletes"), None)
        .await;
    assert_eq!(
        (got.status.as_u16(), got.etag.as_deref()),
        (200, Some("\"1\""))
    );
    assert_eq!(got.body["modules"][1]["rego"], GOOD);

    let list = api.admin(endpoints::list_policy_sets("acme"), None).await;
    assert_eq!(list.status, 200, "{}", list.body);
    assert_eq!(list.body["policy_sets"][0]["set"]["name"], "no-deletes");
    assert_eq!(list.body["policy_sets"][0]["version"], 1);

    let stale = api
        .send(
            Some("admin"),
            endpoints::update_policy_set("acme", "no-deletes"),
            Some(&set("review", GOOD)),
            &[("if-match", "\"7\"")],
        )
        .await;
    assert_eq!(
        (stale.status.as_u16(), stale.body["error"]["code"].as_str()),
        (412, Some("version_mismatch"))
    );
    let put = api
        .send(
            Some("admin"),
            endpoints::update_policy_set("acme", "no-deletes"),
            Some(&set("review", GOOD)),
            &[("if-match", "\"1\"")],
        )
        .await;
    assert_eq!(
        (put.status.as_u16(), put.etag.as_deref()),
        (200, Some("\"2\"")),
        "{}",
        put.body
    );
    assert_eq!(put.body["enforcement"], "review");

    let deleted = api
        .send(
            Some("admin"),
            endpoints::delete_policy_set("acme", "no-deletes"),
            None,
            &[("if-match", "\"2\"")],
        )
        .await;
    assert_eq!(deleted.status, 204, "{}", deleted.body);
    let gone = api
        .admin(endpoints::get_policy_set("acme", "no-deletes"), None)
        .await;
    assert_eq!(gone.status, 404, "{}", gone.body);
    let gone = api
        .admin(endpoints::delete_policy_set("acme", "no-deletes"), None)
        .await;
    assert_eq!(gone.status, 404, "{}", gone.body);
}

#[tokio::test]
async fn rego_that_does_not_compile_is_refused_naming_module_line_and_column() {
    let api = Api::new().await;
    let broken = "package deletes\n\ndeny contains msg if {\n  msg := ]\n}\n";
    let r = api
        .admin(
            endpoints::create_policy_set("acme", "no-deletes"),
            Some(&set("mandatory", broken)),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    let field = &r.body["error"]["fields"][0];
    assert_eq!(field["path"], "modules[1].rego", "{}", r.body);
    let problem = field["problem"].as_str().unwrap();
    assert!(problem.contains("`deletes.rego`"), "{problem}");
    assert!(problem.contains("line 4 column"), "{problem}");

    let unknown = "package deletes\n\ndeny contains msg if {\n  msg := nope(1)\n}\n";
    let r = api
        .admin(
            endpoints::create_policy_set("acme", "no-deletes"),
            Some(&set("mandatory", unknown)),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body["error"]["fields"][0]["problem"]
        .as_str()
        .unwrap()
        .contains("unknown function `nope`"));

    // Bounds and fields: 21 modules, an unknown enforcement, a name that is not the URL's.
    let many: Vec<_> = (0..21)
        .map(|i| json!({"name": format!("m{i}.rego"), "rego": "package m\n"}))
        .collect();
    let r = api
        .admin(
            endpoints::create_policy_set("acme", "no-deletes"),
            Some(&json!({"enforcement": "mandatory", "modules": many}).to_string()),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(
        r.body["error"]["fields"][0]["path"], "modules",
        "{}",
        r.body
    );
    let r = api
        .admin(
            endpoints::create_policy_set("acme", "no-deletes"),
            Some(&set("hard", GOOD)),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    let mut doc: serde_json::Value = serde_json::from_str(&set("mandatory", GOOD)).unwrap();
    doc["name"] = json!("other");
    let r = api
        .admin(
            endpoints::create_policy_set("acme", "no-deletes"),
            Some(&doc.to_string()),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.body["error"]["fields"][0]["path"], "name", "{}", r.body);
}

#[tokio::test]
async fn only_a_maintainer_writes_and_a_viewer_reads() {
    let api = Api::new().await;
    api.grant("acme", Role::Viewer, "vera").await;
    api.grant("acme", Role::Deployer, "dan").await;
    api.grant("acme", Role::Maintainer, "mia").await;
    for who in ["vera", "dan"] {
        let r = api
            .send(
                Some(who),
                endpoints::create_policy_set("acme", "no-deletes"),
                Some(&set("mandatory", GOOD)),
                &[],
            )
            .await;
        assert_eq!(r.status, 403, "{who}: {}", r.body);
    }
    let r = api
        .send(
            Some("mia"),
            endpoints::create_policy_set("acme", "no-deletes"),
            Some(&set("mandatory", GOOD)),
            &[],
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let r = api
        .send(
            Some("vera"),
            endpoints::get_policy_set("acme", "no-deletes"),
            None,
            &[],
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let r = api
        .send(
            Some("dan"),
            endpoints::delete_policy_set("acme", "no-deletes"),
            None,
            &[],
        )
        .await;
    assert_eq!(r.status, 403, "{}", r.body);
    // The root's sets are the administrators'.
    let r = api
        .send(
            Some("mia"),
            endpoints::create_policy_set("-", "shared"),
            Some(&set("advisory", GOOD)),
            &[],
        )
        .await;
    // A maintainer of `acme` is nobody at the root: refused (404, as any group one cannot see).
    assert!(matches!(r.status.as_u16(), 403 | 404), "{}", r.body);
    let r = api
        .admin(
            endpoints::create_policy_set("-", "shared"),
            Some(&set("advisory", GOOD)),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let r = api
        .send(
            None,
            endpoints::get_policy_set("acme", "no-deletes"),
            None,
            &[],
        )
        .await;
    assert_eq!(r.status, 401, "{}", r.body);
}
