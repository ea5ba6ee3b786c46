//! The audit trail's store: the scope a change runs in, whose entry the store writes in
//! the change's own transaction, and [`AuditStore`], which lists, seals and reads the
//! entries of an organisation's chain.
//!
//! The route layer runs each mutating route inside an [`AuditScope`] (the action, the
//! target, the request and, once authorised, the actor and the organisation). The first
//! write the store makes inside the scope takes its entry (`take`) into the same
//! transaction (DynamoDB) or the same lock (memory): one item more, no read, and never a
//! change without its record. A write that fails puts the entry back for the next one.

use std::future::Future;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sortie_core::audit::{Actor, AuditEntry, Seal};

use crate::StoreError;

tokio::task_local! {
    static SCOPE: AuditScope;
}

/// What a change is, before the store writes it: everything an [`AuditEntry`] holds but
/// its id and time.
#[derive(Debug, Clone, Default)]
pub struct Draft {
    /// The action (the API operation's id).
    pub action: String,
    /// The target's path.
    pub target: String,
    /// The request's id.
    pub request_id: String,
    /// The caller's address.
    pub source_ip: Option<String>,
    /// The caller's `User-Agent`.
    pub user_agent: Option<String>,
    /// Who acts, once known.
    pub actor: Option<Actor>,
    /// The organisation whose chain the entry joins (`None`: not yet known; the root's
    /// chain, `-`, if it never is).
    pub org: Option<String>,
    /// The group the change was authorised on (not kept in the entry: the events about
    /// the change are routed by it).
    pub group: Option<String>,
    /// The version the change replaced (`If-Match`).
    pub before: Option<String>,
    /// The digest of the body the change sent.
    pub after: Option<String>,
}

/// Where a scope's entry is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Taken {
    /// Not yet written.
    Pending,
    /// In a write that has not answered yet.
    InFlight,
    /// Written, with this change.
    Written(Box<AuditEntry>),
}

#[derive(Debug)]
struct ScopeState {
    draft: Draft,
    taken: Taken,
}

/// The audit scope of one change: the store's first write inside it carries its entry.
#[derive(Debug, Clone)]
pub struct AuditScope(Arc<Mutex<ScopeState>>);

impl AuditScope {
    /// A scope for the change `draft` describes.
    pub fn new(draft: Draft) -> Self {
        Self(Arc::new(Mutex::new(ScopeState {
            draft,
            taken: Taken::Pending,
        })))
    }

    /// Runs `f` inside this scope.
    pub async fn run<F: Future>(&self, f: F) -> F::Output {
        SCOPE.scope(self.clone(), f).await
    }

    /// The group the change was authorised on, once named.
    pub fn group(&self) -> Option<String> {
        self.lock().draft.group.clone()
    }

