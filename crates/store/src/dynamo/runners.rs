//! Runners: one item per runner under its owner group's partition.

use super::Written;
use async_trait::async_trait;
use chrono::Utc;
use sortie_core::{GroupPath, Runner, RunnerId};
use std::collections::HashMap;

use super::items::{from_item, to_item, RunnerItem};
use super::keys::{group_pk, runner_key};
use super::{n, DynamoStore};
use crate::{RunnerStore, StoreError, Versioned};

#[async_trait]
impl RunnerStore for DynamoStore {
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
            .write_one(self.put_with(
                to_item(&item),
                "attribute_not_exists(pk)",
                Default::default(),
            ))
            .await?;
        match res {
            Written::Done => Ok(Versioned {
                item: runner.clone(),
                version: 1,
            }),
            Written::ConditionFailed => Err(StoreError::AlreadyExists {
                kind: "runner",
                id: runner.id.to_string(),
            }),
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
            .write_one(self.put_with(
                to_item(&item),
                "version = :v AND link_count = :links",
                HashMap::from([
                    (":v".to_string(), n(old_version)),
                    (":links".to_string(), n(item.link_count)),
                ]),
            ))
            .await?;
        match res {
            Written::Done => Ok(Versioned {
                item: runner.clone(),
                version: item.version,
            }),
            Written::ConditionFailed => {
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
            .write_one(self.delete(
                runner_key(id),
                "version = :v AND link_count = :zero",
                HashMap::from([
                    (":v".to_string(), n(current.version)),
                    (":zero".to_string(), n(0)),
                ]),
            ))
            .await?;
        match res {
            Written::Done => Ok(()),
            Written::ConditionFailed => match self.read_runner(id).await? {
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
        }
    }
}
