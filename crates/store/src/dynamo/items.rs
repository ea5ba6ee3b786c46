//! The table's items: one struct per item kind, and their conversion to and from
//! DynamoDB attribute maps (with `serde_dynamo`).

use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sortie_core::{Job, Runner, RunnerRule};

use super::keys::{group_pk, org_env_sk, org_pk, pending_sk, DRIFT, PENDING};
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

#[derive(Serialize, Deserialize)]
pub(super) struct RunnerItem {
    pub(super) pk: String,
    pub(super) sk: String,
    pub(super) kind: String,
    pub(super) version: u64,
    pub(super) link_count: u64,
    pub(super) updated_at: DateTime<Utc>,
    #[serde(flatten)]
    pub(super) runner: Runner,
}

#[derive(Serialize, Deserialize)]
pub(super) struct RuleSetItem {
    pub(super) pk: String,
    pub(super) sk: String,
    pub(super) kind: String,
    pub(super) version: u64,
    pub(super) rules: Vec<RunnerRule>,
}

#[derive(Serialize, Deserialize)]
pub(super) struct EnvItem {
    pub(super) pk: String,
    pub(super) sk: String,
    pub(super) kind: String,
    pub(super) gsi1pk: String,
    pub(super) gsi1sk: String,
    pub(super) gsi2pk: String,
    pub(super) gsi2sk: String,
    /// `DRIFT` while the environment has a next drift check (a sparse index entry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) gsi3pk: Option<String>,
    /// `<next_drift_at>#<path>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) gsi3sk: Option<String>,
    /// `ORG#<org>`: the organisation's environments (gsi4). Absent on an item written before
    /// gsi4 existed, until its next update writes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) gsi4pk: Option<String>,
    /// `ENV#<path>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) gsi4sk: Option<String>,
    pub(super) version: u64,
    #[serde(flatten)]
    pub(super) record: EnvironmentRecord,
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

/// The environment item for `record` at `version`: its keys, its group (gsi1) and runner
/// link (gsi2) index entries, its gsi3 `DRIFT` entry while `next_drift_at` is set, and its
/// organisation (gsi4) entry.
pub(super) fn env_item(record: EnvironmentRecord, version: u64) -> EnvItem {
    let e = &record.environment;
    EnvItem {
        pk: format!("ENV#{}", e.path),
        sk: "ENV".into(),
        kind: "environment".into(),
        gsi1pk: group_pk(e.path.group()),
        gsi1sk: format!("ENV#{}", e.path.name()),
        gsi2pk: format!("LINK#{}", e.runner.runner_id),
        gsi2sk: e.path.to_string(),
        gsi3pk: record.next_drift_at.map(|_| DRIFT.to_string()),
        gsi3sk: record.next_drift_at.map(|t| drift_sk(t, &e.path)),
        gsi4pk: Some(org_pk(e.path.org())),
        gsi4sk: Some(org_env_sk(&e.path.to_string())),
        version,
        record,
    }
}

/// The environment item for `record` at `version`, checked as [`checked_item`] checks
/// (DynamoDB's limits, and that it reads back) before any write.
pub(super) fn env_to_item(record: &EnvironmentRecord, version: u64) -> Result<Item, StoreError> {
    checked_item("environment", &env_item(record.clone(), version))
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
