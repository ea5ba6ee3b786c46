//! What must hold before a pull request's plan is applied, decided over facts the caller
//! gathered from GitHub (the pull request, its reviews, its checks, its branch protection).
//!
//! Two rules always hold: a plan of the current head commit exists, and every required
//! check is green, except Sortie's own checks (named with
//! [`crate::vcs::report::CHECK_NAME_PREFIX`]): requiring Sortie's check in branch protection
//! must never block Sortie's own apply, which is what would turn it green (the deadlock of
//! atlantis#1316). The binding's [`Requirements`] add approvals, mergeability and being up
//! to date with the base branch.

use std::collections::BTreeMap;
use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::vcs::binding::Requirements;
use crate::vcs::report::CHECK_NAME_PREFIX;

/// How many characters of a commit SHA are shown.
const SHORT_SHA: usize = 7;

/// A review's state, in GitHub's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ReviewState {
    /// The reviewer approved.
    Approved,
    /// The reviewer asked for changes.
    ChangesRequested,
    /// The reviewer only commented: their standing does not change.
    Commented,
    /// The review was dismissed: the reviewer's earlier approval or request no longer holds.
    Dismissed,
    /// The review is not submitted yet: it does not count.
    Pending,
}

/// One review of the pull request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Review {
    /// The reviewer's login.
    pub user: String,
    /// What the review said.
    pub state: ReviewState,
    /// The commit the review was made on.
    pub commit_id: String,
    /// When it was submitted.
    pub submitted_at: DateTime<Utc>,
}

/// One check on the head commit: a check run's or a commit status's latest result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckResult {
    /// The check run's name or the status's context.
    pub name: String,
    /// `Some(true)` passed, `Some(false)` failed, `None` still pending.
    pub passed: Option<bool>,
}

/// What the caller knows about a pull request when an apply is asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PullFacts {
    /// The pull request author's login.
    pub author: String,
    /// The head commit now.
    pub head_sha: String,
    /// The commit Sortie's latest plan is of; `None` when there is no plan.
    pub planned_sha: Option<String>,
    /// Every submitted review, in any order.
    pub reviews: Vec<Review>,
    /// GitHub's `mergeable`: `None` while GitHub is still computing it.
    pub mergeable: Option<bool>,
    /// True for a draft pull request.
    pub draft: bool,
    /// How many commits of the base branch the head is missing; `None` when unknown.
    pub behind_by: Option<u32>,
    /// The contexts branch protection and rulesets require on the base branch.
    pub required_checks: Vec<String>,
    /// The checks on the head commit, the latest result per name (where several share a
    /// name, a failure or a pending one wins: the stricter reading).
    pub checks: Vec<CheckResult>,
}

/// One requirement that does not hold, in words a reviewer understands (`Display`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unmet {
    /// No plan of the pull request exists.
    NotPlanned,
    /// The plan is of an older commit.
    HeadMoved {
        /// The commit planned.
        planned: String,
        /// The head commit now.
        head: String,
    },
    /// Too few approvals on the head commit.
    Approvals {
        /// Approvals that count.
        have: u32,
        /// Approvals required.
        need: u32,
    },
    /// The pull request is a draft.
    Draft,
    /// GitHub cannot merge it (conflicts, or still computing).
    NotMergeable {
        /// Why, in words.
        why: String,
    },
    /// The head is behind the base branch.
    Diverged {
        /// Commits of the base branch missing from the head.
        behind_by: u32,
    },
    /// GitHub has not said how far the head is behind the base branch.
    BehindUnknown,
    /// A required check has not finished.
    CheckPending {
        /// The check's name.
        name: String,
    },
    /// A required check failed.
    CheckFailed {
        /// The check's name.
        name: String,
    },
    /// A required check has not reported on the head commit.
    CheckMissing {
        /// The check's name.
        name: String,
    },
}

impl Unmet {
    /// True when the requirement may still come to hold with no one acting on the pull
    /// request: a required check running or not reported yet, GitHub still computing
    /// mergeability or how far behind the head is. An approved apply waits for these;
    /// any other (the head moved, a check failed, conflicts, too few approvals) discards it.
    pub fn may_still_hold(&self) -> bool {
        match self {
            Self::CheckPending { .. } | Self::CheckMissing { .. } | Self::BehindUnknown => true,
            Self::NotMergeable { why } => why == STILL_COMPUTING,
            Self::NotPlanned
            | Self::HeadMoved { .. }
            | Self::Approvals { .. }
            | Self::Draft
            | Self::Diverged { .. }
            | Self::CheckFailed { .. } => false,
        }
    }
}

