//! A job's live log: `GET /v1/jobs/{id}/logs?offset=N`, read from the pilot's S3 chunks.
//!
//! One answer lists only from the chunk that holds `offset` (`start-after`, never the
//! whole log), reads its chunks in parallel ([`PAGE_READ_CONCURRENCY`] at once, ranged
//! GETs for partial chunks), and stops at the first gap, at [`PAGE_READ_BYTES`], at
//! [`PAGE_JSON_BYTES`] once JSON-escaped twice (as Lambda returns it), or when [`PAGE_TIME_BUDGET`] is spent. Each
//! read of a job that has not ended also marks it followed, so its pilot ships every
//! second ([`sortie_core::protocol::logs`]); a follower's first read marks it at once.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use axum::extract::State;
use futures_util::StreamExt;
use serde::Deserialize;
use sortie_core::protocol::logs::{
    follow_marker_key, list_start_after, page_cut, plan_page, FOLLOW_MARK_EVERY, PAGE_JSON_BYTES,
    PAGE_READ_BYTES, PAGE_READ_CONCURRENCY, PAGE_TIME_BUDGET,
};
use sortie_core::protocol::pilot::{log_chunk_key, log_chunk_offset, log_prefix};
use sortie_core::{Action, JobId};
use sortie_store::{Artifacts, ObjectInfo, PageFrom, StoreError, MAX_LIST_PAGE};
use utoipa::IntoParams;

use super::jobs::read_job_for;
use super::Reply;
use crate::error::ApiError;
use crate::extract::{query_field, Caller, JobIdParam, QueryParams};
use crate::model::LogsPage;
use crate::openapi::errors::*;
use crate::AppState;

/// The most listing pages one answer reads once it has found where to start (each up to
/// 1,000 chunks, fewer when S3 answers a short page).
const MAX_LIST_PAGES: usize = 8;

/// The query of the log.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct LogsQuery {
    /// The byte offset to read from (the `next_offset` of the previous answer); 0 when absent.
    #[serde(default, deserialize_with = "offset")]
    #[param(value_type = Option<u64>, minimum = 0)]
    offset: Option<u64>,
}

fn offset<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    query_field(d, "offset", "must be a whole number of bytes", |s| {
        s.parse::<u64>().ok()
    })
}

/// The job's log from `offset`, up to the first gap (a chunk not written yet), at most
/// about 4 MB an answer.
#[utoipa::path(get, path = "/v1/jobs/{id}/logs", tag = "jobs",
    params(("id" = String, Path, description = "Job id"), LogsQuery),
    security(("bearerAuth" = [])),
    responses((status = 200, description = "`data` from `offset`, `next_offset`, and `more`: whether more may come (the job has not ended, or the page was full)", body = LogsPage),
        BadRequest, Unauthorized, NotFound, BadGateway, Unavailable))]
