//! The table's items: one struct per item kind, and their conversion to and from
//! DynamoDB attribute maps (with `serde_dynamo`).

use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sortie_core::{Job, Runner, RunnerRule};

use super::keys::{group_pk, pending_sk, DRIFT, PENDING};
use super::Item;
use crate::sortkeys::drift_sk;
use crate::{EnvironmentRecord, JobRecord, MembershipRecord, StoreError};

pub(super) fn to_item<T: Serialize>(v: &T) -> Item {
    serde_dynamo::to_item(v).expect("domain values always serialise to DynamoDB items")
}

/// DynamoDB's item size limit: 400 KB.
pub(crate) const MAX_ITEM_BYTES: usize = 400 * 1024;
/// DynamoDB's limit on nested maps and lists: 32 levels.
pub(crate) const MAX_DEPTH: usize = 32;

/// Serialises `v` into an item that DynamoDB will accept and that reads back as a `T`:
/// every check is made before the write, so a refused item never leaves half a change.
/// `kind` names the item in the errors (`job`, `rule`).
pub(super) fn checked_item<T: Serialize + DeserializeOwned>(
    kind: &'static str,
    v: &T,
) -> Result<Item, StoreError> {
    let item: Item = serde_dynamo::to_item(v).map_err(|e| StoreError::Invalid {
        path: kind.into(),
        problem: format!("cannot be written as a DynamoDB item: {e}"),
    })?;
    check_item(kind, &item)?;
    // The round trip: what is written must decode back, or it would be an item nobody can read.
    serde_dynamo::from_item::<_, T>(item.clone()).map_err(|e| StoreError::Invalid {
        path: kind.into(),
        problem: format!("would not read back: {e}"),
    })?;
    Ok(item)
}

/// Checks an item against DynamoDB's limits: size, nesting depth, empty map keys.
pub(crate) fn check_item(kind: &'static str, item: &Item) -> Result<(), StoreError> {
    let mut size = 0;
    for (name, value) in item {
        if name.is_empty() {
            return Err(StoreError::Invalid {
                path: kind.into(),
                problem: "an attribute name is empty".into(),
            });
        }
        size += name.len() + value_size(name, value, 1)?;
    }
    if size > MAX_ITEM_BYTES {
        return Err(StoreError::TooLarge {
            kind,
            size,
            limit: MAX_ITEM_BYTES,
        });
    }
    Ok(())
}

/// The size DynamoDB counts for a value (documented rules, rounded up), checking depth and
/// map keys on the way; `path` names the value in errors.
fn value_size(path: &str, v: &AttributeValue, depth: usize) -> Result<usize, StoreError> {
    Ok(match v {
        AttributeValue::S(s) => s.len(),
        AttributeValue::N(n) => n.len().div_ceil(2) + 1,
        AttributeValue::B(b) => b.as_ref().len(),
        AttributeValue::Bool(_) | AttributeValue::Null(_) => 1,
        AttributeValue::Ss(x) => x.iter().map(String::len).sum(),
        AttributeValue::Ns(x) => x.iter().map(|n| n.len().div_ceil(2) + 1).sum(),
        AttributeValue::Bs(x) => x.iter().map(|b| b.as_ref().len()).sum(),
        AttributeValue::L(_) | AttributeValue::M(_) if depth >= MAX_DEPTH => {
            return Err(StoreError::Invalid {
                path: path.into(),
                problem: format!("is nested deeper than DynamoDB's {MAX_DEPTH} levels"),
            })
        }
        AttributeValue::L(items) => {
            let mut size = 3;
            for (i, x) in items.iter().enumerate() {
                size += 1 + value_size(&format!("{path}[{i}]"), x, depth + 1)?;
            }
            size
        }
        AttributeValue::M(map) => {
            let mut size = 3;
            for (k, x) in map {
                if k.is_empty() {
                    return Err(StoreError::Invalid {
                        path: path.into(),
                        problem: "has an empty key, which DynamoDB refuses".into(),
                    });
                }
                size += 1 + k.len() + value_size(&format!("{path}.{k}"), x, depth + 1)?;
            }
            size
        }
        _ => 0,
    })
}

pub(super) fn from_item<T: DeserializeOwned>(item: Item) -> Result<T, StoreError> {
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

/// A runner item: the runner and the attributes only the table keeps. Written with
/// [`runner_to_item`] and read with [`runner_from_item`] (the runner's `version` setting is
/// stored as [`TOOL_VERSION`]).
pub(super) struct RunnerItem {
    pub(super) pk: String,
    pub(super) sk: String,
    pub(super) kind: String,
    pub(super) version: u64,
    pub(super) link_count: u64,
    pub(super) updated_at: DateTime<Utc>,
    pub(super) runner: Runner,
}

/// A runner item's own attributes.
#[derive(Serialize, Deserialize)]
struct RunnerHead {
    pk: String,
    sk: String,
    kind: String,
    version: u64,
    link_count: u64,
    updated_at: DateTime<Utc>,
}

#[derive(Serialize, Deserialize)]
pub(super) struct RuleSetItem {
    pub(super) pk: String,
    pub(super) sk: String,
    pub(super) kind: String,
    pub(super) version: u64,
    pub(super) rules: Vec<RunnerRule>,
}

/// An environment item: the record and the item's version. Written with [`env_to_item`]
/// (which derives the keys and index entries from the record) and read with
/// [`env_from_item`].
pub(super) struct EnvItem {
    pub(super) version: u64,
    pub(super) record: EnvironmentRecord,
}

/// An environment item's own attributes.
#[derive(Serialize, Deserialize)]
struct EnvHead {
    pk: String,
    sk: String,
    kind: String,
    gsi1pk: String,
    gsi1sk: String,
    gsi2pk: String,
    gsi2sk: String,
    /// `DRIFT` while the environment has a next drift check (a sparse index entry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    gsi3pk: Option<String>,
    /// `<next_drift_at>#<path>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    gsi3sk: Option<String>,
    version: u64,
}

#[derive(Serialize, Deserialize)]
pub(super) struct JobItem {
    pub(super) pk: String,
    pub(super) sk: String,
    pub(super) kind: String,
    pub(super) gsi1pk: String,
    pub(super) gsi1sk: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) gsi3pk: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) gsi3sk: Option<String>,
    /// The job's position in its environment's queue, while it waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) queue_sk: Option<String>,
    #[serde(flatten)]
    pub(super) record: JobRecord,
}

