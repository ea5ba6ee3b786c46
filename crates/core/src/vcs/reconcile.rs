//! The reconcile of a repository's open pull requests, so that a lost webhook is made good
//! within one period: what to do with each pull request, decided from what the host lists
//! open now, what the last reconcile saw open, and the head each record was planned at.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// At most this many open pull requests are remembered for one repository and base (the
/// GitHub client reads at most 3,000 of them, 30 pages of 100).
pub const MAX_REMEMBERED: usize = 3000;

/// What the last reconcile of one repository and base branch saw: the host's `ETag` of the
/// list (asked with `If-None-Match` next time, so an unchanged list costs no rate limit)
/// and the numbers open then.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenPulls {
    /// The list's `ETag`, when the host gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etag: Option<String>,
    /// The numbers open then, ascending.
    #[serde(default)]
    pub numbers: Vec<u64>,
}

/// One open pull request as the host lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedPull {
    /// Its number.
    pub number: u64,
    /// Its head commit.
    pub head_sha: String,
}

/// What the reconcile does with one pull request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Repair {
    /// Open, and Sortie has no record of its head: handled as if it had just moved (a lost
    /// `opened` or `synchronize`).
    Plan(u64),
    /// Open at the head Sortie recorded: its checks and comment are written again from its
    /// jobs, which writes nothing to the host when nothing changed (a lost report).
    Report(u64),
    /// Open at the last reconcile and not now: handled as closed, which reads whether it
    /// was merged (a lost `closed`, and the applies a merge makes).
    Closed(u64),
}

/// The repairs of one repository and base, in number order. `listed` is the host's open
/// list now, or `None` when the host said it had not changed since `last` (then every
/// number open at `last` is still open at the head planned then). `recorded` is the head
/// each listed pull request's record holds.
pub fn repairs(
    last: &OpenPulls,
    listed: Option<&[ListedPull]>,
    recorded: &BTreeMap<u64, String>,
) -> Vec<Repair> {
    let Some(listed) = listed else {
        return last.numbers.iter().map(|n| Repair::Report(*n)).collect();
    };
    let open: BTreeSet<u64> = listed.iter().map(|p| p.number).collect();
    let mut out: Vec<Repair> = listed
        .iter()
        .map(|p| match recorded.get(&p.number) {
            Some(head) if *head == p.head_sha => Repair::Report(p.number),
            _ => Repair::Plan(p.number),
        })
        .collect();
    out.extend(
        last.numbers
            .iter()
            .filter(|n| !open.contains(n))
            .map(|n| Repair::Closed(*n)),
    );
    out.sort_by_key(|r| match r {
        Repair::Plan(n) | Repair::Report(n) | Repair::Closed(n) => *n,
    });
    out.dedup();
    out
}

/// What to remember after a reconcile that listed `listed` with `etag`: the numbers open
/// now, ascending and at most [`MAX_REMEMBERED`].
pub fn remembered(listed: &[ListedPull], etag: Option<String>) -> OpenPulls {
    let numbers: BTreeSet<u64> = listed.iter().map(|p| p.number).collect();
    OpenPulls {
        etag,
        numbers: numbers.into_iter().take(MAX_REMEMBERED).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn listed(pulls: &[(u64, &str)]) -> Vec<ListedPull> {
        pulls
            .iter()
            .map(|(n, h)| ListedPull {
                number: *n,
                head_sha: h.to_string(),
            })
            .collect()
    }

    #[test]
    fn a_lost_open_is_planned_a_moved_head_is_planned_again_and_a_lost_close_is_closed() {
        let last = OpenPulls {
            etag: Some("\"a\"".into()),
            numbers: vec![1, 2, 3],
        };
        let recorded = BTreeMap::from([(1, "h1".to_string()), (2, "old".to_string())]);
        let now = listed(&[(1, "h1"), (2, "new"), (4, "h4")]);
        assert_eq!(
            repairs(&last, Some(&now), &recorded),
            vec![
                Repair::Report(1),
                Repair::Plan(2),
                Repair::Closed(3),
                Repair::Plan(4)
            ]
        );
    }

    #[test]
    fn an_unchanged_list_reports_what_was_open() {
        let last = OpenPulls {
            etag: Some("\"a\"".into()),
            numbers: vec![5, 9],
        };
        assert_eq!(
            repairs(&last, None, &BTreeMap::new()),
            vec![Repair::Report(5), Repair::Report(9)]
        );
    }

    proptest! {
        /// Every pull request open now or at the last reconcile gets exactly one repair:
        /// closed exactly when it is no longer listed, reported exactly when its record is
        /// at the listed head, planned otherwise.
        #[test]
        fn each_pull_request_gets_exactly_one_repair(
            last in proptest::collection::btree_set(1u64..40, 0..20),
            now in proptest::collection::btree_map(1u64..40, 0u8..3, 0..20),
            rec in proptest::collection::btree_map(1u64..40, 0u8..3, 0..20),
        ) {
            let last = OpenPulls { etag: None, numbers: last.into_iter().collect() };
            let now: Vec<ListedPull> = now.iter().map(|(n, h)| ListedPull { number: *n, head_sha: format!("h{h}") }).collect();
            let recorded: BTreeMap<u64, String> = rec.iter().map(|(n, h)| (*n, format!("h{h}"))).collect();
            let out = repairs(&last, Some(&now), &recorded);
            let mut seen = BTreeSet::new();
            for r in &out {
                let n = match r { Repair::Plan(n) | Repair::Report(n) | Repair::Closed(n) => *n };
                prop_assert!(seen.insert(n), "{n} repaired twice: {out:?}");
                let listed = now.iter().find(|p| p.number == n);
                match (r, listed) {
                    (Repair::Closed(_), None) => prop_assert!(last.numbers.contains(&n)),
                    (Repair::Report(_), Some(p)) => prop_assert_eq!(recorded.get(&n), Some(&p.head_sha)),
                    (Repair::Plan(_), Some(p)) => prop_assert_ne!(recorded.get(&n), Some(&p.head_sha)),
                    _ => prop_assert!(false, "{r:?} for {n} listed {listed:?}"),
                }
            }
            let expected: BTreeSet<u64> = last.numbers.iter().copied().chain(now.iter().map(|p| p.number)).collect();
            prop_assert_eq!(seen, expected);
            let kept = remembered(&now, None);
            prop_assert!(kept.numbers.windows(2).all(|w| w[0] < w[1]));
        }
    }
}
