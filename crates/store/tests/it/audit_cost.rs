//! What the audit trail costs each change (issue 44's goal): at most one item more and no
//! extra round trip. Each change is made twice on DynamoDB (moto, through the loopback
//! proxy that records every request): outside an audit scope and inside one. Inside, the
//! change's one write becomes a transaction carrying exactly one more item (its entry),
//! and the requests are otherwise the same. The two documented exceptions (an unlock and
//! an unfreeze read the lock first: a transaction cannot return the old value their single
//! write returned) are measured here too.

use std::collections::{BTreeMap, BTreeSet};

use chrono::Utc;
use serde_json::Value;
use sortie_core::expiry::ExpiryLimits;
use sortie_core::lock::EnvLock;
use sortie_core::{
    EnvPath, Environment, Grantee, GroupPath, Membership, Role, Runner, RunnerId, RunnerLink,
    RunnerSpec,
};
use sortie_store::audit::{AuditScope, Draft};
use sortie_store::{
    AuditRange, AuditStore, DynamoStore, EnvironmentStore, LockStore, MembershipRecord,
    MembershipStore, RunnerStore,
};
use sortie_testkit::proxy::{FaultProxy, Recorded};

/// The requests a change made: each operation, with the items of a write.
fn calls(recorded: &[Recorded]) -> Vec<(String, usize)> {
    recorded
        .iter()
        .map(|r| {
            let op = r.operation.clone().unwrap_or_default();
            let items = match op.as_str() {
                "TransactWriteItems" => serde_json::from_slice::<Value>(&r.body).unwrap()
                    ["TransactItems"]
                    .as_array()
                    .map_or(0, Vec::len),
                "PutItem" | "UpdateItem" | "DeleteItem" => 1,
                _ => 0,
            };
            (op, items)
        })
        .collect()
}

fn writes(calls: &[(String, usize)]) -> Vec<usize> {
    calls
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(_, n)| *n)
        .collect()
}

fn runner(id: &str) -> Runner {
    Runner {
        id: RunnerId::parse(id).unwrap(),
        spec: RunnerSpec::parse(
            "runner_configuration: {type: local}\nstate_storage_configuration: {type: local, directory: /tmp/s}",
        )
        .unwrap(),
    }
}

fn env(path: &str) -> Environment {
    Environment {
        settings: Default::default(),
        path: EnvPath::parse(path).unwrap(),
        env_type: "development".into(),
        labels: BTreeMap::new(),
        tags: BTreeSet::new(),
        runner: RunnerLink {
            runner_id: RunnerId::parse("acme/local").unwrap(),
            rule_id: "r1".into(),
            linked_by: "alice".into(),
            linked_at: Utc::now(),
        },
    }
}

fn grant(id: &str) -> MembershipRecord {
    MembershipRecord {
        id: id.into(),
        membership: Membership {
            group: GroupPath::parse("acme").unwrap(),
            role: Role::Viewer,
            grantee: Grantee::Subject {
                subject: format!("user-{id}"),
                issuer: None,
            },
        },
        granted_by: "test".into(),
        granted_at: Utc::now(),
    }
}

/// Each change, made on object `n` (so the plain and the audited runs touch their own).
async fn change(store: &DynamoStore, what: &str, n: u32) {
    let lock = EnvLock::new("alice", Utc::now(), "freeze").unwrap();
    match what {
        "create_runner" => drop(
            store
                .create_runner(&runner(&format!("acme/r{n}")))
                .await
                .unwrap(),
        ),
        "update_runner" => drop(
            store
                .update_runner(&runner(&format!("acme/u{n}")), Some(1))
                .await
                .unwrap(),
        ),
        "delete_runner" => store
            .delete_runner(&RunnerId::parse(&format!("acme/d{n}")).unwrap(), None)
            .await
            .unwrap(),
        "create_environment" => drop(
            store
                .create_environment(&env(&format!("acme/e{n}")))
                .await
                .unwrap(),
        ),
        "lock_environment" => drop(
            store
                .lock_environment(&EnvPath::parse(&format!("acme/l{n}")).unwrap(), &lock)
                .await
                .unwrap(),
        ),
        "unlock_environment" => drop(
            store
                .unlock_environment(&EnvPath::parse(&format!("acme/l{n}")).unwrap())
                .await
                .unwrap(),
        ),
        "grant_membership" => store
            .put_membership(&grant(&format!("g{n}")))
            .await
            .unwrap(),
        "set_group_expiry" => store
            .set_group_expiry(
                &GroupPath::parse(&format!("acme/t{n}")).unwrap(),
                &ExpiryLimits::default(),
            )
            .await
            .unwrap(),
        other => panic!("no change {other}"),
    }
}

