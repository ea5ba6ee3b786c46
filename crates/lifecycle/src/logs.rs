//! A job's live log, read and written through the artifacts bucket: one page of it from
//! an offset, read from the pilot's S3 chunks; the follow marker a read leaves, so the
//! pilot ships every second while someone follows; and the presigned URLs the pilot
//! uploads its chunks with. The route modules call [`Logs`]; the rules are pure
//! functions in [`sortie_core::protocol::logs`].
//!
//! One page lists only from the chunk that holds `offset` (`start-after`, never the whole
//! log), reads its chunks in parallel ([`PAGE_READ_CONCURRENCY`] at once, ranged GETs for
//! partial chunks), and stops at the first gap, at [`PAGE_READ_BYTES`], at
//! [`PAGE_JSON_BYTES`] once JSON-escaped twice (as Lambda returns it), or when
//! [`PAGE_TIME_BUDGET`] is spent. Design: `docs/decisions/logs-and-artifacts.md`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use futures_util::StreamExt;
use sortie_core::protocol::logs::{
    follow_marker_key, list_start_after, live_key, page_cut, plan_page, LiveLog, LiveRead,
    FOLLOW_MARK_EVERY, LIVE_READ_BYTES, PAGE_JSON_BYTES, PAGE_READ_BYTES, PAGE_READ_CONCURRENCY,
    PAGE_TIME_BUDGET,
};
use sortie_core::protocol::pilot::{log_chunk_key, log_chunk_offset, log_prefix, UploadKind};
use sortie_core::JobId;
use sortie_store::{Artifacts, ObjectInfo, PageFrom, PresignedPut, StoreError, MAX_LIST_PAGE};

/// The most listing pages one answer reads once it has found where to start (each up to
/// 1,000 chunks, fewer when S3 answers a short page).
const MAX_LIST_PAGES: usize = 8;

/// A job's log, over the artifacts bucket.
#[derive(Clone)]
pub struct Logs {
    /// Where the pilot writes its chunks and the API reads them.
    pub artifacts: Arc<dyn Artifacts>,
}

/// One page of a job's log.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LogPage {
    /// The offset read from.
    pub offset: u64,
    /// The offset to read from next.
    pub next_offset: u64,
    /// The log text from `offset` (invalid UTF-8 replaced).
    pub data: String,
    /// Whether more may come: the job has not ended, or the page was full.
    pub more: bool,
    /// A presigned GET of the job's live object, while the job runs and the log has a live
    /// bucket: a follower reads it directly, between calls of this API.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub live: Option<LiveUrl>,
}

/// A presigned GET of a job's live object ([`sortie_core::protocol::logs::LiveLog`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LiveUrl {
    /// The URL.
    pub url: String,
    /// When it stops working (a directory bucket's URL dies with its session).
    pub expires_at: DateTime<Utc>,
}

/// What the pilot uploads a flush with: one presigned PUT per chunk, and a presigned GET
/// of the follow marker.
#[derive(Debug, Clone)]
pub struct LogGrants {
    /// Each chunk's key and its presigned PUT, in the order of the offsets asked for.
    pub chunks: Vec<(String, PresignedPut)>,
    /// The follow marker's presigned GET.
    pub follow_url: String,
    /// When the first of these URLs stops working.
    pub expires_at: DateTime<Utc>,
    /// The live object's key and its presigned PUT, when the log has a live bucket: while
    /// someone follows, the pilot rewrites it every second instead of shipping a chunk.
    pub live: Option<(String, PresignedPut)>,
}

impl Logs {
    /// The log service over `artifacts`.
    pub fn new(artifacts: Arc<dyn Artifacts>) -> Self {
        Self { artifacts }
    }

