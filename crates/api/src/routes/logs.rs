//! A job's live log: `GET /v1/jobs/{id}/logs?offset=N`, read from the pilot's S3 chunks.
//!
//! One answer lists only from the chunk that holds `offset` (`start-after`, never the
//! whole log), reads its chunks in parallel ([`PAGE_READ_CONCURRENCY`] at once, ranged
//! GETs for partial chunks), and stops at the first gap, at [`PAGE_READ_BYTES`], at
//! [`PAGE_JSON_BYTES`] once JSON-escaped, or when [`PAGE_TIME_BUDGET`] is spent. Each
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
use sortie_core::protocol::pilot::{log_chunk_offset, log_prefix};
use sortie_core::{Action, JobId};
use sortie_store::{Artifacts, ObjectInfo, StoreError, MAX_LIST_PAGE};
use utoipa::IntoParams;

use super::jobs::read_job_for;
use super::Reply;
use crate::error::ApiError;
use crate::extract::{query_field, Caller, JobIdParam, QueryParams};
use crate::model::LogsPage;
use crate::openapi::errors::*;
use crate::AppState;

/// The most listing pages one answer reads (each up to 1,000 chunks).
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

/// Lists the chunks from the one holding `offset`, enough for one page.
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
    let mut after = start_after;
    let mut ahead = 0u64;
    for _ in 0..MAX_LIST_PAGES {
        let page: Vec<ObjectInfo> = artifacts
            .list_page(prefix, after.as_deref(), MAX_LIST_PAGE)
            .await?;
        let full = page.len() >= MAX_LIST_PAGE;
        after = page.last().map(|o| o.key.clone());
        for o in page {
            if let Some(start) = log_chunk_offset(prefix, &o.key) {
                if start + o.size > offset {
                    ahead += (start + o.size - offset.max(start)).min(o.size);
                }
                listed.chunks.push((start, o.size));
                listed.keys.push(o.key);
            }
        }
        if !full {
            listed.exhausted = true;
            break;
        }
        if ahead >= PAGE_READ_BYTES as u64 {
            break;
        }
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

    #[tokio::test]
    async fn an_escaped_page_is_cut_to_fit_and_the_rest_follows() {
        // Control bytes escape to six bytes each: one page cannot hold 4 MiB of them.
        let chunks: Vec<(u64, Vec<u8>)> = (0..4)
            .map(|i| ((i * 1024 * 1024) as u64, vec![1u8; 1024 * 1024]))
            .collect();
        let b = bucket_of(&chunks);
        let page = read_page(&b, "logs/j/", 0, true, Instant::now() + PAGE_TIME_BUDGET)
            .await
            .unwrap();
        assert_eq!(page.next_offset, (PAGE_JSON_BYTES / 6) as u64);
        assert!(page.more, "the rest is on the next page");
        let (read, _) = read_all(&b, true).await;
        assert_eq!(read.len(), 4 * 1024 * 1024);
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
