//! The log engine against a bucket in memory that counts its reads and can be slow.

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
    /// The live bucket, when the log has one.
    live: Option<Arc<Bucket>>,
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
        self.objects
            .lock()
            .unwrap()
            .get(key)
            .cloned()
            .ok_or_else(|| StoreError::NotFound {
                kind: "object",
                id: key.into(),
            })
    }
    async fn presign_get(&self, key: &str, _: std::time::Duration) -> Result<String, StoreError> {
        Ok(format!("memory://{key}"))
    }
    fn live(&self) -> Option<Arc<dyn Artifacts>> {
        self.live.clone().map(|l| l as Arc<dyn Artifacts>)
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
/// answer (status, content type, JSON body) in the real `ApiGatewayV2httpResponse`,
/// serialised with serde_json as `lambda_http` does, so the body is escaped twice.
fn lambda_payload_len(page: LogPage) -> usize {
    // The API answers the page as JSON (`LogsPage`, the same fields: sortie-api's
    // `a_log_page_is_answered_field_for_field`).
    let body = serde_json::to_vec(&page).unwrap();
    let mut envelope = aws_lambda_events::apigw::ApiGatewayV2httpResponse::default();
    envelope.status_code = 200;
    envelope.headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    envelope.body = Some(aws_lambda_events::encodings::Body::Text(
        String::from_utf8(body).unwrap(),
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
            let payload = lambda_payload_len(page);
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

/// A running job's log with a live bucket: chunks `[0, 10)`, and `live` in the live bucket.
fn with_live(id: &JobId, live: Option<LiveLog>) -> (Logs, Arc<Bucket>, Arc<Bucket>) {
    let live_bucket = Arc::new(Bucket::default());
    if let Some(live) = live {
        live_bucket
            .objects
            .lock()
            .unwrap()
            .insert(live_key(id), live.encode());
    }
    let chunks = Bucket {
        live: Some(live_bucket.clone()),
        ..Bucket::default()
    };
    chunks.objects.lock().unwrap().insert(
        sortie_core::protocol::pilot::log_chunk_key(&log_prefix(id), 0),
        b"0123456789".to_vec(),
    );
    let chunks = Arc::new(chunks);
    (Logs::new(chunks.clone()), chunks, live_bucket)
}

fn live(start: u64, bytes: &[u8]) -> LiveLog {
    LiveLog {
        start,
        ended: false,
        bytes: bytes.to_vec(),
    }
}

#[tokio::test]
async fn a_running_jobs_page_joins_the_live_object_where_the_chunks_end_each_byte_once() {
    let id = JobId::from("01JLIVEJOIN");
    for (object, from, expect_data, expect_next) in [
        // the live object starts where the chunks end
        (Some(live(10, b"abc")), 0, "0123456789abc", 13),
        // it overlaps them (a chunk was shipped after the live object was read)
        (Some(live(5, b"56789abc")), 0, "0123456789abc", 13),
        // read from inside the live part
        (Some(live(10, b"abc")), 11, "bc", 13),
        // a gap: it starts past the chunks (their next one is not listed yet)
        (Some(live(12, b"cd")), 0, "0123456789", 10),
        // nothing new past the reader
        (Some(live(10, b"abc")), 13, "", 13),
        // no live object yet
        (None, 0, "0123456789", 10),
    ] {
        let (logs, _, _) = with_live(&id, object.clone());
        let page = logs.page(&id, from, false).await.unwrap();
        assert_eq!(
            (page.data.as_str(), page.next_offset, page.more),
            (expect_data, expect_next, true),
            "{object:?} from {from}"
        );
        let url = page
            .live
            .expect("a running job's page hands out the live URL");
        assert_eq!(url.url, format!("memory://{}", live_key(&id)));
    }
}

#[tokio::test]
async fn an_ended_jobs_page_reads_chunks_only_and_the_marker_lives_in_the_live_bucket() {
    let id = JobId::from("01JLIVEENDED");
    let (logs, chunks, live_bucket) = with_live(&id, Some(live(10, b"stale")));
    let page = logs.page(&id, 0, true).await.unwrap();
    assert_eq!((page.data.as_str(), page.more), ("0123456789", false));
    assert_eq!(page.live, None, "no live URL once the job has ended");
    assert_eq!(
        live_bucket.gets.load(Ordering::SeqCst),
        0,
        "nor a read of it"
    );

    let running = JobId::from("01JLIVEMARK");
    let (logs, chunks_running, live_running) = with_live(&running, None);
    logs.page(&running, 0, false).await.unwrap();
    assert!(live_running
        .objects
        .lock()
        .unwrap()
        .contains_key(&follow_marker_key(&running)));
    assert_eq!(chunks_running.writes.load(Ordering::SeqCst), 0);
    assert_eq!(chunks.writes.load(Ordering::SeqCst), 0);
}

/// The live object is written through a URL the job's own code could use too: a huge one
/// is read no further than `LIVE_READ_BYTES`, and the page answers what that holds.
#[tokio::test]
async fn a_huge_live_object_is_read_no_further_than_its_cap() {
    let id = JobId::from("01JLIVEHUGE");
    let huge = live(10, &vec![b'x'; 20 * 1024 * 1024]);
    let (logs, _, _) = with_live(&id, Some(huge));
    let page = logs.page(&id, 0, false).await.unwrap();
    let cap = LIVE_READ_BYTES as usize;
    assert!(
        page.data.len() > 10 && page.data.len() < cap,
        "{}",
        page.data.len()
    );
    assert_eq!(page.next_offset, page.data.len() as u64);
    assert!(page.data.starts_with("0123456789xxx"));
}