#[derive(Serialize, Deserialize)]
pub(super) struct MemberItem {
    pub(super) pk: String,
    pub(super) sk: String,
    pub(super) kind: String,
    #[serde(flatten)]
    pub(super) record: MembershipRecord,
}

/// The attribute a `version` setting (the tool version of an environment or a runner) is
/// stored under: an item's own `version` is its optimistic-concurrency counter, and both are
/// flattened into one attribute map.
pub(super) const TOOL_VERSION: &str = "tool_version";

/// Writes `body` (a domain value flattened into the item, its `version` setting moved to
/// [`TOOL_VERSION`]) and `head` (the item's own attributes, `version` among them) as one
/// item, checked as [`checked_item`] checks: DynamoDB's limits, and that `decode` reads it
/// back.
fn versioned_item<H: Serialize, B: Serialize, T>(
    kind: &'static str,
    head: &H,
    body: &B,
    decode: impl FnOnce(Item) -> Result<T, StoreError>,
) -> Result<Item, StoreError> {
    let invalid = |e: serde_dynamo::Error| StoreError::Invalid {
        path: kind.into(),
        problem: format!("cannot be written as a DynamoDB item: {e}"),
    };
    let mut item: Item = serde_dynamo::to_item(body).map_err(invalid)?;
    if let Some(v) = item.remove("version") {
        item.insert(TOOL_VERSION.into(), v);
    }
    let head: Item = serde_dynamo::to_item(head).map_err(invalid)?;
    item.extend(head);
    check_item(kind, &item)?;
    decode(item.clone()).map_err(|e| StoreError::Invalid {
        path: kind.into(),
        problem: format!("would not read back: {e}"),
    })?;
    Ok(item)
}

/// Reads an item written by [`versioned_item`]: its head, and its body with the `version`
/// setting back in place.
fn split_versioned<H: DeserializeOwned, B: DeserializeOwned>(
    mut item: Item,
) -> Result<(H, B), StoreError> {
    let head: H = from_item(item.clone())?;
    item.remove("version");
    if let Some(v) = item.remove(TOOL_VERSION) {
        item.insert("version".into(), v);
    }
    Ok((head, from_item(item)?))
}

/// The environment item for `record` at `version`: its keys, its group (gsi1) and runner
/// link (gsi2) index entries, and its gsi3 `DRIFT` entry while `next_drift_at` is set.
/// Checked before any write (size, depth, read back).
pub(super) fn env_to_item(record: &EnvironmentRecord, version: u64) -> Result<Item, StoreError> {
    let e = &record.environment;
    let head = EnvHead {
        pk: format!("ENV#{}", e.path),
        sk: "ENV".into(),
        kind: "environment".into(),
        gsi1pk: group_pk(e.path.group()),
        gsi1sk: format!("ENV#{}", e.path.name()),
        gsi2pk: format!("LINK#{}", e.runner.runner_id),
        gsi2sk: e.path.to_string(),
        gsi3pk: record.next_drift_at.map(|_| DRIFT.to_string()),
        gsi3sk: record.next_drift_at.map(|t| drift_sk(t, &e.path)),
        version,
    };
    versioned_item("environment", &head, record, env_from_item)
}

/// Reads an environment item.
pub(super) fn env_from_item(item: Item) -> Result<EnvItem, StoreError> {
    let (head, record): (EnvHead, EnvironmentRecord) = split_versioned(item)?;
    Ok(EnvItem {
        version: head.version,
        record,
    })
}

/// The runner item, checked before any write (size, depth, read back).
pub(super) fn runner_to_item(r: &RunnerItem) -> Result<Item, StoreError> {
    let head = RunnerHead {
        pk: r.pk.clone(),
        sk: r.sk.clone(),
        kind: r.kind.clone(),
        version: r.version,
        link_count: r.link_count,
        updated_at: r.updated_at,
    };
    versioned_item("runner", &head, &r.runner, runner_from_item)
}

/// Reads a runner item.
pub(super) fn runner_from_item(item: Item) -> Result<RunnerItem, StoreError> {
    let (head, runner): (RunnerHead, Runner) = split_versioned(item)?;
    Ok(RunnerItem {
        pk: head.pk,
        sk: head.sk,
        kind: head.kind,
        version: head.version,
        link_count: head.link_count,
        updated_at: head.updated_at,
        runner,
    })
}

pub(super) fn job_item(job: &Job, holds_lock: bool) -> JobItem {
    JobItem {
        pk: format!("JOB#{}", job.id),
        sk: "JOB".into(),
        kind: "job".into(),
        gsi1pk: format!("ENVJOBS#{}", job.environment),
        gsi1sk: job.id.to_string(),
        gsi3pk: holds_lock.then(|| PENDING.to_string()),
        gsi3sk: holds_lock.then(|| pending_sk(job)),
        queue_sk: None,
        record: JobRecord::new(job),
    }
}