pub(crate) async fn get_job_logs(
    State(state): State<AppState>,
    JobIdParam(id): JobIdParam,
    caller: Caller,
    query: QueryParams<LogsQuery>,
) -> Result<Reply<LogsPage>, ApiError> {
    let (record, _) = read_job_for(&state, &caller, &id, Action::Read).await?;
    let offset = query.get()?.offset.unwrap_or(0);
    let terminal = record.job.state.is_terminal();
    if !terminal {
        mark_followed(state.artifacts.as_ref(), &record.job.id).await;
    }
    let deadline = Instant::now() + PAGE_TIME_BUDGET;
    let page = read_page(
        state.artifacts.as_ref(),
        &log_prefix(&record.job.id),
        offset,
        terminal,
        deadline,
    )
    .await?;
    Ok(Reply::ok(page))
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
async fn read_page(
    artifacts: &dyn Artifacts,
    prefix: &str,
    offset: u64,
    terminal: bool,
    deadline: Instant,
) -> Result<LogsPage, ApiError> {
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
            (_, Err(e)) if data.is_empty() => return Err(e.into()),
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
    let cut = page_cut(&data, PAGE_JSON_BYTES, terminal && reached_end);
    let full = cut < data.len() || !reached_end;
    data.truncate(cut);
    Ok(LogsPage {
        offset,
        next_offset: offset + cut as u64,
        data: String::from_utf8_lossy(&data).into_owned(),
        more: !terminal || full,
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
async fn mark_followed(artifacts: &dyn Artifacts, id: &JobId) {
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
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A bucket in memory that counts its reads and can be slow.
    #[derive(Default)]
    struct Bucket {
        objects: Mutex<BTreeMap<String, Vec<u8>>>,
        gets: AtomicUsize,
        lists: AtomicUsize,
        delay: Option<std::time::Duration>,
        /// Writes tried, and how many of the next ones fail.
        writes: AtomicUsize,
        failing_writes: AtomicUsize,
        /// Listing pages hold at most this many keys, whatever was asked (S3 may answer
        /// short pages while more keys follow).
        short_pages: Option<usize>,
    }

    #[async_trait::async_trait]
    impl Artifacts for Bucket {
        async fn presign_put(
            &self,
            key: &str,
            _: &str,
            _: std::time::Duration,
        ) -> Result<sortie_store::PresignedPut, StoreError> {
            Err(StoreError::NotFound {
                kind: "bucket",
                id: key.into(),
            })
        }
        async fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>, StoreError> {
            self.lists.fetch_add(1, Ordering::SeqCst);
            Ok(self
                .objects
                .lock()
                .unwrap()
                .iter()
                .filter(|(k, _)| k.starts_with(prefix))
                .map(|(k, v)| ObjectInfo {
                    key: k.clone(),
                    size: v.len() as u64,
                })
                .collect())
        }
        async fn list_page(
            &self,
            prefix: &str,
            from: PageFrom<'_>,
            max_keys: usize,
        ) -> Result<sortie_store::ObjectPage, StoreError> {
            let after = match from {
                PageFrom::Start => None,
                PageFrom::After(key) | PageFrom::Next(key) => Some(key.to_string()),
            };
            let mut all = self.list(prefix).await?;
            all.retain(|o| after.as_ref().is_none_or(|a| &o.key > a));
            let keep = max_keys.min(self.short_pages.unwrap_or(usize::MAX));
            let more = all.len() > keep;
            all.truncate(keep);
            Ok(sortie_store::ObjectPage {
                next: more.then(|| all.last().map(|o| o.key.clone())).flatten(),
                objects: all,
            })
        }
        async fn write(&self, key: &str, bytes: Vec<u8>, _: &str) -> Result<(), StoreError> {
            self.writes.fetch_add(1, Ordering::SeqCst);
            if self
                .failing_writes
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
            {
                return Err(StoreError::NotFound {
                    kind: "bucket",
                    id: key.into(),
                });
            }
            self.objects.lock().unwrap().insert(key.into(), bytes);
            Ok(())
        }
        async fn get(&self, key: &str) -> Result<Vec<u8>, StoreError> {
            self.gets.fetch_add(1, Ordering::SeqCst);
            if let Some(d) = self.delay {
                tokio::time::sleep(d).await;
            }
            Ok(self.objects.lock().unwrap()[key].clone())
        }
    }

    fn bucket_of(chunks: &[(u64, Vec<u8>)]) -> Bucket {
        let b = Bucket::default();
        for (at, bytes) in chunks {
            b.objects.lock().unwrap().insert(
                sortie_core::protocol::pilot::log_chunk_key("logs/j/", *at),
                bytes.clone(),
            );
        }
        b
    }

    /// A log of `n` chunks of `size` bytes each, every byte a printable letter.
    fn log_of(n: usize, size: usize) -> (Vec<u8>, Vec<(u64, Vec<u8>)>) {
        let all: Vec<u8> = (0..n * size).map(|i| b'a' + (i % 26) as u8).collect();
        let chunks = all
            .chunks(size)
            .enumerate()
            .map(|(i, c)| ((i * size) as u64, c.to_vec()))
            .collect();
        (all, chunks)
    }

    async fn read_all(b: &Bucket, terminal: bool) -> (Vec<u8>, usize) {
        let (mut out, mut offset, mut pages) = (Vec::new(), 0, 0);
        loop {
            let deadline = Instant::now() + PAGE_TIME_BUDGET;
            let page = read_page(b, "logs/j/", offset, terminal, deadline)
                .await
                .unwrap();
            assert_eq!(page.offset, offset);
            assert!(serde_json::to_string(&page).unwrap().len() < 5_000_000);
            out.extend_from_slice(page.data.as_bytes());
            offset = page.next_offset;
            pages += 1;
            assert!(pages < 1000);
            if !page.more || page.data.is_empty() {
                return (out, pages);
            }
        }
    }

    #[tokio::test]
    async fn a_first_read_marks_the_log_at_once_and_a_failed_mark_is_retried_by_the_next() {
        let b = Bucket::default();
        let id = JobId::from("01JMARKTEST");
        b.failing_writes.store(1, Ordering::SeqCst);
        mark_followed(&b, &id).await;
        assert_eq!(b.writes.load(Ordering::SeqCst), 1, "the first read writes");
        mark_followed(&b, &id).await;
        assert_eq!(b.writes.load(Ordering::SeqCst), 2, "after a failure: again");
        let marked: i64 =
            String::from_utf8(b.objects.lock().unwrap()["logs/01JMARKTEST/following"].clone())
                .unwrap()
                .parse()
                .unwrap();
        assert!((chrono::Utc::now().timestamp_millis() - marked).abs() < 5_000);
        mark_followed(&b, &id).await;
        assert_eq!(b.writes.load(Ordering::SeqCst), 2, "then at most every 5 s");
    }

    #[tokio::test]
    async fn a_big_log_reads_back_page_by_page_each_under_its_budget() {
        let (all, chunks) = log_of(24, 1024 * 1024);
        let b = bucket_of(&chunks);
        let (read, pages) = read_all(&b, true).await;
        assert!(read == all, "byte-identical");
        assert_eq!(pages, 6, "4 MiB a page");
    }

    #[tokio::test]
    async fn thousands_of_small_chunks_are_listed_from_the_offset_not_from_the_start() {
        let (all, chunks) = log_of(2500, 100);
        let b = bucket_of(&chunks);
        let (read, _) = read_all(&b, true).await;
        assert!(read == all);
        assert_eq!(b.gets.load(Ordering::SeqCst), 2500, "each chunk read once");
        // From the middle, the page starts in the chunk that holds the offset.
        let page = read_page(
            &b,
            "logs/j/",
            123_456,
            true,
            Instant::now() + PAGE_TIME_BUDGET,
        )
        .await
        .unwrap();
        assert_eq!(page.data.as_bytes(), &all[123_456..]);
    }

    /// Issue 41 item 7: ten thousand chunks of 100 B (a job followed for hours, a short
    /// line a second) read to the end, page by page, each page making progress: with
    /// full listing pages, and with short ones that S3 says are not the end.
    #[tokio::test]
    async fn ten_thousand_small_chunks_read_to_the_end_with_full_or_short_listing_pages() {
        for short_pages in [None, Some(7)] {
            let (all, chunks) = log_of(10_000, 100);
            let mut b = bucket_of(&chunks);
            b.short_pages = short_pages;
            let (mut read, mut offset, mut pages) = (Vec::new(), 0u64, 0);
            loop {
                let deadline = Instant::now() + PAGE_TIME_BUDGET;
                let page = read_page(&b, "logs/j/", offset, true, deadline)
                    .await
                    .unwrap();
                assert!(
                    page.next_offset > offset || !page.more,
                    "{short_pages:?}: the page at {offset} is empty and says more follows"
                );
                read.extend_from_slice(page.data.as_bytes());
                offset = page.next_offset;
                pages += 1;
                assert!(pages <= 2_000, "{short_pages:?}: bounded");
                if !page.more {
                    break;
                }
            }
            assert_eq!(
                read.len(),
                all.len(),
                "{short_pages:?}: the whole log, not an end reported early"
            );
            assert!(read == all, "{short_pages:?}: byte-identical");
            // From inside a chunk far from the start, the page starts at that byte.
            let page = read_page(
                &b,
                "logs/j/",
                987_654,
                true,
                Instant::now() + PAGE_TIME_BUDGET,
            )
            .await
            .unwrap();
            assert_eq!(
                page.data.as_bytes(),
                &all[987_654..987_654 + page.data.len()]
            );
            assert!(!page.data.is_empty(), "{short_pages:?}");
        }
    }

    #[tokio::test]
    async fn an_escaped_page_is_cut_to_fit_and_the_rest_follows() {
        // Control bytes escape to 7 bytes each in the answer: a page holds fewer than 4 MiB.
        let chunks: Vec<(u64, Vec<u8>)> = (0..4)
            .map(|i| ((i * 1024 * 1024) as u64, vec![1u8; 1024 * 1024]))
            .collect();
        let b = bucket_of(&chunks);
        let page = read_page(&b, "logs/j/", 0, true, Instant::now() + PAGE_TIME_BUDGET)
            .await
            .unwrap();
        // Escaped twice (the body, then the body in Lambda's response): 7 bytes each.
        assert_eq!(page.next_offset, (PAGE_JSON_BYTES / 7) as u64);
        assert!(page.more, "the rest is on the next page");
        let (read, _) = read_all(&b, true).await;
        assert_eq!(read.len(), 4 * 1024 * 1024);
    }

    /// The bytes Lambda returns for `page` behind API Gateway (payload v2): the route's
    /// answer (status, headers, JSON body) in the real `ApiGatewayV2httpResponse`,
    /// serialised with serde_json as `lambda_http` does, so the body is escaped twice.
    async fn lambda_payload_len(page: LogsPage) -> usize {
        use axum::response::IntoResponse;
        let (parts, body) = Reply::ok(page).into_response().into_parts();
        let body = axum::body::to_bytes(body, usize::MAX).await.unwrap();
        let mut envelope = aws_lambda_events::apigw::ApiGatewayV2httpResponse::default();
        envelope.status_code = i64::from(parts.status.as_u16());
        envelope.headers = parts.headers;
        envelope.body = Some(aws_lambda_events::encodings::Body::Text(
            String::from_utf8(body.to_vec()).unwrap(),
        ));
        envelope.is_base64_encoded = false;
        serde_json::to_vec(&envelope).unwrap().len()
    }

    /// Lambda's largest synchronous response payload, 6 MB
    /// (<https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html>).
    const LAMBDA_RESPONSE_BYTES: usize = 6_291_456;

    /// A log of `len` bytes drawn from `weights` over: `"`, `\`, a newline, another
    /// control byte, a byte that is not UTF-8, a multi-byte character, a plain letter.
    fn hostile_log(weights: &[u32; 7], len: usize, mut seed: u64) -> Vec<u8> {
        let total: u32 = weights.iter().sum::<u32>().max(1);
        let mut out = Vec::with_capacity(len + 4);
        while out.len() < len {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let mut pick = (seed % u64::from(total)) as u32;
            let class = weights
                .iter()
                .position(|&w| {
                    let hit = pick < w;
                    pick = pick.saturating_sub(w);
                    hit
                })
                .unwrap_or(6);
            match class {
                0 => out.push(b'"'),
                1 => out.push(b'\\'),
                2 => out.push(b'\n'),
                3 => out.push(1 + (seed >> 32) as u8 % 8),
                4 => out.push(0xff),
                5 => out.extend_from_slice("→".as_bytes()),
                _ => out.push(b'a' + (seed >> 40) as u8 % 26),
            }
        }
        out.truncate(len);
        out
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]

        /// Issue 41 item 6: however rich a log is in quotes, backslashes, newlines, control
        /// bytes and invalid UTF-8, every page of it, as Lambda returns it to API Gateway,
        /// fits Lambda's 6 MB response limit; and the pages read the log to its end.
        #[test]
        fn every_log_page_fits_lambdas_response_limit_once_escaped_twice(
            weights in proptest::array::uniform7(0u32..10),
            heavy in 0usize..4,
            seed in 1u64..u64::MAX,
            chunk_kib in proptest::sample::select(vec![64usize, 1024]),
        ) {
            let mut weights = weights;
            weights[heavy] += 40;
            let log = hostile_log(&weights, 5 * 1024 * 1024, seed);
            let chunks: Vec<(u64, Vec<u8>)> = log
                .chunks(chunk_kib * 1024)
                .enumerate()
                .map(|(i, c)| ((i * chunk_kib * 1024) as u64, c.to_vec()))
                .collect();
            let b = bucket_of(&chunks);
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            let (mut offset, mut pages) = (0u64, 0);
            loop {
                let page = runtime
                    .block_on(read_page(&b, "logs/j/", offset, true, Instant::now() + PAGE_TIME_BUDGET))
                    .unwrap();
                let (next, more) = (page.next_offset, page.more);
                let payload = runtime.block_on(lambda_payload_len(page));
                proptest::prop_assert!(
                    payload <= LAMBDA_RESPONSE_BYTES,
                    "the page at {offset} is {payload} bytes in Lambda's response"
                );
                proptest::prop_assert!(next > offset || !more, "a page makes progress");
                offset = next;
                pages += 1;
                proptest::prop_assert!(pages < 100);
                if !more {
                    break;
                }
            }
            proptest::prop_assert_eq!(offset, log.len() as u64);
        }
    }

    #[tokio::test]
    async fn a_slow_store_answers_what_it_read_within_the_time_budget() {
        let (_, chunks) = log_of(64, 10);
        let mut b = bucket_of(&chunks);
        b.delay = Some(std::time::Duration::from_millis(200));
        let started = Instant::now();
        let page = read_page(
            &b,
            "logs/j/",
            0,
            false,
            Instant::now() + std::time::Duration::from_millis(500),
        )
        .await
        .unwrap();
        assert!(started.elapsed() < std::time::Duration::from_millis(900));
        assert!(page.more);
        assert!(
            page.next_offset > 0 && page.next_offset < 640,
            "{}",
            page.next_offset
        );
        assert_eq!(page.next_offset % 10, 0, "whole chunks, in order");
    }

    #[tokio::test]
    async fn a_chunk_bigger_than_the_cap_is_still_found() {
        let big: Vec<u8> = (0..3 * 1024 * 1024)
            .map(|i| b'a' + (i % 26) as u8)
            .collect();
        let b = bucket_of(&[(0, big.clone()), (big.len() as u64, b"tail".to_vec())]);
        let page = read_page(
            &b,
            "logs/j/",
            2 * 1024 * 1024 + 5,
            true,
            Instant::now() + PAGE_TIME_BUDGET,
        )
        .await
        .unwrap();
        let mut want = big[2 * 1024 * 1024 + 5..].to_vec();
        want.extend_from_slice(b"tail");
        assert!(page.data.as_bytes() == want.as_slice());
        assert!(!page.more);
    }
}