    /// The entry this scope wrote, once a write carried it.
    pub fn written(&self) -> Option<AuditEntry> {
        match &self.lock().taken {
            Taken::Written(e) => Some((**e).clone()),
            _ => None,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ScopeState> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Names who acts in the current scope, when nobody is named yet. Outside a scope it
/// does nothing.
pub fn actor(actor: Actor) {
    let _ = SCOPE.try_with(|scope| {
        scope.lock().draft.actor.get_or_insert(actor);
    });
}

/// Names the organisation whose chain the current scope's entry joins (`None`: the root
/// group's), when none is named yet: the first authorisation decides. Outside a scope it
/// does nothing.
pub fn organisation(org: Option<&str>) {
    let _ = SCOPE.try_with(|scope| {
        scope
            .lock()
            .draft
            .org
            .get_or_insert_with(|| org.unwrap_or(ROOT_CHAIN).to_string());
    });
}

/// Names the group the current scope's change was authorised on, when none is named yet.
/// Outside a scope it does nothing.
pub fn group(group: &str) {
    let _ = SCOPE.try_with(|scope| {
        scope
            .lock()
            .draft
            .group
            .get_or_insert_with(|| group.to_string());
    });
}

/// Records the digest of the body the current scope's change sent. Outside a scope it
/// does nothing.
pub fn sent(body: &[u8]) {
    let _ = SCOPE.try_with(|scope| {
        scope.lock().draft.after =
            (!body.is_empty()).then(|| sortie_core::audit::body_digest(body));
    });
}

/// The chain of the root group's configuration.
pub const ROOT_CHAIN: &str = "-";

/// A taken entry: [`Taking::commit`] once its write succeeded; dropped uncommitted, it
/// goes back to its scope for the next write.
#[derive(Debug)]
pub(crate) struct Taking {
    scope: AuditScope,
    /// The entry to write.
    pub entry: AuditEntry,
    done: bool,
}

impl Taking {
    /// The write carrying the entry succeeded.
    pub fn commit(mut self) {
        self.done = true;
        self.scope.lock().taken = Taken::Written(Box::new(self.entry.clone()));
    }
}

impl Drop for Taking {
    fn drop(&mut self) {
        if !self.done {
            let mut st = self.scope.lock();
            if st.taken == Taken::InFlight {
                st.taken = Taken::Pending;
            }
        }
    }
}

/// True inside a scope whose entry is not written yet: the next write should carry it.
pub(crate) fn pending() -> bool {
    SCOPE
        .try_with(|scope| scope.lock().taken == Taken::Pending)
        .unwrap_or(false)
}

/// The current scope's entry, when it has not been written yet: for the write about to
/// be made, which [`Taking::commit`]s it on success.
pub(crate) fn take() -> Option<Taking> {
    SCOPE
        .try_with(|scope| {
            let mut st = scope.lock();
            if st.taken != Taken::Pending {
                return None;
            }
            st.taken = Taken::InFlight;
            let at = Utc::now();
            let d = &st.draft;
            let entry = AuditEntry {
                org: d.org.clone().unwrap_or_else(|| ROOT_CHAIN.to_string()),
                id: sortie_core::audit::new_id_at(at),
                at,
                actor: d.actor.clone().unwrap_or(Actor {
                    subject: "unknown".into(),
                    issuer: None,
                    credential: sortie_core::audit::CredentialKind::System,
                }),
                action: d.action.clone(),
                target: d.target.clone(),
                request_id: d.request_id.clone(),
                source_ip: d.source_ip.clone(),
                user_agent: d.user_agent.clone(),
                before: d.before.clone(),
                after: d.after.clone(),
            };
            Some(Taking {
                scope: scope.clone(),
                entry,
                done: false,
            })
        })
        .ok()
        .flatten()
}

/// One stored entry: its stored bytes and, once sealed, its seal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRecord {
    /// The entry as stored (`sortie_core::audit::entry_json`).
    pub body: String,
    /// Its seal, once the sealer reached it.
    pub seal: Option<Seal>,
}

/// Which of an organisation's entries a page reads.
#[derive(Debug, Clone, Default)]
pub struct AuditRange {
    /// Continue after this entry id (a previous page's `next`).
    pub after: Option<String>,
    /// Entries with ids at or above this one ([`sortie_core::audit::id_bound`] of a time).
    pub since: Option<String>,
    /// Entries with ids below this one.
    pub until: Option<String>,
    /// Newest first (a listing) rather than oldest first (a verification).
    pub newest_first: bool,
    /// At most this many entries.
    pub limit: u32,
}

/// A page of entries.
#[derive(Debug, Clone, Default)]
pub struct AuditPage {
    /// The entries, in the order asked.
    pub records: Vec<AuditRecord>,
    /// The id to continue after, when there may be more.
    pub next: Option<String>,
}

/// The most entries one page reads.
pub const MAX_AUDIT_PAGE: u32 = 1000;

/// The most entries one call to [`AuditStore::seal_audit`] seals (one transaction with the
/// head: DynamoDB allows 100 items).
pub const MAX_SEAL_BATCH: usize = 50;

/// The audit trail's entries: read by organisation, sealed by the sweeper.
#[async_trait]
pub trait AuditStore: Send + Sync {
    /// A page of `org`'s entries, sealed or not.
    async fn audit_page(&self, org: &str, range: &AuditRange) -> Result<AuditPage, StoreError>;

    /// Entries not sealed yet whose ids are below `before`, oldest first, at most `limit`:
    /// `(org, id)`, over every organisation.
    async fn unsealed_audit(
        &self,
        before: &str,
        limit: u32,
    ) -> Result<Vec<(String, String)>, StoreError>;

    /// Seals `ids` (of `org`, oldest first, at most [`MAX_SEAL_BATCH`]) after the chain's
    /// head, in one transaction with the head; the number sealed (0 when another sealer
    /// moved the head first: the next pass takes them).
    async fn seal_audit(&self, org: &str, ids: &[String]) -> Result<usize, StoreError>;

    /// `org`'s last seal, when it has one.
    async fn audit_head(&self, org: &str) -> Result<Option<Seal>, StoreError>;

    /// Writes the current scope's entry on its own, when it is not written yet: for a
    /// change that is not a write of the table (a running job's cancel is a message to
    /// its queue), written before that change is made. Outside a scope it does nothing.
    async fn record_audit(&self) -> Result<(), StoreError>;

    /// Copies the sealed entries not yet exported to the store's archive (an S3 bucket
    /// under Object Lock), one object per organisation whose last export is at least
    /// `every` old: its entries in sequence as JSON lines, then its head. At most
    /// `max_orgs` organisations a call; each on its own (a failure is counted, the others
    /// go on). A store without an archive exports nothing.
    async fn export_audit(
        &self,
        now: DateTime<Utc>,
        every: chrono::Duration,
        max_orgs: u32,
    ) -> Result<Exported, StoreError>;
}

/// What one [`AuditStore::export_audit`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Exported {
    /// Objects written.
    pub objects: usize,
    /// Entries in them.
    pub entries: usize,
    /// Organisations whose export failed (tried again next time).
    pub errors: usize,
}

/// The most pages of 1,000 entries one organisation's export reads.
pub const MAX_EXPORT_PAGES: usize = 50;

/// Where the audit trail's exports are kept: write-once objects.
#[async_trait]
pub trait AuditArchive: Send + Sync + std::fmt::Debug {
    /// Writes the object `key`.
    async fn put_export(&self, key: &str, body: Vec<u8>) -> Result<(), StoreError>;
}

/// The key of an export: `audit/<org>/<first seq>-<last seq>.jsonl`, zero-padded so keys
/// sort as the chain does.
pub fn export_key(org: &str, first: u64, last: u64) -> String {
    format!("audit/{org}/{first:012}-{last:012}.jsonl")
}

/// An export's body: one line per entry (`{"stored": …, "seal": …}`), in sequence, then
/// the head (`{"head": …}`).
pub fn export_body(records: &[AuditRecord], head: &Seal) -> Vec<u8> {
    let mut out = Vec::new();
    for r in records {
        let line = serde_json::json!({ "stored": r.body, "seal": r.seal });
        out.extend(line.to_string().into_bytes());
        out.push(b'\n');
    }
    out.extend(serde_json::json!({ "head": head }).to_string().into_bytes());
    out.push(b'\n');
    out
}

/// The sealed entries of `found` numbered `after + 1 ..= head.seq`, in sequence; `None`
/// when one is missing (not yet readable: the next export takes them).
pub(crate) fn export_range(
    found: Vec<AuditRecord>,
    after: u64,
    head: &Seal,
) -> Option<Vec<AuditRecord>> {
    let mut picked: Vec<AuditRecord> = found
        .into_iter()
        .filter(|r| {
            r.seal
                .as_ref()
                .is_some_and(|s| s.seq > after && s.seq <= head.seq)
        })
        .collect();
    picked.sort_by_key(|r| r.seal.as_ref().map(|s| s.seq));
    picked.dedup_by_key(|r| r.seal.as_ref().map(|s| s.seq));
    (picked.len() as u64 == head.seq - after).then_some(picked)
}

/// The audit archive in memory: every object written, by key.
#[derive(Debug, Default)]
pub struct MemoryAuditArchive {
    objects: Mutex<std::collections::BTreeMap<String, Vec<u8>>>,
}

impl MemoryAuditArchive {
    /// Every object written so far, by key.
    pub fn objects(&self) -> std::collections::BTreeMap<String, Vec<u8>> {
        self.objects
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

#[async_trait]
impl AuditArchive for MemoryAuditArchive {
    async fn put_export(&self, key: &str, body: Vec<u8>) -> Result<(), StoreError> {
        self.objects
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key.to_string(), body);
        Ok(())
    }
}

/// The audit archive in S3: a bucket with Object Lock in compliance mode (its default
/// retention applies to every object; S3 refuses a put to such a bucket without a
/// checksum, so each carries its SHA-256).
#[derive(Debug, Clone)]
pub struct S3AuditArchive {
    client: aws_sdk_s3::Client,
    bucket: String,
}

impl S3AuditArchive {
    /// The archive in `bucket`.
    pub fn new(client: aws_sdk_s3::Client, bucket: impl Into<String>) -> Self {
        Self {
            client,
            bucket: bucket.into(),
        }
    }

