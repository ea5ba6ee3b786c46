//! The job log: every byte goes to stdout (CloudWatch) and to S3 as ordered chunks.
//!
//! [`LogSink`] collects bytes; [`LogShipper`] uploads what has accumulated at
//! least every [`FLUSH_INTERVAL`] and once more when it is finished. Each
//! chunk is stored at [`log_chunk_key`]`(prefix, start offset)`, so chunks
//! never overlap and concatenating them in key order gives the log. A failed
//! upload keeps its bytes for the next one, which then starts at the same
//! offset (overwriting any partial success under the same key).

use std::io::Write;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use sortie_core::spec::{log_chunk_key, ArtifactLocation};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::objects::{ObjectRef, ObjectStore};

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
        Self {
            state: Arc::new(Mutex::new(State {
                at_line_start: true,
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

    /// Puts back bytes taken at `offset` whose upload failed.
    fn restore(&self, offset: u64, mut bytes: Vec<u8>) {
        let mut state = self.lock();
        bytes.append(&mut state.pending);
        state.pending = bytes;
        state.offset = offset;
    }

    /// Ships the pending bytes as one chunk. On failure they stay pending.
    pub async fn flush_to(
        &self,
        store: &dyn ObjectStore,
        location: &ArtifactLocation,
    ) -> Result<(), String> {
        let Some((offset, bytes)) = self.take() else {
            return Ok(());
        };
        let object = ObjectRef::new(
            Some(&location.region),
            &location.bucket,
            &log_chunk_key(&location.prefix, offset),
        );
        match store
            .put(&object, bytes.clone(), "text/plain; charset=utf-8")
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
    task: JoinHandle<()>,
}

impl LogShipper {
    /// Starts shipping `sink` to `location` every `interval`.
    pub fn spawn(
        sink: LogSink,
        store: Arc<dyn ObjectStore>,
        location: ArtifactLocation,
        interval: Duration,
    ) -> Self {
        let (stop, mut stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let mut ticker = tokio::time::interval(interval);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = ticker.tick() => {
                        if let Err(e) = sink.flush_to(store.as_ref(), &location).await {
                            tracing::warn!(error = %e, "log upload failed; retrying with the next chunk");
                        }
                    }
                    _ = &mut stopped => break,
                }
            }
            // The final flush: a few tries, since these are the log's last lines.
            for attempt in 1..=4u32 {
                match sink.flush_to(store.as_ref(), &location).await {
                    Ok(()) => return,
                    Err(e) => {
                        tracing::warn!(error = %e, attempt, "final log upload failed");
                        tokio::time::sleep(Duration::from_millis(250 * u64::from(attempt))).await;
                    }
                }
            }
            tracing::error!("the end of the log could not be uploaded; it is on stdout only");
        });
        Self {
            stop: Some(stop),
            task,
        }
    }

    /// Stops the ticker, ships everything still pending and waits for it.
    pub async fn finish(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Err(e) = (&mut self.task).await {
            tracing::error!(error = %e, "the log shipper stopped unexpectedly");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::MemoryObjects;

    fn location() -> ArtifactLocation {
        ArtifactLocation {
            bucket: "logs".into(),
            prefix: "logs/j1/".into(),
            region: "us-east-1".into(),
        }
    }

    fn joined(store: &MemoryObjects) -> String {
        store
            .list("logs", "logs/j1/")
            .into_iter()
            .map(|(_, v)| String::from_utf8(v).unwrap())
            .collect()
    }

    #[tokio::test]
    async fn chunks_are_keyed_by_start_offset_and_concatenate_to_the_log() {
        let store = MemoryObjects::new();
        let sink = LogSink::new(false);
        sink.write(b"Initializing the backend...\n");
        sink.flush_to(&store, &location()).await.unwrap();
        sink.flush_to(&store, &location()).await.unwrap(); // nothing pending: no empty chunk
        sink.write(b"partial");
        sink.line("sortie-runner: done");
        sink.flush_to(&store, &location()).await.unwrap();
        let keys: Vec<String> = store
            .list("logs", "logs/j1/")
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(
            keys,
            ["logs/j1/000000000000.log", "logs/j1/000000000028.log"]
        );
        assert_eq!(
            joined(&store),
            "Initializing the backend...\npartial\nsortie-runner: done\n"
        );
    }

    #[tokio::test]
    async fn a_failed_upload_is_retried_from_the_same_offset() {
        let store = MemoryObjects::new();
        let sink = LogSink::new(false);
        sink.write(b"one\n");
        sink.flush_to(&store, &location()).await.unwrap();
        sink.write(b"two\n");
        store.fail_next_puts(1);
        assert!(sink.flush_to(&store, &location()).await.is_err());
        sink.write(b"three\n");
        sink.flush_to(&store, &location()).await.unwrap();
        let keys: Vec<String> = store
            .list("logs", "logs/j1/")
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(
            keys,
            ["logs/j1/000000000000.log", "logs/j1/000000000004.log"]
        );
        assert_eq!(joined(&store), "one\ntwo\nthree\n");
    }

    #[tokio::test]
    async fn the_shipper_flushes_on_a_timer_and_at_the_end() {
        let store = Arc::new(MemoryObjects::new());
        let sink = LogSink::new(false);
        let shipper = LogShipper::spawn(
            sink.clone(),
            store.clone(),
            location(),
            Duration::from_millis(20),
        );
        sink.write(b"early\n");
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(joined(&store), "early\n", "shipped by the timer");
        sink.write(b"late\n");
        shipper.finish().await;
        assert_eq!(joined(&store), "early\nlate\n");
    }
}
