use super::*;
use chrono::TimeZone;
use proptest::prelude::*;

const HEAD: &str = "5d6e7f8a9b0c1d2e3f405162738495a6b7c8d9e0";
const OLD: &str = "1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d";

fn at(minute: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_700_000_000 + minute * 60, 0)
        .single()
        .unwrap_or_default()
}

fn review(user: &str, state: ReviewState, commit: &str, minute: i64) -> Review {
    Review {
        user: user.into(),
        state,
        commit_id: commit.into(),
        submitted_at: at(minute),
    }
}

fn facts() -> PullFacts {
    PullFacts {
        author: "author".into(),
        head_sha: HEAD.into(),
        planned_sha: Some(HEAD.into()),
        reviews: Vec::new(),
        mergeable: Some(true),
        draft: false,
        behind_by: Some(0),
        required_checks: Vec::new(),
        checks: Vec::new(),
    }
}

fn need(approved: u32) -> Requirements {
    Requirements {
        approved: Some(approved),
        ..Requirements::default()
    }
}

fn have(f: &PullFacts) -> u32 {
    match evaluate(&need(APPROVED_CAP), f).as_slice() {
        [Unmet::Approvals { have, .. }] => *have,
        [] => APPROVED_CAP,
        other => panic!("{other:?}"),
    }
}

/// More approvals than any test gives, so [`have`] always reads the count.
const APPROVED_CAP: u32 = 1000;

#[test]
fn a_plan_of_the_head_with_nothing_required_may_apply() {
    assert_eq!(evaluate(&Requirements::default(), &facts()), []);
}

#[test]
fn a_plan_must_exist_and_be_of_the_head() {
    let mut f = facts();
    f.planned_sha = None;
    assert_eq!(evaluate(&Requirements::default(), &f), [Unmet::NotPlanned]);
    f.planned_sha = Some(OLD.into());
    let unmet = evaluate(&Requirements::default(), &f);
    assert_eq!(
        unmet,
        [Unmet::HeadMoved {
            planned: OLD.into(),
            head: HEAD.into()
        }]
    );
    assert_eq!(
        unmet[0].to_string(),
        "the plan is of 1a2b3c4, but the head is now 5d6e7f8: plan again"
    );
    f.planned_sha = Some(HEAD.to_ascii_uppercase());
    assert_eq!(evaluate(&Requirements::default(), &f), []);
}

#[test]
fn required_checks_must_be_green_once_each() {
    let mut f = facts();
    f.required_checks = ["lint", "test", "build", "docs", "test"]
        .map(String::from)
        .to_vec();
    f.checks = vec![
        CheckResult {
            name: "lint".into(),
            passed: Some(true),
        },
        CheckResult {
            name: "test".into(),
            passed: Some(false),
        },
        CheckResult {
            name: "build".into(),
            passed: None,
        },
        CheckResult {
            name: "build".into(),
            passed: Some(true),
        },
    ];
    let unmet = evaluate(&Requirements::default(), &f);
    assert_eq!(
        unmet,
        [
            Unmet::CheckFailed {
                name: "test".into()
            },
            Unmet::CheckPending {
                name: "build".into()
            },
            Unmet::CheckMissing {
                name: "docs".into()
            },
        ]
    );
    assert_eq!(unmet[0].to_string(), "the required check “test” failed");
    assert_eq!(
        unmet[1].to_string(),
        "the required check “build” has not finished"
    );
    assert_eq!(
        unmet[2].to_string(),
        "the required check “docs” has not reported on the head commit"
    );
}

#[test]
fn sorties_own_required_check_never_blocks_its_apply() {
    let mut f = facts();
    f.required_checks = vec!["sortie: prod".into(), "sortie: staging".into()];
    f.checks = vec![CheckResult {
        name: "sortie: prod".into(),
        passed: Some(false),
    }];
    assert_eq!(evaluate(&Requirements::default(), &f), []);
    assert!(is_sortie_check("sortie: prod"));
    assert!(!is_sortie_check("sortie-prod"));
}