/// What each change needs first, on object `n`.
async fn prepare(store: &DynamoStore, what: &str, n: u32) {
    match what {
        "update_runner" => drop(
            store
                .create_runner(&runner(&format!("acme/u{n}")))
                .await
                .unwrap(),
        ),
        "delete_runner" => drop(
            store
                .create_runner(&runner(&format!("acme/d{n}")))
                .await
                .unwrap(),
        ),
        "lock_environment" => drop(
            store
                .create_environment(&env(&format!("acme/l{n}")))
                .await
                .unwrap(),
        ),
        "unlock_environment" => {
            drop(
                store
                    .create_environment(&env(&format!("acme/l{n}")))
                    .await
                    .unwrap(),
            );
            change(store, "lock_environment", n).await;
        }
        _ => {}
    }
}

#[tokio::test]
async fn an_audited_change_writes_one_item_more_in_the_same_round_trip() {
    sortie_testkit::require_aws!();
    let direct = sortie_testkit::sdk_config().await;
    let proxy = FaultProxy::start(&sortie_testkit::endpoint());
    let via = direct.to_builder().endpoint_url(proxy.url()).build();
    let store = DynamoStore::new(
        aws_sdk_dynamodb::Client::new(&via),
        sortie_testkit::unique("sortie-audit-cost"),
    );
    store.ensure_table().await.unwrap();
    store.create_runner(&runner("acme/local")).await.unwrap();

    let same = [
        "create_runner",
        "update_runner",
        "delete_runner",
        "create_environment",
        "lock_environment",
        "grant_membership",
        "set_group_expiry",
    ];
    for (n, what) in same.iter().chain(["unlock_environment"].iter()).enumerate() {
        let n = n as u32;
        prepare(&store, what, 2 * n).await;
        prepare(&store, what, 2 * n + 1).await;
        proxy.clear();
        change(&store, what, 2 * n).await;
        let plain = calls(&proxy.requests());
        proxy.clear();
        let scope = AuditScope::new(Draft {
            action: what.to_string(),
            target: format!("/test/{what}"),
            org: Some("acme".into()),
            ..Draft::default()
        });
        scope.run(change(&store, what, 2 * n + 1)).await;
        let audited = calls(&proxy.requests());
        assert!(scope.written().is_some(), "{what}: the entry was written");
        let (plain_writes, audited_writes) = (writes(&plain), writes(&audited));
        assert_eq!(
            audited_writes.iter().sum::<usize>(),
            plain_writes.iter().sum::<usize>() + 1,
            "{what}: one item more: {plain:?} then {audited:?}"
        );
        assert_eq!(
            audited_writes.len(),
            plain_writes.len(),
            "{what}: no write more: {plain:?} then {audited:?}"
        );
        let reads = |c: &[(String, usize)]| c.iter().filter(|(_, n)| *n == 0).count();
        let extra_reads = usize::from(*what == "unlock_environment");
        assert_eq!(
            reads(&audited),
            reads(&plain) + extra_reads,
            "{what}: reads: {plain:?} then {audited:?}"
        );
        println!("{what}: {plain:?} -> {audited:?}");
    }
    // Every entry is in the organisation's chain, once.
    let page = store
        .audit_page(
            "acme",
            &AuditRange {
                limit: 100,
                ..AuditRange::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(page.records.len(), same.len() + 1);
}
