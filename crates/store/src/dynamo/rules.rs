//! Rules: one item per rule (`RULES#<scope>` / `RULE#<id>`), one small rule-set version
//! item per scope (`RULESET`) and one per organisation (`RULESVER#<org>`), both bumped in
//! the transaction of every change, so no number of rules reaches the item size limit.
//!
//! The old layout (every rule of a scope in one `RULES` item) is still read, and a scope is
//! converted on its next write: the old rules are copied to per-rule items first, then one
//! transaction deletes the old item (on condition of its version), writes the version item
//! at the old version + 1, makes the change and bumps the organisation's version.

use std::collections::{BTreeSet, HashMap};

use async_trait::async_trait;
use aws_sdk_dynamodb::types::{DeleteRequest, KeysAndAttributes, PutRequest, WriteRequest};
use serde::{Deserialize, Serialize};
use sortie_core::{GroupPath, RunnerRule};

use super::items::{checked_item, from_item, to_item, RuleSetItem};
use super::keys::key;
use super::{n, s, DynamoStore, Item, TxOutcome, RETRIES};
use crate::error::aws;
use crate::{RuleStore, StoreError, Versioned};

/// The old layout's sort key: every rule of the scope in one item.
const OLD_SK: &str = "RULES";
/// The scope's rule-set version item.
const VERSION_SK: &str = "RULESET";
/// The sort key prefix of one rule.
const RULE_SK: &str = "RULE#";

fn scope_pk(scope: &GroupPath) -> String {
    format!("RULES#{}", scope.as_str())
}

/// The organisation's rule version item (`RULESVER#` for the root).
fn org_key(org: Option<&str>) -> Item {
    key(format!("RULESVER#{}", org.unwrap_or_default()), "RULESVER")
}

#[derive(Serialize, Deserialize)]
struct RuleItem {
    pk: String,
    sk: String,
    kind: String,
    #[serde(flatten)]
    rule: RunnerRule,
}

fn rule_item(rule: &RunnerRule) -> RuleItem {
    RuleItem {
        pk: scope_pk(&rule.scope),
        sk: format!("{RULE_SK}{}", rule.id),
        kind: "rule".into(),
        rule: rule.clone(),
    }
}

/// A scope as read: its rules and version, and what the write path must know.
struct Scope {
    version: u64,
    rules: Vec<RunnerRule>,
    /// The old-format item's version, while the scope is still in the old layout.
    old: Option<u64>,
    /// The ids of per-rule items present (left over by an interrupted migration, while `old`).
    stored_ids: BTreeSet<String>,
}

