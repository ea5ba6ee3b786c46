//! The job log: every byte goes to stdout (CloudWatch) and to S3 as ordered chunks,
//! each through a URL the API presigns ([`Uploader`]).
//!
//! [`LogSink`] collects bytes; [`LogShipper`] ships them on the pace of a [`Pump`]:
//! every second while someone follows the log, every 60 s otherwise, and at once when a
//! full chunk (1 MiB) is pending ([`sortie_core::protocol::logs`]). The follow marker is
//! read every second while no one follows and new bytes arrive, so a follower who joins
//! mid-run gets the lines written after they joined within about 2 s. Each chunk is named
//! by its start offset (12 digits; the API stores it at `logs/<job id>/<offset>.log`, see
//! `sortie_core::protocol::pilot::upload_key`), so chunks never overlap and
//! concatenating them in key order gives the log. A failed upload keeps its bytes for the
//! next one, which then starts at the same offset (overwriting any partial success under
//! the same key).
//!
//! Nothing leaves unscrubbed: every byte written passes through a [`StreamScrubber`] with
//! the process's [`Secrets`] before it is echoed to stdout or queued for S3, so a secret
//! cut across two writes (two reads of Terraform's pipe) is still caught; the scrubber
//! holds back at most (longest secret − 1) bytes until the next write or the end
//! ([`LogSink::end`], called by [`LogShipper::finish`]). [`ScrubbedStderr`] does the same
//! for the pilot's own diagnostics, one whole line at a time.

use std::io::Write;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use sortie_core::protocol::logs::{
    flush_due, split_chunks, CheckPace, FOLLOWED_FLUSH, IDLE_FLUSH, MAX_CHUNKS_PER_GRANT,
    MAX_CHUNK_BYTES,
};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::scrub::{Secrets, StreamScrubber};
use crate::upload::Uploader;

/// How often the shipper looks at its [`Pump`].
pub const TICK: Duration = Duration::from_millis(250);

/// The most bytes one flush ships (one presigning call's worth of chunks).
const MAX_FLUSH_BYTES: usize = MAX_CHUNKS_PER_GRANT * MAX_CHUNK_BYTES;

/// The shipping pace: how often while followed, while not, and when the follow marker is
/// read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pace {
    /// The flush interval while someone follows.
    pub followed: Duration,
    /// The flush interval otherwise.
    pub idle: Duration,
    /// When the follow state is read.
    pub check: CheckPace,
}

impl Default for Pace {
    fn default() -> Self {
        Self {
            followed: FOLLOWED_FLUSH,
            idle: IDLE_FLUSH,
            check: CheckPace::default(),
        }
    }
}

/// When to read the follow state and when to ship, on a clock given to it (`now` is the
/// time since the log started), so the pace is tested without waiting.
#[derive(Debug, Clone)]
pub struct Pump {
    pace: Pace,
    last_flush: Duration,
    last_check: Option<Duration>,
    /// The log's end offset at the last read of the follow state.
    checked_up_to: u64,
    followed: bool,
}

impl Pump {
    /// A pump at `pace`, nothing shipped yet; the follow state is read at the first step.
    pub fn new(pace: Pace) -> Self {
        Self {
            pace,
            last_flush: Duration::ZERO,
            last_check: None,
            checked_up_to: 0,
            followed: false,
        }
    }

    /// Whether the log was followed at the last read.
    pub fn followed(&self) -> bool {
        self.followed
    }

    /// One step at `now`: reads the follow state when due ([`CheckPace::due`]; always at
    /// the first step), then ships when due. Returns whether it shipped; an upload error
    /// is logged and the bytes stay pending.
    pub async fn step(&mut self, now: Duration, sink: &LogSink, uploader: &dyn Uploader) -> bool {
        let end = sink.written_up_to();
        let due = match self.last_check {
            None => true,
            Some(at) => self.pace.check.due(
                now.saturating_sub(at),
                self.followed,
                end > self.checked_up_to,
                sink.pending_len(),
            ),
        };
        if due {
            self.last_check = Some(now);
            self.checked_up_to = end;
            if let Some(followed) = uploader.followed().await {
                self.followed = followed;
            }
        }
        let interval = if self.followed {
            self.pace.followed
        } else {
            self.pace.idle
        };
        let since = now.saturating_sub(self.last_flush);
        if !flush_due(since, sink.pending_len(), interval) {
            return false;
        }
        self.last_flush = now;
        if let Err(e) = sink.flush_to(uploader).await {
            tracing::warn!(error = %e, "log upload failed; retrying with the next chunk");
        }
        true
    }
}

