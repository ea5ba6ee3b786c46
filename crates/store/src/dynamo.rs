//! The DynamoDB implementation of [`Store`]: one table, documented in `docs/ARCHITECTURE.md`.

use std::collections::HashMap;

use async_trait::async_trait;
use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use aws_sdk_dynamodb::types::{
    AttributeValue, Delete, KeysAndAttributes, Put, ReturnValue, TransactWriteItem, Update,
};
use aws_sdk_dynamodb::Client;
use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sortie_core::{
    EnvPath, Environment, GroupPath, Job, JobState, Membership, Runner, RunnerId, RunnerLink,
    RunnerRule, Transition,
};

use crate::error::aws;
use crate::{
    EnvironmentRecord, IdempotencyKey, JobPage, JobRecord, JobUpdate, MembershipRecord, Released,
    Store, StoreError, Submitted, Versioned,
};

type Item = HashMap<String, AttributeValue>;

/// How long an idempotency key is remembered.
const IDEMPOTENCY_TTL_SECONDS: i64 = 24 * 60 * 60;
/// How often a conditional read-modify-write is retried on a concurrent change.
const RETRIES: usize = 8;

/// The DynamoDB store.
#[derive(Debug, Clone)]
pub struct DynamoStore {
    client: Client,
    table: String,
}

fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

fn n(v: impl ToString) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

fn key(pk: String, sk: &str) -> Item {
    HashMap::from([("pk".to_string(), s(pk)), ("sk".to_string(), s(sk))])
}

fn group_pk(g: &GroupPath) -> String {
    format!("GROUP#{}", g.as_str())
}
fn runner_key(id: &RunnerId) -> Item {
    key(group_pk(id.group()), &format!("RUNNER#{}", id.name()))
}
fn rules_key(scope: &GroupPath) -> Item {
    key(format!("RULES#{}", scope.as_str()), "RULES")
}
fn env_key(path: &EnvPath) -> Item {
    key(format!("ENV#{path}"), "ENV")
}
fn job_key(id: &str) -> Item {
    key(format!("JOB#{id}"), "JOB")
}
fn queue_key(env: &EnvPath, id: &str) -> Item {
    key(format!("QUEUE#{env}"), id)
}
fn members_pk(org: Option<&str>) -> String {
    format!("MEMBERS#{}", org.unwrap_or_default())
}

fn to_item<T: Serialize>(v: &T) -> Item {
    serde_dynamo::to_item(v).expect("domain values always serialise to DynamoDB items")
}

fn from_item<T: DeserializeOwned>(item: Item) -> Result<T, StoreError> {
    let key = format!(
        "{}/{}",
        item.get("pk")
            .and_then(|v| v.as_s().ok())
            .cloned()
            .unwrap_or_default(),
        item.get("sk")
            .and_then(|v| v.as_s().ok())
            .cloned()
            .unwrap_or_default()
    );
    serde_dynamo::from_item(item).map_err(|e| StoreError::Corrupt {
        key,
        message: e.to_string(),
    })
}

#[derive(Serialize, Deserialize)]
struct RunnerItem {
    pk: String,
    sk: String,
    kind: String,
    version: u64,
    link_count: u64,
    updated_at: DateTime<Utc>,
    #[serde(flatten)]
    runner: Runner,
}

#[derive(Serialize, Deserialize)]
struct RuleSetItem {
    pk: String,
    sk: String,
    kind: String,
    version: u64,
    rules: Vec<RunnerRule>,
}

#[derive(Serialize, Deserialize)]
struct EnvItem {
    pk: String,
    sk: String,
    kind: String,
    gsi1pk: String,
    gsi1sk: String,
    gsi2pk: String,
    gsi2sk: String,
    version: u64,
    #[serde(flatten)]
    record: EnvironmentRecord,
}

#[derive(Serialize, Deserialize)]
struct JobItem {
    pk: String,
    sk: String,
    kind: String,
    gsi1pk: String,
    gsi1sk: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    gsi3pk: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    gsi3sk: Option<String>,
    /// The job's position in its environment's queue, while it waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    queue_sk: Option<String>,
    #[serde(flatten)]
    record: JobRecord,
}

#[derive(Serialize, Deserialize)]
struct MemberItem {
    pk: String,
    sk: String,
    kind: String,
    #[serde(flatten)]
    record: MembershipRecord,
}

const PENDING: &str = "PENDING";
const ACTIVE: &str = "ACTIVE";

/// True when a write failed its condition expression (the item was not as expected).
fn condition_failed<E: ProvideErrorMetadata>(e: &aws_sdk_dynamodb::error::SdkError<E>) -> bool {
    e.as_service_error().and_then(|se| se.code()) == Some("ConditionalCheckFailedException")
}

/// Adds the optional attributes of a job update to an update expression.
fn add_update(update: &JobUpdate, set: &mut Vec<&'static str>, values: &mut Item) {
    if let Some(v) = &update.task_arn {
        set.push("task_arn = :arn");
        values.insert(":arn".into(), s(v));
    }
    if let Some(v) = &update.token_hash {
        set.push("token_hash = :th");
        values.insert(":th".into(), s(v));
    }
    if let Some(v) = &update.started_at {
        set.push("started_at = :sa");
        values.insert(":sa".into(), s(v.to_rfc3339()));
    }
    if let Some(v) = &update.cancel_requested_by {
        set.push("cancel_requested_by = :cr");
        values.insert(":cr".into(), s(v));
    }
    if let Some(v) = &update.timeout_requested_at {
        set.push("timeout_requested_at = :tr");
        values.insert(":tr".into(), s(v.to_rfc3339()));
    }
    if let Some(v) = &update.summary {
        set.push("summary = :sum");
        values.insert(
            ":sum".into(),
            serde_dynamo::to_attribute_value(v).expect("summary serialises"),
        );
    }
}

fn pending_sk(job: &Job) -> String {
    format!("{}#{}", job.transitions[0].at.to_rfc3339(), job.id)
}

fn env_item(record: EnvironmentRecord, version: u64) -> EnvItem {
    let e = &record.environment;
    EnvItem {
        pk: format!("ENV#{}", e.path),
        sk: "ENV".into(),
        kind: "environment".into(),
        gsi1pk: group_pk(e.path.group()),
        gsi1sk: format!("ENV#{}", e.path.name()),
        gsi2pk: format!("LINK#{}", e.runner.runner_id),
        gsi2sk: e.path.to_string(),
        version,
        record,
    }
}

