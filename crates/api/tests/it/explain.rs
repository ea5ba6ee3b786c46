//! The resolution answer: the winner, why and counts by default; every rule's fate only
//! with `?explain=full`, a page of at most 1,000 rules at a time. In memory (the fast tier), so a rule
//! set of 1,006 rules is quick to build; the moto-backed API suite covers the same
//! routes over DynamoDB.

use axum::body::Body;
use axum::http::Request;
use serde_json::Value;
use sortie_api::router;
use sortie_client::{endpoints, Call};
use sortie_core::{Criteria, GroupPath, Runner, RunnerId, RunnerRule, RunnerSpec};
use sortie_store::{RuleStore, RunnerStore};
use sortie_testkit::world::World;
use tower::ServiceExt;

async fn call(app: &axum::Router, call: Call, body: &str) -> (u16, Value, usize) {
    let req = Request::builder()
        .method(call.method)
        .uri(call.path)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    let status = resp.status().as_u16();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, serde_json::from_slice(&bytes).unwrap(), bytes.len())
}

#[tokio::test]
async fn counts_by_default_and_every_rule_only_on_request_a_page_at_a_time() {
    let world = World::fast();
    let store = world.fakes().store.clone();
    let spec = RunnerSpec::parse(
        "runner_configuration: {type: local}\nstate_storage_configuration: {type: local, directory: /x}",
    )
    .unwrap();
    let shared = RunnerId::parse("shared").unwrap();
    store
        .create_runner(&Runner {
            id: shared.clone(),
            spec,
        })
        .await
        .unwrap();
    let rule = |id: String, env_type: Option<&str>| RunnerRule {
        id,
        scope: GroupPath::root(),
        runner_id: shared.clone(),
        criteria: Criteria {
            env_type: env_type.map(str::to_string),
            ..Default::default()
        },
        priority: 0,
    };
    for i in 0..1005 {
        store
            .create_rule(&rule(format!("other-{i:04}"), Some("other")))
            .await
            .unwrap();
    }
    store
        .create_rule(&rule("default".into(), None))
        .await
        .unwrap();
    // The fast world's API, with the development identity on and no administrator.
    let mut state = world.api_state();
    state.dev_identity = true;
    state.admin_subjects = vec![];
    let app = router(state);

    let (status, created, size) = call(
        &app,
        endpoints::create_environment("acme"),
        r#"{"name":"prod","env_type":"production"}"#,
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let resolution = &created["resolution"];
    assert_eq!(resolution["rule"]["id"], "default");
    assert!(resolution["why"].as_str().unwrap().contains("`default`"));
    assert_eq!(resolution["counts"]["won"], 1);
    assert_eq!(resolution["counts"]["not_matched"]["env_type"], 1005);
    assert!(
        resolution.get("explanation").is_none(),
        "no per-rule list unless asked"
    );
    assert!(size < 4096, "the default answer stays small: {size} bytes");

    let refresh = endpoints::refresh_runner("acme/prod")
        .query([("dry_run", Some("true")), ("explain", Some("full"))]);
    let (status, first, _) = call(&app, refresh.clone(), "").await;
    assert_eq!(status, 200, "{first}");
    let page = first["resolution"]["explanation"].as_array().unwrap();
    assert_eq!(page.len(), 1000);
    assert_eq!(page[0]["rule_id"], "default");
    assert_eq!(page[0]["outcome"], "won");
    assert_eq!(first["resolution"]["explanation_next"], 1000);

    let (status, second, _) =
        call(&app, refresh.query([("explain_offset", Some("1000"))]), "").await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(
        second["resolution"]["explanation"]
            .as_array()
            .unwrap()
            .len(),
        6
    );
    assert!(second["resolution"].get("explanation_next").is_none());

    let (status, bad, _) = call(
        &app,
        endpoints::refresh_runner("acme/prod").query([("explain", Some("everything"))]),
        "",
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(bad["error"]["fields"][0]["path"], "query.explain");
}
