//! The job log's rules, shared by the pilot (which writes it) and the API (which reads it):
//! how big a chunk may be, when the pilot ships what it has (fast while someone follows,
//! slow otherwise), how a follower is signalled, and how a page of the log is cut so that
//! an answer stays under its byte budget. Pure functions: time is passed in.
//!
//! The arithmetic behind the numbers is in `docs/decisions/logs-and-artifacts.md`.

use std::time::Duration;

/// The largest log chunk the pilot writes: a bigger write is split. A reader may therefore
/// look for the chunk holding byte `n` no earlier than `n - MAX_CHUNK_BYTES`.
pub const MAX_CHUNK_BYTES: usize = 1024 * 1024;

/// How often pending bytes are shipped while someone follows the log.
pub const FOLLOWED_FLUSH: Duration = Duration::from_secs(1);

/// How often pending bytes are shipped while no one follows (a chunk is also shipped as
/// soon as [`MAX_CHUNK_BYTES`] are pending).
pub const IDLE_FLUSH: Duration = Duration::from_secs(60);

/// How often the pilot reads the follow marker ([`follow_marker_key`]) while no one
/// follows and the job has written since the last read: a follower who joins mid-run is
/// seen within this, so a line written after they joined reaches them within about this
/// plus [`FOLLOWED_FLUSH`]'s upload and their own poll.
pub const FOLLOW_CHECK_FAST: Duration = Duration::from_secs(1);

/// How often the pilot reads the follow marker otherwise, while bytes are pending (while
/// followed, or while nothing new was written since the last read).
pub const FOLLOW_CHECK: Duration = Duration::from_secs(5);

/// How long after a reader's last `GET /v1/jobs/{id}/logs` the log counts as followed:
/// twice [`FOLLOWER_API_EVERY`], so one late call of a follower that reads the live object
/// does not stop the live writes it reads.
pub const FOLLOW_WINDOW: Duration = Duration::from_secs(30);

/// How often one API process rewrites a job's follow marker while it is being read.
pub const FOLLOW_MARK_EVERY: Duration = Duration::from_secs(5);

/// The most log chunks one `POST /v1/jobs/{id}/log-uploads` presigns.
pub const MAX_CHUNKS_PER_GRANT: usize = 16;

/// The most bytes of log data one `GET /v1/jobs/{id}/logs` reads from S3.
pub const PAGE_READ_BYTES: usize = 4 * 1024 * 1024;

/// The most bytes the `data` of one answer may take in Lambda's response: JSON-escaped
/// twice, once in the answer's body and once more when `lambda_http` carries that body as
/// a string in API Gateway's payload-v2 response (a `"` takes 4 bytes, a control byte 7).
/// With the rest of the answer and its headers it stays under 5 MB; Lambda's response
/// limit is 6 MB, 6,291,456 bytes
/// (<https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html>).
pub const PAGE_JSON_BYTES: usize = 4_800_000;

/// How long one `GET /v1/jobs/{id}/logs` may spend reading S3 before it answers what it
/// has (API Gateway gives up at 29 s).
pub const PAGE_TIME_BUDGET: Duration = Duration::from_secs(8);

/// How many chunks one `GET /v1/jobs/{id}/logs` reads at once.
pub const PAGE_READ_CONCURRENCY: usize = 16;

/// `logs/<job id>/following`: rewritten by the API while someone reads the log, read by the
/// pilot through a presigned URL. Its body is the time of the read, in Unix milliseconds.
/// It is not a chunk ([`super::pilot::log_chunk_offset`] is `None` for it).
pub fn follow_marker_key(job_id: &crate::JobId) -> String {
    format!("{}following", super::pilot::log_prefix(job_id))
}

/// Whether a follow marker written at `marked_at_ms` (Unix milliseconds) still says
/// someone follows at `now_ms`. A marker from the future (clock skew) counts as fresh.
pub fn is_followed(marked_at_ms: u64, now_ms: u64) -> bool {
    now_ms.saturating_sub(marked_at_ms) < FOLLOW_WINDOW.as_millis() as u64
}

