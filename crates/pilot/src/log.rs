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
    flush_due, split_chunks, CheckPace, LiveLog, FOLLOWED_FLUSH, IDLE_FLUSH, LIVE_MAX_BYTES,
    MAX_CHUNKS_PER_GRANT, MAX_CHUNK_BYTES,
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
    /// Whether the log has a live bucket: `None` until a write says.
    live_bucket: Option<bool>,
    /// When the live object was last written, and the log's end it held.
    last_live: Option<Duration>,
    live_up_to: u64,
    /// Whether the live object was ever written (its end is then written too).
    live_used: bool,
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
            live_bucket: None,
            last_live: None,
            live_up_to: 0,
            live_used: false,
        }
    }

    /// Whether the live object was ever written.
    pub fn live_used(&self) -> bool {
        self.live_used
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
        if self.followed && self.live_bucket != Some(false) {
            // `None`: no live bucket, or its write failed: chunks at the followed pace.
            if let Some(shipped) = self.step_live(now, sink, uploader).await {
                return shipped;
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
        self.flush(now, sink, uploader).await;
        true
    }

    async fn flush(&mut self, now: Duration, sink: &LogSink, uploader: &dyn Uploader) {
        self.last_flush = now;
        if let Err(e) = sink.flush_to(uploader).await {
            tracing::warn!(error = %e, "log upload failed; retrying with the next chunk");
        }
    }

    /// A followed step with the live object: chunks ship at the idle pace (or once
    /// [`LIVE_MAX_BYTES`] are pending), and in between the live object is rewritten at the
    /// followed pace with every byte not shipped yet. Returns whether anything shipped;
    /// `None` when there is no live bucket or the write failed (the caller ships chunks).
    async fn step_live(
        &mut self,
        now: Duration,
        sink: &LogSink,
        uploader: &dyn Uploader,
    ) -> Option<bool> {
        let pending = sink.pending_len();
        let since_flush = now.saturating_sub(self.last_flush);
        if pending >= LIVE_MAX_BYTES || flush_due(since_flush, pending, self.pace.idle) {
            self.flush(now, sink, uploader).await;
            return Some(true);
        }
        let end = sink.written_up_to();
        let too_soon = self
            .last_live
            .is_some_and(|at| now.saturating_sub(at) < self.pace.followed);
        if end <= self.live_up_to || too_soon {
            return Some(false);
        }
        let (start, bytes) = sink.unshipped();
        let body = LiveLog {
            start,
            ended: false,
            bytes,
        }
        .encode();
        match uploader.write_live(body).await {
            Ok(true) => {
                self.live_bucket = Some(true);
                self.live_used = true;
                self.last_live = Some(now);
                self.live_up_to = end;
                Some(true)
            }
            Ok(false) => {
                self.live_bucket = Some(false);
                None
            }
            Err(e) => {
                tracing::warn!(error = %e, "live log write failed; shipping a chunk instead");
                None
            }
        }
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

    /// The bytes not shipped yet, and the offset of the first (what the live object
    /// holds).
    pub fn unshipped(&self) -> (u64, Vec<u8>) {
        let state = self.lock();
        (state.offset, state.pending.clone())
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
                    Ok(()) => {
                        if pump.live_used() {
                            // A follower reading the live object learns that every byte is
                            // in the chunks (best effort: the API says so too).
                            let ended = LiveLog {
                                start: sink.shipped_up_to(),
                                ended: true,
                                bytes: Vec::new(),
                            };
                            if let Err(e) = uploader.write_live(ended.encode()).await {
                                tracing::warn!(error = %e, "could not mark the live log ended");
                            }
                        }
                        return None;
                    }
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
#[path = "log_tests.rs"]
mod tests;
