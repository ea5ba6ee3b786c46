//! The audit trail in the table: each entry is `AUDIT#<org>` / `E#<id>` holding its stored
//! bytes (`body`), in gsi3's `AUDIT` partition until sealed; the seal (`seq`, `digest`,
//! `hash`) is added by the sealer, with the organisation's head at `AUDIT#<org>` / `HEAD`.

use std::collections::HashMap;

use async_trait::async_trait;
use aws_sdk_dynamodb::types::TransactWriteItem;
use chrono::{DateTime, Utc};
use sortie_core::audit::{entry_json, AuditEntry, Seal};

use super::keys::key;
use super::{n, s, DynamoStore, Item, TxOutcome};
use crate::audit::{
    export_body, export_key, export_range, AuditPage, AuditRange, AuditRecord, AuditStore,
    Exported, MAX_AUDIT_PAGE, MAX_EXPORT_PAGES, MAX_SEAL_BATCH,
};
use crate::error::aws;
use crate::StoreError;

/// The gsi3 partition of entries not sealed yet.
const UNSEALED: &str = "AUDIT";
/// The gsi3 partition of heads whose chain has sealed entries not exported yet.
const EXPORT_DUE: &str = "AUDITEXPORT";
const HEAD_SK: &str = "HEAD";

fn audit_pk(org: &str) -> String {
    format!("AUDIT#{org}")
}

fn entry_sk(id: &str) -> String {
    format!("E#{id}")
}

fn text(item: &Item, name: &str) -> Option<String> {
    item.get(name).and_then(|v| v.as_s().ok()).cloned()
}

fn number(item: &Item, name: &str) -> Option<u64> {
    item.get(name)
        .and_then(|v| v.as_n().ok())
        .and_then(|v| v.parse().ok())
}

fn seal_of(item: &Item) -> Option<Seal> {
    Some(Seal {
        seq: number(item, "seq")?,
        digest: text(item, "digest")?,
        hash: text(item, "hash")?,
    })
}

fn record_of(item: &Item) -> Option<AuditRecord> {
    Some(AuditRecord {
        body: text(item, "body")?,
        seal: seal_of(item),
    })
}

impl DynamoStore {
    /// Exports `org`'s entries `after + 1 ..= head.seq` and records it on the head: the
    /// number of entries exported.
    async fn export_one(
        &self,
        archive: &dyn crate::AuditArchive,
        org: &str,
        after: u64,
        head: &Seal,
        now: DateTime<Utc>,
    ) -> Result<usize, StoreError> {
        // The newest sealed entries are the ones to export: read newest first until found.
        let mut found = Vec::new();
        let mut range = AuditRange {
            newest_first: true,
            limit: MAX_AUDIT_PAGE,
            ..AuditRange::default()
        };
        for _ in 0..MAX_EXPORT_PAGES {
            let page = self.audit_page(org, &range).await?;
            let reached = page
                .records
                .iter()
                .any(|r| r.seal.as_ref().is_some_and(|s| s.seq <= after + 1));
            found.extend(page.records);
            match page.next {
                Some(next) if !reached => range.after = Some(next),
                _ => break,
            }
        }
        let records = export_range(found, after, head).ok_or_else(|| StoreError::Aws {
            service: "dynamodb",
            message: format!(
                "entries {} to {} of {org} not all read",
                after + 1,
                head.seq
            ),
            retryable: true,
        })?;
        archive
            .put_export(
                &export_key(org, after + 1, head.seq),
                export_body(&records, head),
            )
            .await?;
        // Caught up: out of the due list, unless the sealer moved the head meanwhile.
        let key = key(audit_pk(org), HEAD_SK);
        let values = HashMap::from([
            (":seq".to_string(), n(head.seq)),
            (":now".to_string(), s(now.to_rfc3339())),
        ]);
        let caught_up = self.update(
            key.clone(),
            "SET exported = :seq, exported_at = :now REMOVE gsi3pk, gsi3sk",
            "seq = :seq",
            values.clone(),
            HashMap::new(),
        );
        if let TxOutcome::Cancelled(_) = self.transact_items(vec![caught_up]).await? {
            let behind = self.update(
                key,
                "SET exported = :seq, exported_at = :now",
                "attribute_not_exists(exported) OR exported < :seq",
                values,
                HashMap::new(),
            );
            self.transact_items(vec![behind]).await?;
        }
        Ok(records.len())
    }

