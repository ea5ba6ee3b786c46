//! The local DynamoDB (moto server, as `scripts/with-moto.sh` starts it) must
//! never lose a write it acknowledged, however requests interleave.
//!
//! Stock moto 5.2.5 answers a failed `TransactWriteItems` by putting back a
//! deep copy of every table the transaction named, taken when the transaction
//! began: every other client's write acknowledged in between is undone. It
//! also serves requests on concurrent threads with no locking, so the deep
//! copy can meet a table changing under it and answer 500 ("dictionary
//! changed size during iteration"). Sortie fails conditional transactions
//! routinely (a submit to a busy environment), so the harness serialises
//! DynamoDB requests inside moto (`scripts/moto_server.py`); this test holds
//! it to that.

use std::collections::BTreeMap;
use std::sync::Arc;

use aws_config::retry::RetryConfig;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, ConditionCheck, KeySchemaElement, KeyType,
    Put, ScalarAttributeType, TransactWriteItem,
};
use aws_sdk_dynamodb::Client;
use sortie_testkit::{sdk_config, unique};
use tokio::sync::Semaphore;

/// Rounds, each on a fresh table. On stock moto one round loses dozens of
/// acknowledged puts; raise this to hunt rarer interleavings.
const ROUNDS: usize = 1;
/// Plain PutItems of distinct keys per round, each of which must survive.
const PUTS: usize = 300;
/// TransactWriteItems per round built to fail their condition check,
/// interleaved with the puts.
const FAILING_TRANSACTIONS: usize = 100;
/// Terms of the condition on each failing transaction's Put.
const CONDITION_TERMS: usize = 40;
/// Requests in flight at once: concurrent enough to interleave inside moto,
/// few enough that the server's listen backlog never drops a connection.
const IN_FLIGHT: usize = 64;

/// How one request ended.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    Ok,
    /// An HTTP response carrying an error: its status and error code.
    Service(u16, String),
    /// No HTTP response at all (connect failure, timeout, ...).
    NoResponse(String),
}

impl Outcome {
    fn of<T, E: ProvideErrorMetadata + std::fmt::Debug>(result: &Result<T, SdkError<E>>) -> Self {
        match result {
            Ok(_) => Outcome::Ok,
            Err(err) => match err.raw_response() {
                Some(raw) => {
                    Outcome::Service(raw.status().as_u16(), err.code().unwrap_or("?").to_owned())
                }
                None => Outcome::NoResponse(format!("{err:?}")),
            },
        }
    }

    fn is_5xx(&self) -> bool {
        matches!(self, Outcome::Service(status, _) if *status >= 500)
    }
}

/// What one round saw.
#[derive(Debug, Default)]
struct Round {
    put_outcomes: Vec<Outcome>,
    transaction_outcomes: Vec<Outcome>,
    acknowledged: usize,
    /// Keys of acknowledged puts a consistent read no longer finds.
    lost: Vec<String>,
    /// Keys a canceled transaction's Put left behind.
    leaked: Vec<String>,
}

fn s(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}

async fn create_table(ddb: &Client) -> String {
    let table = unique("sortie-moto-writes");
    ddb.create_table()
        .table_name(&table)
        .attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name("pk")
                .attribute_type(ScalarAttributeType::S)
                .build()
                .expect("attribute definition"),
        )
        .key_schema(
            KeySchemaElement::builder()
                .attribute_name("pk")
                .key_type(KeyType::Hash)
                .build()
                .expect("key schema element"),
        )
        .billing_mode(BillingMode::PayPerRequest)
        .send()
        .await
        .expect("create table");
    table
}

async fn exists(ddb: &Client, table: &str, key: &str) -> bool {
    ddb.get_item()
        .table_name(table)
        .key("pk", s(key))
        .consistent_read(true)
        .send()
        .await
        .unwrap_or_else(|e| panic!("get {key}: {e:?}"))
        .item()
        .is_some()
}

