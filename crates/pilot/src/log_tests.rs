//! The log's chunks, its final flush and its shipping pace, on a fake clock.

use super::*;
use crate::upload::MemoryUploads;
use sortie_core::protocol::pilot::UploadKind;
use std::sync::atomic::Ordering;

fn names(store: &MemoryUploads) -> Vec<String> {
    store
        .of(UploadKind::Log)
        .into_iter()
        .map(|(k, _)| k)
        .collect()
}

fn joined(store: &MemoryUploads) -> String {
    store
        .of(UploadKind::Log)
        .into_iter()
        .map(|(_, v)| String::from_utf8(v).unwrap())
        .collect()
}

#[tokio::test]
async fn chunks_are_named_by_start_offset_and_concatenate_to_the_log() {
    let store = MemoryUploads::new();
    let sink = LogSink::new(false);
    sink.write(b"Initializing the backend...\n");
    sink.flush_to(&store).await.unwrap();
    sink.flush_to(&store).await.unwrap(); // nothing pending: no empty chunk
    sink.write(b"partial");
    sink.line("sortie-pilot: done");
    sink.flush_to(&store).await.unwrap();
    assert_eq!(names(&store), ["000000000000", "000000000028"]);
    assert_eq!(
        joined(&store),
        "Initializing the backend...\npartial\nsortie-pilot: done\n"
    );
}

#[tokio::test]
async fn a_log_that_continues_another_names_its_chunks_from_its_offset() {
    let store = MemoryUploads::new();
    let sink = LogSink::starting_at(false, 1234);
    sink.line("sortie-pilot: apply phase");
    sink.flush_to(&store).await.unwrap();
    sink.write(b"Apply complete!\n");
    sink.flush_to(&store).await.unwrap();
    assert_eq!(names(&store), ["000000001234", "000000001260"]);
    assert_eq!(sink.shipped_up_to(), 1260 + 16);
    assert_eq!(
        joined(&store),
        "sortie-pilot: apply phase\nApply complete!\n"
    );
}

#[tokio::test]
async fn a_failed_upload_is_retried_from_the_same_offset() {
    let store = MemoryUploads::new();
    let sink = LogSink::new(false);
    sink.write(b"one\n");
    sink.flush_to(&store).await.unwrap();
    sink.write(b"two\n");
    store.fail_next(1);
    assert!(sink.flush_to(&store).await.is_err());
    sink.write(b"three\n");
    sink.flush_to(&store).await.unwrap();
    assert_eq!(names(&store), ["000000000000", "000000000004"]);
    assert_eq!(joined(&store), "one\ntwo\nthree\n");
}

#[tokio::test]
async fn the_shipper_flushes_on_a_timer_and_at_the_end() {
    let store = Arc::new(MemoryUploads::new());
    let sink = LogSink::new(false);
    let pace = Pace {
        followed: Duration::from_millis(20),
        idle: Duration::from_millis(20),
        check: CheckPace {
            fast: Duration::from_secs(1),
            slow: Duration::from_secs(1),
        },
    };
    let shipper = LogShipper::spawn(sink.clone(), store.clone(), pace);
    sink.write(b"early\n");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(joined(&store), "early\n", "shipped by the timer");
    sink.write(b"late\n");
    assert_eq!(shipper.finish().await, None);
    assert_eq!(joined(&store), "early\nlate\n");
}

#[tokio::test]
async fn an_end_that_cannot_be_shipped_is_reported() {
    let store = Arc::new(MemoryUploads::new());
    let sink = LogSink::new(false);
    let shipper = LogShipper::spawn(sink.clone(), store.clone(), Pace::default());
    tokio::time::sleep(Duration::from_millis(20)).await;
    sink.write(b"lost\n");
    store.fail_next(10);
    let problem = shipper.finish().await.expect("a problem");
    assert!(problem.contains("from byte 0"), "{problem}");
}