    /// The `Put` of an audit entry, for the change's transaction.
    pub(super) fn audit_put(&self, entry: &AuditEntry) -> TransactWriteItem {
        let mut item = key(audit_pk(&entry.org), &entry_sk(&entry.id));
        item.insert("body".into(), s(entry_json(entry)));
        item.insert("org".into(), s(entry.org.clone()));
        item.insert("id".into(), s(entry.id.clone()));
        item.insert("gsi3pk".into(), s(UNSEALED));
        item.insert("gsi3sk".into(), s(entry.id.clone()));
        self.put(item, "attribute_not_exists(pk)")
    }
}

#[async_trait]
impl AuditStore for DynamoStore {
    async fn audit_page(&self, org: &str, range: &AuditRange) -> Result<AuditPage, StoreError> {
        let limit = range.limit.clamp(1, MAX_AUDIT_PAGE);
        let lo = entry_sk(range.since.as_deref().unwrap_or_default());
        let hi = entry_sk(range.until.as_deref().unwrap_or("~"));
        let mut q = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("pk = :pk AND sk BETWEEN :lo AND :hi")
            .expression_attribute_values(":pk", s(audit_pk(org)))
            .expression_attribute_values(":lo", s(lo))
            .expression_attribute_values(":hi", s(hi))
            .scan_index_forward(!range.newest_first)
            .consistent_read(true)
            .limit(i32::try_from(limit).unwrap_or(i32::MAX));
        if let Some(after) = &range.after {
            q = q.set_exclusive_start_key(Some(key(audit_pk(org), &entry_sk(after))));
        }
        let out = q.send().await.map_err(|e| aws("dynamodb", e))?;
        let items = out.items.unwrap_or_default();
        let next = out
            .last_evaluated_key
            .filter(|k| !k.is_empty())
            .and_then(|k| text(&k, "sk"))
            .and_then(|sk| sk.strip_prefix("E#").map(String::from));
        let until = range.until.as_deref();
        Ok(AuditPage {
            records: items
                .iter()
                .filter(|i| text(i, "id").as_deref() != until || until.is_none())
                .filter_map(record_of)
                .collect(),
            next,
        })
    }

