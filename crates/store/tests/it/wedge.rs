//! "No input can wedge Sortie", at the store: a submit is atomic (a failure at any of its
//! DynamoDB calls leaves the environment exactly as it was, and a retry succeeds), an input
//! DynamoDB would refuse or could not give back is refused before anything is written, and
//! old-format rule sets are read and migrated. DynamoDB on moto, through the real SDK and the
//! loopback fault proxy.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use aws_sdk_dynamodb::types::AttributeValue;
use chrono::Utc;
use sortie_core::{
    EnvPath, Environment, GroupPath, Job, JobRequest, Runner, RunnerId, RunnerLink, RunnerRule,
    RunnerSpec,
};
use sortie_store::{
    DynamoStore, EnvironmentStore, IdempotencyKey, JobStore, RuleStore, RunnerStore, StoreError,
};
use sortie_testkit::proxy::FaultProxy;

struct Rig {
    proxy: FaultProxy,
    store: DynamoStore,
    raw: aws_sdk_dynamodb::Client,
}

async fn rig() -> Rig {
    let direct = sortie_testkit::sdk_config().await;
    let proxy = FaultProxy::start(&sortie_testkit::endpoint());
    let via = direct.to_builder().endpoint_url(proxy.url()).build();
    let table = sortie_testkit::unique("sortie");
    let store = DynamoStore::new(aws_sdk_dynamodb::Client::new(&via), table);
    store.ensure_table().await.unwrap();
    store
        .create_runner(&Runner {
            id: RunnerId::parse("acme/local").unwrap(),
            spec: RunnerSpec::parse("runner_configuration: {type: local}\nstate_storage_configuration: {type: local, directory: /tmp/s}").unwrap(),
        })
        .await
        .unwrap();
    Rig {
        proxy,
        store,
        raw: aws_sdk_dynamodb::Client::new(&direct),
    }
}

impl Rig {
    async fn env(&self, path: &str) -> EnvPath {
        let env = Environment {
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
        };
        self.store.create_environment(&env).await.unwrap();
        env.path
    }

    async fn get(&self, pk: String, sk: &str) -> Option<HashMap<String, AttributeValue>> {
        self.raw
            .get_item()
            .table_name(self.store.table())
            .key("pk", AttributeValue::S(pk))
            .key("sk", AttributeValue::S(sk.into()))
            .consistent_read(true)
            .send()
            .await
            .unwrap()
            .item
    }

    async fn queue_len(&self, env: &EnvPath) -> usize {
        self.raw
            .query()
            .table_name(self.store.table())
            .key_condition_expression("pk = :pk")
            .expression_attribute_values(":pk", AttributeValue::S(format!("QUEUE#{env}")))
            .consistent_read(true)
            .send()
            .await
            .unwrap()
            .items
            .unwrap_or_default()
            .len()
    }

    /// Everything a submit may change: the lock, the queue, the job item, the idempotency key.
    async fn snapshot(&self, env: &EnvPath, job: &Job, key: &str) -> Snapshot {
        let e = self.store.get_environment(env).await.unwrap().item;
        Snapshot {
            active_job: e.active_job.map(|j| j.to_string()),
            queued_count: e.queued_count,
            queue_seq: e.queue_seq,
            queue_len: self.queue_len(env).await,
            job_item: self.get(format!("JOB#{}", job.id), "JOB").await.is_some(),
            idem_item: self
                .get(format!("IDEM#{env}#{key}"), "IDEM")
                .await
                .is_some(),
        }
    }
}

#[derive(Debug, PartialEq)]
struct Snapshot {
    active_job: Option<String>,
    queued_count: u64,
    queue_seq: u64,
    queue_len: usize,
    job_item: bool,
    idem_item: bool,
}

/// A job whose variables are taken as given: the store is the last line of defence, so
/// these requests skip the API's validation (which refuses the bad ones too), as an item
/// written by an older version or a bug would.
fn job_with(env: &EnvPath, request: &str) -> Job {
    let mut raw: serde_json::Value = serde_json::from_str(request).unwrap();
    let variables = raw
        .as_object_mut()
        .and_then(|o| o.remove("variables"))
        .unwrap_or_default();
    let mut request = JobRequest::from_value(&raw).unwrap();
    request.variables = serde_json::from_value(variables).unwrap_or_default();
    Job::new(
        sortie_core::tokens::new_id(),
        env.clone(),
        RunnerId::parse("acme/local").unwrap(),
        request,
        "alice".into(),
        Utc::now(),
    )
}

fn job(env: &EnvPath) -> Job {
    job_with(
        env,
        r#"{"operation":"apply","files":{"main.tf":""},"variables":{"n":3}}"#,
    )
}

fn idem(key: &str) -> IdempotencyKey {
    IdempotencyKey {
        key: key.into(),
        request_hash: "h1".into(),
    }
}