    /// One page of job `id`'s log from `offset`; `ended` when the job has ended (then a
    /// page that reaches the last byte written says no more may come). A read of a job
    /// that has not ended marks it followed first.
    /// The live object, when it is read from the live bucket, joins the page where the
    /// chunks end, and the answer carries its presigned GET for the follower.
    pub async fn page(&self, id: &JobId, offset: u64, ended: bool) -> Result<LogPage, StoreError> {
        let live_store = self.artifacts.live();
        if !ended {
            mark_followed(self.marker_store().as_ref(), id).await;
        }
        let deadline = Instant::now() + PAGE_TIME_BUDGET;
        let live_store = live_store.filter(|_| !ended);
        let live = match &live_store {
            Some(store) => read_live(store.as_ref(), id).await,
            None => None,
        };
        let mut page = read_page_with_live(
            self.artifacts.as_ref(),
            &log_prefix(id),
            offset,
            ended,
            deadline,
            live.as_ref(),
        )
        .await?;
        if let Some(live_store) = live_store {
            match live_store
                .presign_get_until(&live_key(id), LIVE_URL_TTL)
                .await
            {
                Ok((url, expires_at)) => page.live = Some(LiveUrl { url, expires_at }),
                Err(e) => {
                    tracing::warn!(job_id = %id, error = %e, "could not presign the live log")
                }
            }
        }
        Ok(page)
    }

    /// Where the follow marker lives: the live bucket when there is one (its requests cost
    /// a fraction), else the artifacts bucket.
    fn marker_store(&self) -> Arc<dyn Artifacts> {
        self.artifacts
            .live()
            .unwrap_or_else(|| self.artifacts.clone())
    }

    /// The offset just past job `id`'s log so far: its last chunk's start plus its size
    /// (where the apply phase of a reviewed job goes on writing).
    pub async fn end(&self, id: &JobId) -> Result<u64, StoreError> {
        let prefix = log_prefix(id);
        let chunks = self.artifacts.list(&prefix).await?;
        Ok(chunks
            .iter()
            .filter_map(|o| log_chunk_offset(&prefix, &o.key).map(|start| start + o.size))
            .max()
            .unwrap_or(0))
    }

    /// Presigned PUTs for job `id`'s log chunks starting at `offsets`, and a presigned GET
    /// of its follow marker, each working for `ttl`.
    pub async fn upload_grants(
        &self,
        id: &JobId,
        offsets: &[u64],
        ttl: Duration,
    ) -> Result<LogGrants, StoreError> {
        let prefix = log_prefix(id);
        let mut chunks = Vec::with_capacity(offsets.len());
        let mut expires_at =
            Utc::now() + chrono::Duration::from_std(ttl).unwrap_or(chrono::Duration::zero());
        for &at in offsets {
            let key = log_chunk_key(&prefix, at);
            let signed = self
                .artifacts
                .presign_put(&key, UploadKind::Log.content_type(), ttl)
                .await?;
            expires_at = expires_at.min(signed.expires_at);
            chunks.push((key, signed));
        }
        let (follow_url, follow_until) = self
            .marker_store()
            .presign_get_until(&follow_marker_key(id), ttl)
            .await?;
        expires_at = expires_at.min(follow_until);
        let live = match self.artifacts.live() {
            Some(live_store) => {
                let key = live_key(id);
                let signed = live_store
                    .presign_put(&key, UploadKind::Log.content_type(), ttl)
                    .await?;
                expires_at = expires_at.min(signed.expires_at);
                Some((key, signed))
            }
            None => None,
        };
        Ok(LogGrants {
            chunks,
            follow_url,
            expires_at,
            live,
        })
    }
}

/// How long a follower's presigned GET of the live object is asked to work (a directory
/// bucket's ends sooner, with the session that signs it: at least four minutes).
const LIVE_URL_TTL: Duration = Duration::from_secs(10 * 60);

/// The job's live object, read before the chunks: whatever it holds past the chunks'
/// end joins the page (the chunks read after it may already hold part of it; the page
/// takes each byte once, by offset). A missing or unreadable live object adds nothing, and
/// the next read tries again.
async fn read_live(live_store: &dyn Artifacts, id: &JobId) -> Option<LiveLog> {
    // A ranged read: the job's own code could write a huge object through the pilot's URL.
    match live_store
        .get_range(&live_key(id), 0, LIVE_READ_BYTES)
        .await
    {
        Ok(body) => {
            let live = LiveLog::decode(&body);
            if live.is_none() {
                tracing::warn!(job_id = %id, "the live log is not in the live format");
            }
            live
        }
        Err(StoreError::NotFound { .. }) => None,
        Err(e) => {
            tracing::warn!(job_id = %id, error = %e, "could not read the live log");
            None
        }
    }
}