/// `PUTS` PutItems of distinct keys `put#i`, concurrently with
/// `FAILING_TRANSACTIONS` transactions of [ConditionCheck
/// `attribute_exists(pk)` on a key nobody writes, Put `txn#t`]; then a
/// consistent read of every key.
async fn round(ddb: &Client, table: &str) -> Round {
    let gate = Arc::new(Semaphore::new(IN_FLIGHT));
    let mut puts = Vec::with_capacity(PUTS);
    let mut transactions = Vec::with_capacity(FAILING_TRANSACTIONS);
    let every = PUTS / FAILING_TRANSACTIONS;
    for i in 0..PUTS {
        let (client, name, permits) = (ddb.clone(), table.to_owned(), gate.clone());
        puts.push(tokio::spawn(async move {
            let _permit = permits.acquire_owned().await.expect("semaphore open");
            let result = client
                .put_item()
                .table_name(&name)
                .item("pk", s(format!("put#{i}")))
                .item("n", AttributeValue::N(i.to_string()))
                .send()
                .await;
            (format!("put#{i}"), Outcome::of(&result))
        }));
        if i % every == every - 1 {
            let t = i / every;
            let (client, name, permits) = (ddb.clone(), table.to_owned(), gate.clone());
            transactions.push(tokio::spawn(async move {
                let _permit = permits.acquire_owned().await.expect("semaphore open");
                let check = ConditionCheck::builder()
                    .table_name(&name)
                    .key("pk", s(format!("absent#{t}")))
                    .condition_expression("attribute_exists(pk)")
                    .build()
                    .expect("condition check");
                // A long condition that holds: moto evaluates it (and applies
                // the Put) after the check above failed, keeping it busy
                // between its snapshot and its rollback, which is when it
                // loses other clients' writes.
                let mut put = Put::builder()
                    .table_name(&name)
                    .item("pk", s(format!("txn#{t}")))
                    .condition_expression(
                        (0..CONDITION_TERMS)
                            .map(|a| format!("attribute_not_exists(#a{a})"))
                            .collect::<Vec<_>>()
                            .join(" AND "),
                    );
                for a in 0..CONDITION_TERMS {
                    put = put.expression_attribute_names(format!("#a{a}"), format!("a{a}"));
                }
                let put = put.build().expect("put");
                let result = client
                    .transact_write_items()
                    .transact_items(TransactWriteItem::builder().condition_check(check).build())
                    .transact_items(TransactWriteItem::builder().put(put).build())
                    .send()
                    .await;
                (format!("txn#{t}"), Outcome::of(&result))
            }));
        }
    }

    let mut report = Round::default();
    let mut acknowledged = Vec::with_capacity(PUTS);
    for task in puts {
        let (key, outcome) = task.await.expect("put task");
        if outcome == Outcome::Ok {
            acknowledged.push(key);
        }
        report.put_outcomes.push(outcome);
    }
    let mut transaction_keys = Vec::with_capacity(FAILING_TRANSACTIONS);
    for task in transactions {
        let (key, outcome) = task.await.expect("transaction task");
        transaction_keys.push(key);
        report.transaction_outcomes.push(outcome);
    }
    report.acknowledged = acknowledged.len();
    for key in acknowledged {
        if !exists(ddb, table, &key).await {
            report.lost.push(key);
        }
    }
    for key in transaction_keys {
        if exists(ddb, table, &key).await {
            report.leaked.push(key);
        }
    }
    report
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn failed_transactions_never_undo_concurrent_acknowledged_puts() {
    sortie_testkit::require_aws!();
    let config = sdk_config().await;
    // One attempt: a 500 must show up here, not be retried away by the SDK.
    let ddb = Client::from_conf(
        aws_sdk_dynamodb::config::Builder::from(&config)
            .retry_config(RetryConfig::disabled())
            .build(),
    );

    let mut rounds = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let table = create_table(&ddb).await;
        rounds.push(round(&ddb, &table).await);
        ddb.delete_table()
            .table_name(&table)
            .send()
            .await
            .expect("delete table");
    }

    let mut tally: BTreeMap<(&str, &Outcome), usize> = BTreeMap::new();
    for r in &rounds {
        for o in &r.put_outcomes {
            *tally.entry(("PutItem", o)).or_default() += 1;
        }
        for o in &r.transaction_outcomes {
            *tally.entry(("TransactWriteItems", o)).or_default() += 1;
        }
    }
    let server_errors: usize = tally
        .iter()
        .filter(|((_, o), _)| o.is_5xx())
        .map(|(_, n)| n)
        .sum();
    let lost: Vec<&String> = rounds.iter().flat_map(|r| &r.lost).collect();
    let leaked: Vec<&String> = rounds.iter().flat_map(|r| &r.leaked).collect();
    let per_round: Vec<String> = rounds
        .iter()
        .map(|r| {
            format!(
                "{} of {} acknowledged puts lost, {} 5xx",
                r.lost.len(),
                r.acknowledged,
                r.put_outcomes
                    .iter()
                    .chain(&r.transaction_outcomes)
                    .filter(|o| o.is_5xx())
                    .count()
            )
        })
        .collect();
    let summary = format!(
        "{ROUNDS} rounds of {PUTS} puts + {FAILING_TRANSACTIONS} failing transactions: \
         {} acknowledged puts lost, {server_errors} 5xx ({}); outcomes {tally:?}; \
         lost {lost:?}; canceled transactions' puts visible {leaked:?}",
        lost.len(),
        per_round.join("; "),
    );
    eprintln!("moto_writes: {summary}");

    assert!(lost.is_empty(), "acknowledged writes lost: {summary}");
    assert_eq!(server_errors, 0, "server errors: {summary}");
    let canceled = Outcome::Service(400, "TransactionCanceledException".into());
    for ((op, outcome), n) in &tally {
        let expected = match *op {
            "PutItem" => Outcome::Ok,
            _ => canceled.clone(),
        };
        assert_eq!(
            **outcome, expected,
            "{n} {op} answered {outcome:?}: {summary}"
        );
    }
    assert!(leaked.is_empty(), "a canceled transaction wrote: {summary}");
}