#[test]
fn approvals_count_on_the_head_commit_by_others() {
    let mut f = facts();
    f.reviews = vec![
        review("alice", ReviewState::Approved, HEAD, 1),
        review("bob", ReviewState::Approved, OLD, 2),
        review("author", ReviewState::Approved, HEAD, 3),
    ];
    let unmet = evaluate(&need(2), &f);
    assert_eq!(unmet, [Unmet::Approvals { have: 1, need: 2 }]);
    assert_eq!(unmet[0].to_string(), "1 of 2 approvals on the head commit");
    assert_eq!(
        Unmet::Approvals { have: 0, need: 1 }.to_string(),
        "0 of 1 approval on the head commit"
    );
    f.reviews
        .push(review("bob", ReviewState::Approved, HEAD, 4));
    assert_eq!(evaluate(&need(2), &f), []);
}

#[test]
fn the_latest_standing_review_decides() {
    let mut f = facts();
    use ReviewState::*;
    for (reviews, count) in [
        (vec![(Approved, 1), (ChangesRequested, 2)], 0),
        (vec![(ChangesRequested, 1), (Approved, 2)], 1),
        (vec![(Approved, 1), (Commented, 2)], 1),
        (vec![(Approved, 1), (Pending, 2)], 1),
        (vec![(Approved, 1), (Dismissed, 2)], 0),
        (vec![(Dismissed, 2), (Approved, 1)], 0),
        (vec![(Approved, 1), (Approved, 2)], 1),
        (vec![(Commented, 1)], 0),
    ] {
        f.reviews = reviews
            .iter()
            .map(|(state, minute)| review("alice", *state, HEAD, *minute))
            .collect();
        assert_eq!(have(&f), count, "{reviews:?}");
    }
}

#[test]
fn logins_compare_without_case() {
    let mut f = facts();
    f.reviews = vec![
        review("Alice", ReviewState::Approved, HEAD, 1),
        review("alice", ReviewState::ChangesRequested, HEAD, 2),
        review("AUTHOR", ReviewState::Approved, HEAD, 3),
    ];
    assert_eq!(have(&f), 0);
}

#[test]
fn mergeable_means_githubs_yes_and_not_a_draft() {
    let req = Requirements {
        mergeable: true,
        ..Requirements::default()
    };
    let mut f = facts();
    assert_eq!(evaluate(&req, &f), []);
    f.draft = true;
    assert_eq!(evaluate(&req, &f), [Unmet::Draft]);
    f.draft = false;
    f.mergeable = None;
    let unmet = evaluate(&req, &f);
    assert!(
        unmet[0].to_string().contains("still working out"),
        "{unmet:?}"
    );
    f.mergeable = Some(false);
    let unmet = evaluate(&req, &f);
    assert_eq!(
        unmet[0].to_string(),
        "it cannot be merged: it has conflicts with its base branch"
    );
    // Without the requirement, none of it matters.
    f.draft = true;
    assert_eq!(evaluate(&Requirements::default(), &f), []);
}

#[test]
fn undiverged_means_behind_by_zero() {
    let req = Requirements {
        undiverged: true,
        ..Requirements::default()
    };
    let mut f = facts();
    assert_eq!(evaluate(&req, &f), []);
    f.behind_by = Some(3);
    let unmet = evaluate(&req, &f);
    assert_eq!(unmet, [Unmet::Diverged { behind_by: 3 }]);
    assert_eq!(
        unmet[0].to_string(),
        "the branch is 3 commits behind its base branch: update it"
    );
    f.behind_by = None;
    assert_eq!(evaluate(&req, &f), [Unmet::BehindUnknown]);
    f.behind_by = Some(5);
    assert_eq!(evaluate(&Requirements::default(), &f), []);
}

#[test]
fn every_unmet_reads_as_a_sentence() {
    for u in [
        Unmet::NotPlanned,
        Unmet::Draft,
        Unmet::BehindUnknown,
        Unmet::Diverged { behind_by: 1 },
    ] {
        let text = u.to_string();
        assert!(text.len() > 20 && !text.ends_with(' '), "{text}");
    }
    assert!(Unmet::Diverged { behind_by: 1 }
        .to_string()
        .contains("1 commit behind"));
}