#[tokio::test]
async fn a_big_write_ships_as_capped_chunks_that_concatenate_to_it() {
    let store = MemoryUploads::new();
    let sink = LogSink::new(false);
    let big: Vec<u8> = (0..(2 * MAX_CHUNK_BYTES + 10))
        .map(|i| b'a' + (i % 26) as u8)
        .collect();
    sink.write(b"head\n");
    sink.write(&big);
    sink.flush_to(&store).await.unwrap();
    let chunks = store.of(UploadKind::Log);
    assert_eq!(chunks.len(), 3);
    assert!(chunks.iter().all(|(_, c)| c.len() <= MAX_CHUNK_BYTES));
    assert_eq!(chunks[1].0, format!("{:012}", MAX_CHUNK_BYTES));
    assert_eq!(
        store.log_batches.load(Ordering::SeqCst),
        1,
        "one presigning call"
    );
    let mut want = b"head\n".to_vec();
    want.extend_from_slice(&big);
    assert!(store.log() == want);
}

#[tokio::test]
async fn more_than_one_batch_is_pending_and_flush_all_ships_it_all() {
    let store = MemoryUploads::new();
    let sink = LogSink::new(false);
    let big = vec![b'x'; MAX_FLUSH_BYTES + 3];
    sink.write(&big);
    sink.flush_to(&store).await.unwrap();
    assert_eq!(sink.pending_len(), 3, "one batch at a time");
    sink.flush_all(&store).await.unwrap();
    assert_eq!(store.log().len(), big.len());
    assert_eq!(store.log_batches.load(Ordering::SeqCst), 2);
}

/// Drives a pump second by second on a fake clock: a line a second for `secs`.
async fn simulate(store: &MemoryUploads, secs: u64, follow_from: Option<u64>) -> Vec<u64> {
    let sink = LogSink::new(false);
    let mut pump = Pump::new(Pace::default());
    let mut shipped_at = vec![];
    for t in 0..secs * 4 {
        let now = Duration::from_millis(t * 250);
        if t % 4 == 0 {
            sink.line(&format!("Still creating... [{}s elapsed]", t / 4));
        }
        store.set_followed(follow_from.is_some_and(|f| now.as_secs() >= f));
        if pump.step(now, &sink, store).await {
            shipped_at.push(now.as_millis() as u64);
        }
    }
    sink.flush_all(store).await.unwrap();
    shipped_at
}

#[tokio::test]
async fn an_unfollowed_log_ships_every_60_s_and_a_followed_one_every_second() {
    let store = MemoryUploads::new();
    let shipped = simulate(&store, 120, None).await;
    assert_eq!(shipped, [60_000], "idle: every 60 s");
    assert_eq!(
        store.follow_checks.load(Ordering::SeqCst),
        120,
        "a check every second while a line a second is written"
    );

    let store = MemoryUploads::new();
    let shipped = simulate(&store, 60, Some(20)).await;
    let followed: Vec<_> = shipped.iter().filter(|t| **t >= 20_000).collect();
    // The marker is read every second while new lines come: the pace changes at 20 s.
    assert_eq!(followed.first(), Some(&&20_000));
    assert!(
        followed.windows(2).all(|w| w[1] - w[0] == 1000),
        "{followed:?}"
    );
    assert_eq!(followed.len(), 40);
    assert!(store.log().ends_with(b"[59s elapsed]\n"));
}

/// A follower joins at `join` (ms, on no tick) a log written a line every 100 ms: the
/// first shipment after the join, which carries every line written before it.
async fn first_shipment_after_a_join(join: u64) -> u64 {
    let store = MemoryUploads::new();
    let sink = LogSink::new(false);
    let mut pump = Pump::new(Pace::default());
    for t in 0..(join / 250 + 40) {
        let now = t * 250;
        for line in 0..(if t == 0 { 1 } else { 3 }) {
            sink.line(&format!("line {}", now.saturating_sub(line * 100)));
        }
        store.set_followed(now >= join);
        if pump.step(Duration::from_millis(now), &sink, &store).await && now >= join {
            return now;
        }
    }
    panic!("nothing shipped within 10 s of a join at {join} ms");
}

