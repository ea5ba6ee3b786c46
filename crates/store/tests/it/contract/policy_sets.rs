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
