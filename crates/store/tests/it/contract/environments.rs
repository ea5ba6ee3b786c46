//! Contract cases for environments: create, read, relink, update and delete with versions,
//! their settings, and the environments under a group.

use std::sync::Arc;

use chrono::{TimeZone, Utc};
use sortie_core::{
    Approval, DriftRemediation, EnvPath, EnvSettings, GroupPath, RunnerId, RunnerLink, ToolName,
};
use sortie_store::{Store, StoreError};

use super::{environment, runner, setup_env, setup_env_with, ENV};

/// Every setting set to something other than its default.
fn full_settings(schedule: &str) -> EnvSettings {
    EnvSettings {
        approval: Approval::Required,
        approval_timeout_seconds: Some(600),
        four_eyes: true,
        drift_schedule: Some(schedule.into()),
        drift_remediation: DriftRemediation::Apply,
        tool: Some(ToolName::Opentofu),
        tool_version: Some("1.8.0".into()),
        triggers: vec![sortie_core::EnvPath::parse("acme/payments/db").unwrap()],
        trigger_operation: sortie_core::triggers::TriggerOperation::Apply,
        trigger_inputs: vec!["db_host".into()],
        expires_at: Some(Utc.timestamp_opt(1_900_000_000, 0).unwrap()),
        ttl: Some("72h".into()),
        ttl_from: sortie_core::expiry::TtlFrom::LastApply,
        vcs: Some(
            serde_json::from_value(serde_json::json!({
                "repository": "acme/infra",
                "directory": "payments/prod",
                "apply": "before_merge",
                "requirements": {"approved": 2, "mergeable": true},
            }))
            .unwrap(),
        ),
        extended_to: Some(Utc.timestamp_opt(1_900_100_000, 0).unwrap()),
    }
}

pub async fn environments_crud_relink_and_conflicts<S: Store + 'static>(s: Arc<S>) {
    s.create_runner(&runner("acme/local")).await.unwrap();
    s.create_runner(&runner("acme/second")).await.unwrap();
    let path = EnvPath::parse("acme/payments/prod").unwrap();
    assert!(matches!(
        s.create_environment(&environment("acme/payments/prod", "acme/missing"))
            .await,
        Err(StoreError::NotFound { kind: "runner", .. })
    ));
    let before = Utc::now();
    let created = s
        .create_environment(&environment("acme/payments/prod", "acme/local"))
        .await
        .unwrap();
    assert_eq!(created.version, 1);
    // The creation time is set once, by the create, and kept by every later write.
    let born = created
        .item
        .created_at
        .expect("a created environment has created_at");
    assert!(born >= before && born <= Utc::now(), "{born}");
    assert_eq!(
        s.get_environment(&path).await.unwrap().item.created_at,
        Some(born)
    );
    assert!(matches!(
        s.create_environment(&environment("acme/payments/prod", "acme/local"))
            .await,
        Err(StoreError::AlreadyExists { .. })
    ));
    let listed = s
        .list_environments(&GroupPath::parse("acme/payments").unwrap())
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].item.environment.path, path);

    let mut changed = created.item.environment.clone();
    changed.env_type = "production".into();
    changed.labels.insert("team".into(), "blue".into());
    changed.runner.runner_id = RunnerId::parse("acme/second").unwrap(); // ignored: updates never relink
    let updated = s.update_environment(&changed, Some(1)).await.unwrap();
    assert_eq!(updated.version, 2);
    assert_eq!(updated.item.environment.env_type, "production");
    assert_eq!(
        updated.item.created_at,
        Some(born),
        "an update keeps created_at"
    );
    assert_eq!(
        updated.item.environment.runner.runner_id.to_string(),
        "acme/local",
        "an update never relinks"
    );
    assert!(matches!(
        s.update_environment(&changed, Some(1)).await,
        Err(StoreError::VersionMismatch { .. })
    ));

    let link = RunnerLink {
        runner_id: RunnerId::parse("acme/second").unwrap(),
        rule_id: "r2".into(),
        linked_by: "bob".into(),
        linked_at: Utc::now(),
    };
    let relinked = s.relink_environment(&path, &link, Some(2)).await.unwrap();
    assert_eq!(relinked.version, 3);
    let stored = s.get_environment(&path).await.unwrap().item;
    assert_eq!(stored.created_at, Some(born), "a relink keeps created_at");
    assert_eq!(
        stored.created(),
        born,
        "and creation is not the new link's time"
    );
    assert_eq!(
        s.get_environment(&path)
            .await
            .unwrap()
            .item
            .environment
            .runner
            .linked_by,
        "bob"
    );
    // The old runner is free now, the new one is not.
    s.delete_runner(&RunnerId::parse("acme/local").unwrap(), None)
        .await
        .unwrap();
    assert!(matches!(
        s.delete_runner(&RunnerId::parse("acme/second").unwrap(), None)
            .await,
        Err(StoreError::InUse { .. })
    ));
    s.delete_environment(&path, Some(3)).await.unwrap();
    assert!(matches!(
        s.get_environment(&path).await,
        Err(StoreError::NotFound { .. })
    ));
}

pub async fn environment_settings_round_trip_and_clear_through_create_get_and_update<
    S: Store + 'static,