/// How often the pilot reads the follow marker: [`FOLLOW_CHECK_FAST`] and
/// [`FOLLOW_CHECK`] by default (tests use shorter ones).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckPace {
    /// While no one follows and the job has written since the last read.
    pub fast: Duration,
    /// Otherwise, while bytes are pending.
    pub slow: Duration,
}

impl Default for CheckPace {
    fn default() -> Self {
        Self {
            fast: FOLLOW_CHECK_FAST,
            slow: FOLLOW_CHECK,
        }
    }
}

impl CheckPace {
    /// Whether the follow marker is read now, `since_check` after the last read: never
    /// while nothing is pending (the follow state only decides when pending bytes ship,
    /// and it is read as soon as there are some); at the fast pace while no one follows
    /// and new bytes were written since the last read (they are what a follower who just
    /// joined waits for); at the slow pace otherwise (followed: the log already ships
    /// every second; old bytes only: they were written before any new follower joined).
    pub fn due(
        &self,
        since_check: Duration,
        followed: bool,
        new_output: bool,
        pending: usize,
    ) -> bool {
        if pending == 0 {
            return false;
        }
        let interval = if !followed && new_output {
            self.fast
        } else {
            self.slow
        };
        since_check >= interval
    }
}

/// The flush interval for a log that is (or is not) followed.
pub fn flush_interval(followed: bool) -> Duration {
    if followed {
        FOLLOWED_FLUSH
    } else {
        IDLE_FLUSH
    }
}

/// When the pilot ships its pending bytes: at once when a full chunk is pending, else
/// when `interval` ([`flush_interval`]) has passed since the last shipment.
pub fn flush_due(since_last_flush: Duration, pending: usize, interval: Duration) -> bool {
    pending > 0 && (pending >= MAX_CHUNK_BYTES || since_last_flush >= interval)
}

/// Splits `len` pending bytes starting at `offset` into chunks of at most
/// [`MAX_CHUNK_BYTES`]: `(start offset, length)` each, in order.
pub fn split_chunks(offset: u64, len: usize) -> Vec<(u64, usize)> {
    let mut out = Vec::with_capacity(len.div_ceil(MAX_CHUNK_BYTES));
    let mut at = 0usize;
    while at < len {
        let n = (len - at).min(MAX_CHUNK_BYTES);
        out.push((offset + at as u64, n));
        at += n;
    }
    out
}

/// The `start-after` key from which a listing finds the chunk holding byte `offset`,
/// given that chunks are at most [`MAX_CHUNK_BYTES`] long (`None`: from the first).
pub fn list_start_after(prefix: &str, offset: u64) -> Option<String> {
    let back = MAX_CHUNK_BYTES as u64;
    (offset >= back).then(|| super::pilot::log_chunk_key(prefix, offset - back))
}

/// The most bytes the live object holds: while someone follows, the pilot rewrites it
/// every [`FOLLOWED_FLUSH`] with everything not yet shipped as chunks, and ships the chunks
/// once this much is pending (or at [`IDLE_FLUSH`]), so each rewrite stays a small PUT.
pub const LIVE_MAX_BYTES: usize = 256 * 1024;

/// The most bytes of the live object a reader reads: its header and [`LIVE_MAX_BYTES`],
/// with room to spare. The pilot never writes more; the object is written through a URL
/// that a job's own (hostile) code could use too, so a reader never reads it whole.
pub const LIVE_READ_BYTES: u64 = LIVE_MAX_BYTES as u64 + 4096;

/// How often a follower that reads the live object directly still asks the API: for the
/// job's state, a fresh live URL, and to keep the follow marker fresh (it counts for
/// [`FOLLOW_WINDOW`]).
pub const FOLLOWER_API_EVERY: Duration = Duration::from_secs(15);

/// `logs/<job id>/live` in the live bucket: the log's bytes not yet shipped as chunks,
/// rewritten every [`FOLLOWED_FLUSH`] while someone follows ([`LiveLog`]). Its key is fixed,
/// so one presigned PUT serves every rewrite while the URL lives, and one presigned GET
/// serves every read.
pub fn live_key(job_id: &crate::JobId) -> String {
    format!("{}live", super::pilot::log_prefix(job_id))
}

/// The live object's first line names its format.
const LIVE_MAGIC: &str = "sortie-live 1";

