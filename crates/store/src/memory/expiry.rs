//! The expiry due list and the `destroyed` mark, as the table keeps them.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sortie_core::expiry::Destroyed;
use sortie_core::EnvPath;

use super::MemoryStore;
use crate::expiry::{expiry_due_bound, expiry_sk};
use crate::{ExpiryEntry, ExpiryPage, ExpiryStore, StoreError, Versioned, MAX_EXPIRY_PAGE};

#[async_trait]
impl ExpiryStore for MemoryStore {
    async fn set_expiry(
        &self,
        path: &EnvPath,
        expires_at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let mut st = self.lock();
        let key = path.to_string();
        match st.expiries.get_mut(&key) {
            // Unchanged: nothing written, as the table's store writes nothing.
            Some((entry, _)) if entry.expires_at == expires_at => return Ok(()),
            Some((entry, version)) => {
                let destroy_job = entry.destroy_job.take();
                *entry = ExpiryEntry {
                    destroy_job,
                    ..ExpiryEntry::new(path.clone(), expires_at)
                };
                *version += 1;
            }
            None => {
                st.expiries
                    .insert(key, (ExpiryEntry::new(path.clone(), expires_at), 1));
            }
        }
        st.audited();
        Ok(())
    }

    async fn get_expiry(
        &self,
        path: &EnvPath,
    ) -> Result<Option<Versioned<ExpiryEntry>>, StoreError> {
        Ok(self
            .lock()
            .expiries
            .get(&path.to_string())
            .map(|(item, version)| Versioned {
                item: item.clone(),
                version: *version,
            }))
    }

    async fn remove_expiry(&self, path: &EnvPath) -> Result<(), StoreError> {
        self.lock().expiries.remove(&path.to_string());
        Ok(())
    }

    async fn due_expiries(
        &self,
        now: DateTime<Utc>,
        limit: u32,
        after: Option<&str>,
    ) -> Result<ExpiryPage, StoreError> {
        let st = self.lock();
        let bound = expiry_due_bound(now);
        let mut due: Vec<(String, Versioned<ExpiryEntry>)> = st
            .expiries
            .values()
            .map(|(e, v)| (expiry_sk(e.due, &e.path), e, v))
            .filter(|(sk, _, _)| *sk < bound && after.is_none_or(|a| sk.as_str() > a))
            .map(|(sk, e, v)| {
                (
                    sk,
                    Versioned {
                        item: e.clone(),
                        version: *v,
                    },
                )
            })
            .collect();
        due.sort_by(|a, b| a.0.cmp(&b.0));
        let limit = limit.clamp(1, MAX_EXPIRY_PAGE) as usize;
        let more = due.len() > limit;
        due.truncate(limit);
        Ok(ExpiryPage {
            next: if more {
                due.last().map(|(sk, _)| sk.clone())
            } else {
                None
            },
            entries: due.into_iter().map(|(_, e)| e).collect(),
        })
    }

    async fn update_expiry(&self, entry: &ExpiryEntry, expected: u64) -> Result<bool, StoreError> {
        let mut st = self.lock();
        match st.expiries.get_mut(&entry.path.to_string()) {
            Some((held, version)) if *version == expected => {
                *held = entry.clone();
                *version += 1;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn mark_destroyed(
        &self,
        path: &EnvPath,
        destroyed: Option<&Destroyed>,
    ) -> Result<(), StoreError> {
        let mut st = self.lock();
        let entry = st
            .envs
            .get_mut(&path.to_string())
            .ok_or_else(|| StoreError::NotFound {
                kind: "environment",
                id: path.to_string(),
            })?;
        entry.record.destroyed = destroyed.cloned();
        Ok(())
    }
}