    /// Creates the bucket with Object Lock in compliance mode, each object kept
    /// `retention_days`, if it does not exist (`sortie dev`; the SAM template makes
    /// AWS's).
    pub async fn ensure_bucket(&self, retention_days: i32) -> Result<(), StoreError> {
        use aws_sdk_s3::types::{
            DefaultRetention, ObjectLockConfiguration, ObjectLockEnabled, ObjectLockRetentionMode,
            ObjectLockRule,
        };
        if self
            .client
            .head_bucket()
            .bucket(&self.bucket)
            .send()
            .await
            .is_ok()
        {
            return Ok(());
        }
        self.client
            .create_bucket()
            .bucket(&self.bucket)
            .object_lock_enabled_for_bucket(true)
            .send()
            .await
            .map_err(|e| crate::error::aws("s3", e))?;
        let rule = ObjectLockRule::builder()
            .default_retention(
                DefaultRetention::builder()
                    .mode(ObjectLockRetentionMode::Compliance)
                    .days(retention_days.max(1))
                    .build(),
            )
            .build();
        self.client
            .put_object_lock_configuration()
            .bucket(&self.bucket)
            .object_lock_configuration(
                ObjectLockConfiguration::builder()
                    .object_lock_enabled(ObjectLockEnabled::Enabled)
                    .rule(rule)
                    .build(),
            )
            .checksum_algorithm(aws_sdk_s3::types::ChecksumAlgorithm::Sha256)
            .send()
            .await
            .map_err(|e| crate::error::aws("s3", e))?;
        Ok(())
    }
}

#[async_trait]
impl AuditArchive for S3AuditArchive {
    async fn put_export(&self, key: &str, body: Vec<u8>) -> Result<(), StoreError> {
        self.client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .content_type("application/x-ndjson")
            .checksum_algorithm(aws_sdk_s3::types::ChecksumAlgorithm::Sha256)
            .body(body.into())
            .send()
            .await
            .map_err(|e| crate::error::aws("s3", e))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draft() -> Draft {
        Draft {
            action: "create_runner".into(),
            target: "/v1/groups/acme/-/runners/local".into(),
            ..Draft::default()
        }
    }

    #[tokio::test]
    async fn a_scope_gives_its_entry_once_and_a_failed_write_gives_it_back() {
        assert!(take().is_none(), "outside a scope there is no entry");
        let scope = AuditScope::new(draft());
        scope
            .run(async {
                organisation(Some("acme"));
                organisation(Some("other"));
                let first = take().expect("the first write takes the entry");
                assert!(take().is_none(), "a write beside it takes none");
                drop(first);
                let again = take().expect("a failed write gave it back");
                assert_eq!(again.entry.org, "acme");
                again.commit();
                assert!(take().is_none(), "written once");
            })
            .await;
        assert_eq!(scope.written().unwrap().action, "create_runner");
    }

    #[test]
    fn an_ids_time_reads_back() {
        let at = DateTime::from_timestamp_millis(1_764_000_000_123).unwrap();
        let id = sortie_core::audit::new_id_at(at);
        // An id sorts inside its millisecond: at or above its bound, below the next one's.
        assert!(sortie_core::audit::id_bound(at) <= id);
        assert!(id < sortie_core::audit::id_bound(at + chrono::Duration::milliseconds(1)));
    }
}
