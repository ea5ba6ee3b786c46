//! Environments: one item each, indexed by group (gsi1), by linked runner (gsi2), while
//! a drift check is scheduled by its next fire time (gsi3 `DRIFT`), and by organisation and
//! path (gsi4 `ORG#<org>` / `ENV#<path>`) for the listings under a group. Drift and the
//! last apply are written in [`drift`].

mod drift;

use std::collections::HashMap;

use async_trait::async_trait;
use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::types::{AttributeValue, Select};
use chrono::{DateTime, Utc};
use sortie_core::drift::{DriftSkipped, DriftStatus};
use sortie_core::{EnvPath, Environment, GroupPath, RunnerLink};

use super::items::{check_item, env_to_item, from_item, EnvItem};
use super::keys::{env_key, group_pk, org_env_sk, org_pk, runner_key};
use super::{n, s, DynamoStore, Item, TxOutcome};
use crate::error::aws;
use crate::sortkeys::next_drift;
use crate::{
    environments_under, EnvironmentRecord, EnvironmentStore, EnvironmentsUnder, LastApply,
    StoreError, Versioned,
};

/// The attributes an environment update rewrites: its type, labels and tags, and its
/// settings. Each is set to the checked item's value, or removed when the item has none
/// (never written as NULL).
const UPDATED: [&str; 20] = [
    // The organisation index (gsi4): written by every update, so an item written before
    // gsi4 existed gets it on its next update.
    "gsi4pk",
    "gsi4sk",
    "env_type",
    "labels",
    "tags",
    "approval",
    "approval_timeout_seconds",
    "four_eyes",
    "drift_schedule",
    "drift_remediation",
    "tool",
    "tool_version",
    "triggers",
    "trigger_operation",
    "trigger_inputs",
    "expires_at",
    "ttl",
    "ttl_from",
    "vcs",
    "extended_to",
];

/// The attributes of the drift schedule's next fire time and its gsi3 entry.
const NEXT_DRIFT: [&str; 3] = ["next_drift_at", "gsi3pk", "gsi3sk"];

fn not_found(path: &EnvPath) -> StoreError {
    StoreError::NotFound {
        kind: "environment",
        id: path.to_string(),
    }
}

/// Checks one attribute an update writes against DynamoDB's limits (size, depth, empty map
/// keys), as [`check_item`] checks a whole item.
fn check_attribute(name: &'static str, v: &AttributeValue) -> Result<(), StoreError> {
    check_item(name, &HashMap::from([(name.to_string(), v.clone())]))
}

/// An update expression that gives each of `attrs` the value `item` has for it, or removes
/// it when `item` has none; names `#a<i>`, values `:a<i>`.
fn set_or_remove(
    attrs: &[&str],
    item: &Item,
    set: &mut Vec<String>,
    remove: &mut Vec<String>,
    names: &mut HashMap<String, String>,
    values: &mut Item,
) {
    for (i, a) in attrs.iter().enumerate() {
        let name = format!("#a{i}");
        names.insert(name.clone(), a.to_string());
        match item.get(*a) {
            Some(v) => {
                set.push(format!("{name} = :a{i}"));
                values.insert(format!(":a{i}"), v.clone());
            }
            None => remove.push(name),
        }
    }
}

impl DynamoStore {
    /// The gsi4 Query of organisation `org`'s environments whose path begins with `prefix`
    /// (a group's path and `/`).
    fn under_query(&self, org: &str, prefix: &str) -> QueryFluentBuilder {
        self.client
            .query()
            .table_name(&self.table)
            .index_name("gsi4")
            .key_condition_expression("gsi4pk = :org AND begins_with(gsi4sk, :under)")
            .expression_attribute_values(":org", s(org_pk(org)))
            .expression_attribute_values(":under", s(org_env_sk(prefix)))
    }
}

