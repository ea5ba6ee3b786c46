//! Uploads to the control plane's bucket, behind one small trait: through URLs the API
//! presigns for this job ([`ApiUploader`]), or in memory for tests ([`MemoryUploads`]).
//!
//! The pilot holds no AWS credentials for the control plane's bucket: it asks the API
//! (with its job token) for a presigned PUT of one object of its own, then sends the
//! bytes straight to S3, so a plan or a log chunk never passes through Lambda.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use sortie_core::protocol::logs::is_followed;
use sortie_core::protocol::pilot::UploadKind;

use crate::api::{ApiClient, LogUploadGrants, UploadGrant};

/// Writes one of the job's objects. Errors are one-line descriptions.
#[async_trait]
pub trait Uploader: Send + Sync {
    /// Writes `body` as the job's object of `kind` named `name` (a log chunk's
    /// 12-digit start offset; `None` for the plan, the summary and the outputs).
    async fn upload(
        &self,
        kind: UploadKind,
        name: Option<&str>,
        body: Vec<u8>,
    ) -> Result<(), String>;

    /// Writes log chunks `(start offset, bytes)`. On an error some may have been written;
    /// the caller ships them all again (each chunk's key is its offset, so a rewrite
    /// replaces it). The default uploads them one by one.
    async fn upload_log(&self, chunks: Vec<(u64, Vec<u8>)>) -> Result<(), String> {
        for (offset, bytes) in chunks {
            let name = format!("{offset:012}");
            self.upload(UploadKind::Log, Some(&name), bytes).await?;
        }
        Ok(())
    }

    /// Whether someone follows the log now; `None` when it cannot be told this time (the
    /// last answer stands). An API without a follow marker counts as followed: the log
    /// ships at the followed pace, as it did before the marker existed.
    async fn followed(&self) -> Option<bool> {
        None
    }

    /// Rewrites the job's live object with `body` (a
    /// [`sortie_core::protocol::logs::LiveLog`]). `Ok(false)`: the log has no live bucket,
    /// so a followed log ships as chunks at the followed pace. The default has none.
    async fn write_live(&self, body: Vec<u8>) -> Result<bool, String> {
        let _ = body;
        Ok(false)
    }
}

/// How long a follow URL is used before a fresh one is asked for (they work 10 minutes;
/// a directory bucket's less: see [`use_until`]).
const FOLLOW_URL_REUSE: Duration = Duration::from_secs(8 * 60);

/// How long before its end a URL is no longer used.
const URL_MARGIN: Duration = Duration::from_secs(30);

/// Until when URLs of an answer that expires at `expires_at` are used: [`FOLLOW_URL_REUSE`],
/// but no later than [`URL_MARGIN`] before they end (a directory bucket's URLs end with the
/// session that signed them, after four to five minutes).
fn use_until(expires_at: Option<chrono::DateTime<chrono::Utc>>) -> Instant {
    let now = Instant::now();
    let left = expires_at
        .and_then(|at| (at - chrono::Utc::now()).to_std().ok())
        .map_or(FOLLOW_URL_REUSE, |left| {
            left.saturating_sub(URL_MARGIN).min(FOLLOW_URL_REUSE)
        });
    now + left
}

/// Whether the API has a live bucket for this job's log, as far as it has said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LiveBucket {
    /// Not asked yet.
    Unknown,
    /// It has one.
    Yes,
    /// It has none (or is older than the live object): chunks at the followed pace.
    No,
}

/// How many times an upload is tried (each with a fresh URL) before it is given up.
const ATTEMPTS: u32 = 3;

/// Uploads through presigned URLs from the API: log chunks several to a call
/// (`POST /v1/jobs/{id}/log-uploads`), other objects one by one.
pub struct ApiUploader {
    api: Arc<ApiClient>,
    first_delay: Duration,
    /// The follow marker's URL and until when it is used.
    follow: Mutex<Option<(String, Instant)>>,
    /// The live object's presigned PUT and until when it is used.
    live: Mutex<Option<(UploadGrant, Instant)>>,
    /// Whether the log has a live bucket.
    live_bucket: Mutex<LiveBucket>,
    /// False once the API said it has no `log-uploads` route.
    batches: AtomicBool,
}

impl ApiUploader {
    /// Uploads for `api`'s job.
    pub fn new(api: Arc<ApiClient>) -> Self {
        Self {
            api,
            first_delay: Duration::from_millis(300),
            follow: Mutex::new(None),
            live: Mutex::new(None),
            live_bucket: Mutex::new(LiveBucket::Unknown),
            batches: AtomicBool::new(true),
        }
    }

    /// Keeps an answer's follow URL and live grant, each used until shortly before the
    /// answer's URLs end.
    fn remember(&self, answer: &LogUploadGrants) {
        let until = use_until(answer.expires_at);
        *self.follow.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((answer.follow_url.clone(), until));
        *self.live_bucket.lock().unwrap_or_else(|p| p.into_inner()) = if answer.live.is_some() {
            LiveBucket::Yes
        } else {
            LiveBucket::No
        };
        *self.live.lock().unwrap_or_else(|p| p.into_inner()) =
            answer.live.clone().map(|grant| (grant, until));
    }