/// The live object: the log's bytes from `start`, and whether the pilot has shipped its
/// last byte (then `bytes` is empty and `start` is the log's end).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveLog {
    /// The log offset of `bytes[0]`.
    pub start: u64,
    /// Whether the log has ended (every byte is in its chunks).
    pub ended: bool,
    /// The bytes.
    pub bytes: Vec<u8>,
}

impl LiveLog {
    /// The object's body: a header line `sortie-live 1 <start> <0|1>`, then the bytes.
    pub fn encode(&self) -> Vec<u8> {
        let head = format!("{LIVE_MAGIC} {} {}\n", self.start, u8::from(self.ended));
        let mut out = Vec::with_capacity(head.len() + self.bytes.len());
        out.extend_from_slice(head.as_bytes());
        out.extend_from_slice(&self.bytes);
        out
    }

    /// Reads a body written by [`LiveLog::encode`]; `None` for anything else.
    pub fn decode(body: &[u8]) -> Option<Self> {
        let end = body.iter().position(|b| *b == b'\n')?;
        let head = std::str::from_utf8(&body[..end]).ok()?;
        let rest = head.strip_prefix(LIVE_MAGIC)?.strip_prefix(' ')?;
        let (start, ended) = rest.split_once(' ')?;
        let ended = match ended {
            "0" => false,
            "1" => true,
            _ => return None,
        };
        Some(Self {
            start: start.parse().ok()?,
            ended,
            bytes: body[end + 1..].to_vec(),
        })
    }

    /// What a reader at `offset` takes from it: the bytes from `offset` on, nothing new,
    /// or a gap (the object starts past `offset`: the bytes between are in the chunks).
    pub fn from_offset(&self, offset: u64) -> LiveRead<'_> {
        if self.start > offset {
            return LiveRead::Gap;
        }
        let skip = offset - self.start;
        match usize::try_from(skip) {
            Ok(skip) if skip < self.bytes.len() => LiveRead::Bytes(&self.bytes[skip..]),
            _ => LiveRead::Nothing,
        }
    }
}

/// What a reader at an offset takes from the live object ([`LiveLog::from_offset`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LiveRead<'a> {
    /// The bytes from the reader's offset on.
    Bytes(&'a [u8]),
    /// Nothing past the reader's offset.
    Nothing,
    /// The object starts past the reader's offset; read the chunks first.
    Gap,
}

/// One read of a page: `len` bytes of chunk number `chunk` (in the listing given to
/// [`plan_page`]) from byte `from` of that chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkRead {
    /// The chunk's index in the listing.
    pub chunk: usize,
    /// The first byte read, within the chunk.
    pub from: u64,
    /// How many bytes.
    pub len: u64,
    /// Whether the read is the whole chunk (a plain GET rather than a ranged one).
    pub whole: bool,
}

/// The reads that make a page from `offset`: chunks `(start, size)` in offset order
/// (from a listing), read contiguously from `offset` up to the first gap, at most
/// `budget` bytes. Chunks wholly before `offset` are skipped; a gap (a chunk not written
/// yet) ends the page.
pub fn plan_page(chunks: &[(u64, u64)], offset: u64, budget: u64) -> Vec<ChunkRead> {
    let mut out = Vec::new();
    let mut next = offset;
    let mut left = budget;
    for (i, &(start, size)) in chunks.iter().enumerate() {
        if left == 0 {
            break;
        }
        let end = start.saturating_add(size);
        if end <= next || size == 0 {
            continue;
        }
        if start > next {
            break;
        }
        let from = next - start;
        let len = (size - from).min(left);
        out.push(ChunkRead {
            chunk: i,
            from,
            len,
            whole: from == 0 && len == size,
        });
        next += len;
        left -= len;
    }
    out
}

