//! The DynamoDB implementation of the store traits: one table, documented in
//! `docs/decisions/dynamodb-table.md`.
//!
//! This module holds [`DynamoStore`] and the helpers every aggregate shares (reads,
//! transactions, queries, version checks); `keys` and `items` are the table's layout,
//! `schema` creates the table, and one module per aggregate implements its trait.

use std::collections::HashMap;

use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use aws_sdk_dynamodb::types::{AttributeValue, Delete, Put, TransactWriteItem, Update};
use aws_sdk_dynamodb::Client;
use sortie_core::{EnvPath, RunnerId};

use crate::error::aws;
use crate::{EnvironmentRecord, StoreError, Versioned};

mod audit;
mod environments;
mod expiry;
mod items;
mod jobs;
mod keys;
mod locks;
mod memberships;
mod notifications;
mod policy_sets;
mod pools;
mod rules;
mod runners;
mod schema;
mod submit;
mod unreadable;
mod vcs;

use items::{from_item, EnvItem, JobItem, RunnerItem};
use keys::{env_key, job_key, runner_key};

type Item = HashMap<String, AttributeValue>;

/// How often a conditional read-modify-write is retried on a concurrent change.
const RETRIES: usize = 8;

/// The DynamoDB store.
#[derive(Debug, Clone)]
pub struct DynamoStore {
    client: Client,
    table: String,
    /// The `Limit` of each page of the gsi4 environment listings; `None` lets DynamoDB fill
    /// its 1 MB pages.
    page_size: Option<i32>,
    /// Where the audit trail is exported, when anywhere.
    archive: Option<std::sync::Arc<dyn crate::AuditArchive>>,
}

fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

fn n(v: impl ToString) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

/// A record field as its DynamoDB attribute.
fn attribute<T: serde::Serialize>(v: &T) -> AttributeValue {
    serde_dynamo::to_attribute_value(v).expect("domain values serialise")
}

/// True when a write failed its condition expression (the item was not as expected).
fn condition_failed<E: ProvideErrorMetadata>(e: &aws_sdk_dynamodb::error::SdkError<E>) -> bool {
    e.as_service_error().and_then(|se| se.code()) == Some("ConditionalCheckFailedException")
}

/// The codes of a cancelled transaction's reasons, in item order (`None` where an item passed).
fn cancellation_codes<E: ProvideErrorMetadata>(
    err: &aws_sdk_dynamodb::error::SdkError<E>,
    reasons: Option<Vec<Option<String>>>,
    items: usize,
) -> Option<Vec<Option<String>>> {
    if let Some(r) = reasons {
        return Some(r);
    }
    // Fall back to the message: "... cancellation reasons [ConditionalCheckFailed, None]".
    let msg = err
        .as_service_error()
        .and_then(|e| e.message())
        .unwrap_or_default();
    let start = msg.find('[')?;
    let end = msg.rfind(']')?;
    let codes: Vec<Option<String>> = msg[start + 1..end]
        .split(',')
        .map(|c| c.trim())
        .map(|c| {
            if c == "None" || c.is_empty() {
                None
            } else {
                Some(c.to_string())
            }
        })
        .collect();
    (codes.len() == items).then_some(codes)
}

/// What [`DynamoStore::write_one`] did.
enum Written {
    Done,
    /// Its condition expression failed: nothing was written.
    ConditionFailed,
}

enum TxOutcome {
    Done,
    /// The transaction was cancelled; the codes say which items failed.
    Cancelled(Vec<Option<String>>),
}