fn job_item(job: &Job, holds_lock: bool) -> JobItem {
    JobItem {
        pk: format!("JOB#{}", job.id),
        sk: "JOB".into(),
        kind: "job".into(),
        gsi1pk: format!("ENVJOBS#{}", job.environment),
        gsi1sk: job.id.clone(),
        gsi3pk: holds_lock.then(|| PENDING.to_string()),
        gsi3sk: holds_lock.then(|| pending_sk(job)),
        queue_sk: None,
        record: JobRecord {
            job: job.clone(),
            task_arn: None,
            token_hash: None,
            started_at: None,
            cancel_requested_by: None,
            timeout_requested_at: None,
            summary: None,
            updated_at: job.transitions[0].at,
        },
    }
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
        }
    }

    /// The table name.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// Creates the table with its keys, three GSIs and TTL, if it does not exist yet.
    /// Used by local mode and tests; in AWS the SAM template creates it.
    pub async fn ensure_table(&self) -> Result<(), StoreError> {
        use aws_sdk_dynamodb::types::{
            AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType,
            Projection, ProjectionType, ScalarAttributeType, TimeToLiveSpecification,
        };
        if self
            .client
            .describe_table()
            .table_name(&self.table)
            .send()
            .await
            .is_ok()
        {
            return Ok(());
        }
        let attr = |name: &str| {
            AttributeDefinition::builder()
                .attribute_name(name)
                .attribute_type(ScalarAttributeType::S)
                .build()
                .expect("name and type are set")
        };
        let key_el = |name: &str, kt: KeyType| {
            KeySchemaElement::builder()
                .attribute_name(name)
                .key_type(kt)
                .build()
                .expect("name and type are set")
        };
        let mut req = self
            .client
            .create_table()
            .table_name(&self.table)
            .billing_mode(BillingMode::PayPerRequest)
            .attribute_definitions(attr("pk"))
            .attribute_definitions(attr("sk"))
            .key_schema(key_el("pk", KeyType::Hash))
            .key_schema(key_el("sk", KeyType::Range));
        for i in 1..=3 {
            let (pk, sk) = (format!("gsi{i}pk"), format!("gsi{i}sk"));
            req = req
                .attribute_definitions(attr(&pk))
                .attribute_definitions(attr(&sk))
                .global_secondary_indexes(
                    GlobalSecondaryIndex::builder()
                        .index_name(format!("gsi{i}"))
                        .key_schema(key_el(&pk, KeyType::Hash))
                        .key_schema(key_el(&sk, KeyType::Range))
                        .projection(
                            Projection::builder()
                                .projection_type(ProjectionType::All)
                                .build(),
                        )
                        .build()
                        .expect("index name and keys are set"),
                );
        }
        match req.send().await {
            Ok(_) => {}
            Err(e)
                if e.as_service_error()
                    .is_some_and(|se| se.is_resource_in_use_exception()) =>
            {
                return Ok(())
            }
            Err(e) => return Err(aws("dynamodb", e)),
        }
        self.client
            .update_time_to_live()
            .table_name(&self.table)
            .time_to_live_specification(
                TimeToLiveSpecification::builder()
                    .attribute_name("expires_at")
                    .enabled(true)
                    .build()
                    .expect("name and flag are set"),
            )
            .send()
            .await
            .map_err(|e| aws("dynamodb", e))?;
        Ok(())
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

    async fn transact(&self, items: Vec<TransactWriteItem>) -> Result<TxOutcome, StoreError> {
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
        TransactWriteItem::builder()
            .put(
                Put::builder()
                    .table_name(&self.table)
                    .set_item(Some(item))
                    .condition_expression(condition)
                    .build()
                    .expect("table, item and condition are set"),
            )
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

    async fn read_rules(&self, scope: &GroupPath) -> Result<Option<RuleSetItem>, StoreError> {
        self.get_item(rules_key(scope))
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

#[async_trait]
impl Store for DynamoStore {
    async fn create_runner(&self, runner: &Runner) -> Result<Versioned<Runner>, StoreError> {
        let k = runner_key(&runner.id);
        let item = RunnerItem {
            pk: k["pk"].as_s().expect("s").clone(),
            sk: k["sk"].as_s().expect("s").clone(),
            kind: "runner".into(),
            version: 1,
            link_count: 0,
            updated_at: Utc::now(),
            runner: runner.clone(),
        };
        let res = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(to_item(&item)))
            .condition_expression("attribute_not_exists(pk)")
            .send()
            .await;
        match res {
            Ok(_) => Ok(Versioned {
                item: runner.clone(),
                version: 1,
            }),
            Err(e) if condition_failed(&e) => Err(StoreError::AlreadyExists {
                kind: "runner",
                id: runner.id.to_string(),
            }),
            Err(e) => Err(aws("dynamodb", e)),
        }
    }

    async fn get_runner(&self, id: &RunnerId) -> Result<Versioned<Runner>, StoreError> {
        let item = self
            .read_runner(id)
            .await?
            .ok_or_else(|| StoreError::NotFound {
                kind: "runner",
                id: id.to_string(),
            })?;
        Ok(Versioned {
            item: item.runner,
            version: item.version,
        })
    }

    async fn list_runners(&self, group: &GroupPath) -> Result<Vec<Versioned<Runner>>, StoreError> {
        let items = self
            .query_pk(None, "pk", &group_pk(group), Some(("sk", "RUNNER#")))
            .await?;
        items
            .into_iter()
            .map(|i| {
                from_item::<RunnerItem>(i).map(|r| Versioned {
                    item: r.runner,
                    version: r.version,
                })
            })
            .collect()
    }

    async fn update_runner(
        &self,
        runner: &Runner,
        expected: Option<u64>,
    ) -> Result<Versioned<Runner>, StoreError> {
        let current = self
            .read_runner(&runner.id)
            .await?
            .ok_or_else(|| StoreError::NotFound {
                kind: "runner",
                id: runner.id.to_string(),
            })?;
        Self::version_check("runner", runner.id.to_string(), expected, current.version)?;
        let mut item = current;
        let old_version = item.version;
        item.version += 1;
        item.updated_at = Utc::now();
        item.runner = runner.clone();
        let res = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(to_item(&item)))
            .condition_expression("version = :v AND link_count = :links")
            .expression_attribute_values(":v", n(old_version))
            .expression_attribute_values(":links", n(item.link_count))
            .send()
            .await;
        match res {
            Ok(_) => Ok(Versioned {
                item: runner.clone(),
                version: item.version,
            }),
            Err(e) if condition_failed(&e) => {
                let actual = self
                    .read_runner(&runner.id)
                    .await?
                    .map(|r| r.version)
                    .unwrap_or(0);
                Err(StoreError::VersionMismatch {
                    kind: "runner",
                    id: runner.id.to_string(),
                    expected: old_version,
                    actual,
                })
            }
            Err(e) => Err(aws("dynamodb", e)),
        }
    }

    async fn delete_runner(&self, id: &RunnerId, expected: Option<u64>) -> Result<(), StoreError> {
        let current = self
            .read_runner(id)
            .await?
            .ok_or_else(|| StoreError::NotFound {
                kind: "runner",
                id: id.to_string(),
            })?;
        Self::version_check("runner", id.to_string(), expected, current.version)?;
        let linked = || async {
            let items = self
                .query_pk(Some("gsi2"), "gsi2pk", &format!("LINK#{id}"), None)
                .await?;
            let mut envs: Vec<String> = items
                .into_iter()
                .filter_map(|i| i.get("gsi2sk").and_then(|v| v.as_s().ok()).cloned())
                .collect();
            envs.sort();
            Ok::<_, StoreError>(envs)
        };
        if current.link_count > 0 {
            return Err(StoreError::InUse {
                kind: "runner",
                id: id.to_string(),
                by: linked().await?,
            });
        }
        let res = self
            .client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(runner_key(id)))
            .condition_expression("version = :v AND link_count = :zero")
            .expression_attribute_values(":v", n(current.version))
            .expression_attribute_values(":zero", n(0))
            .send()
            .await;
        match res {
            Ok(_) => Ok(()),
            Err(e) if condition_failed(&e) => match self.read_runner(id).await? {
                None => Err(StoreError::NotFound {
                    kind: "runner",
                    id: id.to_string(),
                }),
                Some(r) if r.link_count > 0 => Err(StoreError::InUse {
                    kind: "runner",
                    id: id.to_string(),
                    by: linked().await?,
                }),
                Some(r) => Err(StoreError::VersionMismatch {
                    kind: "runner",
                    id: id.to_string(),
                    expected: current.version,
                    actual: r.version,
                }),
            },
            Err(e) => Err(aws("dynamodb", e)),
        }
    }

    async fn create_rule(&self, rule: &RunnerRule) -> Result<Versioned<RunnerRule>, StoreError> {
        for _ in 0..RETRIES {
            let current = self.read_rules(&rule.scope).await?;
            let (mut set, condition, old) = match current {
                Some(set) => {
                    let v = set.version;
                    (set, "version = :v", Some(v))
                }
                None => {
                    let k = rules_key(&rule.scope);
                    (
                        RuleSetItem {
                            pk: k["pk"].as_s().expect("s").clone(),
                            sk: "RULES".into(),
                            kind: "rules".into(),
                            version: 0,
                            rules: vec![],
                        },
                        "attribute_not_exists(pk)",
                        None,
                    )
                }
            };
            if set.rules.iter().any(|r| r.id == rule.id) {
                return Err(StoreError::AlreadyExists {
                    kind: "rule",
                    id: format!("{}:{}", rule.scope.as_str(), rule.id),
                });
            }
            set.rules.push(rule.clone());
            set.version += 1;
            let mut put = self
                .client
                .put_item()
                .table_name(&self.table)
                .set_item(Some(to_item(&set)))
                .condition_expression(condition);
            if let Some(v) = old {
                put = put.expression_attribute_values(":v", n(v));
            }
            match put.send().await {
                Ok(_) => {
                    return Ok(Versioned {
                        item: rule.clone(),
                        version: set.version,
                    })
                }
                Err(e) if condition_failed(&e) => continue,
                Err(e) => return Err(aws("dynamodb", e)),
            }
        }
        Err(StoreError::Aws {
            service: "dynamodb",
            message: "rule set kept changing; try again".into(),
            retryable: true,
        })
    }

    async fn list_rules(
        &self,
        scope: &GroupPath,
    ) -> Result<Versioned<Vec<RunnerRule>>, StoreError> {
        Ok(match self.read_rules(scope).await? {
            Some(set) => Versioned {
                item: set.rules,
                version: set.version,
            },
            None => Versioned {
                item: vec![],
                version: 0,
            },
        })
    }

    async fn rules_for(&self, group: &GroupPath) -> Result<Vec<RunnerRule>, StoreError> {
        let keys: Vec<Item> = group.self_and_ancestors().iter().map(rules_key).collect();
        let mut request = HashMap::from([(
            self.table.clone(),
            KeysAndAttributes::builder()
                .set_keys(Some(keys))
                .consistent_read(true)
                .build()
                .expect("keys are set"),
        )]);
        let mut rules = Vec::new();
        // One BatchGetItem; a retry only for keys DynamoDB left unprocessed.
        for _ in 0..RETRIES {
            let out = self
                .client
                .batch_get_item()
                .set_request_items(Some(request))
                .send()
                .await
                .map_err(|e| aws("dynamodb", e))?;
            for item in out
                .responses
                .unwrap_or_default()
                .remove(&self.table)
                .unwrap_or_default()
            {
                rules.extend(from_item::<RuleSetItem>(item)?.rules);
            }
            match out.unprocessed_keys {
                Some(u) if !u.is_empty() => request = u,
                _ => return Ok(rules),
            }
        }
        Err(StoreError::Aws {
            service: "dynamodb",
            message: "BatchGetItem left keys unprocessed".into(),
            retryable: true,
        })
    }

    async fn update_rule(
        &self,
        rule: &RunnerRule,
        expected: Option<u64>,
    ) -> Result<Versioned<RunnerRule>, StoreError> {
        let rule_id = format!("{}:{}", rule.scope.as_str(), rule.id);
        let not_found = || StoreError::NotFound {
            kind: "rule",
            id: rule_id.clone(),
        };
        for _ in 0..RETRIES {
            let mut set = self.read_rules(&rule.scope).await?.ok_or_else(not_found)?;
            Self::version_check("rule", rule_id.clone(), expected, set.version)?;
            let slot = set
                .rules
                .iter_mut()
                .find(|r| r.id == rule.id)
                .ok_or_else(not_found)?;
            *slot = rule.clone();
            let old = set.version;
            set.version += 1;
            let res = self
                .client
                .put_item()
                .table_name(&self.table)
                .set_item(Some(to_item(&set)))
                .condition_expression("version = :v")
                .expression_attribute_values(":v", n(old))
                .send()
                .await;
            match res {
                Ok(_) => {
                    return Ok(Versioned {
                        item: rule.clone(),
                        version: set.version,
                    })
                }
                Err(e) if condition_failed(&e) => continue,
                Err(e) => return Err(aws("dynamodb", e)),
            }
        }
        Err(StoreError::Aws {
            service: "dynamodb",
            message: "rule set kept changing; try again".into(),
            retryable: true,
        })
    }

    async fn delete_rule(
        &self,
        scope: &GroupPath,
        id: &str,
        expected: Option<u64>,
    ) -> Result<(), StoreError> {
        let rule_id = format!("{}:{id}", scope.as_str());
        for _ in 0..RETRIES {
            let mut set = self
                .read_rules(scope)
                .await?
                .ok_or_else(|| StoreError::NotFound {
                    kind: "rule",
                    id: rule_id.clone(),
                })?;
            Self::version_check("rule", rule_id.clone(), expected, set.version)?;
            let before = set.rules.len();
            set.rules.retain(|r| r.id != id);
            if set.rules.len() == before {
                return Err(StoreError::NotFound {
                    kind: "rule",
                    id: rule_id,
                });
            }
            let old = set.version;
            set.version += 1;
            let res = self
                .client
                .put_item()
                .table_name(&self.table)
                .set_item(Some(to_item(&set)))
                .condition_expression("version = :v")
                .expression_attribute_values(":v", n(old))
                .send()
                .await;
            match res {
                Ok(_) => return Ok(()),
                Err(e) if condition_failed(&e) => continue,
                Err(e) => return Err(aws("dynamodb", e)),
            }
        }
        Err(StoreError::Aws {
            service: "dynamodb",
            message: "rule set kept changing; try again".into(),
            retryable: true,
        })
    }

    async fn create_environment(
        &self,
        env: &Environment,
    ) -> Result<Versioned<EnvironmentRecord>, StoreError> {
        let record = EnvironmentRecord {
            environment: env.clone(),
            active_job: None,
            queued_count: 0,
            queue_seq: 0,
        };
        let item = env_item(record.clone(), 1);
        let items = vec![
            self.put(to_item(&item), "attribute_not_exists(pk)"),
            self.update(
                runner_key(&env.runner.runner_id),
                "SET link_count = link_count + :one",
                "attribute_exists(pk)",
                HashMap::from([(":one".to_string(), n(1))]),
                HashMap::new(),
            ),
        ];
        match self.transact(items).await? {
            TxOutcome::Done => Ok(Versioned {
                item: record,
                version: 1,
            }),
            TxOutcome::Cancelled(codes) => {
                if codes.first().and_then(|c| c.as_deref()) == Some("ConditionalCheckFailed") {
                    Err(StoreError::AlreadyExists {
                        kind: "environment",
                        id: env.path.to_string(),
                    })
                } else {
                    Err(StoreError::NotFound {
                        kind: "runner",
                        id: env.runner.runner_id.to_string(),
                    })
                }
            }
        }
    }

    async fn get_environment(
        &self,
        path: &EnvPath,
    ) -> Result<Versioned<EnvironmentRecord>, StoreError> {
        self.read_env(path)
            .await?
            .map(Self::versioned_env)
            .ok_or_else(|| StoreError::NotFound {
                kind: "environment",
                id: path.to_string(),
            })
    }

    async fn list_environments(
        &self,
        group: &GroupPath,
    ) -> Result<Vec<Versioned<EnvironmentRecord>>, StoreError> {
        let items = self
            .query_pk(
                Some("gsi1"),
                "gsi1pk",
                &group_pk(group),
                Some(("gsi1sk", "ENV#")),
            )
            .await?;
        items
            .into_iter()
            .map(|i| from_item::<EnvItem>(i).map(Self::versioned_env))
            .collect()
    }

    async fn update_environment(
        &self,
        env: &Environment,
        expected: Option<u64>,
    ) -> Result<Versioned<EnvironmentRecord>, StoreError> {
        let id = env.path.to_string();
        let current = self
            .read_env(&env.path)
            .await?
            .ok_or_else(|| StoreError::NotFound {
                kind: "environment",
                id: id.clone(),
            })?;
        Self::version_check("environment", id.clone(), expected, current.version)?;
        let version = current.version + 1;
        let res = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(env_key(&env.path)))
            .update_expression("SET env_type = :t, labels = :l, tags = :g, version = :nv")
            .condition_expression("version = :v")
            .expression_attribute_values(":t", s(&env.env_type))
            .expression_attribute_values(
                ":l",
                serde_dynamo::to_attribute_value(&env.labels).expect("labels serialise"),
            )
            .expression_attribute_values(
                ":g",
                serde_dynamo::to_attribute_value(&env.tags).expect("tags serialise"),
            )
            .expression_attribute_values(":nv", n(version))
            .expression_attribute_values(":v", n(current.version))
            .return_values(ReturnValue::AllNew)
            .send()
            .await;
        match res {
            Ok(out) => Ok(Self::versioned_env(from_item(
                out.attributes.unwrap_or_default(),
            )?)),
            Err(e) if condition_failed(&e) => {
                let actual = self
                    .read_env(&env.path)
                    .await?
                    .map(|e| e.version)
                    .unwrap_or(0);
                Err(StoreError::VersionMismatch {
                    kind: "environment",
                    id,
                    expected: current.version,
                    actual,
                })
            }
            Err(e) => Err(aws("dynamodb", e)),
        }
    }

    async fn relink_environment(
        &self,
        path: &EnvPath,
        link: &RunnerLink,
        expected: Option<u64>,
    ) -> Result<Versioned<EnvironmentRecord>, StoreError> {
        let id = path.to_string();
        let current = self
            .read_env(path)
            .await?
            .ok_or_else(|| StoreError::NotFound {
                kind: "environment",
                id: id.clone(),
            })?;
        Self::version_check("environment", id.clone(), expected, current.version)?;
        let old_runner = current.record.environment.runner.runner_id.clone();
        let mut record = current.record.clone();
        record.environment.runner = link.clone();
        let item = env_item(record, current.version + 1);
        let mut items = vec![self.put(to_item(&item), "version = :v")];
        if let Some(TransactWriteItem { put: Some(p), .. }) = items.first_mut() {
            p.expression_attribute_values =
                Some(HashMap::from([(":v".to_string(), n(current.version))]));
        }
        if old_runner != link.runner_id {
            let one = HashMap::from([(":one".to_string(), n(1))]);
            items.push(self.update(
                runner_key(&link.runner_id),
                "SET link_count = link_count + :one",
                "attribute_exists(pk)",
                one.clone(),
                HashMap::new(),
            ));
            items.push(self.update(
                runner_key(&old_runner),
                "SET link_count = link_count - :one",
                "attribute_exists(pk)",
                one,
                HashMap::new(),
            ));
        }
        match self.transact(items).await? {
            TxOutcome::Done => Ok(Self::versioned_env(item)),
            TxOutcome::Cancelled(codes) => match codes.iter().position(|c| c.is_some()) {
                Some(1) => Err(StoreError::NotFound {
                    kind: "runner",
                    id: link.runner_id.to_string(),
                }),
                _ => {
                    let actual = self.read_env(path).await?.map(|e| e.version).unwrap_or(0);
                    Err(StoreError::VersionMismatch {
                        kind: "environment",
                        id,
                        expected: current.version,
                        actual,
                    })
                }
            },
        }
    }

    async fn delete_environment(
        &self,
        path: &EnvPath,
        expected: Option<u64>,
    ) -> Result<(), StoreError> {
        let id = path.to_string();
        let current = self
            .read_env(path)
            .await?
            .ok_or_else(|| StoreError::NotFound {
                kind: "environment",
                id: id.clone(),
            })?;
        Self::version_check("environment", id.clone(), expected, current.version)?;
        let busy = |rec: &EnvironmentRecord| rec.active_job.is_some() || rec.queued_count > 0;
        if busy(&current.record) {
            return Err(StoreError::InUse {
                kind: "environment",
                id,
                by: current.record.active_job.into_iter().collect(),
            });
        }
        let items = vec![
            self.delete(
                env_key(path),
                "version = :v AND attribute_not_exists(active_job) AND queued_count = :zero",
                HashMap::from([
                    (":v".to_string(), n(current.version)),
                    (":zero".to_string(), n(0)),
                ]),
            ),
            self.update(
                runner_key(&current.record.environment.runner.runner_id),
                "SET link_count = link_count - :one",
                "attribute_exists(pk)",
                HashMap::from([(":one".to_string(), n(1))]),
                HashMap::new(),
            ),
        ];
        match self.transact(items).await? {
            TxOutcome::Done => Ok(()),
            TxOutcome::Cancelled(_) => match self.read_env(path).await? {
                None => Err(StoreError::NotFound {
                    kind: "environment",
                    id,
                }),
                Some(e) if busy(&e.record) => Err(StoreError::InUse {
                    kind: "environment",
                    id,
                    by: e.record.active_job.into_iter().collect(),
                }),
                Some(e) => Err(StoreError::VersionMismatch {
                    kind: "environment",
                    id,
                    expected: current.version,
                    actual: e.version,
                }),
            },
        }
    }

    async fn submit_job(
        &self,
        job: &Job,
        idempotency: Option<&IdempotencyKey>,
    ) -> Result<Submitted, StoreError> {
        let env = &job.environment;
        let idem_item = idempotency.map(|k| {
            let mut item = key(format!("IDEM#{env}#{}", k.key), "IDEM");
            item.insert("kind".into(), s("idempotency"));
            item.insert("job_id".into(), s(&job.id));
            item.insert("request_hash".into(), s(&k.request_hash));
            item.insert(
                "expires_at".into(),
                n(Utc::now().timestamp() + IDEMPOTENCY_TTL_SECONDS),
            );
            item
        });
        for _ in 0..RETRIES {
            // First try: take the lock, if the environment is idle.
            let items = vec![
                self.put(to_item(&job_item(job, true)), "attribute_not_exists(pk)"),
                self.update(
                    env_key(env),
                    "SET active_job = :id",
                    "attribute_exists(pk) AND attribute_not_exists(active_job)",
                    HashMap::from([(":id".to_string(), s(&job.id))]),
                    HashMap::new(),
                ),
            ];
            let codes = match self
                .try_submit(items, job, idem_item.as_ref(), idempotency, true)
                .await?
            {
                Ok(submitted) => return Ok(submitted),
                Err(codes) => codes,
            };
            if codes.first().is_some_and(|c| c.is_some()) {
                return Err(StoreError::AlreadyExists {
                    kind: "job",
                    id: job.id.clone(),
                });
            }
            // The environment is busy (or missing): join its FIFO queue, while it stays busy.
            // The queue position is the environment's next sequence number, taken in the
            // same transaction, so FIFO follows the order the submits committed in.
            let Some(current) = self.read_env(env).await? else {
                return Err(StoreError::NotFound {
                    kind: "environment",
                    id: env.to_string(),
                });
            };
            if current.record.active_job.is_none() {
                continue;
            }
            let seq = current.record.queue_seq;
            let position = format!("{:020}", seq + 1);
            let mut queue_item = queue_key(env, &position);
            queue_item.insert("kind".into(), s("queue"));
            queue_item.insert("job_id".into(), s(&job.id));
            let mut waiting = job_item(job, false);
            waiting.queue_sk = Some(position);
            let items = vec![
                self.put(to_item(&waiting), "attribute_not_exists(pk)"),
                self.update(
                    env_key(env),
                    "SET queued_count = queued_count + :one, queue_seq = :next",
                    "attribute_exists(active_job) AND queue_seq = :seq",
                    HashMap::from([
                        (":one".to_string(), n(1)),
                        (":next".to_string(), n(seq + 1)),
                        (":seq".to_string(), n(seq)),
                    ]),
                    HashMap::new(),
                ),
                self.put(queue_item, "attribute_not_exists(pk)"),
            ];
            match self
                .try_submit(items, job, idem_item.as_ref(), idempotency, false)
                .await?
            {
                Ok(submitted) => return Ok(submitted),
                Err(codes) if codes.first().is_some_and(|c| c.is_some()) => {
                    return Err(StoreError::AlreadyExists {
                        kind: "job",
                        id: job.id.clone(),
                    });
                }
                Err(_) if self.read_env(env).await?.is_none() => {
                    return Err(StoreError::NotFound {
                        kind: "environment",
                        id: env.to_string(),
                    });
                }
                Err(_) => {}
            }
            // The lock was released between the two attempts: try to take it again.
        }
        Err(StoreError::Aws {
            service: "dynamodb",
            message: "environment lock kept changing; try again".into(),
            retryable: true,
        })
    }

    async fn get_job(&self, id: &str) -> Result<JobRecord, StoreError> {
        self.read_job(id)
            .await?
            .map(|j| j.record)
            .ok_or_else(|| StoreError::NotFound {
                kind: "job",
                id: id.to_string(),
            })
    }

    async fn list_jobs(
        &self,
        env: &EnvPath,
        limit: u32,
        cursor: Option<&str>,
    ) -> Result<JobPage, StoreError> {
        let pk = format!("ENVJOBS#{env}");
        let mut q = self
            .client
            .query()
            .table_name(&self.table)
            .index_name("gsi1")
            .key_condition_expression("gsi1pk = :pk")
            .expression_attribute_values(":pk", s(&pk))
            .scan_index_forward(false)
            .limit(limit.clamp(1, 100) as i32);
        if let Some(c) = cursor {
            let last = decode_cursor(c).ok_or(StoreError::NotFound {
                kind: "cursor",
                id: c.to_string(),
            })?;
            let mut start = job_key(&last);
            start.insert("gsi1pk".into(), s(&pk));
            start.insert("gsi1sk".into(), s(&last));
            q = q.set_exclusive_start_key(Some(start));
        }
        let out = q.send().await.map_err(|e| aws("dynamodb", e))?;
        let jobs: Vec<Job> = out
            .items
            .unwrap_or_default()
            .into_iter()
            .map(|i| from_item::<JobItem>(i).map(|j| j.record.job))
            .collect::<Result<_, _>>()?;
        let next = match out.last_evaluated_key {
            Some(k) if !k.is_empty() => k
                .get("gsi1sk")
                .and_then(|v| v.as_s().ok())
                .map(|id| encode_cursor(id)),
            _ => None,
        };
        Ok(JobPage { jobs, next })
    }

    async fn transition_job(
        &self,
        id: &str,
        from: JobState,
        to: JobState,
        at: DateTime<Utc>,
        reason: &str,
        update: JobUpdate,
    ) -> Result<JobRecord, StoreError> {
        // The core state machine checks the transition; the write checks the current state.
        // One UpdateItem, no read first: this is the dispatch hot path.
        if !from.can_become(to) {
            return Err(StoreError::StateConflict {
                job_id: id.to_string(),
                expected: from,
                actual: from,
            });
        }
        let transition = Transition {
            from: Some(from),
            to,
            at,
            reason: reason.to_string(),
        };
        let mut set = vec![
            "#state = :to",
            "transitions = list_append(transitions, :t)",
            "updated_at = :now",
        ];
        let mut remove: Vec<&str> = vec![];
        let mut values: Item = HashMap::from([
            (":to".to_string(), s(to.as_str())),
            (":from".to_string(), s(from.as_str())),
            (
                ":t".to_string(),
                AttributeValue::L(vec![
                    serde_dynamo::to_attribute_value(&transition).expect("transition serialises")
                ]),
            ),
            (":now".to_string(), s(at.to_rfc3339())),
        ]);
        add_update(&update, &mut set, &mut values);
        // The sparse gsi3 index: PENDING while a lock holder waits to be sent (queued),
        // ACTIVE while launched (dispatching, running), absent once terminal.
        if to == JobState::Queued {
            set.push("gsi3pk = :g3");
            set.push("gsi3sk = :g3s");
            values.insert(":g3".into(), s(PENDING));
            values.insert(":g3s".into(), s(format!("{}#{id}", at.to_rfc3339())));
        } else if to.is_active() {
            set.push("gsi3pk = :g3");
            set.push("gsi3sk = :g3s");
            values.insert(":g3".into(), s(ACTIVE));
            values.insert(":g3s".into(), s(format!("{}#{id}", at.to_rfc3339())));
        } else {
            remove.push("gsi3pk, gsi3sk");
        }
        let mut expr = format!("SET {}", set.join(", "));
        if !remove.is_empty() {
            expr.push_str(&format!(" REMOVE {}", remove.join(", ")));
        }
        let res = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(job_key(id)))
            .update_expression(expr)
            .condition_expression("#state = :from")
            .expression_attribute_names("#state", "state")
            .set_expression_attribute_values(Some(values))
            .return_values(ReturnValue::AllNew)
            .send()
            .await;
        match res {
            Ok(out) => Ok(from_item::<JobItem>(out.attributes.unwrap_or_default())?.record),
            Err(e) if condition_failed(&e) => match self.read_job(id).await? {
                Some(j) => Err(StoreError::StateConflict {
                    job_id: id.to_string(),
                    expected: from,
                    actual: j.record.job.state,
                }),
                None => Err(StoreError::NotFound {
                    kind: "job",
                    id: id.to_string(),
                }),
            },
            Err(e) => Err(aws("dynamodb", e)),
        }
    }

    async fn mark_job(
        &self,
        id: &str,
        at: DateTime<Utc>,
        update: JobUpdate,
    ) -> Result<JobRecord, StoreError> {
        let mut set = vec!["updated_at = :now"];
        let mut values: Item = HashMap::from([
            (":now".to_string(), s(at.to_rfc3339())),
            (":d".to_string(), s(JobState::Dispatching.as_str())),
            (":r".to_string(), s(JobState::Running.as_str())),
        ]);
        add_update(&update, &mut set, &mut values);
        let res = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(job_key(id)))
            .update_expression(format!("SET {}", set.join(", ")))
            .condition_expression("#state IN (:d, :r)")
            .expression_attribute_names("#state", "state")
            .set_expression_attribute_values(Some(values))
            .return_values(ReturnValue::AllNew)
            .send()
            .await;
        match res {
            Ok(out) => Ok(from_item::<JobItem>(out.attributes.unwrap_or_default())?.record),
            Err(e) if condition_failed(&e) => match self.read_job(id).await? {
                Some(j) => Err(StoreError::StateConflict {
                    job_id: id.to_string(),
                    expected: JobState::Running,
                    actual: j.record.job.state,
                }),
                None => Err(StoreError::NotFound {
                    kind: "job",
                    id: id.to_string(),
                }),
            },
            Err(e) => Err(aws("dynamodb", e)),
        }
    }

    async fn active_jobs(&self, limit: u32) -> Result<Vec<JobRecord>, StoreError> {
        let out = self
            .client
            .query()
            .table_name(&self.table)
            .index_name("gsi3")
            .key_condition_expression("gsi3pk = :a")
            .expression_attribute_values(":a", s(ACTIVE))
            .limit(limit.clamp(1, 1000) as i32)
            .send()
            .await
            .map_err(|e| aws("dynamodb", e))?;
        out.items
            .unwrap_or_default()
            .into_iter()
            .map(|i| from_item::<JobItem>(i).map(|j| j.record))
            .collect()
    }

    async fn cancel_waiting_job(
        &self,
        id: &str,
        at: DateTime<Utc>,
        reason: &str,
    ) -> Result<JobRecord, StoreError> {
        let current = self
            .read_job(id)
            .await?
            .ok_or_else(|| StoreError::NotFound {
                kind: "job",
                id: id.to_string(),
            })?;
        let mut record = current.record.clone();
        record
            .job
            .transition(JobState::Canceled, at, reason)
            .map_err(|e| StoreError::StateConflict {
                job_id: id.to_string(),
                expected: JobState::Queued,
                actual: e.from,
            })?;
        let env = &record.job.environment;
        let Some(position) = current.queue_sk.clone() else {
            // Not waiting in a queue: it holds its environment's lock (or never queued).
            return Err(StoreError::StateConflict {
                job_id: id.to_string(),
                expected: JobState::Queued,
                actual: current.record.job.state,
            });
        };
        let transition = record.job.transitions.last().expect("just recorded");
        let items =
            vec![
            self.delete(queue_key(env, &position), "attribute_exists(pk)", HashMap::new()),
            self.update(
                env_key(env),
                "SET queued_count = queued_count - :one",
                "queued_count > :zero",
                HashMap::from([(":one".to_string(), n(1)), (":zero".to_string(), n(0))]),
                HashMap::new(),
            ),
            self.update(
                job_key(id),
                "SET #state = :to, transitions = list_append(transitions, :t), updated_at = :now",
                "#state = :from",
                HashMap::from([
                    (":to".to_string(), s(JobState::Canceled.as_str())),
                    (":from".to_string(), s(JobState::Queued.as_str())),
                    (
                        ":t".to_string(),
                        AttributeValue::L(vec![serde_dynamo::to_attribute_value(transition)
                            .expect("transition serialises")]),
                    ),
                    (":now".to_string(), s(at.to_rfc3339())),
                ]),
                HashMap::from([("#state".to_string(), "state".to_string())]),
            ),
        ];
        match self.transact(items).await? {
            TxOutcome::Done => {
                record.updated_at = at;
                Ok(record)
            }
            TxOutcome::Cancelled(_) => {
                let actual = self
                    .read_job(id)
                    .await?
                    .map(|j| j.record.job.state)
                    .unwrap_or(JobState::Queued);
                Err(StoreError::StateConflict {
                    job_id: id.to_string(),
                    expected: JobState::Queued,
                    actual,
                })
            }
        }
    }

    async fn release_environment(
        &self,
        env: &EnvPath,
        job_id: &str,
    ) -> Result<Released, StoreError> {
        for _ in 0..RETRIES {
            let Some(current) = self.read_env(env).await? else {
                return Ok(Released::NotHeld);
            };
            if current.record.active_job.as_deref() != Some(job_id) {
                return Ok(Released::NotHeld);
            }
            let next = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("pk = :pk")
                .expression_attribute_values(":pk", s(format!("QUEUE#{env}")))
                .consistent_read(true)
                .limit(1)
                .send()
                .await
                .map_err(|e| aws("dynamodb", e))?
                .items
                .unwrap_or_default()
                .into_iter()
                .next()
                .and_then(|i| {
                    let sk = i.get("sk").and_then(|v| v.as_s().ok()).cloned()?;
                    let job_id = i.get("job_id").and_then(|v| v.as_s().ok()).cloned()?;
                    Some((sk, job_id))
                });
            let held = HashMap::from([(":held".to_string(), s(job_id))]);
            match next {
                None => {
                    let mut values = held.clone();
                    values.insert(":zero".into(), n(0));
                    let res = self
                        .client
                        .update_item()
                        .table_name(&self.table)
                        .set_key(Some(env_key(env)))
                        .update_expression("REMOVE active_job")
                        .condition_expression("active_job = :held AND queued_count = :zero")
                        .set_expression_attribute_values(Some(values))
                        .send()
                        .await;
                    match res {
                        Ok(_) => return Ok(Released::Idle),
                        // A job joined the queue meanwhile: hand the lock to it instead.
                        Err(e) if condition_failed(&e) => continue,
                        Err(e) => return Err(aws("dynamodb", e)),
                    }
                }
                Some((position, next_id)) => {
                    let Some(next_job) = self.read_job(&next_id).await? else {
                        return Err(StoreError::Corrupt {
                            key: format!("QUEUE#{env}/{next_id}"),
                            message: "queued job item is missing".into(),
                        });
                    };
                    let mut values = held.clone();
                    values.insert(":next".into(), s(&next_id));
                    values.insert(":one".into(), n(1));
                    let items = vec![
                        self.update(
                            env_key(env),
                            "SET active_job = :next, queued_count = queued_count - :one",
                            "active_job = :held",
                            values,
                            HashMap::new(),
                        ),
                        self.delete(
                            queue_key(env, &position),
                            "attribute_exists(pk)",
                            HashMap::new(),
                        ),
                        self.update(
                            job_key(&next_id),
                            "SET gsi3pk = :pending, gsi3sk = :psk REMOVE queue_sk",
                            "#state = :queued",
                            HashMap::from([
                                (":pending".to_string(), s(PENDING)),
                                (":psk".to_string(), s(pending_sk(&next_job.record.job))),
                                (":queued".to_string(), s(JobState::Queued.as_str())),
                            ]),
                            HashMap::from([("#state".to_string(), "state".to_string())]),
                        ),
                    ];
                    match self.transact(items).await? {
                        TxOutcome::Done => {
                            return Ok(Released::HandedTo(Box::new(next_job.record.job)))
                        }
                        TxOutcome::Cancelled(_) => continue,
                    }
                }
            }
        }
        Err(StoreError::Aws {
            service: "dynamodb",
            message: "environment lock kept changing; try again".into(),
            retryable: true,
        })
    }

    async fn pending_sends(
        &self,
        before: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<Job>, StoreError> {
        let out = self
            .client
            .query()
            .table_name(&self.table)
            .index_name("gsi3")
            .key_condition_expression("gsi3pk = :p AND gsi3sk < :before")
            .expression_attribute_values(":p", s(PENDING))
            .expression_attribute_values(":before", s(before.to_rfc3339()))
            .limit(limit.clamp(1, 1000) as i32)
            .send()
            .await
            .map_err(|e| aws("dynamodb", e))?;
        out.items
            .unwrap_or_default()
            .into_iter()
            .map(|i| from_item::<JobItem>(i).map(|j| j.record.job))
            .collect()
    }

    async fn put_membership(&self, record: &MembershipRecord) -> Result<(), StoreError> {
        let item = MemberItem {
            pk: members_pk(record.membership.group.org()),
            sk: format!("M#{}#{}", record.membership.group.as_str(), record.id),
            kind: "membership".into(),
            record: record.clone(),
        };
        let res = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(to_item(&item)))
            .condition_expression("attribute_not_exists(pk)")
            .send()
            .await;
        match res {
            Ok(_) => Ok(()),
            Err(e) if condition_failed(&e) => Err(StoreError::AlreadyExists {
                kind: "membership",
                id: record.id.clone(),
            }),
            Err(e) => Err(aws("dynamodb", e)),
        }
    }

    async fn delete_membership(&self, group: &GroupPath, id: &str) -> Result<(), StoreError> {
        let res = self
            .client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(key(
                members_pk(group.org()),
                &format!("M#{}#{id}", group.as_str()),
            )))
            .condition_expression("attribute_exists(pk)")
            .send()
            .await;
        match res {
            Ok(_) => Ok(()),
            Err(e) if condition_failed(&e) => Err(StoreError::NotFound {
                kind: "membership",
                id: id.to_string(),
            }),
            Err(e) => Err(aws("dynamodb", e)),
        }
    }

    async fn list_memberships(
        &self,
        group: &GroupPath,
    ) -> Result<Vec<MembershipRecord>, StoreError> {
        let items = self
            .query_pk(
                None,
                "pk",
                &members_pk(group.org()),
                Some(("sk", &format!("M#{}#", group.as_str()))),
            )
            .await?;
        items
            .into_iter()
            .map(|i| from_item::<MemberItem>(i).map(|m| m.record))
            .collect()
    }

    async fn memberships_for(&self, org: Option<&str>) -> Result<Vec<Membership>, StoreError> {
        let mut pks = vec![members_pk(None)];
        if org.is_some() {
            pks.push(members_pk(org));
        }
        let mut out = Vec::new();
        for pk in pks {
            for item in self.query_pk(None, "pk", &pk, None).await? {
                out.push(from_item::<MemberItem>(item)?.record.membership);
            }
        }
        Ok(out)
    }
}