#[derive(Debug, Default)]
struct State {
    /// Bytes not yet shipped.
    pending: Vec<u8>,
    /// The log offset of `pending[0]`.
    offset: u64,
    /// Whether the last byte written ended a line (true before any byte).
    at_line_start: bool,
    /// The tail of what was written that may still become a secret.
    scrubber: StreamScrubber,
}

/// The job log's writer, shared by every thread that produces output.
#[derive(Debug, Clone)]
pub struct LogSink {
    state: Arc<Mutex<State>>,
    echo: bool,
    secrets: Secrets,
}

impl LogSink {
    /// A new, empty log scrubbed of the process's [`Secrets`]; `echo` copies every byte
    /// to stdout as well.
    pub fn new(echo: bool) -> Self {
        Self::starting_at(echo, 0)
    }

    /// A log whose first byte is the job log's byte `offset`: the second phase of a
    /// reviewed job continues the first phase's log, so its chunks are named from there
    /// and never replace the first phase's. Scrubbed of the process's [`Secrets`].
    pub fn starting_at(echo: bool, offset: u64) -> Self {
        Self::scrubbed(echo, offset, Secrets::process())
    }

    /// A log starting at `offset`, scrubbed of `secrets` (a set that may grow while the
    /// log is written).
    pub fn scrubbed(echo: bool, offset: u64, secrets: Secrets) -> Self {
        Self {
            state: Arc::new(Mutex::new(State {
                at_line_start: true,
                offset,
                ..State::default()
            })),
            echo,
            secrets,
        }
    }