>(
    s: Arc<S>,
) {
    let env = setup_env_with(&*s, ENV, full_settings("0 */6 * * *")).await;
    let got = s.get_environment(&env.path).await.unwrap();
    assert_eq!(got.version, 1);
    assert_eq!(got.item.environment, env, "every setting round-trips");
    let listed = s
        .list_environments(&GroupPath::parse("acme/payments").unwrap())
        .await
        .unwrap();
    assert_eq!(listed[0].item.environment, env);

    // Cleared: every setting back to its default, the optional ones absent.
    let mut cleared = env.clone();
    cleared.settings = EnvSettings::default();
    let updated = s.update_environment(&cleared, Some(1)).await.unwrap();
    assert_eq!(updated.version, 2);
    assert_eq!(updated.item.environment, cleared);
    let got = s.get_environment(&env.path).await.unwrap();
    assert_eq!((got.version, &got.item.environment), (2, &cleared));
    assert_eq!(got.item.next_drift_at, None, "no schedule, no next check");

    // Set again, one at a time.
    let mut versioned = cleared.clone();
    versioned.settings.tool_version = Some("~> 1.6".into());
    versioned.settings.approval_timeout_seconds = Some(3600);
    let updated = s.update_environment(&versioned, Some(2)).await.unwrap();
    assert_eq!(updated.version, 3);
    assert_eq!(updated.item.environment.settings, versioned.settings);
    assert_eq!(
        s.get_environment(&env.path).await.unwrap().item.environment,
        versioned
    );
    // The version check still guards an update.
    assert!(matches!(
        s.update_environment(&env, Some(2)).await,
        Err(StoreError::VersionMismatch {
            expected: 2,
            actual: 3,
            ..
        })
    ));
}

pub async fn environments_under_a_group_are_its_own_and_its_descendants_by_path<
    S: Store + 'static,
>(
    s: Arc<S>,
) {
    for path in [
        "acme/web/prod",
        "acme/web/eu/prod",
        "acme/web/eu/dev",
        "acme/webshop/prod",
        "acme/api/prod",
        "acme/pay/prod",
        "acme/payments/eu/prod",
        "acmecorp/web/prod",
        "other/web/prod",
    ] {
        setup_env(&*s, path).await;
    }
    let under_at_most = |g: &str, limit: usize| {
        let s = s.clone();
        let g = GroupPath::parse(g).unwrap();
        async move {
            let listed = s.list_environments_under(&g, limit).await.unwrap();
            let paths = listed
                .environments
                .into_iter()
                .map(|e| e.item.environment.path.to_string())
                .collect::<Vec<_>>();
            (paths, listed.truncated)
        }
    };
    let under = |g: &'static str| {
        let listed = under_at_most(g, 10_000);
        async move {
            let (paths, truncated) = listed.await;
            assert!(!truncated, "{g}: nothing to cut");
            paths
        }
    };
    let count = |g: &str| {
        let s = s.clone();
        let g = GroupPath::parse(g).unwrap();
        async move { s.count_environments_under(&g).await.unwrap() }
    };
    assert_eq!(
        under("acme/web").await,
        ["acme/web/eu/dev", "acme/web/eu/prod", "acme/web/prod"],
        "its own and its descendants', never a sibling whose name starts alike"
    );
    assert_eq!(
        under("acme/pay").await,
        ["acme/pay/prod"],
        "`acme/pay` is not a prefix of `acme/payments/...`"
    );
    assert_eq!(
        under("acme").await,
        [
            "acme/api/prod",
            "acme/pay/prod",
            "acme/payments/eu/prod",
            "acme/web/eu/dev",
            "acme/web/eu/prod",
            "acme/web/prod",
            "acme/webshop/prod",
        ],
        "an organisation lists only its own, by path: never `acmecorp`'s nor `other`'s"
    );
    assert_eq!(under("other").await, ["other/web/prod"]);
    assert_eq!(under("acme/web/eu").await.len(), 2);
    assert!(under("acme/nothing").await.is_empty());
    assert!(under("nobody").await.is_empty());

    // A bounded listing says when it was cut, and keeps the first by path.
    assert_eq!(
        under_at_most("acme", 3).await,
        (
            vec![
                "acme/api/prod".to_string(),
                "acme/pay/prod".to_string(),
                "acme/payments/eu/prod".to_string()
            ],
            true
        )
    );
    assert!(!under_at_most("acme/web", 3).await.1, "exactly the limit");
    assert!(under_at_most("acme/web", 2).await.1);
    assert_eq!(under_at_most("acme/web", 0).await, (vec![], true));

    // The counts come from the same index.
    assert_eq!(count("acme").await, 7);
    assert_eq!(count("acme/web").await, 3);
    assert_eq!(count("acme/pay").await, 1);
    assert_eq!(count("acmecorp").await, 1);
    assert_eq!(count("acme/nothing").await, 0);

    // An update keeps the environment listed (and rewrites its index entry).
    let mut env = s
        .get_environment(&EnvPath::parse("acme/pay/prod").unwrap())
        .await
        .unwrap()
        .item
        .environment;
    env.labels.insert("tier".into(), "gold".into());
    s.update_environment(&env, None).await.unwrap();
    assert_eq!(under("acme/pay").await, ["acme/pay/prod"]);

    // The root group spans every organisation: refused, never a listing of all tenants.
    let root = GroupPath::root();
    assert!(matches!(
        s.list_environments_under(&root, 10).await,
        Err(StoreError::Invalid { .. })
    ));
    assert!(matches!(
        s.count_environments_under(&root).await,
        Err(StoreError::Invalid { .. })
    ));
}
