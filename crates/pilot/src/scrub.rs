//! Secret values kept out of everything that leaves the job's container: the job log
//! (its S3 chunks and the pilot's stdout, which goes to CloudWatch), the pilot's own
//! diagnostics (stderr), the exit report and `outputs.json`.
//!
//! Pure (no I/O):
//!
//! - [`forms`]: the byte strings a log may show one secret value as: the value itself;
//!   its JSON-escaped forms (serde's, and Go's `encoding/json`, which Terraform's `-json`
//!   output and its providers use: `<`, `>`, `&` as `\u003c`, ...); its Go-quoted form
//!   (`strconv.Quote`, how Terraform's plan renders a string, with `${` as `$${`); and,
//!   for a multi-line value, each line of at least [`SHORT_VALUE_CHARS`] characters
//!   (Terraform renders a multi-line string as a heredoc, one line at a time);
//! - [`Patterns`]: every form of every secret, replaced by [`MARKER`], leftmost first and
//!   longest first where two start at the same byte;
//! - [`StreamScrubber`]: the same replacement over a stream cut anywhere (a secret split
//!   across two writes or two reads is still caught). It holds back a tail only while
//!   that tail could be the start of a pattern, so at most (longest pattern − 1) bytes,
//!   until the next write or [`StreamScrubber::finish`]; what it lets out, concatenated,
//!   is exactly [`Patterns::scrub`] of the whole input.
//!
//! [`Secrets`] is the set one process shares (the pilot runs one job per process): the job
//! log's sink, the stderr writer and the exit report all read it, and the run adds the
//! values as it learns them (the job token, the git credential, the platform's secrets,
//! the sensitive variables), before anything could print them.
//!
//! **Short values** are scrubbed too, whatever their length (fail closed): a secret of
//! one to three characters is replaced everywhere it appears, which can make the log hard
//! to read (the run warns, by name, when it has one). An empty value is not a secret.
//! The marker has a fixed length, so it never tells a value's length.

use std::sync::{Arc, OnceLock, RwLock};

/// What replaces a secret value: the plan view's marker (a fixed text, whatever the
/// value's length).
pub const MARKER: &str = sortie_core::plan::MARKER;

/// Values shorter than this (in characters) are still scrubbed, but the run warns that
/// they may erase ordinary text; a multi-line value's lines shorter than this are not
/// scrubbed on their own (the whole value still is).
pub const SHORT_VALUE_CHARS: usize = 4;

/// Every form a log or a JSON document may show `value` in (see the module's
/// documentation), distinct, the value itself first; none for an empty value.
pub fn forms(value: &str) -> Vec<String> {
    if value.is_empty() {
        return Vec::new();
    }
    let mut all = vec![value.to_string()];
    let serde = serde_json::to_string(value)
        .map(|quoted| quoted[1..quoted.len() - 1].to_string())
        .unwrap_or_default();
    let go_quoted = go_quote(value);
    let candidates = [
        serde,
        go_json(value),
        go_quoted.clone(),
        go_quoted.replace("${", "$${").replace("%{", "%%{"),
    ];
    all.extend(candidates);
    if value.contains('\n') {
        all.extend(
            value
                .split('\n')
                .map(|line| line.trim_end_matches('\r').trim())
                .filter(|line| line.chars().count() >= SHORT_VALUE_CHARS)
                .map(str::to_string),
        );
    }
    let mut seen = std::collections::BTreeSet::new();
    all.retain(|form| !form.is_empty() && seen.insert(form.clone()));
    all
}

/// Go's `encoding/json` string body (without the quotes): `\"`, `\\`, `\n`, `\r`, `\t`,
/// every other control character and `<`, `>`, `&`, U+2028, U+2029 as `\u00XX`/`\u20XX`.
fn go_json(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", c as u32))
            }
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// Go's `strconv.Quote` body (without the quotes), for the characters a secret holds in
/// practice: `\"`, `\\`, the C escapes, other ASCII control characters as `\xXX`, and
/// the line and paragraph separators as `\uXXXX`.
fn go_quote(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            '\u{2028}' | '\u{2029}' => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// The byte strings replaced by [`MARKER`]: every [`forms`] of every secret added.
#[derive(Clone, Default)]
pub struct Patterns {
    /// Longest first, distinct.
    patterns: Vec<Vec<u8>>,
    /// Whether some pattern starts with this byte.
    first: Vec<bool>,
}

impl std::fmt::Debug for Patterns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Patterns")
            .field("count", &self.patterns.len())
            .finish()
    }
}