#[tokio::test]
async fn a_follower_who_joins_mid_run_is_seen_within_a_second() {
    let fast = CheckPace::default().fast.as_millis() as u64;
    for join in [1_013, 7_777, 29_999, 61_234, 200_501, 333_333] {
        let shipped = first_shipment_after_a_join(join).await;
        assert!(
            shipped - join <= fast + TICK.as_millis() as u64,
            "joined at {join} ms, first shipment at {shipped} ms"
        );
    }
}

#[tokio::test]
async fn a_quiet_log_reads_the_marker_only_while_bytes_are_pending() {
    let store = MemoryUploads::new();
    let sink = LogSink::new(false);
    let mut pump = Pump::new(Pace::default());
    // One line at the start, then 10 minutes of silence.
    sink.line("Still creating...");
    for t in 0..2400u64 {
        pump.step(Duration::from_millis(t * 250), &sink, &store)
            .await;
    }
    // Read at the start, then every 5 s until the line ships at 60 s, then never.
    assert_eq!(store.follow_checks.load(Ordering::SeqCst), 1 + 12);
    assert_eq!(store.puts.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_ten_minute_job_nobody_follows_costs_ten_puts() {
    let store = MemoryUploads::new();
    simulate(&store, 600, None).await;
    let puts = store.puts.load(Ordering::SeqCst);
    let calls = store.log_batches.load(Ordering::SeqCst);
    let checks = store.follow_checks.load(Ordering::SeqCst);
    println!("log requests of a 10-minute unfollowed job: {puts} S3 PUTs, {calls} presigning calls, {checks} follow-marker GETs");
    assert_eq!((puts, calls, checks), (10, 10, 600));
}

/// A followed ten-minute job with a live bucket: the live object is rewritten every second
/// and chunks ship at the idle pace, so a follower reading the live object between chunks
/// sees every line within a second, and the job costs 10 chunk PUTs (and their 10
/// presigning calls) plus 600 live PUTs on S3 Express One Zone.
#[tokio::test]
async fn a_followed_job_with_a_live_bucket_rewrites_the_live_object_and_ships_chunks_idly() {
    let store = MemoryUploads::with_live();
    let sink = LogSink::new(false);
    let mut pump = Pump::new(Pace::default());
    let mut worst = Duration::ZERO;
    let mut written_at: Vec<(u64, Duration)> = Vec::new();
    for t in 0..600u64 * 4 {
        let now = Duration::from_millis(t * 250);
        if t % 4 == 0 {
            let before = sink.written_up_to();
            sink.line(&format!("Still creating... [{}s elapsed]", t / 4));
            written_at.push((before, now));
        }
        store.set_followed(true);
        pump.step(now, &sink, &store).await;
        // What a follower would read now: the chunks, then the live object past them.
        let mut seen = store.log();
        if let Some(live) = store.live().and_then(|b| LiveLog::decode(&b)) {
            if let sortie_core::protocol::logs::LiveRead::Bytes(more) =
                live.from_offset(seen.len() as u64)
            {
                seen.extend_from_slice(more);
            }
        }
        for (at, when) in &written_at {
            if (*at as usize) < seen.len() {
                worst = worst.max(now - *when);
            }
        }
        written_at.retain(|(at, _)| *at as usize >= seen.len());
    }
    sink.flush_all(&store).await.unwrap();
    let (puts, calls, live_puts) = (
        store.puts.load(Ordering::SeqCst),
        store.log_batches.load(Ordering::SeqCst),
        store.live_puts.load(Ordering::SeqCst),
    );
    let checks = store.follow_checks.load(Ordering::SeqCst);
    println!(
        "log requests of a 10-minute followed job with a live bucket: {puts} chunk PUTs, \
         {calls} presigning calls, {live_puts} live PUTs, {checks} follow-marker GETs, \
         worst line-to-reader {worst:?}"
    );
    assert_eq!((puts, calls), (10, 10), "chunks at the idle pace");
    assert!((590..=600).contains(&live_puts), "{live_puts} live PUTs");
    assert!(worst <= Duration::from_secs(1), "a line waited {worst:?}");
    assert!(store.log().ends_with(b"[599s elapsed]\n"));
}

#[tokio::test]
async fn without_a_live_bucket_or_when_it_fails_a_followed_log_ships_chunks_every_second() {
    // No live bucket: as before it existed.
    let store = MemoryUploads::new();
    let shipped = simulate(&store, 30, Some(0)).await;
    assert!(shipped.len() >= 29, "{shipped:?}");
    assert!(
        shipped.windows(2).all(|w| w[1] - w[0] == 1000),
        "{shipped:?}"
    );
    assert_eq!(store.live_puts.load(Ordering::SeqCst), 0);

    // A live bucket whose write fails once: that second ships a chunk instead.
    let store = MemoryUploads::with_live();
    let sink = LogSink::new(false);
    let mut pump = Pump::new(Pace::default());
    store.set_followed(true);
    sink.line("one");
    assert!(pump.step(Duration::ZERO, &sink, &store).await);
    assert_eq!(store.live_puts.load(Ordering::SeqCst), 1);
    sink.line("two");
    store.fail_next(1);
    assert!(pump.step(Duration::from_secs(1), &sink, &store).await);
    // the failed live write, then the chunk: the chunk holds both lines
    assert_eq!(store.log(), b"one\ntwo\n");
}

#[tokio::test]
async fn a_big_burst_while_followed_ships_as_chunks_and_the_live_object_stays_small() {
    let store = MemoryUploads::with_live();
    let sink = LogSink::new(false);
    let mut pump = Pump::new(Pace::default());
    store.set_followed(true);
    let line = "x".repeat(1023);
    let mut biggest = 0;
    for t in 0..40u64 {
        for _ in 0..100 {
            sink.line(&line); // 100 KiB a second
        }
        pump.step(Duration::from_secs(t), &sink, &store).await;
        biggest = biggest.max(store.live().map_or(0, |b| b.len()));
    }
    assert!(
        biggest <= LIVE_MAX_BYTES + 200 * 1024,
        "live object of {biggest} bytes"
    );
    assert!(
        store.puts.load(Ordering::SeqCst) >= 10,
        "chunks ship once 256 KiB are pending"
    );
}

#[tokio::test]
async fn the_shipper_marks_the_live_object_ended_after_its_last_chunk() {
    let store = Arc::new(MemoryUploads::with_live());
    store.set_followed(true);
    let sink = LogSink::new(false);
    let pace = Pace {
        followed: Duration::from_millis(20),
        idle: Duration::from_secs(60),
        check: CheckPace {
            fast: Duration::from_millis(10),
            slow: Duration::from_millis(10),
        },
    };
    let shipper = LogShipper::spawn(sink.clone(), store.clone(), pace);
    sink.line("hello");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(store.live_puts.load(Ordering::SeqCst) >= 1);
    sink.line("bye");
    assert_eq!(shipper.finish().await, None);
    assert_eq!(store.log(), b"hello\nbye\n");
    let live = LiveLog::decode(&store.live().unwrap()).unwrap();
    assert_eq!((live.start, live.ended, live.bytes.len()), (10, true, 0));
}

#[tokio::test]
async fn a_ten_minute_followed_job_without_a_live_bucket_ships_a_chunk_a_second() {
    let store = MemoryUploads::new();
    simulate(&store, 600, Some(0)).await;
    let puts = store.puts.load(Ordering::SeqCst);
    let calls = store.log_batches.load(Ordering::SeqCst);
    let checks = store.follow_checks.load(Ordering::SeqCst);
    println!("log requests of a 10-minute followed job without a live bucket: {puts} S3 PUTs, {calls} presigning calls, {checks} follow-marker GETs");
    assert!((598..=601).contains(&puts), "{puts}");
    assert_eq!(calls, puts, "a presigning call a chunk");
}