enum Change<'a> {
    Create(&'a RunnerRule),
    Update(&'a RunnerRule),
    Delete(&'a str),
}

impl Change<'_> {
    fn id(&self) -> &str {
        match self {
            Change::Create(r) | Change::Update(r) => &r.id,
            Change::Delete(id) => id,
        }
    }
}

impl DynamoStore {
    /// Reads one scope: a consistent, paginated query of its partition. An unreadable rule
    /// item is logged and skipped, so one bad item never fails an org's reads.
    async fn read_scope(&self, scope: &GroupPath) -> Result<Scope, StoreError> {
        let mut version = None;
        let mut old: Option<RuleSetItem> = None;
        let mut rules = Vec::new();
        for item in self.query_pk(None, "pk", &scope_pk(scope), None).await? {
            let sk = item
                .get("sk")
                .and_then(|v| v.as_s().ok())
                .cloned()
                .unwrap_or_default();
            if sk == OLD_SK {
                old = Some(from_item(item)?);
            } else if sk == VERSION_SK {
                version = Some(
                    item.get("version")
                        .and_then(|v| v.as_n().ok())
                        .and_then(|v| v.parse::<u64>().ok())
                        .ok_or_else(|| StoreError::Corrupt {
                            key: format!("{}/{sk}", scope_pk(scope)),
                            message: "no version".into(),
                        })?,
                );
            } else if sk.starts_with(RULE_SK) {
                match from_item::<RuleItem>(item) {
                    Ok(r) => rules.push(r.rule),
                    Err(e) => tracing::error!(error = %e, "unreadable rule item skipped"),
                }
            }
        }
        let stored_ids = rules.iter().map(|r| r.id.clone()).collect();
        Ok(match old {
            // Still in the old layout: the old item is the truth.
            Some(set) => Scope {
                version: set.version,
                rules: set.rules,
                old: Some(set.version),
                stored_ids,
            },
            None => Scope {
                version: version.unwrap_or(0),
                rules,
                old: None,
                stored_ids,
            },
        })
    }

    /// What a change needs to know of its scope, cheaply: the version item, the changed rule's
    /// item and the old-format item, in one consistent `BatchGetItem`. Only a scope still in
    /// the old layout is read whole (the migration needs every rule). In the result, `rules`
    /// holds just the changed rule when it exists (or every rule, in the old layout).
    async fn scope_head(&self, scope: &GroupPath, id: &str) -> Result<Scope, StoreError> {
        let pk = scope_pk(scope);
        let keys = vec![
            key(pk.clone(), VERSION_SK),
            key(pk.clone(), &format!("{RULE_SK}{id}")),
            key(pk.clone(), OLD_SK),
        ];
        let mut request = HashMap::from([(
            self.table.clone(),
            KeysAndAttributes::builder()
                .set_keys(Some(keys))
                .consistent_read(true)
                .build()
                .expect("keys are set"),
        )]);
        let mut found = Vec::new();
        for _ in 0..RETRIES {
            let out = self
                .client
                .batch_get_item()
                .set_request_items(Some(request))
                .send()
                .await
                .map_err(|e| aws("dynamodb", e))?;
            found.extend(
                out.responses
                    .unwrap_or_default()
                    .remove(&self.table)
                    .unwrap_or_default(),
            );
            match out.unprocessed_keys {
                Some(u) if !u.is_empty() => request = u,
                _ => break,
            }
        }
        let sk_of = |i: &Item| {
            i.get("sk")
                .and_then(|v| v.as_s().ok())
                .cloned()
                .unwrap_or_default()
        };
        if found.iter().any(|i| sk_of(i) == OLD_SK) {
            return self.read_scope(scope).await;
        }
        let mut head = Scope {
            version: 0,
            rules: vec![],
            old: None,
            stored_ids: BTreeSet::new(),
        };
        for item in found {
            if sk_of(&item) == VERSION_SK {
                head.version = item
                    .get("version")
                    .and_then(|v| v.as_n().ok())
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
            } else if let Ok(r) = from_item::<RuleItem>(item) {
                head.rules.push(r.rule);
            }
        }
        Ok(head)
    }

    /// Puts and deletes items outside a transaction, 25 at a time (the migration's copy).
    async fn batch_write(&self, mut writes: Vec<WriteRequest>) -> Result<(), StoreError> {
        while !writes.is_empty() {
            let rest = writes.split_off(writes.len().min(25));
            let mut chunk = std::mem::replace(&mut writes, rest);
            for _ in 0..RETRIES {
                let out = self
                    .client
                    .batch_write_item()
                    .request_items(&self.table, chunk)
                    .send()
                    .await
                    .map_err(|e| aws("dynamodb", e))?;
                chunk = out
                    .unprocessed_items
                    .and_then(|mut u| u.remove(&self.table))
                    .unwrap_or_default();
                if chunk.is_empty() {
                    break;
                }
            }
            if !chunk.is_empty() {
                return Err(StoreError::Aws {
                    service: "dynamodb",
                    message: "BatchWriteItem left items unprocessed".into(),
                    retryable: true,
                });
            }
        }
        Ok(())
    }

    /// One change to a scope's rules, with its version checks; returns the new version.
    async fn change_rules(
        &self,
        scope: &GroupPath,
        change: Change<'_>,
        expected: Option<u64>,
    ) -> Result<u64, StoreError> {
        let rule_id = format!("{}:{}", scope.as_str(), change.id());
        let new_item = match &change {
            Change::Create(r) | Change::Update(r) => Some(checked_item("rule", &rule_item(r))?),
            Change::Delete(_) => None,
        };
        let rule_key = key(scope_pk(scope), &format!("{RULE_SK}{}", change.id()));
        for _ in 0..RETRIES {
            let st = self.scope_head(scope, change.id()).await?;
            let exists = st.rules.iter().any(|r| r.id == change.id());
            match change {
                Change::Create(_) if exists => {
                    return Err(StoreError::AlreadyExists {
                        kind: "rule",
                        id: rule_id,
                    })
                }
                Change::Update(_) | Change::Delete(_) if !exists => {
                    return Err(StoreError::NotFound {
                        kind: "rule",
                        id: rule_id,
                    })
                }
                _ => {}
            }
            if !matches!(change, Change::Create(_)) {
                Self::version_check("rule", rule_id.clone(), expected, st.version)?;
            }
            let next = st.version + 1;
            let mut version_item = key(scope_pk(scope), VERSION_SK);
            version_item.insert("kind".into(), s("ruleset"));
            version_item.insert("version".into(), n(next));
            let org_bump = self.update(
                org_key(scope.org()),
                "SET version = if_not_exists(version, :zero) + :one",
                "attribute_not_exists(pk) OR attribute_exists(pk)",
                HashMap::from([(":zero".to_string(), n(0)), (":one".to_string(), n(1))]),
                HashMap::new(),
            );
            let mut items = Vec::new();
            match st.old {
                Some(old_version) => {
                    // Migration: copy the other rules to their own items first (idempotent),
                    // removing leftovers of an interrupted copy, then switch in one transaction.
                    let keep: BTreeSet<&str> = st
                        .rules
                        .iter()
                        .map(|r| r.id.as_str())
                        .filter(|id| *id != change.id())
                        .collect();
                    let mut writes = Vec::new();
                    for r in st.rules.iter().filter(|r| r.id != change.id()) {
                        writes.push(
                            WriteRequest::builder()
                                .put_request(
                                    PutRequest::builder()
                                        .set_item(Some(to_item(&rule_item(r))))
                                        .build()
                                        .expect("item is set"),
                                )
                                .build(),
                        );
                    }
                    for stale in st
                        .stored_ids
                        .iter()
                        .filter(|id| !keep.contains(id.as_str()))
                    {
                        writes.push(
                            WriteRequest::builder()
                                .delete_request(
                                    DeleteRequest::builder()
                                        .set_key(Some(key(
                                            scope_pk(scope),
                                            &format!("{RULE_SK}{stale}"),
                                        )))
                                        .build()
                                        .expect("key is set"),
                                )
                                .build(),
                        );
                    }
                    self.batch_write(writes).await?;
                    items.push(self.delete(
                        key(scope_pk(scope), OLD_SK),
                        "version = :v",
                        HashMap::from([(":v".to_string(), n(old_version))]),
                    ));
                    items.push(self.put(version_item, "attribute_not_exists(pk)"));
                    match new_item.clone() {
                        Some(item) => items.push(
                            self.put(item, "attribute_exists(pk) OR attribute_not_exists(pk)"),
                        ),
                        None => items.push(self.delete(
                            rule_key.clone(),
                            "attribute_exists(pk) OR attribute_not_exists(pk)",
                            HashMap::new(),
                        )),
                    }
                }
                None => {
                    items.push(match (&change, new_item.clone()) {
                        (Change::Create(_), Some(item)) => {
                            self.put(item, "attribute_not_exists(pk)")
                        }
                        (_, Some(item)) => self.put(item, "attribute_exists(pk)"),
                        (_, None) => {
                            self.delete(rule_key.clone(), "attribute_exists(pk)", HashMap::new())
                        }
                    });
                    if st.version == 0 {
                        items.push(self.put(version_item, "attribute_not_exists(pk)"));
                    } else {
                        items.push(self.update(
                            key(scope_pk(scope), VERSION_SK),
                            "SET version = :next",
                            "version = :v",
                            HashMap::from([
                                (":next".to_string(), n(next)),
                                (":v".to_string(), n(st.version)),
                            ]),
                            HashMap::new(),
                        ));
                    }
                }
            }
            items.push(org_bump);
            match self.transact(items).await? {
                TxOutcome::Done => return Ok(next),
                // Someone changed the scope meanwhile: read it again and decide again.
                TxOutcome::Cancelled(_) => continue,
            }
        }
        Err(StoreError::Aws {
            service: "dynamodb",
            message: "rule set kept changing; try again".into(),
            retryable: true,
        })
    }
}

#[async_trait]
impl RuleStore for DynamoStore {
    async fn create_rule(&self, rule: &RunnerRule) -> Result<Versioned<RunnerRule>, StoreError> {
        let version = self
            .change_rules(&rule.scope, Change::Create(rule), None)
            .await?;
        Ok(Versioned {
            item: rule.clone(),
            version,
        })
    }

    async fn list_rules(
        &self,
        scope: &GroupPath,
    ) -> Result<Versioned<Vec<RunnerRule>>, StoreError> {
        let st = self.read_scope(scope).await?;
        Ok(Versioned {
            item: st.rules,
            version: st.version,
        })
    }

    async fn rules_for(&self, group: &GroupPath) -> Result<Vec<RunnerRule>, StoreError> {
        let scopes = group.self_and_ancestors();
        let read =
            futures_util::future::try_join_all(scopes.iter().map(|g| self.read_scope(g))).await?;
        Ok(read.into_iter().flat_map(|s| s.rules).collect())
    }

    async fn update_rule(
        &self,
        rule: &RunnerRule,
        expected: Option<u64>,
    ) -> Result<Versioned<RunnerRule>, StoreError> {
        let version = self
            .change_rules(&rule.scope, Change::Update(rule), expected)
            .await?;
        Ok(Versioned {
            item: rule.clone(),
            version,
        })
    }

    async fn delete_rule(
        &self,
        scope: &GroupPath,
        id: &str,
        expected: Option<u64>,
    ) -> Result<(), StoreError> {
        self.change_rules(scope, Change::Delete(id), expected)
            .await
            .map(|_| ())
    }

    async fn rules_version(&self, org: Option<&str>) -> Result<u64, StoreError> {
        self.org_and_root_version(org_key, org).await
    }
}
