//! The end of a job, tried again: a bound on attempts and on age, then the job fails.
//!
//! Pure: the time is an argument. Ending a job reads and writes (the policy gate reads its
//! `plan.json`, the end writes the job and releases its environment's lock); any of them
//! can fail, and an end that fails is tried again by the next event or sweep. Without a
//! bound a job whose end always fails (an artifact the gate can never read, a read that
//! kills the function) holds its environment's lock for good. So every try is counted on
//! the job ([`EndTries`]): after [`MAX_END_TRIES`] tries, or [`MAX_END_RETRY_MINUTES`] since
//! the first failed one, the job fails with [`give_up_reason`], which quotes the last error,
//! and its environment is released.

use chrono::{DateTime, Duration, Utc};

/// An end is tried at most this many times; the next try fails the job instead.
pub const MAX_END_TRIES: u32 = 5;
/// An end that keeps failing is tried for at most this long (from its first failed try).
pub const MAX_END_RETRY_MINUTES: i64 = 15;
/// The longest error quoted in a give-up reason, in bytes.
pub const QUOTED_ERROR_MAX_BYTES: usize = 300;
/// The error recorded for a try that never reported back (the function ran out of memory
/// or time while ending the job): the sweeper records the try before it starts it.
pub const INTERRUPTED: &str =
    "a try to end the job did not finish (the function ending it stopped: out of memory or time?)";

/// The tries to end a job recorded on it while its task's exit was known and the end failed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EndTries {
    /// Tries counted (failed, or started and never reported back).
    pub tries: u32,
    /// When the first of them was recorded.
    pub since: Option<DateTime<Utc>>,
    /// The last error recorded.
    pub error: Option<String>,
}

impl EndTries {
    /// The tries that count for a job that entered its current state at `entered`: tries
    /// recorded before it (an earlier phase of a reviewed job) do not.
    pub fn current(&self, entered: DateTime<Utc>) -> EndTries {
        match self.since {
            Some(since) if since >= entered => self.clone(),
            _ => EndTries::default(),
        }
    }

    /// True when the end must not be tried again: [`MAX_END_TRIES`] tries were counted, or
    /// the first failed [`MAX_END_RETRY_MINUTES`] or more before `now`.
    pub fn exhausted(&self, now: DateTime<Utc>) -> bool {
        self.tries >= MAX_END_TRIES
            || self
                .since
                .is_some_and(|since| now - since >= Duration::minutes(MAX_END_RETRY_MINUTES))
    }
}

/// The reason a job fails when its end was given up: how many tries over how long, and the
/// last error quoted (cut to [`QUOTED_ERROR_MAX_BYTES`] at a character boundary).
pub fn give_up_reason(tries: &EndTries, now: DateTime<Utc>) -> String {
    let minutes = tries.since.map(|s| (now - s).num_minutes()).unwrap_or(0);
    let error = tries.error.as_deref().unwrap_or("no error was recorded");
    format!(
        "sortie: the job's end failed {} time(s) over {minutes} min and is not tried again; last error: \"{}\"",
        tries.tries,
        cut(error, QUOTED_ERROR_MAX_BYTES)
    )
}

/// `text` cut to at most `max` bytes at a character boundary, with `…` when cut.
pub fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn at(minutes: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000, 0).unwrap() + Duration::minutes(minutes)
    }

    proptest! {
        /// Whatever the count and the clock, an end is given up by its tries or its age,
        /// and never before both are short of the bound.
        #[test]
        fn an_end_is_given_up_by_tries_or_age(tries in 0u32..20, age in 0i64..60) {
            let t = EndTries { tries, since: Some(at(0)), error: Some("boom".into()) };
            let exhausted = t.exhausted(at(age));
            prop_assert_eq!(exhausted, tries >= MAX_END_TRIES || age >= MAX_END_RETRY_MINUTES);
        }

        /// A give-up reason quotes the error, bounded, whatever its length and characters.
        #[test]
        fn the_reason_quotes_the_error_bounded(error in "\\PC{0,600}") {
            let t = EndTries { tries: 5, since: Some(at(0)), error: Some(error.clone()) };
            let reason = give_up_reason(&t, at(3));
            prop_assert!(reason.len() <= 200 + QUOTED_ERROR_MAX_BYTES + 3);
            let quoted = cut(&error, QUOTED_ERROR_MAX_BYTES);
            let quoted = format!("\"{}\"", quoted);
            prop_assert!(reason.contains(&quoted));
        }
    }

    #[test]
    fn tries_of_an_earlier_phase_do_not_count() {
        let t = EndTries {
            tries: 4,
            since: Some(at(0)),
            error: Some("boom".into()),
        };
        assert_eq!(t.current(at(1)), EndTries::default());
        assert_eq!(t.current(at(0)), t);
        assert!(!EndTries::default().exhausted(at(1000)));
    }
}