/// The DynamoDB operations of a clean submit, in order (table creation excluded).
async fn clean_submit_ops(r: &Rig, env: &EnvPath) -> Vec<String> {
    r.proxy.clear();
    let j = job(env);
    r.store.submit_job(&j, Some(&idem("clean"))).await.unwrap();
    r.proxy
        .requests()
        .into_iter()
        .filter_map(|q| q.operation)
        .collect()
}

/// Fails each DynamoDB call of the submit path in turn, with a non-retryable and with a
/// retryable error, and checks that nothing changed and that a retry then succeeds.
async fn each_step_fails_cleanly(busy: bool) {
    let r = rig().await;
    // A twin environment in the same state shows the calls a clean submit makes.
    let twin = r.env(&format!("acme/twin{}/prod", u8::from(busy))).await;
    if busy {
        r.store.submit_job(&job(&twin), None).await.unwrap();
    }
    let ops = clean_submit_ops(&r, &twin).await;
    assert!(!ops.is_empty());
    eprintln!("submit calls (busy = {busy}): {ops:?}");
    let faults: [(u16, &str, usize); 2] = [
        (400, "ValidationException", 1),
        // The SDK tries a 500 three times; every attempt fails.
        (500, "InternalServerError", 3),
    ];
    for (step, op) in ops.iter().enumerate() {
        let skip = ops[..step].iter().filter(|o| *o == op).count();
        for (status, code, times) in faults {
            let env = r.env(&format!("acme/s{step}x{status}/prod")).await;
            if busy {
                r.store.submit_job(&job(&env), None).await.unwrap();
            }
            let j = job(&env);
            let key = format!("k{step}");
            let before = r.snapshot(&env, &j, &key).await;
            r.proxy.clear();
            r.proxy
                .inject_after(op, skip, times, status, code, "injected by the test");
            let err = r
                .store
                .submit_job(&j, Some(&idem(&key)))
                .await
                .expect_err(&format!("step {step} ({op}) failed with {code}"));
            assert_eq!(
                err.is_retryable(),
                status >= 500,
                "step {step} ({op}) {code}: {err}"
            );
            r.proxy.clear();
            assert_eq!(
                r.snapshot(&env, &j, &key).await,
                before,
                "step {step} ({op}) failed with {code}: the environment must be as it was"
            );
            // The client retries: it succeeds, exactly once.
            let done = r.store.submit_job(&j, Some(&idem(&key))).await.unwrap();
            assert!(!done.replayed);
            assert_eq!(done.took_lock, !busy);
            let after = r.snapshot(&env, &j, &key).await;
            assert!(after.job_item && after.idem_item);
            if busy {
                assert_eq!(after.queued_count, before.queued_count + 1);
                assert_eq!(after.queue_seq, before.queue_seq + 1);
                assert_eq!(after.queue_len, before.queue_len + 1);
                assert_eq!(after.active_job, before.active_job);
            } else {
                assert_eq!(after.active_job.as_deref(), Some(j.id.as_str()));
            }
            assert_eq!(r.store.get_job(&j.id).await.unwrap().job, j);
        }
    }
}

#[tokio::test]
async fn a_failure_at_each_step_of_a_submit_to_an_idle_environment_changes_nothing() {
    sortie_testkit::require_aws!();
    each_step_fails_cleanly(false).await;
}

#[tokio::test]
async fn a_failure_at_each_step_of_a_submit_to_a_busy_environment_changes_nothing() {
    sortie_testkit::require_aws!();
    each_step_fails_cleanly(true).await;
}

fn nested(depth: usize) -> String {
    let mut v = "1".to_string();
    for _ in 0..depth {
        v = format!("{{\"a\":{v}}}");
    }
    v
}

/// Inputs DynamoDB refuses (too deep, an empty map key, over 400 KB) are refused by the
/// store before any write, as input errors, and leave the environment working.
#[tokio::test]
async fn inputs_dynamodb_would_refuse_are_refused_before_any_write_and_nothing_wedges() {
    sortie_testkit::require_aws!();
    let r = rig().await;
    let big = "x".repeat(450 * 1024);
    let bad = [
        (
            "deep",
            format!(
                r#"{{"operation":"plan","files":{{"main.tf":""}},"variables":{{"deep":{}}}}}"#,
                nested(40)
            ),
        ),
        (
            "empty key",
            r#"{"operation":"plan","files":{"main.tf":""},"variables":{"m":{"":1}}}"#.to_string(),
        ),
        (
            "too large",
            format!(
                r#"{{"operation":"plan","files":{{"main.tf":""}},"variables":{{"big":"{big}"}}}}"#
            ),
        ),
    ];
    for busy in [false, true] {
        for (what, request) in &bad {
            let env = r
                .env(&format!(
                    "acme/{}{}/prod",
                    what.replace(' ', "-"),
                    u8::from(busy)
                ))
                .await;
            if busy {
                r.store.submit_job(&job(&env), None).await.unwrap();
            }
            let j = job_with(&env, request);
            let before = r.snapshot(&env, &j, "k").await;
            let err = r
                .store
                .submit_job(&j, Some(&idem("k")))
                .await
                .expect_err(what);
            assert!(
                !matches!(err, StoreError::Aws { .. } | StoreError::Corrupt { .. }),
                "{what} (busy = {busy}): an input error, not a store failure: {err:?}"
            );
            assert!(!err.is_retryable());
            assert_eq!(r.snapshot(&env, &j, "k").await, before, "{what}");
            // The environment still works: its jobs list, and a good job runs next.
            r.store.list_jobs(&env, 10, None).await.unwrap();
            let good = job(&env);
            let done = r.store.submit_job(&good, Some(&idem("k"))).await.unwrap();
            assert!(!done.replayed, "{what}: the refused submit left no key");
            assert_eq!(done.took_lock, !busy);
            assert_eq!(
                r.store.list_jobs(&env, 10, None).await.unwrap().jobs.len(),
                1 + usize::from(busy)
            );
        }
    }
}

