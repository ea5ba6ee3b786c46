//! Drift detection: an environment's `drift_schedule` (a 5-field cron expression in UTC,
//! at least [`DRIFT_MIN_INTERVAL_MINUTES`] minutes between two checks) and the result of a
//! check.

use chrono::{DateTime, Duration, TimeZone, Utc};
use serde::{Deserialize, Serialize};

use crate::changes::ChangeSummary;
use crate::ids::JobId;

/// The shortest interval between two drift checks, in minutes.
pub const DRIFT_MIN_INTERVAL_MINUTES: i64 = 15;

/// The longest `drift_schedule` accepted, in bytes.
pub const DRIFT_SCHEDULE_MAX: usize = 128;

/// How many upcoming fire times the interval check looks at.
const INTERVAL_SAMPLES: usize = 4000;

/// The principal that requests drift checks and their remediations.
pub const DRIFT_PRINCIPAL: &str = "sortie:drift";

/// A parsed drift schedule.
#[derive(Debug, Clone)]
pub struct DriftSchedule {
    cron: croner::Cron,
}

impl DriftSchedule {
    /// Parses a 5-field cron expression (minute, hour, day of month, month, day of week;
    /// or `@hourly`, `@daily`, `@weekly`, `@monthly`, `@yearly`), in UTC, and checks that
    /// two consecutive fire times are never less than 15 minutes apart. The error is the
    /// problem, for the `drift_schedule` field.
    pub fn parse(text: &str) -> Result<Self, String> {
        if text.len() > DRIFT_SCHEDULE_MAX {
            return Err(format!("must be at most {DRIFT_SCHEDULE_MAX} bytes"));
        }
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err("must not be empty; write a cron expression such as `0 */6 * * *`".into());
        }
        if !trimmed.starts_with('@') && trimmed.split_whitespace().count() != 5 {
            return Err(format!(
                "`{}` is not a 5-field cron expression (minute hour day-of-month month day-of-week, in UTC), such as `0 */6 * * *`",
                trimmed.escape_debug()
            ));
        }
        let cron = croner::Cron::new(trimmed)
            .parse()
            .map_err(|e| format!("`{}` is not a cron expression: {e}", trimmed.escape_debug()))?;
        let schedule = Self { cron };
        // The fire times from a fixed instant: the shortest gap between two of them. A cron
        // expression is a product of sets, so its shortest gap shows within its first days.
        let start = Utc
            .with_ymd_and_hms(2024, 1, 1, 0, 0, 0)
            .single()
            .expect("a valid instant");
        let mut previous = schedule.next_after(start);
        if previous.is_none() {
            return Err(format!("`{}` never fires", trimmed.escape_debug()));
        }
        for _ in 0..INTERVAL_SAMPLES {
            let Some(prev) = previous else { break };
            let Some(next) = schedule.next_after(prev) else {
                break;
            };
            if next - prev < Duration::minutes(DRIFT_MIN_INTERVAL_MINUTES) {
                return Err(format!(
                    "`{}` fires {} minute(s) apart (at {} and {}); drift checks must be at least {DRIFT_MIN_INTERVAL_MINUTES} minutes apart",
                    trimmed.escape_debug(),
                    (next - prev).num_minutes(),
                    prev.format("%H:%M"),
                    next.format("%H:%M"),
                ));
            }
            if next - start > Duration::days(800) {
                break;
            }
            previous = Some(next);
        }
        Ok(schedule)
    }

    /// The first fire time strictly after `after`.
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.cron.find_next_occurrence(&after, false).ok()
    }
}

/// The verdict of a drift check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum DriftVerdict {
    /// The plan has no changes.
    InSync,
    /// The plan has changes: the real infrastructure, or the state, moved.
    Drifted,
    /// The check failed, timed out or was canceled.
    Error,
}

impl DriftVerdict {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InSync => "in_sync",
            Self::Drifted => "drifted",
            Self::Error => "error",
        }
    }
}

/// The latest drift check of an environment, set on the environment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DriftStatus {
    /// `in_sync`, `drifted` or `error`.
    pub status: DriftVerdict,
    /// When the check ended.
    pub checked_at: DateTime<Utc>,
    /// The check's plan job.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub job_id: JobId,
    /// The plan's counts, when it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<ChangeSummary>,
    /// Why the check failed, for `error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The apply submitted to remediate a drift (`drift_remediation: apply`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub remediation_job_id: Option<JobId>,
}

/// A drift check the schedule fired but that did not run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DriftSkipped {
    /// When it was skipped.
    pub at: DateTime<Utc>,
    /// Why: the environment was busy, or has no successful apply to compare with.
    pub reason: String,
}

/// The verdict of a drift check job that ended in `state` with `summary`.
pub fn verdict(succeeded: bool, summary: Option<&ChangeSummary>) -> DriftVerdict {
    if !succeeded {
        return DriftVerdict::Error;
    }
    match summary {
        Some(s) if s.has_changes == Some(true) => DriftVerdict::Drifted,
        Some(s) if s.has_changes.is_none() && s.add + s.change + s.destroy > 0 => {
            DriftVerdict::Drifted
        }
        Some(_) => DriftVerdict::InSync,
        None => DriftVerdict::Error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedules_at_least_fifteen_minutes_apart_are_accepted() {
        for ok in [
            "*/15 * * * *",
            "0 */6 * * *",
            "@daily",
            "0,30 9-17 * * 1-5",
            "5 4 * * 0",
        ] {
            DriftSchedule::parse(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
    }

    #[test]
    fn schedules_firing_more_often_or_not_parsing_are_refused() {
        for bad in [
            "*/10 * * * *",
            "* * * * *",
            "0,5 0 1 1 *",
            "0 0 * * * *",
            "61 * * * *",
            "",
            "every day",
            "0 0 31 2 *",
        ] {
            assert!(DriftSchedule::parse(bad).is_err(), "{bad:?} was accepted");
        }
        let e = DriftSchedule::parse("*/5 * * * *").unwrap_err();
        assert!(e.contains("5 minute(s) apart"), "{e}");
    }

    #[test]
    fn the_next_fire_time_is_strictly_after() {
        let s = DriftSchedule::parse("0 * * * *").unwrap();
        let at = Utc.with_ymd_and_hms(2026, 1, 1, 10, 0, 0).unwrap();
        assert_eq!(
            s.next_after(at),
            Some(Utc.with_ymd_and_hms(2026, 1, 1, 11, 0, 0).unwrap())
        );
    }

    #[test]
    fn a_verdict_reads_the_detailed_exit_code_first() {
        let mut s = ChangeSummary::default();
        assert_eq!(verdict(true, Some(&s)), DriftVerdict::InSync);
        s.has_changes = Some(true);
        assert_eq!(verdict(true, Some(&s)), DriftVerdict::Drifted);
        assert_eq!(verdict(false, Some(&s)), DriftVerdict::Error);
        assert_eq!(verdict(true, None), DriftVerdict::Error);
    }
}
