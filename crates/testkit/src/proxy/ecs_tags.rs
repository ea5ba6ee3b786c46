//! ECS's rules for the `tags` of a RunTask, which moto does not check (issue 25, item 8).
//!
//! From the ECS API Reference, `Tag`
//! (<https://docs.aws.amazon.com/AmazonECS/latest/APIReference/API_Tag.html>) and RunTask's
//! `tags` ("Array Members: Minimum number of 0 items. Maximum number of 50 items"):
//!
//! - at most 50 tags, each key given once;
//! - a key of 1 to 128 characters, a value of at most 256;
//! - keys and values of letters, numbers, spaces and `+ - = . _ : / @` only (the pattern
//!   `^([\p{L}\p{Z}\p{N}_.:/=+\-@]*)$`);
//! - neither a key nor a value may begin with `aws:` in any case: the prefix is reserved
//!   for AWS.
//!
//! A RunTask that breaks one is refused with `InvalidParameterException`, as ECS does.

use std::collections::BTreeSet;

/// Most tags on one ECS resource.
pub const TAGS_MAX: usize = 50;
/// Longest tag key, in characters.
pub const KEY_MAX: usize = 128;
/// Longest tag value, in characters.
pub const VALUE_MAX: usize = 256;

/// True for a character ECS allows in a tag key or value: `[\p{L}\p{Z}\p{N}_.:/=+\-@]`.
fn tag_char(c: char) -> bool {
    c.is_alphabetic() || c.is_numeric() || c == ' ' || "_.:/=+-@".contains(c)
}

/// Why ECS would refuse the `tags` of the RunTask `params`, or `None` when it would not.
pub fn run_task_tags_problem(params: &serde_json::Value) -> Option<String> {
    let tags = params["tags"].as_array()?;
    if tags.len() > TAGS_MAX {
        return Some(format!(
            "Too many tags: {} were given, at most {TAGS_MAX} are allowed.",
            tags.len()
        ));
    }
    let mut seen = BTreeSet::new();
    for tag in tags {
        let key = tag["key"].as_str().unwrap_or_default();
        let value = tag["value"].as_str().unwrap_or_default();
        if !(1..=KEY_MAX).contains(&key.chars().count()) {
            return Some(format!(
                "Tag key `{key}` must be 1 to {KEY_MAX} characters."
            ));
        }
        if value.chars().count() > VALUE_MAX {
            return Some(format!(
                "The value of tag `{key}` must be at most {VALUE_MAX} characters."
            ));
        }
        if !key.chars().all(tag_char) || !value.chars().all(tag_char) {
            return Some(format!(
                "Tag `{key}` may only contain letters, numbers, spaces and + - = . _ : / @."
            ));
        }
        for text in [key, value] {
            if text
                .get(..4)
                .is_some_and(|p| p.eq_ignore_ascii_case("aws:"))
            {
                return Some(format!(
                    "Tag `{key}`: the aws: prefix is reserved for AWS use."
                ));
            }
        }
        if !seen.insert(key) {
            return Some(format!("Tag key `{key}` is given twice."));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn with(tags: serde_json::Value) -> serde_json::Value {
        json!({"cluster": "c", "tags": tags})
    }

    #[test]
    fn sortie_s_task_tags_pass_and_what_ecs_refuses_is_refused() {
        let ok = with(json!([
            {"key": "sortie:job", "value": "01jnx6v4k2m8q9r3s5t7w0y1za"},
            {"key": "sortie:env", "value": "acme/payments/prod"},
            {"key": "sortie:org", "value": "acme"},
            {"key": "sortie:runner", "value": "acme/fargate"},
        ]));
        assert_eq!(run_task_tags_problem(&ok), None);
        assert_eq!(run_task_tags_problem(&json!({"cluster": "c"})), None);
        let fifty: Vec<_> = (0..50)
            .map(|i| json!({"key": format!("k{i}"), "value": "v"}))
            .collect();
        assert_eq!(run_task_tags_problem(&with(json!(fifty))), None);
        let too_many: Vec<_> = (0..51)
            .map(|i| json!({"key": format!("k{i}"), "value": "v"}))
            .collect();
        let value_256 = "v".repeat(256);
        assert_eq!(
            run_task_tags_problem(&with(json!([{"key": "k".repeat(128), "value": value_256}]))),
            None
        );
        for (bad, words) in [
            (json!(too_many), "Too many tags"),
            (json!([{"key": "", "value": "v"}]), "1 to 128"),
            (json!([{"key": "k".repeat(129), "value": "v"}]), "1 to 128"),
            (
                json!([{"key": "k", "value": "v".repeat(257)}]),
                "at most 256",
            ),
            (json!([{"key": "AWS:ecs", "value": "v"}]), "reserved"),
            (json!([{"key": "k", "value": "aws:x"}]), "reserved"),
            (json!([{"key": "k", "value": "a\nb"}]), "may only contain"),
            (json!([{"key": "k#", "value": "v"}]), "may only contain"),
            (
                json!([{"key": "k", "value": "1"}, {"key": "k", "value": "2"}]),
                "twice",
            ),
        ] {
            let problem = run_task_tags_problem(&with(bad.clone()));
            assert!(
                problem.as_deref().is_some_and(|p| p.contains(words)),
                "{bad}: {problem:?}"
            );
        }
    }
}
