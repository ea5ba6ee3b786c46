//! One delivery of an event to a destination: its signature, and what follows an attempt.
//!
//! **Signature.** Each delivery carries [`TIMESTAMP_HEADER`] (seconds since the epoch),
//! [`DELIVERY_HEADER`] (the delivery's id, the same on a retry and a redelivery) and
//! [`SIGNATURE_HEADER`]: `sha256=` and the hex HMAC-SHA256, under the destination's signing
//! secret, of `<timestamp>.<body>`. The timestamp is inside the signature, so a receiver
//! that refuses old timestamps ([`verify`]'s `tolerance`) refuses a replay.
//!
//! **Retries.** A 2xx answer delivers it. A 408, a 429, a 5xx, a timeout or an unreachable
//! receiver is tried again ([`next`]): after 30 s, then twice as long each time up to an
//! hour, with jitter (a 429's `Retry-After` is honoured), for 24 hours after the first
//! attempt. Any other answer (another 4xx, a 3xx: redirects are not followed) and an
//! address the guard refuses are final.

use chrono::{DateTime, Duration, Utc};

/// The header of the delivery's signature: `sha256=<hex>`.
pub const SIGNATURE_HEADER: &str = "x-sortie-signature";
/// The header of the second the delivery was signed (seconds since the epoch).
pub const TIMESTAMP_HEADER: &str = "x-sortie-timestamp";
/// The header of the delivery's id: the same on every attempt and on a redelivery.
pub const DELIVERY_HEADER: &str = "x-sortie-delivery";
/// The header naming the event's type, such as `sortie.job.ended`.
pub const EVENT_HEADER: &str = "x-sortie-event";
/// How long one attempt may take, the connection included.
pub const ATTEMPT_TIMEOUT_SECONDS: u64 = 10;
/// The most of an answer read; the rest is not read.
pub const MAX_ANSWER_BYTES: usize = 1024 * 1024;
/// The most of an answer kept in the delivery history.
pub const ANSWER_KEPT_BYTES: usize = 1024;
/// How many deliveries a destination's history keeps (the newest).
pub const HISTORY_LENGTH: usize = 100;
/// How long a delivery is retried after its first attempt.
pub const RETRY_WINDOW: Duration = Duration::hours(24);
/// The first wait before a retry.
pub const FIRST_RETRY_SECONDS: i64 = 30;
/// The longest wait between two attempts.
pub const MAX_RETRY_SECONDS: i64 = 3600;
/// The timestamp tolerance a receiver is advised to use: five minutes either way.
pub const DEFAULT_TOLERANCE_SECONDS: i64 = 300;

/// The bytes the signature covers: `<timestamp>.<body>`.
pub fn signed_content(timestamp: i64, body: &[u8]) -> Vec<u8> {
    let mut content = format!("{timestamp}.").into_bytes();
    content.extend_from_slice(body);
    content
}

/// The [`SIGNATURE_HEADER`] value of `body` sent at `timestamp` under `secret`.
pub fn signature(secret: &[u8], timestamp: i64, body: &[u8]) -> String {
    crate::vcs::webhook::sign(secret, &signed_content(timestamp, body))
}

/// Why a receiver refuses a delivery.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// The timestamp header is absent or not a number of seconds.
    #[error("the {TIMESTAMP_HEADER} header is missing or not a number")]
    Timestamp,
    /// The timestamp is further from now than the tolerance: a replay, or a clock far off.
    #[error("the delivery was signed {0} s away from now, more than the tolerance")]
    Stale(i64),
    /// The signature is absent or does not match.
    #[error("the {SIGNATURE_HEADER} header does not match the body")]
    Signature,
}

/// What a receiver checks (the README's few lines do the same): the timestamp is within
/// `tolerance_seconds` of `now`, and the signature over `<timestamp>.<body>` matches,
/// compared in constant time.
pub fn verify(
    secret: &[u8],
    timestamp: Option<&str>,
    signature: Option<&str>,
    body: &[u8],
    now: i64,
    tolerance_seconds: i64,
) -> Result<(), VerifyError> {
    let timestamp: i64 = timestamp
        .and_then(|t| t.trim().parse().ok())
        .ok_or(VerifyError::Timestamp)?;
    let away = now.saturating_sub(timestamp);
    if away.saturating_abs() > tolerance_seconds {
        return Err(VerifyError::Stale(away));
    }
    if crate::vcs::webhook::verify_signature(secret, &signed_content(timestamp, body), signature) {
        Ok(())
    } else {
        Err(VerifyError::Signature)
    }
}