fn any_state() -> impl Strategy<Value = ReviewState> {
    prop::sample::select(vec![
        ReviewState::Approved,
        ReviewState::ChangesRequested,
        ReviewState::Commented,
        ReviewState::Dismissed,
        ReviewState::Pending,
    ])
}

/// Reviews by a few users (the author among them), each at a distinct time, in any order.
fn any_reviews(commits: Vec<&'static str>) -> impl Strategy<Value = Vec<Review>> {
    let users = vec!["alice", "bob", "carol", "author", "Author"];
    prop::collection::vec(
        (
            prop::sample::select(users),
            any_state(),
            prop::sample::select(commits),
        ),
        0..12,
    )
    .prop_map(|v| {
        v.into_iter()
            .enumerate()
            .map(|(i, (user, state, commit))| review(user, state, commit, i as i64))
            .collect::<Vec<_>>()
    })
    .prop_shuffle()
}

fn facts_with(reviews: Vec<Review>) -> PullFacts {
    PullFacts { reviews, ..facts() }
}

proptest! {
    #[test]
    fn an_approval_on_an_older_commit_never_counts(
        reviews in any_reviews(vec![OLD, "0000000"]),
        more in any_reviews(vec![HEAD, OLD]),
        user in prop::sample::select(vec!["alice", "bob", "carol"]),
    ) {
        prop_assert_eq!(have(&facts_with(reviews)), 0);
        // An approval on an older commit, made last, never adds one.
        let before = have(&facts_with(more.clone()));
        let mut after = more;
        after.push(review(user, ReviewState::Approved, OLD, 1_000));
        prop_assert!(have(&facts_with(after)) <= before);
    }

    #[test]
    fn the_author_never_counts(reviews in any_reviews(vec![HEAD, OLD])) {
        let without: Vec<Review> = reviews
            .iter()
            .filter(|r| !r.user.eq_ignore_ascii_case("author"))
            .cloned()
            .collect();
        prop_assert_eq!(have(&facts_with(reviews)), have(&facts_with(without)));
    }

    #[test]
    fn sorties_own_failing_or_pending_check_never_adds_an_unmet(
        reviews in any_reviews(vec![HEAD, OLD]),
        passed in prop::sample::select(vec![Some(false), None, Some(true)]),
        reported in any::<bool>(),
        planned in prop::sample::select(vec![Some(HEAD), Some(OLD), None]),
        env in "[a-z]{1,8}",
    ) {
        let mut f = facts_with(reviews);
        f.planned_sha = planned.map(String::from);
        f.required_checks = vec!["lint".into()];
        let req = Requirements { approved: Some(1), mergeable: true, undiverged: true };
        let before = evaluate(&req, &f);
        let name = format!("{CHECK_NAME_PREFIX}{env}");
        f.required_checks.push(name.clone());
        if reported {
            f.checks.push(CheckResult { name, passed });
        }
        prop_assert_eq!(evaluate(&req, &f), before);
    }

    #[test]
    fn the_order_of_reviews_by_time_decides(
        states in prop::collection::vec((any_state(), any::<bool>()), 1..8),
        seed in any::<prop::sample::Index>(),
    ) {
        // One reviewer, reviews at distinct times, given in a rotated order.
        let mut reviews: Vec<Review> = states
            .iter()
            .enumerate()
            .map(|(i, (s, on_head))| review("alice", *s, if *on_head { HEAD } else { OLD }, i as i64))
            .collect();
        let decisive = states
            .iter()
            .rev()
            .find(|(s, _)| !matches!(s, ReviewState::Commented | ReviewState::Pending));
        let want = u32::from(matches!(decisive, Some((ReviewState::Approved, true))));
        let k = seed.index(reviews.len());
        reviews.rotate_left(k);
        prop_assert_eq!(have(&facts_with(reviews)), want);
    }
}
