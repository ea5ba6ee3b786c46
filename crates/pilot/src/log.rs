//! The job log: every byte goes to stdout (CloudWatch) and to S3 as ordered chunks,
//! each through a URL the API presigns ([`Uploader`]).
//!
//! [`LogSink`] collects bytes; [`LogShipper`] uploads what has accumulated at
//! least every [`FLUSH_INTERVAL`] and once more when it is finished. Each
//! chunk is named by its start offset (12 digits; the API stores it at
//! `logs/<job id>/<offset>.log`, see `sortie_core::protocol::pilot::upload_key`), so chunks
//! never overlap and concatenating them in key order gives the log. A failed
//! upload keeps its bytes for the next one, which then starts at the same
//! offset (overwriting any partial success under the same key).

use std::io::Write;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use sortie_core::protocol::pilot::UploadKind;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::upload::Uploader;

/// How often buffered bytes are shipped (the contract says at least every 2 s).
pub const FLUSH_INTERVAL: Duration = Duration::from_secs(1);

#[derive(Debug, Default)]
struct State {
    /// Bytes not yet shipped.
    pending: Vec<u8>,
    /// The log offset of `pending[0]`.
    offset: u64,
    /// Whether the last byte written ended a line (true before any byte).
    at_line_start: bool,
}

/// The job log's writer, shared by every thread that produces output.
#[derive(Debug, Clone)]
pub struct LogSink {
    state: Arc<Mutex<State>>,
    echo: bool,
}

impl LogSink {
    /// A new, empty log; `echo` copies every byte to stdout as well.
    pub fn new(echo: bool) -> Self {
        Self::starting_at(echo, 0)
    }

    /// A log whose first byte is the job log's byte `offset`: the second phase of a
    /// reviewed job continues the first phase's log, so its chunks are named from there
    /// and never replace the first phase's.
    pub fn starting_at(echo: bool, offset: u64) -> Self {
        Self {
            state: Arc::new(Mutex::new(State {
                at_line_start: true,
                offset,
                ..State::default()
            })),
            echo,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Appends raw bytes (a tool's output).
    pub fn write(&self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        let mut state = self.lock();
        // Echo under the lock, so stdout and the shipped log have the same order.
        if self.echo {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(bytes).and_then(|()| out.flush());
        }
        state.pending.extend_from_slice(bytes);
        state.at_line_start = bytes.ends_with(b"\n");
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

    /// Takes the pending bytes and their start offset, if there are any.
    fn take(&self) -> Option<(u64, Vec<u8>)> {
        let mut state = self.lock();
        if state.pending.is_empty() {
            return None;
        }
        let bytes = std::mem::take(&mut state.pending);
        let offset = state.offset;
        state.offset += bytes.len() as u64;
        Some((offset, bytes))
    }

    /// The offset of the first byte not yet shipped.
    pub fn shipped_up_to(&self) -> u64 {
        self.lock().offset
    }

    /// Puts back bytes taken at `offset` whose upload failed.
    fn restore(&self, offset: u64, mut bytes: Vec<u8>) {
        let mut state = self.lock();
        bytes.append(&mut state.pending);
        state.pending = bytes;
        state.offset = offset;
    }

    /// Ships the pending bytes as one chunk. On failure they stay pending.
    pub async fn flush_to(&self, uploader: &dyn Uploader) -> Result<(), String> {
        let Some((offset, bytes)) = self.take() else {
            return Ok(());
        };
        let name = format!("{offset:012}");
        match uploader
            .upload(UploadKind::Log, Some(&name), bytes.clone())
            .await
        {
            Ok(()) => Ok(()),
            Err(e) => {
                self.restore(offset, bytes);
                Err(e)
            }
        }
    }
}

/// The background task that ships a [`LogSink`] to S3.
pub struct LogShipper {
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<Option<String>>,
}

impl LogShipper {
    /// Starts shipping `sink` through `uploader` every `interval`.
    pub fn spawn(sink: LogSink, uploader: Arc<dyn Uploader>, interval: Duration) -> Self {
        let (stop, mut stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let mut ticker = tokio::time::interval(interval);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = ticker.tick() => {
                        if let Err(e) = sink.flush_to(uploader.as_ref()).await {
                            tracing::warn!(error = %e, "log upload failed; retrying with the next chunk");
                        }
                    }
                    _ = &mut stopped => break,
                }
            }
            // The final flush: a few tries, since these are the log's last lines.
            let mut last = String::new();
            for attempt in 1..=4u32 {
                match sink.flush_to(uploader.as_ref()).await {
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
        let shipper = LogShipper::spawn(sink.clone(), store.clone(), Duration::from_millis(20));
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
        let shipper = LogShipper::spawn(sink.clone(), store.clone(), Duration::from_secs(60));
        tokio::time::sleep(Duration::from_millis(20)).await;
        sink.write(b"lost\n");
        store.fail_next(10);
        let problem = shipper.finish().await.expect("a problem");
        assert!(problem.contains("from byte 0"), "{problem}");
    }
}