/// Chunks from the listing: `(start, size)` with their keys, in offset order, and whether
/// the listing reached the end of the log's keys.
struct Listed {
    chunks: Vec<(u64, u64)>,
    keys: Vec<String>,
    exhausted: bool,
}

impl Listed {
    /// Adds a page's chunks (other keys, such as the follow marker, are not chunks).
    fn add(&mut self, prefix: &str, page: Vec<ObjectInfo>) {
        for o in page {
            if let Some(start) = log_chunk_offset(prefix, &o.key) {
                self.chunks.push((start, o.size));
                self.keys.push(o.key);
            }
        }
    }

    /// Bytes listed from `offset` on.
    fn ahead(&self, offset: u64) -> u64 {
        self.chunks
            .iter()
            .map(|&(s, n)| (s + n).saturating_sub(offset.max(s)))
            .sum()
    }
}

/// The listing position from which the first key listed is the chunk starting at byte
/// `start` or a later one: after the key of the byte before it.
fn from_byte(prefix: &str, start: u64) -> Option<String> {
    start
        .checked_sub(1)
        .map(|before| log_chunk_key(prefix, before))
}

/// Where a listing starts, from [`from_byte`].
fn page_from(after: Option<&String>) -> PageFrom<'_> {
    after.map_or(PageFrom::Start, |key| PageFrom::After(key))
}

/// The most empty pages a probe follows (S3 may answer an empty page that is not the end).
const MAX_PROBE_PAGES: usize = 4;

/// The first chunk (start, size) that starts at or after byte `at`, if any: one key a page.
async fn first_chunk_from(
    artifacts: &dyn Artifacts,
    prefix: &str,
    at: u64,
) -> Result<Option<(u64, u64)>, StoreError> {
    let after = from_byte(prefix, at);
    let mut page = artifacts
        .list_page(prefix, page_from(after.as_ref()), 1)
        .await?;
    for _ in 1..MAX_PROBE_PAGES {
        match (page.objects.first(), page.next.take()) {
            (None, Some(token)) => {
                page = artifacts
                    .list_page(prefix, PageFrom::Next(&token), 1)
                    .await?
            }
            _ => break,
        }
    }
    Ok(page
        .objects
        .first()
        .and_then(|o| log_chunk_offset(prefix, &o.key).map(|s| (s, o.size))))
}

/// The start of the chunk that holds byte `offset` (or ends at it), given `known`, the start
/// of a chunk before `offset`: the last chunk start in `[known, offset)`. Found with one-key
/// listings (steps back that widen sixteenfold, then a binary search: at most about 26
/// for a chunk's length of 1 MiB) however many small chunks lie in between, where listing
/// them all could take thousands of pages.
async fn holder_start(
    artifacts: &dyn Artifacts,
    prefix: &str,
    offset: u64,
    known: u64,
) -> Result<u64, StoreError> {
    // The last start is in [lo, hi]; `best` is the greatest start seen.
    let (mut lo, mut hi, mut best) = (known + 1, offset.saturating_sub(1), known);
    let mut back = 1u64;
    while lo <= hi {
        // Steps back first (the holder of a page's end is usually near it), then halves.
        let at = if back > 0 {
            offset.saturating_sub(back).max(lo)
        } else {
            lo + (hi - lo).div_ceil(2)
        };
        match first_chunk_from(artifacts, prefix, at).await? {
            Some((s, n)) if s <= hi => {
                if s + n >= offset {
                    return Ok(s);
                }
                best = s;
                lo = s + 1;
                back = 0;
            }
            // No chunk starts in [at, hi].
            _ => {
                hi = at.saturating_sub(1);
                if at == lo {
                    break;
                }
                back = back.saturating_mul(16);
            }
        }
    }
    Ok(best)
}

