//! Rules: one rule-set item per scope, read over all ancestors in one BatchGetItem.

use std::collections::HashMap;

use async_trait::async_trait;
use aws_sdk_dynamodb::types::KeysAndAttributes;
use sortie_core::{GroupPath, RunnerRule};

use super::items::{from_item, to_item, RuleSetItem};
use super::keys::rules_key;
use super::{condition_failed, n, DynamoStore, Item, RETRIES};
use crate::error::aws;
use crate::{RuleStore, StoreError, Versioned};

#[async_trait]
impl RuleStore for DynamoStore {
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
        for _ in 0..RETRIES {
            let mut set =
                self.read_rules(&rule.scope)
                    .await?
                    .ok_or_else(|| StoreError::NotFound {
                        kind: "rule",
                        id: rule_id.clone(),
                    })?;
            Self::version_check("rule", rule_id.clone(), expected, set.version)?;
            let Some(slot) = set.rules.iter_mut().find(|r| r.id == rule.id) else {
                return Err(StoreError::NotFound {
                    kind: "rule",
                    id: rule_id,
                });
            };
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
}