/// How many bytes of `data` a page answers: as many as fit in `json_budget` bytes once
/// JSON-escaped twice ([`PAGE_JSON_BYTES`]; invalid UTF-8 counted as its replacement
/// character), ending on a
/// character boundary. When `complete` is false (more may come), an incomplete UTF-8
/// sequence at the very end is held back for the next page, so a character split across
/// two chunks is never replaced.
pub fn page_cut(data: &[u8], json_budget: usize, complete: bool) -> usize {
    let mut used = 0usize;
    let mut at = 0usize;
    while at < data.len() {
        let (width, escaped) = match utf8_width(&data[at..]) {
            Utf8::Char(w) => (w, escaped_len(&data[at..at + w])),
            Utf8::Incomplete if !complete => break,
            // Invalid, or cut short at the very end of a complete log: one U+FFFD.
            Utf8::Incomplete | Utf8::Invalid => (1, 3),
        };
        if used + escaped > json_budget {
            break;
        }
        used += escaped;
        at += width;
    }
    at
}

enum Utf8 {
    /// A whole character of this many bytes.
    Char(usize),
    /// The start of a character that the data ends in the middle of.
    Incomplete,
    /// Not UTF-8.
    Invalid,
}

fn utf8_width(rest: &[u8]) -> Utf8 {
    let want = match rest[0] {
        0x00..=0x7f => return Utf8::Char(1),
        0xc2..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf4 => 4,
        _ => return Utf8::Invalid,
    };
    let have = rest.len().min(want);
    match std::str::from_utf8(&rest[..have]) {
        Ok(_) => Utf8::Char(want),
        Err(e) if e.error_len().is_none() => Utf8::Incomplete,
        Err(_) => Utf8::Invalid,
    }
}

