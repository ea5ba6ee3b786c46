//! Pull requests in the table:
//! - a connection, `VCS#<org>` / `CONN#<provider>`;
//! - the bindings index, `REPO#<provider>#<owner/name, lower case>` / `ENV#<path>`, one item
//!   per bound environment, read with one paged query;
//! - a delivery seen, `DELIVERY#<provider>#<id>` / `DELIVERY`, with `expires_at` (the
//!   table's TTL attribute) so the table forgets it;
//! - a pull request, `PULL#<provider>#<owner/name, lower case>#<number>` / `PULL`, written
//!   on condition of its `version`;
//! - the connected organisations, `CONNS#<provider>` / `<org>`, beside each connection;
//! - an organisation's bound environments, `VCS#<org>` /
//!   `BOUND#<provider>#<owner/name, lower case>#<path>`, beside the bindings index;
//! - what the last reconcile saw open, `VCS#<org>` /
//!   `OPEN#<provider>#<owner/name, lower case>#<base>`.

use super::Written;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sortie_core::vcs::connection::VcsConnection;
use sortie_core::vcs::pull::PullRequestRecord;
use sortie_core::vcs::reconcile::OpenPulls;
use sortie_core::vcs::VcsProvider;
use sortie_core::EnvPath;
use std::collections::HashMap;

use super::items::{checked_item, from_item};
use super::keys::key;
use super::{condition_failed, n, s, DynamoStore, Item};
use crate::error::aws;
use crate::vcs::{pull_id, repository_key, MAX_BOUND_ENVIRONMENTS};
use crate::{StoreError, VcsStore, Versioned};

fn connection_key(org: &str, provider: VcsProvider) -> Item {
    key(format!("VCS#{org}"), &format!("CONN#{}", provider.as_str()))
}

fn registry_key(org: &str, provider: VcsProvider) -> Item {
    key(format!("CONNS#{}", provider.as_str()), org)
}

fn bound_key(provider: VcsProvider, repository: &str, env: &EnvPath) -> Item {
    key(
        format!("VCS#{}", env.org()),
        &format!(
            "BOUND#{}#{}#{env}",
            provider.as_str(),
            repository_key(repository)
        ),
    )
}

fn open_key(org: &str, provider: VcsProvider, repository: &str, base: &str) -> Item {
    key(
        format!("VCS#{org}"),
        &format!(
            "OPEN#{}#{}#{base}",
            provider.as_str(),
            repository_key(repository)
        ),
    )
}

fn repo_pk(provider: VcsProvider, repository: &str) -> String {
    format!("REPO#{}#{}", provider.as_str(), repository_key(repository))
}

fn pull_key(provider: VcsProvider, repository: &str, number: u64) -> Item {
    key(
        format!(
            "PULL#{}#{}#{number}",
            provider.as_str(),
            repository_key(repository)
        ),
        "PULL",
    )
}

#[derive(Serialize, Deserialize)]
struct ConnectionItem {
    pk: String,
    sk: String,
    kind: String,
    connection: VcsConnection,
}

#[derive(Serialize, Deserialize)]
struct PullItem {
    pk: String,
    sk: String,
    kind: String,
    version: u64,
    pull: PullRequestRecord,
}

#[derive(Serialize, Deserialize)]
struct OpenItem {
    pk: String,
    sk: String,
    kind: String,
    open: OpenPulls,
}

impl DynamoStore {
    /// Every item of partition `pk` (whose sort key begins with `prefix`), paged to the
    /// end, at most `max`.
    async fn query_all(
        &self,
        pk: String,
        prefix: Option<String>,
        max: usize,
    ) -> Result<Vec<Item>, StoreError> {
        let mut out = Vec::new();
        let mut start: Option<Item> = None;
        loop {
            let mut query = self
                .client
                .query()
                .table_name(&self.table)
                .expression_attribute_values(":pk", s(&pk))
                .consistent_read(true)
                .set_exclusive_start_key(start.take());
            query = match &prefix {
                Some(p) => query
                    .key_condition_expression("pk = :pk AND begins_with(sk, :prefix)")
                    .expression_attribute_values(":prefix", s(p)),
                None => query.key_condition_expression("pk = :pk"),
            };
            let page = query.send().await.map_err(|e| aws("dynamodb", e))?;
            out.extend(page.items.unwrap_or_default());
            if out.len() >= max {
                out.truncate(max);
                return Ok(out);
            }
            match page.last_evaluated_key {
                Some(k) if !k.is_empty() => start = Some(k),
                _ => return Ok(out),
            }
        }
    }
}

fn key_parts(k: &Item) -> (String, String) {
    let part = |name: &str| {
        k.get(name)
            .and_then(|v| v.as_s().ok())
            .cloned()
            .unwrap_or_default()
    };
    (part("pk"), part("sk"))
}