#[async_trait]
impl EnvironmentStore for DynamoStore {
    async fn create_environment(
        &self,
        env: &Environment,
    ) -> Result<Versioned<EnvironmentRecord>, StoreError> {
        let record = EnvironmentRecord {
            environment: env.clone(),
            active_job: None,
            queued_count: 0,
            queue_seq: 0,
            drift: None,
            drift_skipped: None,
            last_apply: None,
            next_drift_at: next_drift(&env.settings, Utc::now()),
            lock: None,
            destroyed: None,
            created_at: Some(Utc::now()),
        };
        let item = env_to_item(&record, 1)?;
        let items = vec![
            self.put(item, "attribute_not_exists(pk)"),
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

    async fn list_environments_under(
        &self,
        group: &GroupPath,
        limit: usize,
    ) -> Result<EnvironmentsUnder, StoreError> {
        let (org, prefix) = environments_under(group)?;
        let mut items = Vec::new();
        let mut start = None;
        // Reads at most `limit` + 1 items: the one past the limit says the list was cut.
        while items.len() <= limit {
            let want = i32::try_from(limit + 1 - items.len()).unwrap_or(i32::MAX);
            let page = self
                .under_query(org, &prefix)
                .limit(self.page_size.map_or(want, |p| p.min(want)))
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|e| aws("dynamodb", e))?;
            items.extend(page.items.unwrap_or_default());
            match page.last_evaluated_key {
                Some(k) if !k.is_empty() => start = Some(k),
                _ => break,
            }
        }
        let truncated = items.len() > limit;
        items.truncate(limit);
        // gsi4 sorts by `ENV#<path>`: the items come by path already.
        let environments = items
            .into_iter()
            .map(|i| from_item::<EnvItem>(i).map(Self::versioned_env))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(EnvironmentsUnder {
            environments,
            truncated,
        })
    }

    async fn count_environments_under(&self, group: &GroupPath) -> Result<u64, StoreError> {
        let (org, prefix) = environments_under(group)?;
        let mut count = 0u64;
        let mut start = None;
        loop {
            let page = self
                .under_query(org, &prefix)
                .select(Select::Count)
                .set_limit(self.page_size)
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|e| aws("dynamodb", e))?;
            count += u64::try_from(page.count).unwrap_or_default();
            match page.last_evaluated_key {
                Some(k) if !k.is_empty() => start = Some(k),
                _ => return Ok(count),
            }
        }
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
        let mut record = current.record.clone();
        // The next drift check moves only when the schedule changes: an unrelated edit never
        // skips a due check, nor races the sweeper's `advance_drift`.
        let schedule_changed =
            record.environment.settings.drift_schedule != env.settings.drift_schedule;
        let e = &mut record.environment;
        e.env_type = env.env_type.clone();
        e.labels = env.labels.clone();
        e.tags = env.tags.clone();
        e.settings = env.settings.clone();
        if schedule_changed {
            record.next_drift_at = next_drift(&env.settings, Utc::now());
        }
        // The whole item as it will be, checked; the update writes its attributes.
        let item = env_to_item(&record, version)?;
        let mut set = vec!["version = :nv".to_string()];
        let mut remove = vec![];
        let mut names = HashMap::new();
        let mut values: Item = HashMap::from([
            (":nv".to_string(), n(version)),
            (":v".to_string(), n(current.version)),
        ]);
        let mut attrs = UPDATED.to_vec();
        if schedule_changed {
            attrs.extend(NEXT_DRIFT);
        }
        set_or_remove(
            &attrs,
            &item,
            &mut set,
            &mut remove,
            &mut names,
            &mut values,
        );
        let mut expr = format!("SET {}", set.join(", "));
        if !remove.is_empty() {
            expr.push_str(&format!(" REMOVE {}", remove.join(", ")));
        }
        // `ALL_NEW`, or read back after a transaction when the change carries its audit entry.
        match self
            .update_returning(env_key(&env.path), &expr, "version = :v", names, values)
            .await?
        {
            Some(item) => Ok(Self::versioned_env(from_item::<EnvItem>(item)?)),
            None => {
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
        let version = current.version + 1;
        // An update of the link alone (never a Put of the whole item): the lock and the drift
        // attributes change without a version bump, and a relink must not undo them.
        let item = env_to_item(&record, version)?;
        let mut items = vec![self.update(
            env_key(path),
            "SET #runner = :r, gsi2pk = :g2, gsi4pk = :g4, gsi4sk = :g4s, version = :nv",
            "version = :v",
            HashMap::from([
                (":r".to_string(), item["runner"].clone()),
                (":g2".to_string(), item["gsi2pk"].clone()),
                (":g4".to_string(), item["gsi4pk"].clone()),
                (":g4s".to_string(), item["gsi4sk"].clone()),
                (":nv".to_string(), n(version)),
                (":v".to_string(), n(current.version)),
            ]),
            HashMap::from([("#runner".to_string(), "runner".to_string())]),
        )];
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
            TxOutcome::Done => Ok(Versioned {
                item: record,
                version,
            }),
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
                by: current
                    .record
                    .active_job
                    .iter()
                    .map(|j| j.to_string())
                    .collect(),
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
                    by: e.record.active_job.iter().map(|j| j.to_string()).collect(),
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

    async fn due_drift_checks(
        &self,
        now: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<EnvironmentRecord>, StoreError> {
        self.query_due_drift(now, limit).await
    }

    async fn advance_drift(
        &self,
        path: &EnvPath,
        fired: DateTime<Utc>,
        next: Option<DateTime<Utc>>,
        skipped: Option<&DriftSkipped>,
    ) -> Result<bool, StoreError> {
        self.write_drift_advance(path, fired, next, skipped).await
    }

    async fn record_drift(&self, path: &EnvPath, status: &DriftStatus) -> Result<(), StoreError> {
        self.write_drift(path, status).await
    }

    async fn forget_last_apply(&self, path: &EnvPath, at: DateTime<Utc>) -> Result<(), StoreError> {
        self.remove_last_apply(path, at).await
    }

    async fn record_last_apply(&self, path: &EnvPath, last: &LastApply) -> Result<(), StoreError> {
        self.write_last_apply(path, last).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sortie_core::{Approval, DriftRemediation, EnvSettings};

    /// An update rewrites every setting: a setting added to `EnvSettings` must be added to
    /// `UPDATED`, or an update would never change it.
    #[test]
    fn an_update_rewrites_every_setting() {
        let settings = EnvSettings {
            approval: Approval::Required,
            approval_timeout_seconds: Some(600),
            four_eyes: true,
            drift_schedule: Some("0 * * * *".into()),
            drift_remediation: DriftRemediation::Apply,
            tool: Some(sortie_core::tool::ToolName::Opentofu),
            tool_version: Some("1.8.0".into()),
            triggers: vec![sortie_core::EnvPath::parse("acme/payments/db").unwrap()],
            trigger_operation: sortie_core::triggers::TriggerOperation::Apply,
            trigger_inputs: vec!["db_host".into()],
            expires_at: Some(chrono::Utc::now()),
            ttl: Some("72h".into()),
            ttl_from: sortie_core::expiry::TtlFrom::LastApply,
            vcs: Some(
                serde_json::from_value(serde_json::json!({"repository": "acme/infra"})).unwrap(),
            ),
            extended_to: Some(chrono::Utc::now()),
        };
        let item: Item = serde_dynamo::to_item(&settings).unwrap();
        let mut names: Vec<&str> = item.keys().map(String::as_str).collect();
        names.sort();
        // The first five are gsi4's keys and the environment's own fields, not settings.
        let mut expected: Vec<&str> = UPDATED[5..].to_vec();
        expected.sort();
        assert_eq!(names, expected);
    }
}
