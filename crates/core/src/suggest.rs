//! Nearest-name suggestions: the `did_you_mean` of a 404, among the names the caller may
//! see.

/// At most this many names are suggested.
pub const DID_YOU_MEAN_MAX: usize = 3;

/// The names among `candidates` nearest to `asked` by edit distance, at most
/// [`DID_YOU_MEAN_MAX`], nearest first (ties by name): only those within a third of the
/// longer name's length (at least 2 edits), never `asked` itself. The caller passes only
/// names its caller may see.
pub fn did_you_mean<'a>(asked: &str, candidates: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut scored: Vec<(usize, &str)> = candidates
        .into_iter()
        .filter(|c| *c != asked)
        .filter_map(|c| {
            let longer = c.chars().count().max(asked.chars().count());
            let d = edit_distance(asked, c);
            (d <= (longer / 3).max(2)).then_some((d, c))
        })
        .collect();
    scored.sort();
    scored.dedup();
    scored
        .into_iter()
        .take(DID_YOU_MEAN_MAX)
        .map(|(_, c)| c.to_string())
        .collect()
}

/// Levenshtein distance by characters.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn did_you_mean_picks_the_nearest_names_and_nothing_far() {
        let names = ["prod", "prod-eu", "staging", "dev", "production"];
        assert_eq!(did_you_mean("prdo", names), ["prod"]);
        assert_eq!(did_you_mean("prod-e", names), ["prod-eu", "prod"]);
        assert_eq!(did_you_mean("stagign", names), ["staging"]);
        assert!(did_you_mean("zzzzzzzz", names).is_empty());
        assert!(
            did_you_mean("prod", ["prod"]).is_empty(),
            "never the name asked"
        );
    }

    proptest! {
    #[test]
    fn suggestions_are_few_near_candidates_nearest_first(
        asked in "[a-z]{1,10}",
        names in proptest::collection::vec("[a-z]{1,10}", 0..20),
    ) {
        let got = did_you_mean(&asked, names.iter().map(String::as_str));
        prop_assert!(got.len() <= DID_YOU_MEAN_MAX);
        let mut last = 0;
        for g in &got {
            prop_assert!(names.contains(g));
            prop_assert!(g != &asked);
            let d = edit_distance(&asked, g);
            prop_assert!(d <= (g.len().max(asked.len()) / 3).max(2));
            prop_assert!(d >= last);
            last = d;
        }
    }

    #[test]
    fn edit_distance_is_a_metric(a in "[a-c]{0,6}", b in "[a-c]{0,6}", c in "[a-c]{0,6}") {
        prop_assert_eq!(edit_distance(&a, &b), edit_distance(&b, &a));
        prop_assert_eq!(edit_distance(&a, &a), 0);
        prop_assert!(edit_distance(&a, &c) <= edit_distance(&a, &b) + edit_distance(&b, &c));
    }
    }
}