    async fn unsealed_audit(
        &self,
        before: &str,
        limit: u32,
    ) -> Result<Vec<(String, String)>, StoreError> {
        let mut out = Vec::new();
        let mut start: Option<Item> = None;
        let limit = limit as usize;
        loop {
            let page = self
                .client
                .query()
                .table_name(&self.table)
                .index_name("gsi3")
                .key_condition_expression("gsi3pk = :p AND gsi3sk < :before")
                .expression_attribute_values(":p", s(UNSEALED))
                .expression_attribute_values(":before", s(before))
                .limit(i32::try_from(limit.saturating_sub(out.len()).max(1)).unwrap_or(100))
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|e| aws("dynamodb", e))?;
            for i in page.items.unwrap_or_default() {
                if let (Some(org), Some(id)) = (text(&i, "org"), text(&i, "id")) {
                    out.push((org, id));
                }
            }
            match page.last_evaluated_key {
                Some(k) if !k.is_empty() && out.len() < limit => start = Some(k),
                _ => break,
            }
        }
        out.truncate(limit);
        Ok(out)
    }

    async fn seal_audit(&self, org: &str, ids: &[String]) -> Result<usize, StoreError> {
        let ids = &ids[..ids.len().min(MAX_SEAL_BATCH)];
        let (Some(first), Some(last)) = (ids.first(), ids.last()) else {
            return Ok(0);
        };
        let head_item = self.get_item(key(audit_pk(org), HEAD_SK)).await?;
        let head = head_item.as_ref().and_then(seal_of);
        // The entries, read at once (one consistent query over their range).
        let found = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("pk = :pk AND sk BETWEEN :lo AND :hi")
            .expression_attribute_values(":pk", s(audit_pk(org)))
            .expression_attribute_values(":lo", s(entry_sk(first)))
            .expression_attribute_values(":hi", s(entry_sk(last)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| aws("dynamodb", e))?
            .items
            .unwrap_or_default();
        let by_id: HashMap<String, &Item> = found
            .iter()
            .filter(|i| i.get("seq").is_none())
            .filter_map(|i| Some((text(i, "id")?, i)))
            .collect();
        let picked: Vec<(&String, String)> = ids
            .iter()
            .filter_map(|id| Some((id, text(by_id.get(id)?, "body")?)))
            .collect();
        if picked.is_empty() {
            return Ok(0);
        }
        let bodies: Vec<&str> = picked.iter().map(|(_, b)| b.as_str()).collect();
        let seals = sortie_core::audit::seal(org, head.as_ref(), &bodies);
        let mut items: Vec<TransactWriteItem> = picked
            .iter()
            .zip(&seals)
            .map(|((id, body), seal)| {
                self.update(
                    key(audit_pk(org), &entry_sk(id)),
                    "SET seq = :seq, digest = :d, #h = :h REMOVE gsi3pk, gsi3sk",
                    // Sealed as read: an entry changed since is left for the next pass.
                    "attribute_not_exists(seq) AND body = :body",
                    HashMap::from([
                        (":seq".to_string(), n(seal.seq)),
                        (":d".to_string(), s(seal.digest.clone())),
                        (":h".to_string(), s(seal.hash.clone())),
                        (":body".to_string(), s(body.clone())),
                    ]),
                    HashMap::from([("#h".to_string(), "hash".to_string())]),
                )
            })
            .collect();
        let last = seals.last().expect("one seal per picked entry");
        let mut next_head = key(audit_pk(org), HEAD_SK);
        next_head.insert("seq".into(), n(last.seq));
        next_head.insert("digest".into(), s(last.digest.clone()));
        next_head.insert("hash".into(), s(last.hash.clone()));
        // What was exported stays; the chain now has entries to export.
        for kept in ["exported", "exported_at"] {
            if let Some(v) = head_item.as_ref().and_then(|h| h.get(kept)) {
                next_head.insert(kept.into(), v.clone());
            }
        }
        next_head.insert("gsi3pk".into(), s(EXPORT_DUE));
        next_head.insert("gsi3sk".into(), s(org));
        items.push(match &head {
            None => self.put(next_head, "attribute_not_exists(pk)"),
            Some(h) => self.put_with(
                next_head,
                "seq = :prev",
                HashMap::from([(":prev".to_string(), n(h.seq))]),
            ),
        });
        // The sealer writes outside any audit scope: transact_items, not transact.
        match self.transact_items(items).await? {
            TxOutcome::Done => Ok(seals.len()),
            TxOutcome::Cancelled(_) => Ok(0),
        }
    }

    async fn record_audit(&self) -> Result<(), StoreError> {
        // `transact` adds the pending entry: a transaction of that one item.
        if crate::audit::pending() {
            self.transact(Vec::new()).await?;
        }
        Ok(())
    }

    async fn export_audit(
        &self,
        now: DateTime<Utc>,
        every: chrono::Duration,
        max_orgs: u32,
    ) -> Result<Exported, StoreError> {
        let Some(archive) = &self.archive else {
            return Ok(Exported::default());
        };
        let heads = self
            .client
            .query()
            .table_name(&self.table)
            .index_name("gsi3")
            .key_condition_expression("gsi3pk = :p")
            .expression_attribute_values(":p", s(EXPORT_DUE))
            .limit(i32::try_from(max_orgs.max(1)).unwrap_or(100))
            .send()
            .await
            .map_err(|e| aws("dynamodb", e))?
            .items
            .unwrap_or_default();
        let mut done = Exported::default();
        for item in heads {
            let (Some(org), Some(head)) = (text(&item, "gsi3sk"), seal_of(&item)) else {
                continue;
            };
            let after = number(&item, "exported").unwrap_or(0);
            let last_at = text(&item, "exported_at")
                .and_then(|t| DateTime::parse_from_rfc3339(&t).ok())
                .map(|t| t.with_timezone(&Utc));
            if last_at.is_some_and(|at| now - at < every) {
                continue;
            }
            match self
                .export_one(archive.as_ref(), &org, after, &head, now)
                .await
            {
                Ok(n) => {
                    done.objects += 1;
                    done.entries += n;
                }
                Err(e) => {
                    tracing::warn!(org, error = %e, "audit export failed; tried again next pass");
                    done.errors += 1;
                }
            }
        }
        Ok(done)
    }

    async fn audit_head(&self, org: &str) -> Result<Option<Seal>, StoreError> {
        Ok(self
            .get_item(key(audit_pk(org), HEAD_SK))
            .await?
            .as_ref()
            .and_then(seal_of))
    }
}