impl DynamoStore {
    /// A store over `table`.
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
            page_size: None,
            archive: None,
        }
    }

    /// The same store, exporting its audit trail to `archive`.
    pub fn with_audit_archive(mut self, archive: std::sync::Arc<dyn crate::AuditArchive>) -> Self {
        self.archive = Some(archive);
        self
    }

    /// The same store, reading the environment listings (gsi4) `n` items a page: for tests
    /// that prove a listing pages to the end.
    pub fn with_page_size(mut self, n: i32) -> Self {
        self.page_size = Some(n.max(1));
        self
    }

    /// The table name.
    pub fn table(&self) -> &str {
        &self.table
    }

    async fn get_item(&self, key: Item) -> Result<Option<Item>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(key))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| aws("dynamodb", e))?;
        Ok(out.item)
    }

    /// The `version` number of the counter item at `key`; 0 while it does not exist.
    async fn counter(&self, key: Item) -> Result<u64, StoreError> {
        Ok(self
            .get_item(key)
            .await?
            .and_then(|i| i.get("version").cloned())
            .and_then(|v| match v {
                AttributeValue::N(n) => n.parse().ok(),
                _ => None,
            })
            .unwrap_or(0))
    }

    /// The sum of the root's counter (`key(None)`) and, for an organisation, its own, read
    /// at once (one round trip): what the rule index and the policy-set listing revalidate by.
    async fn org_and_root_version(
        &self,
        key: fn(Option<&str>) -> Item,
        org: Option<&str>,
    ) -> Result<u64, StoreError> {
        Ok(match org {
            Some(o) => {
                let (root, own) = futures_util::future::try_join(
                    self.counter(key(None)),
                    self.counter(key(Some(o))),
                )
                .await?;
                root + own
            }
            None => self.counter(key(None)).await?,
        })
    }

    /// Writes `items` in one transaction, with the current audit scope's entry when it has
    /// not been written yet (one `Put` more: the change and its record commit together).
    async fn transact(&self, mut items: Vec<TransactWriteItem>) -> Result<TxOutcome, StoreError> {
        let own = items.len();
        // DynamoDB takes at most 100 items; a change that large leaves its entry to its next write.
        let taking = (own < 100).then(crate::audit::take).flatten();
        if let Some(t) = &taking {
            items.push(self.audit_put(&t.entry));
        }
        let outcome = self.transact_items(items).await?;
        match outcome {
            TxOutcome::Done => {
                if let Some(t) = taking {
                    t.commit();
                }
                Ok(TxOutcome::Done)
            }
            TxOutcome::Cancelled(mut codes) => {
                codes.truncate(own);
                Ok(TxOutcome::Cancelled(codes))
            }
        }
    }

    /// One write: alone, or in a transaction with the audit scope's entry when it has one
    /// to write. A failed condition is [`Written::ConditionFailed`], either way.
    async fn write_one(&self, item: TransactWriteItem) -> Result<Written, StoreError> {
        if crate::audit::pending() {
            return Ok(match self.transact(vec![item]).await? {
                TxOutcome::Done => Written::Done,
                TxOutcome::Cancelled(codes) => match codes.first() {
                    Some(Some(c)) if c == "ConditionalCheckFailed" => Written::ConditionFailed,
                    _ => {
                        return Err(StoreError::Aws {
                            service: "dynamodb",
                            message: format!("the write was cancelled: {codes:?}"),
                            retryable: true,
                        })
                    }
                },
            });
        }
        let result = if let Some(p) = item.put {
            self.client
                .put_item()
                .table_name(&self.table)
                .set_item(Some(p.item))
                .set_condition_expression(p.condition_expression)
                .set_expression_attribute_names(p.expression_attribute_names)
                .set_expression_attribute_values(p.expression_attribute_values)
                .send()
                .await
                .map(|_| ())
                .map_err(|e| (condition_failed(&e), aws("dynamodb", e)))
        } else if let Some(u) = item.update {
            self.client
                .update_item()
                .table_name(&self.table)
                .set_key(Some(u.key))
                .update_expression(u.update_expression)
                .set_condition_expression(u.condition_expression)
                .set_expression_attribute_names(u.expression_attribute_names)
                .set_expression_attribute_values(u.expression_attribute_values)
                .send()
                .await
                .map(|_| ())
                .map_err(|e| (condition_failed(&e), aws("dynamodb", e)))
        } else if let Some(d) = item.delete {
            self.client
                .delete_item()
                .table_name(&self.table)
                .set_key(Some(d.key))
                .set_condition_expression(d.condition_expression)
                .set_expression_attribute_names(d.expression_attribute_names)
                .set_expression_attribute_values(d.expression_attribute_values)
                .send()
                .await
                .map(|_| ())
                .map_err(|e| (condition_failed(&e), aws("dynamodb", e)))
        } else {
            unreachable!("write_one is given a put, an update or a delete")
        };
        match result {
            Ok(()) => Ok(Written::Done),
            Err((true, _)) => Ok(Written::ConditionFailed),
            Err((false, e)) => Err(e),
        }
    }

    /// One conditional update answering the item as it now is (`ReturnValues: ALL_NEW`),
    /// or `None` when its condition failed. With an audit entry to write, the update and
    /// the entry are one transaction, which answers no values: the item is read back
    /// (consistently) after it.
    async fn update_returning(
        &self,
        key: Item,
        expr: &str,
        condition: &str,
        names: HashMap<String, String>,
        values: Item,
    ) -> Result<Option<Item>, StoreError> {
        if crate::audit::pending() {
            let write = self.update(key.clone(), expr, condition, values, names);
            return match self.write_one(write).await? {
                Written::Done => Ok(Some(self.get_item(key).await?.unwrap_or_default())),
                Written::ConditionFailed => Ok(None),
            };
        }
        let mut b = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key))
            .update_expression(expr)
            .condition_expression(condition)
            .return_values(aws_sdk_dynamodb::types::ReturnValue::AllNew);
        if !names.is_empty() {
            b = b.set_expression_attribute_names(Some(names));
        }
        if !values.is_empty() {
            b = b.set_expression_attribute_values(Some(values));
        }
        match b.send().await {
            Ok(out) => Ok(Some(out.attributes.unwrap_or_default())),
            Err(e) if condition_failed(&e) => Ok(None),
            Err(e) => Err(aws("dynamodb", e)),
        }
    }

    async fn transact_items(&self, items: Vec<TransactWriteItem>) -> Result<TxOutcome, StoreError> {
        let count = items.len();
        match self
            .client
            .transact_write_items()
            .set_transact_items(Some(items))
            .send()
            .await
        {
            Ok(_) => Ok(TxOutcome::Done),
            Err(err) => {
                let reasons = err.as_service_error().and_then(|se| match se {
                    aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError::TransactionCanceledException(tc) => {
                        tc.cancellation_reasons.as_ref().map(|r| r.iter().map(|x| x.code.clone().filter(|c| c != "None")).collect::<Vec<_>>())
                    }
                    _ => None,
                });
                let is_cancel = err
                    .as_service_error()
                    .is_some_and(|se| se.code() == Some("TransactionCanceledException"));
                if is_cancel {
                    if let Some(codes) = cancellation_codes(&err, reasons, count) {
                        // A conflict with another transaction is worth another try, like throttling.
                        if codes.iter().flatten().any(|c| c == "TransactionConflict") {
                            return Err(StoreError::Aws {
                                service: "dynamodb",
                                message: "TransactionConflict".into(),
                                retryable: true,
                            });
                        }
                        return Ok(TxOutcome::Cancelled(codes));
                    }
                }
                Err(aws("dynamodb", err))
            }
        }
    }

    fn put(&self, item: Item, condition: &str) -> TransactWriteItem {
        self.put_with(item, condition, Item::new())
    }

    /// A conditional `Put` whose condition names `values`.
    fn put_with(&self, item: Item, condition: &str, values: Item) -> TransactWriteItem {
        let mut b = Put::builder()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression(condition);
        if !values.is_empty() {
            b = b.set_expression_attribute_values(Some(values));
        }
        TransactWriteItem::builder()
            .put(b.build().expect("table, item and condition are set"))
            .build()
    }

    fn update(
        &self,
        key: Item,
        expr: &str,
        condition: &str,
        values: Item,
        names: HashMap<String, String>,
    ) -> TransactWriteItem {
        let mut b = Update::builder()
            .table_name(&self.table)
            .set_key(Some(key))
            .update_expression(expr)
            .condition_expression(condition);
        if !values.is_empty() {
            b = b.set_expression_attribute_values(Some(values));
        }
        if !names.is_empty() {
            b = b.set_expression_attribute_names(Some(names));
        }
        TransactWriteItem::builder()
            .update(b.build().expect("table, key and expression are set"))
            .build()
    }

    fn delete(&self, key: Item, condition: &str, values: Item) -> TransactWriteItem {
        let mut b = Delete::builder()
            .table_name(&self.table)
            .set_key(Some(key))
            .condition_expression(condition);
        if !values.is_empty() {
            b = b.set_expression_attribute_values(Some(values));
        }
        TransactWriteItem::builder()
            .delete(b.build().expect("table, key and condition are set"))
            .build()
    }

    async fn read_runner(&self, id: &RunnerId) -> Result<Option<RunnerItem>, StoreError> {
        self.get_item(runner_key(id))
            .await?
            .map(from_item)
            .transpose()
    }

    async fn read_env(&self, path: &EnvPath) -> Result<Option<EnvItem>, StoreError> {
        self.get_item(env_key(path))
            .await?
            .map(from_item)
            .transpose()
    }

    async fn read_job(&self, id: &str) -> Result<Option<JobItem>, StoreError> {
        self.get_item(job_key(id)).await?.map(from_item).transpose()
    }

    async fn query_pk(
        &self,
        index: Option<&str>,
        pk_name: &str,
        pk: &str,
        sk_prefix: Option<(&str, &str)>,
    ) -> Result<Vec<Item>, StoreError> {
        let mut out = Vec::new();
        let mut start: Option<Item> = None;
        loop {
            let mut q = self
                .client
                .query()
                .table_name(&self.table)
                .set_index_name(index.map(String::from))
                .expression_attribute_values(":pk", s(pk))
                .set_exclusive_start_key(start.take());
            q = match sk_prefix {
                Some((sk_name, prefix)) => q
                    .key_condition_expression(format!(
                        "{pk_name} = :pk AND begins_with({sk_name}, :prefix)"
                    ))
                    .expression_attribute_values(":prefix", s(prefix)),
                None => q.key_condition_expression(format!("{pk_name} = :pk")),
            };
            if index.is_none() {
                q = q.consistent_read(true);
            }
            let page = q.send().await.map_err(|e| aws("dynamodb", e))?;
            out.extend(page.items.unwrap_or_default());
            match page.last_evaluated_key {
                Some(k) if !k.is_empty() => start = Some(k),
                _ => return Ok(out),
            }
        }
    }

    fn version_check(
        kind: &'static str,
        id: String,
        expected: Option<u64>,
        actual: u64,
    ) -> Result<(), StoreError> {
        match expected {
            Some(e) if e != actual => Err(StoreError::VersionMismatch {
                kind,
                id,
                expected: e,
                actual,
            }),
            _ => Ok(()),
        }
    }

    fn versioned_env(item: EnvItem) -> Versioned<EnvironmentRecord> {
        Versioned {
            item: item.record,
            version: item.version,
        }
    }
}
