//! Environments: one item each, indexed by group (gsi1) and by linked runner (gsi2).

use std::collections::HashMap;

use async_trait::async_trait;
use aws_sdk_dynamodb::types::{ReturnValue, TransactWriteItem};
use sortie_core::{EnvPath, Environment, GroupPath, RunnerLink};

use super::items::{env_item, from_item, to_item, EnvItem};
use super::keys::{env_key, group_pk, runner_key};
use super::{condition_failed, n, s, DynamoStore, TxOutcome};
use crate::error::aws;
use crate::{EnvironmentRecord, EnvironmentStore, StoreError, Versioned};

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
}