impl DynamoStore {
    /// One submit transaction: `items`, then the idempotency key if there is one.
    /// `Ok(Ok(_))` when it committed, or when the key replays an earlier submit;
    /// `Ok(Err(codes))` with the cancellation codes, in item order, otherwise.
    async fn try_submit(
        &self,
        mut items: Vec<TransactWriteItem>,
        job: &Job,
        idem_item: Option<&Item>,
        idempotency: Option<&IdempotencyKey>,
        took_lock: bool,
    ) -> Result<Result<Submitted, Vec<Option<String>>>, StoreError> {
        let idem_index = items.len();
        if let Some(i) = idem_item {
            items.push(self.put(i.clone(), "attribute_not_exists(pk)"));
        }
        match self.transact(items).await? {
            TxOutcome::Done => Ok(Ok(Submitted {
                job: job.clone(),
                took_lock,
                replayed: false,
            })),
            TxOutcome::Cancelled(codes) => match self
                .check_replay(&codes, idem_index, idempotency, &job.environment)
                .await?
            {
                Some(replay) => Ok(Ok(replay)),
                None => Ok(Err(codes)),
            },
        }
    }

    /// If the idempotency item's condition failed, returns the earlier job (or a mismatch error).
    async fn check_replay(
        &self,
        codes: &[Option<String>],
        idem_index: usize,
        idempotency: Option<&IdempotencyKey>,
        env: &EnvPath,
    ) -> Result<Option<Submitted>, StoreError> {
        let Some(k) = idempotency else {
            return Ok(None);
        };
        if codes.get(idem_index).and_then(|c| c.as_deref()) != Some("ConditionalCheckFailed") {
            return Ok(None);
        }
        let item = self
            .get_item(key(format!("IDEM#{env}#{}", k.key), "IDEM"))
            .await?
            .ok_or_else(|| StoreError::Aws {
                service: "dynamodb",
                message: "idempotency item vanished".into(),
                retryable: true,
            })?;
        let job_id = item
            .get("job_id")
            .and_then(|v| v.as_s().ok())
            .cloned()
            .unwrap_or_default();
        let hash = item
            .get("request_hash")
            .and_then(|v| v.as_s().ok())
            .cloned()
            .unwrap_or_default();
        if hash != k.request_hash {
            return Err(StoreError::IdempotencyMismatch {
                key: k.key.clone(),
                job_id,
            });
        }
        let job = self.get_job(&job_id).await?.job;
        Ok(Some(Submitted {
            job,
            took_lock: false,
            replayed: true,
        }))
    }
}

/// An opaque page cursor: the hex of `v1:<last job id>`.
fn encode_cursor(last_id: &str) -> String {
    format!("v1:{last_id}")
        .bytes()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn decode_cursor(cursor: &str) -> Option<String> {
    if !cursor.len().is_multiple_of(2) || cursor.len() > 200 {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..cursor.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(cursor.get(i..i + 2)?, 16).ok())
        .collect();
    let text = String::from_utf8(bytes?).ok()?;
    let id = text.strip_prefix("v1:")?;
    (!id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric())).then(|| id.to_string())
}
