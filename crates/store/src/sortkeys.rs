//! The sort keys both stores compare as strings (the sparse gsi3 index's), and the drift
//! schedule's next fire time, so that [`DynamoStore`](crate::DynamoStore) and
//! [`MemoryStore`](crate::MemoryStore) list the same things in the same order.

use chrono::{DateTime, Utc};
use sortie_core::drift::DriftSchedule;
use sortie_core::{EnvPath, EnvSettings};

/// A time as the gsi3 sort keys hold it: RFC 3339 in UTC (`+00:00`), with fractional seconds
/// only when they are not zero (3, 6 or 9 digits), as every job partition has always
/// written it. Its lexicographic order is time order: the date and time fields are fixed
/// width, and where two keys first differ after the seconds, the shorter one has `+` (below
/// `.` and every digit) or a digit group the other extends (see the test below).
pub(crate) fn sort_time(at: DateTime<Utc>) -> String {
    at.to_rfc3339()
}

/// The gsi3 `DRIFT` sort key of an environment: `<next_drift_at>#<path>`.
pub(crate) fn drift_sk(next: DateTime<Utc>, path: &EnvPath) -> String {
    format!("{}#{path}", sort_time(next))
}

/// The exclusive upper bound of the drift checks due at `now`: every `<time>#<path>` whose
/// time is at or before `now` (`~` sorts after every character of a path).
pub(crate) fn drift_due_bound(now: DateTime<Utc>) -> String {
    format!("{}#~", sort_time(now))
}

/// The gsi3 sort key of a job: `<time>#<id>`, the time being when it entered its partition
/// (`PENDING`, `ACTIVE`, `ENDED`) or its approval deadline (`AWAITING`).
pub(crate) fn job_sk(at: DateTime<Utc>, id: &str) -> String {
    format!("{}#{id}", sort_time(at))
}

/// When an environment's drift schedule fires next after `now`; `None` without a schedule
/// (or with one that no longer parses, which the API never accepts).
pub(crate) fn next_drift(settings: &EnvSettings, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    settings
        .drift_schedule
        .as_deref()
        .and_then(|s| DriftSchedule::parse(s).ok())
        .and_then(|s| s.next_after(now))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Duration, TimeZone};

    #[test]
    fn sort_times_order_as_the_times_they_write() {
        let base = Utc.with_ymd_and_hms(2026, 3, 9, 23, 59, 59).unwrap();
        let mut times = vec![];
        for nanos in [
            0,
            1,
            999,
            1_000,
            1_001,
            500_000,
            999_999,
            1_000_000,
            100_000_000,
            100_000_001,
            500_000_000,
            999_999_999,
        ] {
            times.push(base + Duration::nanoseconds(nanos));
            times.push(base + Duration::seconds(1) + Duration::nanoseconds(nanos));
            times.push(base - Duration::days(400) + Duration::nanoseconds(nanos));
        }
        for a in &times {
            for b in &times {
                assert_eq!(
                    sort_time(*a).cmp(&sort_time(*b)),
                    a.cmp(b),
                    "{} vs {}",
                    sort_time(*a),
                    sort_time(*b)
                );
                // With a suffix, as the keys are: `<time>#<id>` below `<bound>` iff time < bound.
                assert_eq!(job_sk(*a, "01jz") < sort_time(*b), a < b, "{a} before {b}");
                let path = EnvPath::parse("acme/payments/prod").unwrap();
                assert_eq!(
                    drift_sk(*a, &path) < drift_due_bound(*b),
                    a <= b,
                    "{a} due at {b}"
                );
            }
        }
    }
}
