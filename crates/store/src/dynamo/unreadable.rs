//! Job items that cannot be decoded: kept apart from every list, and taken out of an
//! environment's queue, so that one bad item never wedges a list, a sweep or a lock.

use std::collections::HashMap;

use chrono::Utc;
use sortie_core::{EnvPath, JobId};

use super::items::{from_item, JobItem};
use super::keys::{env_key, job_key, queue_key};
use super::{n, s, DynamoStore, Item, TxOutcome};
use crate::{JobStore, Listed, StoreError, Unreadable};

/// Decodes a page of job items: the readable ones, and the others apart (logged), so one bad
/// item never fails a list.
pub(super) fn decode_listed<T>(items: Vec<Item>, f: impl Fn(JobItem) -> T) -> Listed<T> {
    let mut listed = Listed::default();
    for item in items {
        match from_item::<JobItem>(item.clone()) {
            Ok(j) => listed.records.push(f(j)),
            Err(e) => {
                let u = unreadable_of(&item, e.to_string());
                tracing::error!(job_id = %u.job_id, key = %u.key, error = %u.message, "unreadable job item skipped");
                listed.unreadable.push(u);
            }
        }
    }
    listed
}

/// What can still be known of an undecodable job item: its id (from its key) and, when that
/// attribute is readable, its environment.
pub(super) fn unreadable_of(item: &Item, message: String) -> Unreadable {
    let attr = |k: &str| item.get(k).and_then(|v| v.as_s().ok()).cloned();
    let pk = attr("pk").unwrap_or_default();
    let environment = attr("environment")
        .and_then(|e| EnvPath::parse(&e).ok())
        .or_else(|| {
            attr("gsi1pk").and_then(|g| {
                g.strip_prefix("ENVJOBS#")
                    .and_then(|e| EnvPath::parse(e).ok())
            })
        });
    Unreadable {
        key: format!("{pk}/{}", attr("sk").unwrap_or_default()),
        job_id: JobId::new(pk.strip_prefix("JOB#").unwrap_or(&pk).to_string()),
        environment,
        message,
    }
}

impl DynamoStore {
    /// Takes a waiting job that can never run (its item missing or unreadable) out of its
    /// environment's queue in one transaction (the holder keeps the lock), then fails its item.
    pub(super) async fn skip_unreadable_waiting(
        &self,
        env: &EnvPath,
        holder: &JobId,
        position: &str,
        next_id: &str,
    ) -> Result<(), StoreError> {
        tracing::error!(job_id = %next_id, environment = %env, "a waiting job's item is missing or unreadable; it is skipped and failed");
        let items = vec![
            self.delete(
                queue_key(env, position),
                "attribute_exists(pk)",
                HashMap::new(),
            ),
            self.update(
                env_key(env),
                "SET queued_count = queued_count - :one",
                "active_job = :held AND queued_count > :zero",
                HashMap::from([
                    (":one".to_string(), n(1)),
                    (":zero".to_string(), n(0)),
                    (":held".to_string(), s(holder)),
                ]),
                HashMap::new(),
            ),
        ];
        if let TxOutcome::Cancelled(_) = self.transact(items).await? {
            return Ok(()); // The queue moved meanwhile; the caller reads it again.
        }
        if let Some(raw) = self.get_item(job_key(next_id)).await? {
            let u = unreadable_of(&raw, "unreadable while waiting in its queue".into());
            let reason = format!(
                "sortie: the job's stored item is unreadable; it was skipped in {env}'s queue"
            );
            if let Err(e) = self.fail_unreadable_job(&u, Utc::now(), &reason).await {
                tracing::warn!(job_id = %next_id, error = %e, "could not mark the skipped job failed");
            }
        }
        Ok(())
    }
}