/// The length of one character's bytes JSON-escaped twice (serde_json's escaping, applied
/// to its own output): `"` is `\"` then `\\\"`, a newline `\n` then `\\n`, another
/// control byte `\u0001` then `\\u0001`; anything else is not escaped.
fn escaped_len(ch: &[u8]) -> usize {
    match ch {
        [b'"' | b'\\'] => 4,
        [b'\n' | b'\r' | b'\t' | 0x08 | 0x0c] => 3,
        [c] if *c < 0x20 => 7,
        other => other.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_live_object_reads_back_and_answers_bytes_nothing_or_a_gap() {
        let live = LiveLog {
            start: 100,
            ended: false,
            bytes: b"line one\nline\xfftwo\n".to_vec(),
        };
        assert_eq!(LiveLog::decode(&live.encode()), Some(live.clone()));
        assert_eq!(live.from_offset(99), LiveRead::Gap);
        assert_eq!(live.from_offset(100), LiveRead::Bytes(&live.bytes[..]));
        assert_eq!(live.from_offset(109), LiveRead::Bytes(&live.bytes[9..]));
        assert_eq!(live.from_offset(119), LiveRead::Nothing);
        assert_eq!(live.from_offset(500), LiveRead::Nothing);
        let ended = LiveLog {
            start: 119,
            ended: true,
            bytes: Vec::new(),
        };
        assert_eq!(LiveLog::decode(&ended.encode()), Some(ended));
        for bad in [
            &b""[..],
            b"sortie-live 1 100 0",
            b"sortie-live 2 100 0\n",
            b"sortie-live 1 x 0\n",
            b"sortie-live 1 100 2\n",
            b"{\"start\": 1}\n",
        ] {
            assert_eq!(LiveLog::decode(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_full_chunk_ships_at_once_and_otherwise_the_follow_state_sets_the_pace() {
        let s = Duration::from_secs;
        let (followed, idle) = (flush_interval(true), flush_interval(false));
        assert!(
            !flush_due(s(100), 0, followed),
            "nothing pending: nothing shipped"
        );
        assert!(flush_due(s(0), MAX_CHUNK_BYTES, idle));
        assert!(flush_due(s(1), 10, followed));
        assert!(!flush_due(s(1), 10, idle));
        assert!(!flush_due(s(59), 10, idle));
        assert!(flush_due(s(60), 10, idle));
    }

    #[test]
    fn the_marker_is_read_every_second_while_an_unfollowed_job_writes() {
        let pace = CheckPace::default();
        let ms = Duration::from_millis;
        assert!(!pace.due(ms(999), false, true, 10));
        assert!(pace.due(ms(1000), false, true, 10));
        assert!(!pace.due(ms(4999), false, false, 10), "old bytes only");
        assert!(pace.due(ms(5000), false, false, 10));
        assert!(!pace.due(ms(4999), true, true, 10), "followed: slow");
        assert!(pace.due(ms(5000), true, true, 10));
        assert!(!pace.due(ms(60_000), false, true, 0), "nothing pending");
    }

    #[test]
    fn a_marker_counts_for_the_follow_window() {
        let w = FOLLOW_WINDOW.as_millis() as u64;
        assert!(is_followed(1_000, 1_000 + w - 1));
        assert!(!is_followed(1_000, 1_000 + w));
        assert!(
            is_followed(5_000, 1_000),
            "a marker from the future is fresh"
        );
        let id = crate::JobId::from("01J");
        assert_eq!(follow_marker_key(&id), "logs/01J/following");
        assert_eq!(
            super::super::pilot::log_chunk_offset("logs/01J/", &follow_marker_key(&id)),
            None
        );
    }

    #[test]
    fn a_page_reads_from_inside_a_chunk_and_stops_at_a_gap() {
        let chunks = [(0, 10), (10, 10), (25, 5)];
        assert_eq!(
            plan_page(&chunks, 4, 100),
            [
                ChunkRead {
                    chunk: 0,
                    from: 4,
                    len: 6,
                    whole: false
                },
                ChunkRead {
                    chunk: 1,
                    from: 0,
                    len: 10,
                    whole: true
                },
            ]
        );
        assert_eq!(
            plan_page(&chunks, 0, 12),
            [
                ChunkRead {
                    chunk: 0,
                    from: 0,
                    len: 10,
                    whole: true
                },
                ChunkRead {
                    chunk: 1,
                    from: 0,
                    len: 2,
                    whole: false
                },
            ]
        );
        assert!(plan_page(&chunks, 20, 100).is_empty(), "a gap at 20");
        assert_eq!(plan_page(&chunks, 26, 100)[0].from, 1);
    }

    #[test]
    fn the_listing_starts_one_chunk_back() {
        assert_eq!(list_start_after("p/", 10), None);
        let key = list_start_after("p/", 3 * MAX_CHUNK_BYTES as u64 + 7).unwrap();
        assert_eq!(
            super::super::pilot::log_chunk_offset("p/", &key),
            Some(2 * MAX_CHUNK_BYTES as u64 + 7)
        );
    }

    #[test]
    fn a_cut_keeps_split_characters_whole_and_counts_escapes() {
        let text = "añb".as_bytes();
        assert_eq!(page_cut(&text[..2], 100, false), 1, "ñ's first byte waits");
        assert_eq!(
            page_cut(&text[..2], 100, true),
            2,
            "a complete log ends as it is"
        );
        assert_eq!(
            page_cut(b"\x01\x01", 7, true),
            1,
            "a control byte escapes to 6, then 7"
        );
        assert_eq!(page_cut(b"\"\"\"", 8, true), 2, "a quote to 2, then 4");
        assert_eq!(page_cut(b"\n\n", 5, true), 1, "a newline to 2, then 3");
        assert_eq!(
            page_cut(b"ab\xffcd", 100, false),
            5,
            "invalid bytes are answered"
        );
    }

    proptest! {
        /// A follower at any offset that takes what the live object gives, and reads the
        /// chunks on a gap, ends with the log as written: never a byte twice, never one lost.
        #[test]
        fn a_follower_of_the_live_object_loses_and_repeats_nothing(
            log in proptest::collection::vec(any::<u8>(), 0..200),
            shipped_at in proptest::collection::vec(0usize..200, 0..6),
            reader_at in proptest::collection::vec(0usize..200, 1..8),
        ) {
            // The pilot ships chunks at increasing points; the live object holds what
            // follows the last shipment, up to what is written when the reader looks.
            let mut cuts: Vec<usize> = shipped_at.into_iter().map(|c| c.min(log.len())).collect();
            cuts.sort_unstable();
            let mut got: Vec<u8> = Vec::new();
            let mut seen = 0usize;
            for (i, look) in reader_at.iter().enumerate() {
                let written = (*look).min(log.len()).max(seen);
                seen = written;
                let shipped = cuts.get(i).copied().unwrap_or(0).min(written);
                let live = LiveLog { start: shipped as u64, ended: false, bytes: log[shipped..written].to_vec() };
                let at = got.len() as u64;
                match LiveLog::decode(&live.encode()).unwrap().from_offset(at) {
                    LiveRead::Bytes(b) => got.extend_from_slice(b),
                    LiveRead::Nothing => {}
                    // the chunks hold everything before the live object's start
                    LiveRead::Gap => got.extend_from_slice(&log[got.len()..shipped]),
                }
                prop_assert_eq!(&got[..], &log[..got.len()]);
            }
            let end = LiveLog { start: log.len() as u64, ended: true, bytes: Vec::new() };
            if end.from_offset(got.len() as u64) == LiveRead::Gap {
                got.extend_from_slice(&log[got.len()..]);
            }
            prop_assert_eq!(got, log);
        }

        /// Whatever the state, a pending byte waits at most the slow interval for a read,
        /// and a new one written while no one follows at most the fast one; nothing
        /// pending is never read for.
        #[test]
        fn a_check_is_never_later_than_its_interval_nor_earlier_than_the_fast_one(
            since_ms in 0u64..20_000,
            followed in any::<bool>(),
            new_output in any::<bool>(),
            pending in 0usize..10,
        ) {
            let pace = CheckPace::default();
            let since = Duration::from_millis(since_ms);
            let due = pace.due(since, followed, new_output, pending);
            if pending == 0 || since < FOLLOW_CHECK_FAST {
                prop_assert!(!due);
            } else if since >= FOLLOW_CHECK || (!followed && new_output) {
                prop_assert!(due);
            } else {
                prop_assert!(!due);
            }
        }

        #[test]
        fn chunks_cover_the_bytes_in_order_and_are_capped(offset in 0u64..1 << 40, len in 0usize..5 * MAX_CHUNK_BYTES) {
            let chunks = split_chunks(offset, len);
            let mut at = offset;
            for &(start, n) in &chunks {
                prop_assert_eq!(start, at);
                prop_assert!(n > 0 && n <= MAX_CHUNK_BYTES);
                at += n as u64;
            }
            prop_assert_eq!(at, offset + len as u64);
        }

        #[test]
        fn a_cut_page_fits_its_budget_and_loses_nothing(
            data in proptest::collection::vec(any::<u8>(), 0..400),
            budget in 0usize..600,
            complete in any::<bool>(),
        ) {
            let cut = page_cut(&data, budget, complete);
            prop_assert!(cut <= data.len());
            // As Lambda returns it: escaped in the body, then the body escaped again.
            let twice = |bytes: &[u8]| {
                let once = serde_json::to_string(&String::from_utf8_lossy(bytes)).unwrap();
                serde_json::to_string(&once[1..once.len() - 1]).unwrap().len() - 2
            };
            prop_assert!(twice(&data[..cut]) <= budget, "{} > {}", twice(&data[..cut]), budget);
            if let Ok(text) = std::str::from_utf8(&data) {
                // Valid text: the cut is on a character boundary, nothing replaced, and
                // the next character would not have fitted (the count is exact).
                prop_assert!(std::str::from_utf8(&data[..cut]).is_ok());
                if let Some(next) = text[cut..].chars().next() {
                    let more = twice(&data[..cut + next.len_utf8()]);
                    prop_assert!(more > budget, "{more} <= {budget}");
                }
            }
        }

        #[test]
        fn pages_concatenate_to_the_log(sizes in proptest::collection::vec(1u64..50, 1..20), budget in 1u64..80) {
            let mut chunks = vec![];
            let mut at = 0;
            for s in sizes { chunks.push((at, s)); at += s; }
            let mut offset = 0;
            let mut pages = 0;
            while offset < at {
                let reads = plan_page(&chunks, offset, budget);
                prop_assert!(!reads.is_empty());
                let got: u64 = reads.iter().map(|r| r.len).sum();
                prop_assert!(got <= budget);
                for r in &reads { prop_assert_eq!(chunks[r.chunk].0 + r.from, offset); offset += r.len; }
                pages += 1;
                prop_assert!(pages < 10_000);
            }
            prop_assert_eq!(offset, at);
        }
    }
}