    /// The secrets this log is scrubbed of.
    pub fn secrets(&self) -> &Secrets {
        &self.secrets
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Appends raw bytes (a tool's output): scrubbed, then echoed and queued; a tail that
    /// may still become a secret waits for the next write or [`LogSink::end`].
    pub fn write(&self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        let mut state = self.lock();
        let out = state.scrubber.push(&self.secrets.read(), bytes);
        self.emit(&mut state, &out);
        state.at_line_start = bytes.ends_with(b"\n");
    }

    /// The end of the log: lets out the tail the scrubber held back (scrubbed).
    pub fn end(&self) {
        let mut state = self.lock();
        let out = state.scrubber.finish(&self.secrets.read());
        self.emit(&mut state, &out);
    }

    /// Echoes and queues scrubbed bytes, under the lock, so stdout and the shipped log have
    /// the same order.
    fn emit(&self, state: &mut State, out: &[u8]) {
        if out.is_empty() {
            return;
        }
        if self.echo {
            let mut stdout = std::io::stdout().lock();
            let _ = stdout.write_all(out).and_then(|()| stdout.flush());
        }
        state.pending.extend_from_slice(out);
    }

    /// Appends `text` as a line of its own (starting a new line first if needed).
    pub fn line(&self, text: &str) {
        let needs_newline = !self.lock().at_line_start;
        let mut bytes = Vec::with_capacity(text.len() + 2);
        if needs_newline {
            bytes.push(b'\n');
        }
        bytes.extend_from_slice(text.as_bytes());
        bytes.push(b'\n');
        self.write(&bytes);
    }

    /// Takes at most `max` pending bytes and their start offset, if there are any.
    fn take(&self, max: usize) -> Option<(u64, Vec<u8>)> {
        let mut state = self.lock();
        if state.pending.is_empty() {
            return None;
        }
        let bytes = if state.pending.len() <= max {
            std::mem::take(&mut state.pending)
        } else {
            state.pending.drain(..max).collect()
        };
        let offset = state.offset;
        state.offset += bytes.len() as u64;
        Some((offset, bytes))
    }

    /// How many bytes wait to be shipped.
    pub fn pending_len(&self) -> usize {
        self.lock().pending.len()
    }

    /// The offset of the first byte not yet shipped.
    pub fn shipped_up_to(&self) -> u64 {
        self.lock().offset
    }

    /// The offset just past the last byte written (shipped or not).
    pub fn written_up_to(&self) -> u64 {
        let state = self.lock();
        state.offset + state.pending.len() as u64
    }

    /// Puts back bytes taken at `offset` whose upload failed.
    fn restore(&self, offset: u64, mut bytes: Vec<u8>) {
        let mut state = self.lock();
        bytes.append(&mut state.pending);
        state.pending = bytes;
        state.offset = offset;
    }

    /// Ships pending bytes (at most 16 MiB) as chunks of at most 1 MiB, in one batch.
    /// On failure they stay pending.
    pub async fn flush_to(&self, uploader: &dyn Uploader) -> Result<(), String> {
        let Some((offset, bytes)) = self.take(MAX_FLUSH_BYTES) else {
            return Ok(());
        };
        let chunks = split_chunks(offset, bytes.len())
            .into_iter()
            .map(|(at, len)| {
                let from = (at - offset) as usize;
                (at, bytes[from..from + len].to_vec())
            })
            .collect();
        match uploader.upload_log(chunks).await {
            Ok(()) => Ok(()),
            Err(e) => {
                self.restore(offset, bytes);
                Err(e)
            }
        }
    }

    /// Ships everything pending, flush after flush (a bounded number of them).
    pub async fn flush_all(&self, uploader: &dyn Uploader) -> Result<(), String> {
        for _ in 0..64 {
            self.flush_to(uploader).await?;
            if self.pending_len() == 0 {
                return Ok(());
            }
        }
        Err(format!(
            "{} bytes still pending after 64 flushes",
            self.pending_len()
        ))
    }
}

/// The pilot's stderr (its own diagnostics, JSON lines that go to CloudWatch), scrubbed of
/// the process's [`Secrets`]. The tracing subscriber writes each event whole in one
/// `write_all`, so each write is scrubbed whole (nothing is held back, and a JSON-escaped
/// value is one of the forms looked for).
#[derive(Debug, Clone, Copy, Default)]
pub struct ScrubbedStderr;

impl Write for ScrubbedStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let out = Secrets::process().scrub(buf);
        std::io::stderr().lock().write_all(&out)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

/// The background task that ships a [`LogSink`] to S3.
pub struct LogShipper {
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<Option<String>>,
}

impl LogShipper {
    /// Starts shipping `sink` through `uploader` at `pace`.
    pub fn spawn(sink: LogSink, uploader: Arc<dyn Uploader>, pace: Pace) -> Self {
        let (stop, mut stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let started = tokio::time::Instant::now();
            let mut pump = Pump::new(pace);
            let mut ticker = tokio::time::interval(TICK.min(pace.followed));
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = ticker.tick() => {
                        pump.step(started.elapsed(), &sink, uploader.as_ref()).await;
                    }
                    _ = &mut stopped => break,
                }
            }
            // What the scrubber held back, then the final flush: a few tries, since these
            // are the log's last lines.
            sink.end();
            let mut last = String::new();
            for attempt in 1..=4u32 {
                match sink.flush_all(uploader.as_ref()).await {
                    Ok(()) => return None,
                    Err(e) => {
                        tracing::warn!(error = %e, attempt, "final log upload failed");
                        last = e;
                        tokio::time::sleep(Duration::from_millis(250 * u64::from(attempt))).await;
                    }
                }
            }
            tracing::error!("the end of the log could not be uploaded; it is on stdout only");
            Some(format!(
                "the log from byte {} on was not uploaded (it is on the task's stdout only): {last}",
                sink.shipped_up_to()
            ))
        });
        Self {
            stop: Some(stop),
            task,
        }
    }

    /// Stops the ticker, ships everything still pending and waits for it. Returns what
    /// could not be uploaded, if anything.
    pub async fn finish(mut self) -> Option<String> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match (&mut self.task).await {
            Ok(problem) => problem,
            Err(e) => {
                tracing::error!(error = %e, "the log shipper stopped unexpectedly");
                Some(format!("the log shipper stopped unexpectedly: {e}"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
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
}
