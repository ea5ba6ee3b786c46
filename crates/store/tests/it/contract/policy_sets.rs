//! Policy sets: create, read, list by group, update and delete with versions, and the
//! sets of a group's ancestry.

use std::sync::Arc;

use sortie_core::policy::{Enforcement, OnUnavailable, PolicyCriteria, PolicyModule, PolicySet};
use sortie_core::GroupPath;
use sortie_store::{Store, StoreError};

fn g(path: &str) -> GroupPath {
    GroupPath::parse(path).unwrap()
}

fn policy(name: &str, enforcement: Enforcement) -> PolicySet {
    PolicySet {
        name: name.into(),
        description: Some(format!("{name} rules")),
        modules: vec![PolicyModule {
            name: "main.rego".into(),
            rego: format!("package {name}\n\ndeny contains \"no\" if {{ false }}\n"),
        }],
        enforcement,
        criteria: Some(PolicyCriteria {
            env_types: vec!["production".into()],
            labels: [("tier".to_string(), "gold".to_string())].into(),
        }),
        on_unavailable: OnUnavailable::Skip,
    }
}

/// CRUD with versions: a taken name, a stale version, an unknown set.
pub async fn policy_sets_are_created_read_listed_updated_and_deleted_with_versions<
    S: Store + 'static,
>(
    s: Arc<S>,
) {
    let acme = g("acme");
    let created = s
        .create_policy_set(&acme, &policy("tags", Enforcement::Mandatory))
        .await
        .unwrap();
    assert_eq!(created.version, 1);
    assert!(matches!(
        s.create_policy_set(&acme, &policy("tags", Enforcement::Review))
            .await,
        Err(StoreError::AlreadyExists { .. })
    ));
    // The same name in another group is another set.
    s.create_policy_set(&g("acme/payments"), &policy("tags", Enforcement::Review))
        .await
        .unwrap();
    s.create_policy_set(&acme, &policy("costs", Enforcement::Advisory))
        .await
        .unwrap();

    let got = s.get_policy_set(&acme, "tags").await.unwrap();
    assert_eq!(got.item, policy("tags", Enforcement::Mandatory));
    assert_eq!(got.version, 1);
    let names: Vec<String> = s
        .list_policy_sets(&acme)
        .await
        .unwrap()
        .into_iter()
        .map(|v| v.item.name)
        .collect();
    assert_eq!(names, vec!["costs", "tags"]);

    let mut changed = policy("tags", Enforcement::Review);
    changed.modules.push(PolicyModule {
        name: "more.rego".into(),
        rego: "package more\n".repeat(1000),
    });
    let updated = s.update_policy_set(&acme, &changed, Some(1)).await.unwrap();
    assert_eq!(updated.version, 2);
    assert_eq!(s.get_policy_set(&acme, "tags").await.unwrap().item, changed);
    assert!(matches!(
        s.update_policy_set(&acme, &changed, Some(1)).await,
        Err(StoreError::VersionMismatch {
            expected: 1,
            actual: 2,
            ..
        })
    ));
    assert!(matches!(
        s.update_policy_set(&acme, &policy("nope", Enforcement::Review), None)
            .await,
        Err(StoreError::NotFound { .. })
    ));
    assert!(matches!(
        s.delete_policy_set(&acme, "tags", Some(1)).await,
        Err(StoreError::VersionMismatch { .. })
    ));
    s.delete_policy_set(&acme, "tags", Some(2)).await.unwrap();
    assert!(matches!(
        s.get_policy_set(&acme, "tags").await,
        Err(StoreError::NotFound { .. })
    ));
    assert!(matches!(
        s.delete_policy_set(&acme, "tags", None).await,
        Err(StoreError::NotFound { .. })
    ));
    // The other group's set of the same name is untouched.
    assert_eq!(
        s.get_policy_set(&g("acme/payments"), "tags")
            .await
            .unwrap()
            .version,
        1
    );
}

