//! Contract cases for runner rules: one item per rule, read in one batch, updated in place,
//! and the rule-set and organisation versions they move.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use sortie_core::{EnvPath, GroupPath, RunnerId, RunnerRule};
use sortie_store::{Store, StoreError};

fn rule(id: &str, scope: &str, runner: &str) -> RunnerRule {
    RunnerRule {
        id: id.into(),
        scope: GroupPath::parse(scope).unwrap(),
        runner_id: RunnerId::parse(runner).unwrap(),
        criteria: Default::default(),
        priority: 0,
    }
}

pub async fn rules_are_created_listed_read_in_one_batch_and_deleted<S: Store + 'static>(s: Arc<S>) {
    s.create_rule(&rule("shared", "", "fargate-shared"))
        .await
        .unwrap();
    s.create_rule(&rule("org", "acme", "acme/r")).await.unwrap();
    let v = s
        .create_rule(&rule("team", "acme/payments", "acme/r"))
        .await
        .unwrap();
    assert_eq!(v.version, 1);
    s.create_rule(&rule("team-2", "acme/payments", "acme/r"))
        .await
        .unwrap();
    s.create_rule(&rule("elsewhere", "globex", "globex/r"))
        .await
        .unwrap();
    assert!(matches!(
        s.create_rule(&rule("team", "acme/payments", "acme/r"))
            .await,
        Err(StoreError::AlreadyExists { kind: "rule", .. })
    ));
    let listed = s
        .list_rules(&GroupPath::parse("acme/payments").unwrap())
        .await
        .unwrap();
    assert_eq!(listed.version, 2);
    assert_eq!(listed.item.len(), 2);
    let mut ids: Vec<String> = s
        .rules_for(&GroupPath::parse("acme/payments/eu").unwrap())
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    ids.sort();
    assert_eq!(
        ids,
        vec!["org", "shared", "team", "team-2"],
        "ancestors' rules, never a sibling's"
    );
    assert!(matches!(
        s.delete_rule(&GroupPath::parse("acme/payments").unwrap(), "team", Some(1))
            .await,
        Err(StoreError::VersionMismatch { .. })
    ));
    s.delete_rule(&GroupPath::parse("acme/payments").unwrap(), "team", Some(2))
        .await
        .unwrap();
    assert!(matches!(
        s.delete_rule(&GroupPath::parse("acme/payments").unwrap(), "team", None)
            .await,
        Err(StoreError::NotFound { kind: "rule", .. })
    ));
}

/// Rules are stored one per item: no number of rules in a scope reaches DynamoDB's 400 KB
/// item limit (2,000 rules with labels were about 500 KB as one rule-set item).
pub async fn two_thousand_rules_in_one_scope_list_back_and_resolve<S: Store + 'static>(s: Arc<S>) {
    const N: usize = 2000;
    let make = |i: usize| {
        let mut r = rule(&format!("rule-{i:04}"), "acme/payments", "acme/r");
        r.priority = i as i32;
        r.criteria.labels = BTreeMap::from([
            (
                "team".to_string(),
                format!("team-{i:04}-{}", "x".repeat(160)),
            ),
            ("cost-center".to_string(), format!("cc-{i}")),
        ]);
        r
    };
    let mut last = 0;
    for i in 0..N {
        last = s.create_rule(&make(i)).await.unwrap().version;
    }
    assert_eq!(last, N as u64, "one version per create");
    let scope = GroupPath::parse("acme/payments").unwrap();
    let listed = s.list_rules(&scope).await.unwrap();
    assert_eq!(listed.version, N as u64);
    assert_eq!(listed.item.len(), N);
    let mut got = listed.item.clone();
    got.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(got, (0..N).map(make).collect::<Vec<_>>());
    let all = s
        .rules_for(&GroupPath::parse("acme/payments/eu").unwrap())
        .await
        .unwrap();
    assert_eq!(all.len(), N);
    // They resolve: the environment labelled like rule 1234 picks it.
    let index = sortie_core::RuleIndex::compile(all);
    let path = EnvPath::parse("acme/payments/eu/prod").unwrap();
    let labels = make(1234).criteria.labels;
    let pick = index
        .resolve(&sortie_core::EnvFacts {
            path: &path,
            env_type: "production",
            labels: &labels,
            tags: &BTreeSet::new(),
        })
        .unwrap();
    assert_eq!(pick.rule.id, "rule-1234");
    // And they are still changed one by one under the scope's version.
    let v = s
        .update_rule(&make(7), Some(N as u64))
        .await
        .unwrap()
        .version;
    assert_eq!(v, N as u64 + 1);
    s.delete_rule(&scope, "rule-0008", Some(v)).await.unwrap();
    assert_eq!(s.list_rules(&scope).await.unwrap().item.len(), N - 1);
}