/// Lists the chunks for one page from `offset`, from the chunk holding it (chunks are at
/// most [`sortie_core::protocol::logs::MAX_CHUNK_BYTES`], so from that far back), page by page while S3 says more follow
/// (`IsTruncated`, however short a page), until the page's read budget is listed or
/// [`MAX_LIST_PAGES`] pages are read. When more keys lie between that point and `offset`
/// than one listing page holds (thousands of small chunks), the chunk holding `offset` is
/// found by [`holder_start`] and listed from instead, so an answer always reaches `offset`.
async fn list_chunks(
    artifacts: &dyn Artifacts,
    prefix: &str,
    offset: u64,
    start_after: Option<String>,
) -> Result<Listed, StoreError> {
    let mut listed = Listed {
        chunks: vec![],
        keys: vec![],
        exhausted: false,
    };
    let mut page = artifacts
        .list_page(prefix, page_from(start_after.as_ref()), MAX_LIST_PAGE)
        .await?;
    let last_chunk = page
        .objects
        .iter()
        .rev()
        .find_map(|o| log_chunk_offset(prefix, &o.key).map(|s| (s, o.size)));
    if let (Some(_), Some((last, size))) = (&page.next, last_chunk) {
        if last + size < offset {
            let start = holder_start(artifacts, prefix, offset, last).await?;
            let after = from_byte(prefix, start);
            page = artifacts
                .list_page(prefix, page_from(after.as_ref()), MAX_LIST_PAGE)
                .await?;
        }
    }
    for read in 1.. {
        let next = page.next.take();
        listed.add(prefix, std::mem::take(&mut page.objects));
        let Some(token) = next else {
            listed.exhausted = true;
            break;
        };
        if read >= MAX_LIST_PAGES || listed.ahead(offset) >= PAGE_READ_BYTES as u64 {
            break;
        }
        page = artifacts
            .list_page(prefix, PageFrom::Next(&token), MAX_LIST_PAGE)
            .await?;
    }
    Ok(listed)
}

/// One page of the log under `prefix` from `offset` (see the module's description).
#[cfg(test)]
pub(crate) async fn read_page(
    artifacts: &dyn Artifacts,
    prefix: &str,
    offset: u64,
    terminal: bool,
    deadline: Instant,
) -> Result<LogPage, StoreError> {
    read_page_with_live(artifacts, prefix, offset, terminal, deadline, None).await
}