impl fmt::Display for Unmet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotPlanned => write!(
                f,
                "there is no plan of this pull request yet: comment `/sortie plan`"
            ),
            Self::HeadMoved { planned, head } => write!(
                f,
                "the plan is of {}, but the head is now {}: plan again",
                short(planned),
                short(head)
            ),
            Self::Approvals { have, need } => write!(
                f,
                "{have} of {need} approval{} on the head commit",
                if *need == 1 { "" } else { "s" }
            ),
            Self::Draft => write!(f, "the pull request is a draft: mark it ready for review"),
            Self::NotMergeable { why } => write!(f, "it cannot be merged: {why}"),
            Self::Diverged { behind_by } => write!(
                f,
                "the branch is {behind_by} commit{} behind its base branch: update it",
                if *behind_by == 1 { "" } else { "s" }
            ),
            Self::BehindUnknown => write!(
                f,
                "the host has not said yet whether the branch is up to date with its base branch: try again"
            ),
            Self::CheckPending { name } => {
                write!(f, "the required check “{name}” has not finished")
            }
            Self::CheckFailed { name } => write!(f, "the required check “{name}” failed"),
            Self::CheckMissing { name } => write!(
                f,
                "the required check “{name}” has not reported on the head commit"
            ),
        }
    }
}

/// The first 7 characters of a commit SHA.
fn short(sha: &str) -> String {
    sha.chars().take(SHORT_SHA).collect()
}

/// Why the pull request cannot be merged while its host is still working out whether it
/// can (GitHub's `mergeable` null, GitLab's `checking`).
pub const STILL_COMPUTING: &str =
    "the host is still working out whether it can be merged: try again in a moment";
/// Why the pull request cannot be merged when its host says it cannot.
pub const CONFLICTS: &str = "it has conflicts with its base branch";

/// Every requirement that does not hold, in this order: the plan, the required checks (in
/// their order), then approvals, draft and mergeability, and being up to date. Empty means
/// the plan may be applied.
///
/// Approvals: for each user other than the author (logins compared without case, as
/// GitHub's are), the latest review that is Approved, ChangesRequested or Dismissed decides
/// (Commented and Pending do not change a user's standing; equal times keep the later one
/// in `reviews`); it counts when it is Approved and on `head_sha`.
pub fn evaluate(req: &Requirements, facts: &PullFacts) -> Vec<Unmet> {
    let mut unmet = Vec::new();
    match &facts.planned_sha {
        None => unmet.push(Unmet::NotPlanned),
        Some(planned) if !planned.eq_ignore_ascii_case(&facts.head_sha) => {
            unmet.push(Unmet::HeadMoved {
                planned: planned.clone(),
                head: facts.head_sha.clone(),
            });
        }
        Some(_) => {}
    }
    check_requirements(facts, &mut unmet);
    if let Some(need) = req.approved {
        let have = approvals(facts);
        if have < need {
            unmet.push(Unmet::Approvals { have, need });
        }
    }
    if req.mergeable {
        if facts.draft {
            unmet.push(Unmet::Draft);
        }
        match facts.mergeable {
            Some(true) => {}
            Some(false) => unmet.push(Unmet::NotMergeable {
                why: CONFLICTS.to_string(),
            }),
            None => unmet.push(Unmet::NotMergeable {
                why: STILL_COMPUTING.to_string(),
            }),
        }
    }
    if req.undiverged {
        match facts.behind_by {
            Some(0) => {}
            Some(behind_by) => unmet.push(Unmet::Diverged { behind_by }),
            None => unmet.push(Unmet::BehindUnknown),
        }
    }
    unmet
}

/// True for the name of one of Sortie's own check runs.
pub fn is_sortie_check(name: &str) -> bool {
    name.starts_with(CHECK_NAME_PREFIX)
}

/// Pushes an [`Unmet`] for every required check (once per name) that is not green, except
/// Sortie's own.
fn check_requirements(facts: &PullFacts, unmet: &mut Vec<Unmet>) {
    let mut seen: Vec<&str> = Vec::new();
    for name in &facts.required_checks {
        if is_sortie_check(name) || seen.contains(&name.as_str()) {
            continue;
        }
        seen.push(name);
        let results: Vec<Option<bool>> = facts
            .checks
            .iter()
            .filter(|c| c.name == *name)
            .map(|c| c.passed)
            .collect();
        let name = name.clone();
        if results.is_empty() {
            unmet.push(Unmet::CheckMissing { name });
        } else if results.contains(&Some(false)) {
            unmet.push(Unmet::CheckFailed { name });
        } else if results.contains(&None) {
            unmet.push(Unmet::CheckPending { name });
        }
    }
}

/// The approvals that count (see [`evaluate`]).
fn approvals(facts: &PullFacts) -> u32 {
    let mut latest: BTreeMap<String, &Review> = BTreeMap::new();
    for review in &facts.reviews {
        if matches!(review.state, ReviewState::Commented | ReviewState::Pending)
            || review.user.eq_ignore_ascii_case(&facts.author)
        {
            continue;
        }
        let user = review.user.to_ascii_lowercase();
        match latest.get(&user) {
            Some(seen) if seen.submitted_at > review.submitted_at => {}
            _ => {
                latest.insert(user, review);
            }
        }
    }
    let count = latest
        .values()
        .filter(|r| {
            r.state == ReviewState::Approved && r.commit_id.eq_ignore_ascii_case(&facts.head_sha)
        })
        .count();
    u32::try_from(count).unwrap_or(u32::MAX)
}

#[cfg(test)]
#[path = "requirements_tests.rs"]
mod tests;
