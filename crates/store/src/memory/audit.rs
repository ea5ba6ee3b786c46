//! The audit trail in memory: entries by (organisation, id), each organisation's head, and
//! the entry a change writes under the same lock as the change.

use std::collections::{BTreeMap, HashMap};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sortie_core::audit::{entry_json, Seal};

use super::{MemoryStore, State};
use crate::audit::{
    self, export_body, export_key, export_range, AuditPage, AuditRange, AuditRecord, AuditStore,
    Exported, MAX_AUDIT_PAGE,
};
use crate::StoreError;

/// The entries and the heads.
#[derive(Debug, Default)]
pub(super) struct AuditState {
    /// By (organisation, id): the stored bytes and the seal.
    entries: BTreeMap<(String, String), AuditRecord>,
    /// By organisation: the last seal.
    heads: HashMap<String, Seal>,
    /// By organisation: the last sequence number exported, and when.
    exported: HashMap<String, (u64, DateTime<Utc>)>,
}

impl State {
    /// Writes the current audit scope's entry, if it has not been written: called by a
    /// write under the same lock as its change, once the change is made.
    pub(super) fn audited(&mut self) {
        if let Some(taking) = audit::take() {
            let e = &taking.entry;
            self.audit.entries.insert(
                (e.org.clone(), e.id.clone()),
                AuditRecord {
                    body: entry_json(e),
                    seal: None,
                },
            );
            taking.commit();
        }
    }
}

impl MemoryStore {
    /// The same store, exporting its audit trail to `archive`.
    pub fn with_audit_archive(mut self, archive: std::sync::Arc<dyn crate::AuditArchive>) -> Self {
        self.archive = Some(archive);
        self
    }
}

#[async_trait]
impl AuditStore for MemoryStore {
    async fn audit_page(&self, org: &str, range: &AuditRange) -> Result<AuditPage, StoreError> {
        let st = self.lock();
        let limit = range.limit.clamp(1, MAX_AUDIT_PAGE) as usize;
        let in_range = |id: &str| {
            range.since.as_deref().is_none_or(|s| id >= s)
                && range.until.as_deref().is_none_or(|u| id < u)
                && range.after.as_deref().is_none_or(|a| {
                    if range.newest_first {
                        id < a
                    } else {
                        id > a
                    }
                })
        };
        let all = st
            .audit
            .entries
            .range((org.to_string(), String::new())..)
            .take_while(|((o, _), _)| o == org)
            .filter(|((_, id), _)| in_range(id));
        let picked: Vec<(&String, &AuditRecord)> = if range.newest_first {
            let mut v: Vec<_> = all.map(|((_, id), r)| (id, r)).collect();
            v.reverse();
            v.into_iter().take(limit + 1).collect()
        } else {
            all.map(|((_, id), r)| (id, r)).take(limit + 1).collect()
        };
        let more = picked.len() > limit;
        let records: Vec<(String, AuditRecord)> = picked
            .into_iter()
            .take(limit)
            .map(|(id, r)| (id.clone(), r.clone()))
            .collect();
        Ok(AuditPage {
            next: more
                .then(|| records.last().map(|(id, _)| id.clone()))
                .flatten(),
            records: records.into_iter().map(|(_, r)| r).collect(),
        })
    }

    async fn unsealed_audit(
        &self,
        before: &str,
        limit: u32,
    ) -> Result<Vec<(String, String)>, StoreError> {
        let st = self.lock();
        let mut out: Vec<(String, String)> = st
            .audit
            .entries
            .iter()
            .filter(|((_, id), r)| r.seal.is_none() && id.as_str() < before)
            .map(|((org, id), _)| (org.clone(), id.clone()))
            .collect();
        out.sort_by(|a, b| a.1.cmp(&b.1));
        out.truncate(limit as usize);
        Ok(out)
    }

    async fn seal_audit(&self, org: &str, ids: &[String]) -> Result<usize, StoreError> {
        let mut st = self.lock();
        let head = st.audit.heads.get(org).cloned();
        let picked: Vec<String> = ids
            .iter()
            .take(audit::MAX_SEAL_BATCH)
            .filter(|id| {
                st.audit
                    .entries
                    .get(&(org.to_string(), (*id).clone()))
                    .is_some_and(|r| r.seal.is_none())
            })
            .cloned()
            .collect();
        let bodies: Vec<String> = picked
            .iter()
            .map(|id| {
                st.audit.entries[&(org.to_string(), id.clone())]
                    .body
                    .clone()
            })
            .collect();
        let refs: Vec<&str> = bodies.iter().map(String::as_str).collect();
        let seals = sortie_core::audit::seal(org, head.as_ref(), &refs);
        for (id, seal) in picked.iter().zip(&seals) {
            if let Some(r) = st.audit.entries.get_mut(&(org.to_string(), id.clone())) {
                r.seal = Some(seal.clone());
            }
        }
        if let Some(last) = seals.last() {
            st.audit.heads.insert(org.to_string(), last.clone());
        }
        Ok(seals.len())
    }