impl Patterns {
    /// The patterns of `values` (each in every one of its [`forms`]).
    pub fn new<'a>(values: impl IntoIterator<Item = &'a str>) -> Self {
        let mut patterns = Self::default();
        patterns.add(values);
        patterns
    }

    /// Adds `values` (each in every one of its [`forms`]).
    pub fn add<'a>(&mut self, values: impl IntoIterator<Item = &'a str>) {
        for value in values {
            for form in forms(value) {
                let form = form.into_bytes();
                if !self.patterns.contains(&form) {
                    self.patterns.push(form);
                }
            }
        }
        self.patterns
            .sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        self.first = vec![false; 256];
        for p in &self.patterns {
            self.first[usize::from(p[0])] = true;
        }
    }

    /// True when there is nothing to scrub.
    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    /// The longest pattern's length in bytes (0 when there is none).
    pub fn longest(&self) -> usize {
        self.patterns.first().map_or(0, Vec::len)
    }

    /// `bytes` with every pattern replaced by [`MARKER`]: scanning from the start, at each
    /// byte the longest pattern that starts there is replaced and the scan goes on after it.
    pub fn scrub(&self, bytes: &[u8]) -> Vec<u8> {
        self.scan(bytes, true).0
    }

    /// [`Patterns::scrub`] of a text (a marker may replace part of a character only when a
    /// secret is not valid UTF-8 on its own, which a `&str` secret never is).
    pub fn scrub_str(&self, text: &str) -> String {
        if self.is_empty() {
            return text.to_string();
        }
        String::from_utf8_lossy(&self.scrub(text.as_bytes())).into_owned()
    }

    /// Scans `bytes`: what can be let out, and where the undecided tail starts (the
    /// length when `at_end`, or when no pattern could start in the tail).
    fn scan(&self, bytes: &[u8], at_end: bool) -> (Vec<u8>, usize) {
        if self.is_empty() {
            return (bytes.to_vec(), bytes.len());
        }
        let mut out = Vec::with_capacity(bytes.len());
        let (mut i, mut plain_from) = (0, 0);
        while i < bytes.len() {
            if !self.first[usize::from(bytes[i])] {
                i += 1;
                continue;
            }
            let rest = &bytes[i..];
            // A longer pattern might still match once more bytes come: decide later.
            if !at_end
                && self
                    .patterns
                    .iter()
                    .any(|p| p.len() > rest.len() && p.starts_with(rest))
            {
                break;
            }
            match self.patterns.iter().find(|p| rest.starts_with(p)) {
                Some(p) => {
                    out.extend_from_slice(&bytes[plain_from..i]);
                    out.extend_from_slice(MARKER.as_bytes());
                    i += p.len();
                    plain_from = i;
                }
                None => i += 1,
            }
        }
        out.extend_from_slice(&bytes[plain_from..i]);
        (out, i)
    }
}

/// [`Patterns::scrub`] over a stream cut anywhere: holds back the tail that could still
/// become a secret, at most (longest pattern − 1) bytes, until the next
/// [`StreamScrubber::push`] or [`StreamScrubber::finish`].
#[derive(Default)]
pub struct StreamScrubber {
    held: Vec<u8>,
}

impl std::fmt::Debug for StreamScrubber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The held tail may be the start of a secret: its length only.
        f.debug_struct("StreamScrubber")
            .field("held", &self.held.len())
            .finish()
    }
}

impl StreamScrubber {
    /// A scrubber with nothing held.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes the next bytes of the stream; returns those that can be let out, scrubbed
    /// with `patterns` (the same set, or a larger one, at every call).
    pub fn push(&mut self, patterns: &Patterns, bytes: &[u8]) -> Vec<u8> {
        self.held.extend_from_slice(bytes);
        let (out, decided) = patterns.scan(&self.held, false);
        self.held.drain(..decided);
        out
    }

    /// The end of the stream: everything still held, scrubbed.
    pub fn finish(&mut self, patterns: &Patterns) -> Vec<u8> {
        let held = std::mem::take(&mut self.held);
        patterns.scan(&held, true).0
    }

    /// How many bytes are held back.
    pub fn held(&self) -> usize {
        self.held.len()
    }
}

/// The secret values one process knows, shared by every exit that scrubs them.
#[derive(Clone, Default)]
pub struct Secrets(Arc<RwLock<Patterns>>);

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Secrets").field(&*self.read()).finish()
    }
}

impl Secrets {
    /// An empty set of its own (tests; a run uses [`Secrets::process`]).
    pub fn new() -> Self {
        Self::default()
    }

    /// The process's set: what the job log, stdout, stderr and the exit report scrub.
    pub fn process() -> Self {
        static PROCESS: OnceLock<Secrets> = OnceLock::new();
        PROCESS.get_or_init(Secrets::new).clone()
    }

    /// Adds `values` (empty ones are ignored).
    pub fn add<'a>(&self, values: impl IntoIterator<Item = &'a str>) {
        self.0
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .add(values);
    }

    /// The patterns, read-locked.
    pub fn read(&self) -> std::sync::RwLockReadGuard<'_, Patterns> {
        self.0
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// `text` scrubbed of every secret known now.
    pub fn scrub_str(&self, text: &str) -> String {
        self.read().scrub_str(text)
    }

    /// `bytes` scrubbed of every secret known now.
    pub fn scrub(&self, bytes: &[u8]) -> Vec<u8> {
        self.read().scrub(bytes)
    }
}

#[cfg(test)]
#[path = "scrub_tests.rs"]
mod tests;