/// How one attempt went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    /// The receiver answered `status`; a 429's or 503's `Retry-After`, read.
    Answered {
        /// The HTTP status.
        status: u16,
        /// How long the receiver asked to wait, in seconds.
        retry_after: Option<i64>,
    },
    /// No answer within [`ATTEMPT_TIMEOUT_SECONDS`].
    TimedOut,
    /// The receiver could not be reached (DNS, connection, TLS); why.
    Unreachable(String),
    /// The guard refused the destination's address; why.
    Refused(String),
}

/// What follows an attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Delivered: nothing more to do.
    Delivered,
    /// Try again at this time.
    RetryAt(DateTime<Utc>),
    /// Given up: why. One `sortie.notification.failed` is published, and the destination is
    /// marked unhealthy.
    GaveUp(String),
}

/// What follows the `attempt`-th attempt (1 for the first) of a delivery first tried at
/// `first_at`, which went as `result`, at `now`; `seed` draws the jitter.
pub fn next(
    result: &Attempt,
    attempt: u32,
    first_at: DateTime<Utc>,
    now: DateTime<Utc>,
    seed: u64,
) -> Next {
    let (retryable, why, asked) = match result {
        Attempt::Answered { status, .. } if (200..300).contains(status) => return Next::Delivered,
        Attempt::Answered {
            status,
            retry_after,
        } => {
            let retryable = matches!(status, 408 | 429) || (500..600).contains(status);
            let why = if (300..400).contains(status) {
                format!(
                    "the receiver answered {status}, a redirect, and redirects are not followed"
                )
            } else {
                format!("the receiver answered {status}")
            };
            (retryable, why, retry_after.filter(|_| retryable))
        }
        Attempt::TimedOut => (
            true,
            format!("no answer within {ATTEMPT_TIMEOUT_SECONDS} s"),
            None,
        ),
        Attempt::Unreachable(why) => (true, format!("unreachable: {why}"), None),
        Attempt::Refused(why) => (false, format!("refused by the address guard: {why}"), None),
    };
    if !retryable {
        return Next::GaveUp(why);
    }
    let wait = match asked {
        Some(seconds) => seconds.clamp(1, MAX_RETRY_SECONDS),
        None => backoff_seconds(attempt, seed),
    };
    let at = now + Duration::seconds(wait);
    if at > first_at + RETRY_WINDOW {
        return Next::GaveUp(format!(
            "{why}; retried for {} hours ({attempt} attempts)",
            RETRY_WINDOW.num_hours()
        ));
    }
    Next::RetryAt(at)
}

/// The wait after the `attempt`-th failed attempt: a ceiling of 30 s, 60 s, 120 s, … at
/// most an hour, and a wait drawn from `seed` between half the ceiling and the ceiling.
pub fn backoff_seconds(attempt: u32, seed: u64) -> i64 {
    let exponent = attempt.clamp(1, 20) - 1;
    let ceiling = (FIRST_RETRY_SECONDS << exponent).min(MAX_RETRY_SECONDS);
    let half = ceiling / 2;
    let spread = u64::try_from(ceiling - half + 1).unwrap_or(1);
    half + i64::try_from(crate::backoff::mix(seed) % spread).unwrap_or(0)
}

/// A `Retry-After` header's wait in seconds at `now`: a number of seconds, or an HTTP date
/// (RFC 9110 §10.2.3); `None` when it is neither.
pub fn retry_after_seconds(value: &str, now: DateTime<Utc>) -> Option<i64> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<i64>() {
        return Some(seconds.max(0));
    }
    let at = DateTime::parse_from_rfc2822(value).ok()?;
    Some((at.with_timezone(&Utc) - now).num_seconds().max(0))
}

/// The first [`ANSWER_KEPT_BYTES`] of an answer, as text (cut at a character boundary).
pub fn kept_answer(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(ANSWER_KEPT_BYTES + 4)]);
    let mut end = text.len().min(ANSWER_KEPT_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}