#[async_trait]
impl VcsStore for DynamoStore {
    async fn put_connection(&self, connection: &VcsConnection) -> Result<(), StoreError> {
        let (pk, sk) = key_parts(&connection_key(&connection.org, connection.provider));
        let item = checked_item(
            "connection",
            &ConnectionItem {
                pk,
                sk,
                kind: "vcs-connection".into(),
                connection: connection.clone(),
            },
        )?;
        // The registry entry first: a connection is always in the reconcile's list (a
        // stale entry, after a failed write, finds no connection and is skipped).
        let mut entry = registry_key(&connection.org, connection.provider);
        entry.insert("kind".into(), s("vcs-connected"));
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(entry))
            .send()
            .await
            .map_err(|e| aws("dynamodb", e))?;
        // The connection itself carries the change's audit entry.
        self.write_one(self.put(item, "attribute_exists(pk) OR attribute_not_exists(pk)"))
            .await?;
        Ok(())
    }

    async fn get_connection(
        &self,
        org: &str,
        provider: VcsProvider,
    ) -> Result<VcsConnection, StoreError> {
        match self.get_item(connection_key(org, provider)).await? {
            Some(item) => Ok(from_item::<ConnectionItem>(item)?.connection),
            None => Err(not_found(org, provider)),
        }
    }

    async fn delete_connection(&self, org: &str, provider: VcsProvider) -> Result<(), StoreError> {
        let out = self
            .write_one(self.delete(
                connection_key(org, provider),
                "attribute_exists(pk)",
                Item::new(),
            ))
            .await?;
        match out {
            Written::Done => {}
            Written::ConditionFailed => return Err(not_found(org, provider)),
        }
        self.client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(registry_key(org, provider)))
            .send()
            .await
            .map_err(|e| aws("dynamodb", e))?;
        Ok(())
    }

    async fn claim_delivery(
        &self,
        provider: VcsProvider,
        delivery: &str,
        expires_at: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let mut item = key(
            format!("DELIVERY#{}#{delivery}", provider.as_str()),
            "DELIVERY",
        );
        item.insert("kind".into(), s("vcs-delivery"));
        item.insert("expires_at".into(), n(expires_at.timestamp()));
        // DynamoDB's TTL deletes an expired item within days, not at once: an expired one
        // still present counts as absent, and is overwritten.
        let out = self
            .write_one(self.put_with(
                item,
                "attribute_not_exists(pk) OR expires_at <= :now",
                HashMap::from([(":now".to_string(), n(Utc::now().timestamp()))]),
            ))
            .await?;
        match out {
            Written::Done => Ok(true),
            Written::ConditionFailed => Ok(false),
        }
    }

    async fn forget_delivery(
        &self,
        provider: VcsProvider,
        delivery: &str,
    ) -> Result<(), StoreError> {
        self.client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(key(
                format!("DELIVERY#{}#{delivery}", provider.as_str()),
                "DELIVERY",
            )))
            .send()
            .await
            .map_err(|e| aws("dynamodb", e))?;
        Ok(())
    }

    async fn index_binding(
        &self,
        provider: VcsProvider,
        repository: &str,
        env: &EnvPath,
    ) -> Result<(), StoreError> {
        let mut item = key(repo_pk(provider, repository), &format!("ENV#{env}"));
        item.insert("kind".into(), s("vcs-binding"));
        item.insert("environment".into(), s(env.to_string()));
        let mut of_org = bound_key(provider, repository, env);
        of_org.insert("kind".into(), s("vcs-bound"));
        of_org.insert("environment".into(), s(env.to_string()));
        for item in [item, of_org] {
            self.client
                .put_item()
                .table_name(&self.table)
                .set_item(Some(item))
                .send()
                .await
                .map_err(|e| aws("dynamodb", e))?;
        }
        Ok(())
    }

    async fn unindex_binding(
        &self,
        provider: VcsProvider,
        repository: &str,
        env: &EnvPath,
    ) -> Result<(), StoreError> {
        for k in [
            key(repo_pk(provider, repository), &format!("ENV#{env}")),
            bound_key(provider, repository, env),
        ] {
            self.client
                .delete_item()
                .table_name(&self.table)
                .set_key(Some(k))
                .send()
                .await
                .map_err(|e| aws("dynamodb", e))?;
        }
        Ok(())
    }

    async fn bound_environments(
        &self,
        provider: VcsProvider,
        repository: &str,
    ) -> Result<Vec<EnvPath>, StoreError> {
        let pk = repo_pk(provider, repository);
        let mut out = Vec::new();
        let mut start: Option<Item> = None;
        loop {
            let page = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("pk = :pk AND begins_with(sk, :env)")
                .expression_attribute_values(":pk", s(&pk))
                .expression_attribute_values(":env", s("ENV#"))
                .consistent_read(true)
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|e| aws("dynamodb", e))?;
            for item in page.items.unwrap_or_default() {
                let path = item.get("environment").and_then(|v| v.as_s().ok());
                if let Some(path) = path.and_then(|p| EnvPath::parse(p).ok()) {
                    out.push(path);
                }
            }
            if out.len() >= MAX_BOUND_ENVIRONMENTS {
                out.truncate(MAX_BOUND_ENVIRONMENTS);
                return Ok(out);
            }
            match page.last_evaluated_key {
                Some(k) if !k.is_empty() => start = Some(k),
                _ => return Ok(out),
            }
        }
    }

    async fn connected_organisations(
        &self,
        provider: VcsProvider,
    ) -> Result<Vec<String>, StoreError> {
        let items = self
            .query_all(format!("CONNS#{}", provider.as_str()), None, usize::MAX)
            .await?;
        Ok(items
            .iter()
            .filter_map(|item| item.get("sk").and_then(|v| v.as_s().ok()).cloned())
            .collect())
    }

    async fn bound_environments_of(
        &self,
        org: &str,
        provider: VcsProvider,
    ) -> Result<Vec<EnvPath>, StoreError> {
        let items = self
            .query_all(
                format!("VCS#{org}"),
                Some(format!("BOUND#{}#", provider.as_str())),
                MAX_BOUND_ENVIRONMENTS,
            )
            .await?;
        let mut out: Vec<EnvPath> = items
            .iter()
            .filter_map(|item| item.get("environment").and_then(|v| v.as_s().ok()))
            .filter_map(|p| EnvPath::parse(p).ok())
            .collect();
        out.sort();
        out.dedup();
        Ok(out)
    }

    async fn get_open_pulls(
        &self,
        org: &str,
        provider: VcsProvider,
        repository: &str,
        base: &str,
    ) -> Result<OpenPulls, StoreError> {
        match self
            .get_item(open_key(org, provider, repository, base))
            .await?
        {
            Some(item) => Ok(from_item::<OpenItem>(item)?.open),
            None => Ok(OpenPulls::default()),
        }
    }

    async fn put_open_pulls(
        &self,
        org: &str,
        provider: VcsProvider,
        repository: &str,
        base: &str,
        open: &OpenPulls,
    ) -> Result<(), StoreError> {
        let (pk, sk) = key_parts(&open_key(org, provider, repository, base));
        let item = checked_item(
            "open pull requests",
            &OpenItem {
                pk,
                sk,
                kind: "vcs-open".into(),
                open: open.clone(),
            },
        )?;
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .send()
            .await
            .map_err(|e| aws("dynamodb", e))?;
        Ok(())
    }

    async fn get_pull_request(
        &self,
        provider: VcsProvider,
        repository: &str,
        number: u64,
    ) -> Result<Option<Versioned<PullRequestRecord>>, StoreError> {
        let Some(item) = self
            .get_item(pull_key(provider, repository, number))
            .await?
        else {
            return Ok(None);
        };
        let item: PullItem = from_item(item)?;
        Ok(Some(Versioned {
            item: item.pull,
            version: item.version,
        }))
    }

    async fn put_pull_request(
        &self,
        record: &PullRequestRecord,
        expected: Option<u64>,
    ) -> Result<u64, StoreError> {
        let version = expected.unwrap_or(0) + 1;
        let (pk, sk) = key_parts(&pull_key(
            record.provider,
            &record.repository,
            record.number,
        ));
        let item = checked_item(
            "pull request",
            &PullItem {
                pk,
                sk,
                kind: "vcs-pull".into(),
                version,
                pull: record.clone(),
            },
        )?;
        let mut put = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item));
        put = match expected {
            None => put.condition_expression("attribute_not_exists(pk)"),
            Some(v) => put
                .condition_expression("version = :v")
                .expression_attribute_values(":v", n(v)),
        };
        match put.send().await {
            Ok(_) => Ok(version),
            Err(e) if condition_failed(&e) => {
                let id = pull_id(&record.repository, record.number);
                let actual = self
                    .get_pull_request(record.provider, &record.repository, record.number)
                    .await?
                    .map(|v| v.version);
                Err(match (expected, actual) {
                    (None, _) => StoreError::AlreadyExists {
                        kind: "pull request",
                        id,
                    },
                    (Some(e), a) => StoreError::VersionMismatch {
                        kind: "pull request",
                        id,
                        expected: e,
                        actual: a.unwrap_or(0),
                    },
                })
            }
            Err(e) => Err(aws("dynamodb", e)),
        }
    }
}

fn not_found(org: &str, provider: VcsProvider) -> StoreError {
    StoreError::NotFound {
        kind: "connection",
        id: format!("{org}/{}", provider.as_str()),
    }
}