    fn follow_url(&self) -> Option<String> {
        self.follow
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .filter(|(_, until)| Instant::now() < *until)
            .map(|(url, _)| url.clone())
    }

    fn forget_follow_url(&self) {
        *self.follow.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    fn live_grant(&self) -> Option<UploadGrant> {
        self.live
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .filter(|(_, until)| Instant::now() < *until)
            .map(|(grant, _)| grant.clone())
    }

    fn forget_live_grant(&self) {
        *self.live.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// Fresh URLs (no chunk): the follow URL, and the live grant when there is a live
    /// bucket. `Ok(false)` when the API has no batch route (an older API).
    async fn renew(&self) -> Result<bool, String> {
        match self
            .api
            .log_upload_grants(&[])
            .await
            .map_err(|e| e.reason())?
        {
            Some(answer) => {
                self.remember(&answer);
                Ok(true)
            }
            None => {
                self.batches.store(false, Ordering::Relaxed);
                *self.live_bucket.lock().unwrap_or_else(|p| p.into_inner()) = LiveBucket::No;
                Ok(false)
            }
        }
    }

    /// One try of a batch: grants for every chunk, then each PUT. `Ok(false)` when the
    /// API has no batch route.
    async fn try_batch(&self, chunks: &[(u64, Vec<u8>)]) -> Result<bool, String> {
        let offsets: Vec<u64> = chunks.iter().map(|(o, _)| *o).collect();
        let Some(answer) = self
            .api
            .log_upload_grants(&offsets)
            .await
            .map_err(|e| e.reason())?
        else {
            return Ok(false);
        };
        self.remember(&answer);
        if answer.grants.len() != chunks.len() {
            return Err(format!(
                "the API answered {} log grants for {} chunks",
                answer.grants.len(),
                chunks.len()
            ));
        }
        for (grant, (_, bytes)) in answer.grants.iter().zip(chunks) {
            self.api.send_upload(grant, bytes.clone()).await?;
        }
        Ok(true)
    }
}

#[async_trait]
impl Uploader for ApiUploader {
    async fn upload(
        &self,
        kind: UploadKind,
        name: Option<&str>,
        body: Vec<u8>,
    ) -> Result<(), String> {
        let what = match name {
            Some(n) => format!("{} {n}", kind.as_str()),
            None => kind.as_str().to_string(),
        };
        let mut delay = self.first_delay;
        let mut last = String::new();
        for attempt in 1..=ATTEMPTS {
            let result = match self.api.upload_grant(kind, name).await {
                Ok(grant) => self.api.send_upload(&grant, body.clone()).await,
                Err(e) => Err(e.reason()),
            };
            match result {
                Ok(()) => return Ok(()),
                Err(e) => {
                    tracing::warn!(upload = %what, attempt, error = %e, "upload failed");
                    last = e;
                }
            }
            if attempt < ATTEMPTS {
                tokio::time::sleep(delay).await;
                delay = delay.saturating_mul(2);
            }
        }
        Err(format!(
            "could not upload the {what} (after {ATTEMPTS} attempts): {last}"
        ))
    }

    async fn upload_log(&self, chunks: Vec<(u64, Vec<u8>)>) -> Result<(), String> {
        if chunks.is_empty() {
            return Ok(());
        }
        let mut delay = self.first_delay;
        let mut last = String::new();
        for attempt in 1..=ATTEMPTS {
            if !self.batches.load(Ordering::Relaxed) {
                break;
            }
            match self.try_batch(&chunks).await {
                Ok(true) => return Ok(()),
                Ok(false) => {
                    tracing::info!("the API presigns log chunks one by one");
                    self.batches.store(false, Ordering::Relaxed);
                }
                Err(e) => {
                    tracing::warn!(attempt, error = %e, "log upload failed");
                    last = e;
                    if attempt < ATTEMPTS {
                        tokio::time::sleep(delay).await;
                        delay = delay.saturating_mul(2);
                    }
                }
            }
        }
        if self.batches.load(Ordering::Relaxed) {
            let first = chunks.first().map_or(0, |(o, _)| *o);
            return Err(format!(
                "could not upload the log from byte {first} (after {ATTEMPTS} attempts): {last}"
            ));
        }
        for (offset, bytes) in chunks {
            let name = format!("{offset:012}");
            self.upload(UploadKind::Log, Some(&name), bytes).await?;
        }
        Ok(())
    }

    async fn followed(&self) -> Option<bool> {
        let url = match self.follow_url() {
            Some(url) => url,
            // An older API has no follow marker: ship at the followed pace, as it
            // always did, so its followers see lines within the pace they knew.
            None if !self.batches.load(Ordering::Relaxed) => return Some(true),
            None => {
                if !self.renew().await.ok()? {
                    // An older API: no follow marker, no batches.
                    return Some(true);
                }
                self.follow_url()?
            }
        };
        match self.api.peek_presigned(&url).await {
            Ok(None) => Some(false),
            Ok(Some(body)) => {
                let marked: u64 = std::str::from_utf8(&body).ok()?.trim().parse().ok()?;
                Some(is_followed(marked, unix_millis()))
            }
            Err(e) => {
                // An ended URL (a directory bucket's session ends after five minutes) is
                // replaced at the next check.
                tracing::debug!(error = %e, "could not read the follow marker");
                self.forget_follow_url();
                None
            }
        }
    }

    async fn write_live(&self, body: Vec<u8>) -> Result<bool, String> {
        if *self.live_bucket.lock().unwrap_or_else(|p| p.into_inner()) == LiveBucket::No {
            return Ok(false);
        }
        let mut last = String::new();
        // Twice at most: with the grant kept, then with a fresh one.
        for _ in 0..2 {
            let grant = match self.live_grant() {
                Some(grant) => grant,
                None => {
                    if !self.renew().await? {
                        return Ok(false);
                    }
                    match self.live_grant() {
                        Some(grant) => grant,
                        None => return Ok(false),
                    }
                }
            };
            match self.api.send_upload(&grant, body.clone()).await {
                Ok(()) => return Ok(true),
                Err(e) => {
                    self.forget_live_grant();
                    last = e;
                }
            }
        }
        Err(format!("could not write the live log: {last}"))
    }
}

/// The time now in Unix milliseconds.
pub fn unix_millis() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// In-memory uploads for tests; can be told to fail the next ones, or that someone
/// follows the log. Counts the requests a real upload would make.
#[derive(Default)]
pub struct MemoryUploads {
    objects: Mutex<BTreeMap<(UploadKind, String), Vec<u8>>>,
    failing: AtomicU32,
    followed: AtomicBool,
    /// Successful uploads (one S3 PUT each).
    pub puts: AtomicUsize,
    /// Calls of [`Uploader::upload_log`] (one API call each with batches).
    pub log_batches: AtomicUsize,
    /// Calls of [`Uploader::followed`] (one S3 GET each).
    pub follow_checks: AtomicUsize,
    /// Whether the log has a live bucket ([`MemoryUploads::with_live`]).
    live_bucket: AtomicBool,
    /// The live object as last written.
    live: Mutex<Option<Vec<u8>>>,
    /// Writes of the live object (one S3 Express PUT each).
    pub live_puts: AtomicUsize,
}

impl MemoryUploads {
    /// Nothing uploaded yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Uploads whose log has a live bucket.
    pub fn with_live() -> Self {
        let uploads = Self::default();
        uploads.live_bucket.store(true, Ordering::SeqCst);
        uploads
    }

    /// The live object as last written, if it was.
    pub fn live(&self) -> Option<Vec<u8>> {
        self.live.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// From now on [`Uploader::followed`] answers `followed`.
    pub fn set_followed(&self, followed: bool) {
        self.followed.store(followed, Ordering::SeqCst);
    }

    /// The whole log: every chunk, in offset order, concatenated.
    pub fn log(&self) -> Vec<u8> {
        self.of(UploadKind::Log)
            .into_iter()
            .flat_map(|(_, v)| v)
            .collect()
    }

    /// The next `n` uploads fail.
    pub fn fail_next(&self, n: u32) {
        self.failing.store(n, Ordering::SeqCst);
    }

    /// Every upload of `kind`, by name, in name order.
    pub fn of(&self, kind: UploadKind) -> Vec<(String, Vec<u8>)> {
        self.objects
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|((k, _), _)| *k == kind)
            .map(|((_, n), v)| (n.clone(), v.clone()))
            .collect()
    }
}

#[async_trait]
impl Uploader for MemoryUploads {
    async fn upload(
        &self,
        kind: UploadKind,
        name: Option<&str>,
        body: Vec<u8>,
    ) -> Result<(), String> {
        if self
            .failing
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            return Err(format!(
                "could not upload the {}: injected failure",
                kind.as_str()
            ));
        }
        self.objects
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert((kind, name.unwrap_or_default().to_string()), body);
        self.puts.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    async fn upload_log(&self, chunks: Vec<(u64, Vec<u8>)>) -> Result<(), String> {
        self.log_batches.fetch_add(1, Ordering::SeqCst);
        for (offset, bytes) in chunks {
            let name = format!("{offset:012}");
            self.upload(UploadKind::Log, Some(&name), bytes).await?;
        }
        Ok(())
    }

    async fn followed(&self) -> Option<bool> {
        self.follow_checks.fetch_add(1, Ordering::SeqCst);
        Some(self.followed.load(Ordering::SeqCst))
    }

    async fn write_live(&self, body: Vec<u8>) -> Result<bool, String> {
        if !self.live_bucket.load(Ordering::SeqCst) {
            return Ok(false);
        }
        if self
            .failing
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            return Err("could not write the live log: injected failure".into());
        }
        *self.live.lock().unwrap_or_else(|p| p.into_inner()) = Some(body);
        self.live_puts.fetch_add(1, Ordering::SeqCst);
        Ok(true)
    }
}