fn rule(id: &str, scope: &str, priority: i32) -> RunnerRule {
    RunnerRule {
        id: id.into(),
        scope: GroupPath::parse(scope).unwrap(),
        runner_id: RunnerId::parse("acme/local").unwrap(),
        criteria: Default::default(),
        priority,
    }
}

/// Writes an old-format rule set: every rule of a scope in one `RULES` item.
async fn old_rule_set(r: &Rig, scope: &str, version: u64, rules: &[RunnerRule]) {
    let rules: Vec<AttributeValue> = rules
        .iter()
        .map(|x| serde_dynamo::to_attribute_value(x).unwrap())
        .collect();
    r.raw
        .put_item()
        .table_name(r.store.table())
        .item("pk", AttributeValue::S(format!("RULES#{scope}")))
        .item("sk", AttributeValue::S("RULES".into()))
        .item("kind", AttributeValue::S("rules".into()))
        .item("version", AttributeValue::N(version.to_string()))
        .item("rules", AttributeValue::L(rules))
        .send()
        .await
        .unwrap();
}

fn ids(rules: &[RunnerRule]) -> BTreeSet<String> {
    rules.iter().map(|r| r.id.clone()).collect()
}

#[tokio::test]
async fn an_old_format_rule_set_is_read_and_migrated_on_the_next_write() {
    sortie_testkit::require_aws!();
    let r = rig().await;
    // A small set, and one larger than a transaction can hold (100 items).
    let small: Vec<RunnerRule> = (0..3).map(|i| rule(&format!("r{i}"), "acme", i)).collect();
    let large: Vec<RunnerRule> = (0..150)
        .map(|i| rule(&format!("r{i:03}"), "acme/payments", i))
        .collect();
    old_rule_set(&r, "acme", 5, &small).await;
    old_rule_set(&r, "acme/payments", 9, &large).await;

    let listed = r
        .store
        .list_rules(&GroupPath::parse("acme").unwrap())
        .await
        .unwrap();
    assert_eq!((ids(&listed.item), listed.version), (ids(&small), 5));
    let all = r
        .store
        .rules_for(&GroupPath::parse("acme/payments/eu").unwrap())
        .await
        .unwrap();
    assert_eq!(all.len(), 153);

    // The next write to each scope converts it: old item gone, one item per rule.
    let created = r.store.create_rule(&rule("new", "acme", 0)).await.unwrap();
    assert_eq!(created.version, 6);
    let updated = r
        .store
        .update_rule(&rule("r007", "acme/payments", 77), Some(9))
        .await
        .unwrap();
    assert_eq!(updated.version, 10);
    for (scope, n, version) in [("acme", 4, 6), ("acme/payments", 150, 10)] {
        assert!(
            r.get(format!("RULES#{scope}"), "RULES").await.is_none(),
            "{scope}: old item deleted"
        );
        assert!(r.get(format!("RULES#{scope}"), "RULE#new").await.is_some() || scope != "acme");
        let listed = r
            .store
            .list_rules(&GroupPath::parse(scope).unwrap())
            .await
            .unwrap();
        assert_eq!((listed.item.len(), listed.version), (n, version), "{scope}");
    }
    let listed = r
        .store
        .list_rules(&GroupPath::parse("acme/payments").unwrap())
        .await
        .unwrap();
    assert_eq!(
        listed
            .item
            .iter()
            .find(|x| x.id == "r007")
            .unwrap()
            .priority,
        77
    );
    // A stale If-Match still means what it meant.
    assert!(matches!(
        r.store
            .delete_rule(&GroupPath::parse("acme").unwrap(), "r0", Some(5))
            .await,
        Err(StoreError::VersionMismatch { actual: 6, .. })
    ));
    r.store
        .delete_rule(&GroupPath::parse("acme").unwrap(), "r0", Some(6))
        .await
        .unwrap();
    let all = r
        .store
        .rules_for(&GroupPath::parse("acme/payments/eu").unwrap())
        .await
        .unwrap();
    assert_eq!(all.len(), 153);
}