/// Each change bumps its scope's rule-set version and its organisation's rule version; a
/// root (shared) rule moves every organisation's; another organisation's never does.
pub async fn rule_versions_move_per_scope_and_per_org<S: Store + 'static>(s: Arc<S>) {
    assert_eq!(s.rules_version(Some("acme")).await.unwrap(), 0);
    assert_eq!(s.rules_version(None).await.unwrap(), 0);
    s.create_rule(&rule("a", "acme", "acme/r")).await.unwrap();
    let v1 = s.rules_version(Some("acme")).await.unwrap();
    assert!(v1 > 0);
    s.create_rule(&rule("b", "acme/payments", "acme/r"))
        .await
        .unwrap();
    let v2 = s.rules_version(Some("acme")).await.unwrap();
    assert!(v2 > v1, "a deeper scope of the org moves it");
    let globex = s.rules_version(Some("globex")).await.unwrap();
    s.create_rule(&rule("g", "globex", "globex/r"))
        .await
        .unwrap();
    assert_eq!(
        s.rules_version(Some("acme")).await.unwrap(),
        v2,
        "another org's rule"
    );
    assert!(s.rules_version(Some("globex")).await.unwrap() > globex);
    // Update and delete move it too, and the scope's own version goes 1, 2, 3.
    let scope = GroupPath::parse("acme/payments").unwrap();
    let up = s
        .update_rule(&rule("b", "acme/payments", "acme/other"), Some(1))
        .await
        .unwrap();
    assert_eq!(up.version, 2);
    let v3 = s.rules_version(Some("acme")).await.unwrap();
    assert!(v3 > v2);
    s.delete_rule(&scope, "b", Some(2)).await.unwrap();
    let v4 = s.rules_version(Some("acme")).await.unwrap();
    assert!(v4 > v3);
    assert_eq!(
        s.list_rules(&scope).await.unwrap().version,
        3,
        "kept after the last delete"
    );
    // A refused change moves nothing.
    assert!(s.delete_rule(&scope, "b", None).await.is_err());
    assert_eq!(s.rules_version(Some("acme")).await.unwrap(), v4);
    // A shared rule can apply in every org: every org's version moves.
    let root = s.rules_version(None).await.unwrap();
    s.create_rule(&rule("shared", "", "fargate-shared"))
        .await
        .unwrap();
    assert!(s.rules_version(None).await.unwrap() > root);
    assert!(s.rules_version(Some("acme")).await.unwrap() > v4);
    assert!(s.rules_version(Some("globex")).await.unwrap() > globex + 1);
}

pub async fn rules_are_updated_in_place_checking_the_rule_set_version<S: Store + 'static>(
    s: Arc<S>,
) {
    let scope = GroupPath::parse("acme/payments").unwrap();
    s.create_rule(&rule("team", "acme/payments", "acme/r"))
        .await
        .unwrap();
    let other = s
        .create_rule(&rule("team-2", "acme/payments", "acme/r"))
        .await
        .unwrap();
    assert_eq!(other.version, 2);

    // An update replaces the rule, keeps its place, and bumps the rule-set version.
    let mut changed = rule("team", "acme/payments", "acme/payments/fast");
    changed.priority = 5;
    changed.criteria.env_type = Some("production".into());
    let updated = s.update_rule(&changed, Some(2)).await.unwrap();
    assert_eq!(updated.version, 3);
    assert_eq!(updated.item, changed);
    let listed = s.list_rules(&scope).await.unwrap();
    assert_eq!(listed.version, 3);
    assert_eq!(listed.item, vec![changed.clone(), other.item.clone()]);
    assert!(s
        .rules_for(&GroupPath::parse("acme/payments/eu").unwrap())
        .await
        .unwrap()
        .contains(&changed));
    // Without an expected version it still writes on the version it read.
    changed.priority = 6;
    assert_eq!(s.update_rule(&changed, None).await.unwrap().version, 4);

    // A stale version is refused, as delete_rule refuses it, and changes nothing.
    let mut stale = changed.clone();
    stale.priority = 99;
    match s.update_rule(&stale, Some(3)).await {
        Err(StoreError::VersionMismatch {
            kind: "rule",
            id,
            expected: 3,
            actual: 4,
        }) => assert_eq!(id, "acme/payments:team"),
        other => panic!("expected VersionMismatch, got {other:?}"),
    }
    let after = s.list_rules(&scope).await.unwrap();
    assert_eq!(after.version, 4);
    assert_eq!(after.item, vec![changed.clone(), other.item.clone()]);

    // A rule that is not there, in a scope with rules or in one without, is NotFound.
    match s
        .update_rule(&rule("ghost", "acme/payments", "acme/r"), None)
        .await
    {
        Err(StoreError::NotFound { kind: "rule", id }) => assert_eq!(id, "acme/payments:ghost"),
        other => panic!("expected NotFound, got {other:?}"),
    }
    match s
        .update_rule(&rule("team", "globex", "globex/r"), None)
        .await
    {
        Err(StoreError::NotFound { kind: "rule", id }) => assert_eq!(id, "globex:team"),
        other => panic!("expected NotFound, got {other:?}"),
    }
    assert_eq!(s.list_rules(&scope).await.unwrap().version, 4);
    assert_eq!(
        s.list_rules(&GroupPath::parse("globex").unwrap())
            .await
            .unwrap()
            .version,
        0,
        "a refused update creates no rule set"
    );
}