/// A group's sets and its ancestors', the root first, each with its holder; siblings and
/// descendants are not included.
pub async fn policy_sets_for_a_group_are_its_own_and_its_ancestors<S: Store + 'static>(s: Arc<S>) {
    for (group, name) in [
        ("", "shared"),
        ("acme", "org"),
        ("acme/payments", "team"),
        ("acme/pay", "sibling"),
        ("acme/payments/eu", "below"),
        ("other", "elsewhere"),
    ] {
        s.create_policy_set(&g(group), &policy(name, Enforcement::Mandatory))
            .await
            .unwrap();
    }
    let found: Vec<(String, String)> = s
        .policy_sets_for(&g("acme/payments"))
        .await
        .unwrap()
        .into_iter()
        .map(|(group, v)| (group.as_str().to_string(), v.item.name))
        .collect();
    assert_eq!(
        found,
        vec![
            ("".to_string(), "shared".to_string()),
            ("acme".to_string(), "org".to_string()),
            ("acme/payments".to_string(), "team".to_string()),
        ]
    );
}

/// The policy-set version of an organisation moves on every create, update and delete of
/// a set in one of its groups or at the root, never on another organisation's, and never
/// on a refused write; it never goes down.
pub async fn policy_sets_version_moves_on_every_write_in_its_org_and_the_root<
    S: Store + 'static,
>(
    s: Arc<S>,
) {
    let (org, team, other) = (g("vctr"), g("vctr/payments"), g("vother"));
    let mut last = s.policy_sets_version(Some("vctr")).await.unwrap();
    let mut moved = |now: u64, what: &str| {
        assert!(now > last, "{what}: {now} after {last}");
        last = now;
    };
    s.create_policy_set(&team, &policy("tags", Enforcement::Mandatory))
        .await
        .unwrap();
    moved(s.policy_sets_version(Some("vctr")).await.unwrap(), "create");
    s.update_policy_set(&team, &policy("tags", Enforcement::Advisory), Some(1))
        .await
        .unwrap();
    moved(s.policy_sets_version(Some("vctr")).await.unwrap(), "update");
    s.create_policy_set(&org, &policy("cost", Enforcement::Review))
        .await
        .unwrap();
    moved(
        s.policy_sets_version(Some("vctr")).await.unwrap(),
        "the org's own group",
    );
    let root_before = s.policy_sets_version(None).await.unwrap();
    s.create_policy_set(
        &GroupPath::root(),
        &policy("vctr-shared", Enforcement::Advisory),
    )
    .await
    .unwrap();
    moved(
        s.policy_sets_version(Some("vctr")).await.unwrap(),
        "a root set",
    );
    assert!(s.policy_sets_version(None).await.unwrap() > root_before);
    s.delete_policy_set(&GroupPath::root(), "vctr-shared", None)
        .await
        .unwrap();
    moved(
        s.policy_sets_version(Some("vctr")).await.unwrap(),
        "a root delete",
    );

    let here = s.policy_sets_version(Some("vctr")).await.unwrap();
    // Another organisation's write, and refused writes, leave it where it is.
    s.create_policy_set(&other, &policy("tags", Enforcement::Mandatory))
        .await
        .unwrap();
    assert!(matches!(
        s.create_policy_set(&team, &policy("tags", Enforcement::Mandatory))
            .await,
        Err(StoreError::AlreadyExists { .. })
    ));
    assert!(matches!(
        s.update_policy_set(&team, &policy("tags", Enforcement::Mandatory), Some(1))
            .await,
        Err(StoreError::VersionMismatch { .. })
    ));
    assert_eq!(s.policy_sets_version(Some("vctr")).await.unwrap(), here);
    s.delete_policy_set(&team, "tags", Some(2)).await.unwrap();
    moved(s.policy_sets_version(Some("vctr")).await.unwrap(), "delete");
}