/// [`read_page`], then, when the page reached the chunks' end without a gap and the job
/// has not ended, what `live` holds past that end (within the page's budget).
pub(crate) async fn read_page_with_live(
    artifacts: &dyn Artifacts,
    prefix: &str,
    offset: u64,
    terminal: bool,
    deadline: Instant,
    live: Option<&LiveLog>,
) -> Result<LogPage, StoreError> {
    let start_after = list_start_after(prefix, offset);
    let looked_back = start_after.is_some();
    let mut listed = list_chunks(artifacts, prefix, offset, start_after).await?;
    let covered = |l: &Listed| l.chunks.iter().any(|&(s, n)| s <= offset && offset < s + n);
    if looked_back && !covered(&listed) && listed.chunks.iter().any(|&(s, _)| s > offset) {
        // A chunk longer than the cap (written by an older pilot) may hold `offset`:
        // list from the first chunk instead.
        listed = list_chunks(artifacts, prefix, offset, None).await?;
    }
    let reads = plan_page(&listed.chunks, offset, PAGE_READ_BYTES as u64);
    let mut fetches = Vec::with_capacity(reads.len());
    for r in reads.iter().copied() {
        let key = listed.keys[r.chunk].clone();
        fetches.push(async move {
            let bytes = if r.whole {
                artifacts.get(&key).await
            } else {
                artifacts.get_range(&key, r.from, r.len).await
            };
            (r, bytes)
        });
    }
    let mut stream = futures_util::stream::iter(fetches).buffered(PAGE_READ_CONCURRENCY);
    let mut data: Vec<u8> = Vec::new();
    let mut short = false;
    loop {
        let next = match tokio::time::timeout_at(deadline.into(), stream.next()).await {
            Ok(Some(next)) => next,
            Ok(None) => break,
            Err(_) => {
                tracing::warn!(
                    prefix,
                    offset,
                    read = data.len(),
                    "log page: time budget spent"
                );
                short = true;
                break;
            }
        };
        match next {
            (r, Ok(mut bytes)) => {
                let complete = bytes.len() as u64 >= r.len;
                bytes.truncate(r.len as usize);
                data.extend_from_slice(&bytes);
                if !complete {
                    // Shorter than listed (rewritten meanwhile): what follows is not contiguous.
                    short = true;
                    break;
                }
            }
            (_, Err(e)) if data.is_empty() => return Err(e),
            (_, Err(e)) => {
                tracing::warn!(prefix, offset, error = %e, "log page: a chunk read failed");
                short = true;
                break;
            }
        }
    }
    let planned: u64 = reads.iter().map(|r| r.len).sum();
    // Whether the page reaches the end of what is written without a gap.
    let contiguous: u64 = plan_page(&listed.chunks, offset, u64::MAX)
        .iter()
        .map(|r| r.len)
        .sum();
    let reached_end = listed.exhausted && !short && planned == contiguous;
    if let (Some(live), true, false) = (live, reached_end, terminal) {
        if let LiveRead::Bytes(more) = live.from_offset(offset + data.len() as u64) {
            let room = PAGE_READ_BYTES.saturating_sub(data.len());
            data.extend_from_slice(&more[..more.len().min(room)]);
        }
    }
    let cut = page_cut(&data, PAGE_JSON_BYTES, terminal && reached_end);
    let full = cut < data.len() || !reached_end;
    data.truncate(cut);
    Ok(LogPage {
        offset,
        next_offset: offset + cut as u64,
        data: String::from_utf8_lossy(&data).into_owned(),
        more: !terminal || full,
        live: None,
    })
}

/// When this process last wrote each job's follow marker.
fn marks() -> &'static Mutex<HashMap<JobId, Instant>> {
    static MARKS: OnceLock<Mutex<HashMap<JobId, Instant>>> = OnceLock::new();
    MARKS.get_or_init(Default::default)
}

/// The most jobs whose marks one process remembers.
const MAX_MARKS: usize = 10_000;

/// Writes the job's follow marker (at most every [`FOLLOW_MARK_EVERY`] per process), so
/// its pilot ships its log every second. A follower's first read writes it at once (the
/// pilot reads it every second while the job writes, so a follower who joins mid-run is
/// seen within a second). Best effort: a failure is logged, never answered, and the next
/// read tries again.
pub(crate) async fn mark_followed(artifacts: &dyn Artifacts, id: &JobId) {
    let now = Instant::now();
    {
        let mut marks = marks().lock().unwrap_or_else(|p| p.into_inner());
        if marks
            .get(id)
            .is_some_and(|at| now.duration_since(*at) < FOLLOW_MARK_EVERY)
        {
            return;
        }
        if marks.len() >= MAX_MARKS {
            marks.retain(|_, at| now.duration_since(*at) < FOLLOW_MARK_EVERY);
            if marks.len() >= MAX_MARKS {
                marks.clear();
            }
        }
        marks.insert(id.clone(), now);
    }
    let millis = chrono::Utc::now().timestamp_millis().max(0);
    if let Err(e) = artifacts
        .write(
            &follow_marker_key(id),
            millis.to_string().into_bytes(),
            "text/plain",
        )
        .await
    {
        tracing::warn!(job_id = %id, error = %e, "could not mark the log followed");
        let mut marks = marks().lock().unwrap_or_else(|p| p.into_inner());
        if marks.get(id) == Some(&now) {
            marks.remove(id);
        }
    }
}

#[cfg(test)]
#[path = "logs_tests.rs"]
mod tests;