    async fn record_audit(&self) -> Result<(), StoreError> {
        self.lock().audited();
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
        // What each due organisation has to export, read under the lock.
        let due: Vec<(String, u64, Seal, Vec<AuditRecord>)> = {
            let st = self.lock();
            let mut orgs: Vec<&String> = st.audit.heads.keys().collect();
            orgs.sort();
            orgs.into_iter()
                .filter_map(|org| {
                    let head = st.audit.heads[org].clone();
                    let (after, at) = st
                        .audit
                        .exported
                        .get(org)
                        .copied()
                        .unwrap_or((0, DateTime::<Utc>::MIN_UTC));
                    (after < head.seq && now - at >= every).then(|| {
                        let found = st
                            .audit
                            .entries
                            .iter()
                            .filter(|((o, _), _)| o == org)
                            .map(|(_, r)| r.clone())
                            .collect();
                        (org.clone(), after, head, found)
                    })
                })
                .take(max_orgs as usize)
                .collect()
        };
        let mut done = Exported::default();
        for (org, after, head, found) in due {
            let Some(records) = export_range(found, after, &head) else {
                done.errors += 1;
                continue;
            };
            let key = export_key(&org, after + 1, head.seq);
            match archive.put_export(&key, export_body(&records, &head)).await {
                Ok(()) => {
                    done.objects += 1;
                    done.entries += records.len();
                    self.lock().audit.exported.insert(org, (head.seq, now));
                }
                Err(_) => done.errors += 1,
            }
        }
        Ok(done)
    }

    async fn audit_head(&self, org: &str) -> Result<Option<Seal>, StoreError> {
        Ok(self.lock().audit.heads.get(org).cloned())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use chrono::{Duration, Utc};
    use sortie_core::audit::Seal;

    use crate::audit::{AuditScope, Draft};
    use crate::{AuditStore, MemoryAuditArchive, MemoryStore, RunnerStore};

    /// Creates runner `acme/<name>` inside an audit scope: one entry.
    async fn change(store: &MemoryStore, name: &str) {
        let runner = sortie_core::Runner {
            id: sortie_core::RunnerId::parse(&format!("acme/{name}")).unwrap(),
            spec: sortie_core::RunnerSpec::parse(
                "runner_configuration: {type: local}\nstate_storage_configuration: {type: local, directory: /x}",
            )
            .unwrap(),
        };
        let scope = AuditScope::new(Draft {
            action: "create_runner".into(),
            org: Some("acme".into()),
            ..Draft::default()
        });
        scope.run(store.create_runner(&runner)).await.unwrap();
        assert!(scope.written().is_some());
    }

    /// Seals every entry written so far.
    async fn seal_all(store: &MemoryStore) {
        let later = sortie_core::audit::id_bound(Utc::now() + Duration::seconds(1));
        let ids: Vec<String> = store
            .unsealed_audit(&later, 100)
            .await
            .unwrap()
            .into_iter()
            .map(|(_, id)| id)
            .collect();
        store.seal_audit("acme", &ids).await.unwrap();
    }

    #[tokio::test]
    async fn sealed_entries_are_exported_once_in_sequence_with_the_head_at_the_cadence() {
        let archive = Arc::new(MemoryAuditArchive::default());
        let store = MemoryStore::new().with_audit_archive(archive.clone());
        let now = Utc::now();
        let every = Duration::minutes(15);
        change(&store, "a").await;
        change(&store, "b").await;
        assert_eq!(
            store.export_audit(now, every, 10).await.unwrap().objects,
            0,
            "nothing sealed yet"
        );
        seal_all(&store).await;
        let done = store.export_audit(now, every, 10).await.unwrap();
        assert_eq!((done.objects, done.entries, done.errors), (1, 2, 0));
        let objects = archive.objects();
        let body = String::from_utf8(objects["audit/acme/000000000001-000000000002.jsonl"].clone())
            .unwrap();
        let lines: Vec<serde_json::Value> = body
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0]["seal"]["seq"], 1);
        assert_eq!(lines[1]["seal"]["seq"], 2);
        let head: Seal = serde_json::from_value(lines[2]["head"].clone()).unwrap();
        assert_eq!(Some(head), store.audit_head("acme").await.unwrap());
        // Nothing new: nothing exported. New entries wait for the cadence, then go alone.
        change(&store, "c").await;
        seal_all(&store).await;
        assert_eq!(store.export_audit(now, every, 10).await.unwrap().objects, 0);
        let done = store.export_audit(now + every, every, 10).await.unwrap();
        assert_eq!((done.objects, done.entries), (1, 1));
        assert!(archive
            .objects()
            .contains_key("audit/acme/000000000003-000000000003.jsonl"));
    }
}
