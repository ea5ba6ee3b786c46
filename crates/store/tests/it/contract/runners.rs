//! Contract cases for runners: create, read, update and delete with versions, the
//! environments linked to a runner, and a runner's tool.

use std::sync::Arc;

use sortie_core::{EnvPath, GroupPath, RunnerId, ToolName};
use sortie_store::{Store, StoreError};

use super::{environment, runner, setup_env, ENV};

pub async fn runner_crud_with_versions_and_conflicts<S: Store + 'static>(s: Arc<S>) {
    let created = s.create_runner(&runner("acme/payments/r1")).await.unwrap();
    assert_eq!(created.version, 1);
    assert!(matches!(
        s.create_runner(&runner("acme/payments/r1")).await,
        Err(StoreError::AlreadyExists { kind: "runner", .. })
    ));
    let got = s
        .get_runner(&RunnerId::parse("acme/payments/r1").unwrap())
        .await
        .unwrap();
    assert_eq!(got.item, created.item, "round-trips through the store");
    s.create_runner(&runner("acme/payments/r2")).await.unwrap();
    s.create_runner(&runner("acme/other")).await.unwrap();
    let listed = s
        .list_runners(&GroupPath::parse("acme/payments").unwrap())
        .await
        .unwrap();
    assert_eq!(
        listed
            .iter()
            .map(|r| r.item.id.to_string())
            .collect::<Vec<_>>(),
        vec!["acme/payments/r1", "acme/payments/r2"]
    );

    let mut changed = runner("acme/payments/r1");
    changed.spec.description = "changed".into();
    assert!(matches!(
        s.update_runner(&changed, Some(7)).await,
        Err(StoreError::VersionMismatch {
            expected: 7,
            actual: 1,
            ..
        })
    ));
    let updated = s.update_runner(&changed, Some(1)).await.unwrap();
    assert_eq!(updated.version, 2);
    assert_eq!(
        s.get_runner(&changed.id)
            .await
            .unwrap()
            .item
            .spec
            .description,
        "changed"
    );
    assert!(matches!(
        s.delete_runner(&changed.id, Some(1)).await,
        Err(StoreError::VersionMismatch { .. })
    ));
    s.delete_runner(&changed.id, Some(2)).await.unwrap();
    assert!(matches!(
        s.get_runner(&changed.id).await,
        Err(StoreError::NotFound { .. })
    ));
    assert!(matches!(
        s.update_runner(&changed, None).await,
        Err(StoreError::NotFound { .. })
    ));
}

pub async fn a_runner_linked_to_environments_cannot_be_deleted_and_says_by_whom<
    S: Store + 'static,
>(
    s: Arc<S>,
) {
    s.create_runner(&runner("acme/local")).await.unwrap();
    s.create_environment(&environment("acme/payments/prod", "acme/local"))
        .await
        .unwrap();
    s.create_environment(&environment("acme/web/dev", "acme/local"))
        .await
        .unwrap();
    let id = RunnerId::parse("acme/local").unwrap();
    match s.delete_runner(&id, None).await {
        Err(StoreError::InUse { by, .. }) => {
            assert_eq!(by, vec!["acme/payments/prod", "acme/web/dev"])
        }
        other => panic!("expected InUse, got {other:?}"),
    }
    s.delete_environment(&EnvPath::parse("acme/payments/prod").unwrap(), None)
        .await
        .unwrap();
    s.delete_environment(&EnvPath::parse("acme/web/dev").unwrap(), None)
        .await
        .unwrap();
    s.delete_runner(&id, None).await.unwrap();
}

pub async fn runners_count_their_links_and_versions_guard_changes<S: Store + 'static>(s: Arc<S>) {
    setup_env(&*s, "acme/payments/a").await;
    setup_env(&*s, "acme/payments/b").await;
    let id = RunnerId::parse("acme/local").unwrap();
    assert!(matches!(
        s.create_runner(&runner("acme/local")).await,
        Err(StoreError::AlreadyExists { kind: "runner", .. })
    ));
    assert!(matches!(
        s.delete_runner(&id, None).await,
        Err(StoreError::InUse { by, .. }) if by == vec!["acme/payments/a", "acme/payments/b"]
    ));
    assert!(matches!(
        s.update_runner(&runner("acme/local"), Some(7)).await,
        Err(StoreError::VersionMismatch {
            expected: 7,
            actual: 1,
            ..
        })
    ));
    assert_eq!(
        s.update_runner(&runner("acme/local"), Some(1))
            .await
            .unwrap()
            .version,
        2
    );
    s.create_runner(&runner("acme/other")).await.unwrap();
    let link = environment(ENV, "acme/other").runner;
    let a = EnvPath::parse("acme/payments/a").unwrap();
    assert!(matches!(
        s.relink_environment(&a, &link, Some(3)).await,
        Err(StoreError::VersionMismatch { .. })
    ));
    assert_eq!(
        s.relink_environment(&a, &link, Some(1))
            .await
            .unwrap()
            .version,
        2
    );
    s.delete_environment(&EnvPath::parse("acme/payments/b").unwrap(), None)
        .await
        .unwrap();
    s.delete_runner(&id, Some(2)).await.unwrap();
    assert!(matches!(
        s.delete_runner(&RunnerId::parse("acme/other").unwrap(), None)
            .await,
        Err(StoreError::InUse { by, .. }) if by == vec!["acme/payments/a"]
    ));
    let names: Vec<String> = s
        .list_runners(&GroupPath::parse("acme").unwrap())
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.item.id.to_string())
        .collect();
    assert_eq!(names, vec!["acme/other"]);
}

pub async fn a_runners_tool_and_tool_version_round_trip<S: Store + 'static>(s: Arc<S>) {
    let mut r = runner("acme/pinned");
    r.spec.tool = Some(ToolName::Terraform);
    r.spec.tool_version = Some("1.5.7".into());
    assert_eq!(s.create_runner(&r).await.unwrap().version, 1);
    let got = s.get_runner(&r.id).await.unwrap();
    assert_eq!((got.version, &got.item), (1, &r));
    r.spec.tool_version = Some("~> 1.9".into());
    assert_eq!(s.update_runner(&r, Some(1)).await.unwrap().version, 2);
    let listed = s
        .list_runners(&GroupPath::parse("acme").unwrap())
        .await
        .unwrap();
    assert_eq!((listed[0].version, &listed[0].item), (2, &r));
    r.spec.tool_version = None;
    assert_eq!(s.update_runner(&r, Some(2)).await.unwrap().version, 3);
    assert_eq!(s.get_runner(&r.id).await.unwrap().item, r);
}
