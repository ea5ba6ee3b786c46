//! The table's items: one struct per item kind, and their conversion to and from
//! DynamoDB attribute maps (with `serde_dynamo`).

use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sortie_core::{Job, Runner, RunnerRule};

use super::keys::{group_pk, pending_sk, PENDING};
use super::Item;
use crate::{EnvironmentRecord, JobRecord, MembershipRecord, StoreError};

pub(super) fn to_item<T: Serialize>(v: &T) -> Item {
    serde_dynamo::to_item(v).expect("domain values always serialise to DynamoDB items")
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
        version,
        record,
    }
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
        record: JobRecord {
            job: job.clone(),
            task: None,
            token_hash: None,
            started_at: None,
            cancel_requested_by: None,
            timeout_requested_at: None,
            summary: None,
            updated_at: job.transitions[0].at,
        },
    }
}
