use super::*;
use proptest::prelude::*;
use serde_json::json;

fn decode(value: Value) -> Result<VcsBinding, Vec<(String, String)>> {
    let mut p = Problems::default();
    let binding = VcsBinding::from_value(&value, "vcs", &mut p);
    match binding {
        Some(b) if p.is_empty() => Ok(b),
        _ => Err(p.0.into_iter().map(|x| (x.path, x.problem)).collect()),
    }
}

fn paths(problems: &[(String, String)]) -> Vec<&str> {
    problems.iter().map(|(p, _)| p.as_str()).collect()
}

fn binding(directory: &str) -> VcsBinding {
    VcsBinding {
        repository: "acme/infra".into(),
        directory: directory.into(),
        ..VcsBinding::default()
    }
}

#[test]
fn a_bare_repository_takes_every_default_and_serializes_back_to_itself() {
    let b = decode(json!({"repository": "acme/infra"})).expect("valid");
    assert_eq!(b.provider, VcsProvider::Github);
    assert_eq!(b.directory, "");
    assert_eq!(b.branch, "main");
    assert!(b.when_modified.is_empty());
    assert_eq!(b.apply, ApplyMode::AfterMerge);
    assert_eq!(b.requirements, Requirements::default());
    assert_eq!(
        serde_json::to_value(&b).expect("serializes"),
        json!({"repository": "acme/infra"})
    );
}

#[test]
fn every_field_decodes_and_round_trips() {
    let doc = json!({
        "provider": "github",
        "repository": "acme/infra",
        "directory": "envs/prod",
        "branch": "release/2.x",
        "when_modified": ["envs/prod/**", "modules/**/*.tf"],
        "apply": "before_merge",
        "requirements": {"approved": 2, "mergeable": true, "undiverged": true}
    });
    let b = decode(doc.clone()).expect("valid");
    assert_eq!(b.apply.as_str(), "before_merge");
    assert_eq!(b.provider.as_str(), "github");
    assert_eq!(b.requirements.approved, Some(2));
    assert!(b.requirements.mergeable && b.requirements.undiverged);
    // The provider is the default, so it is not written back.
    let mut written = doc.clone();
    written.as_object_mut().map(|o| o.remove("provider"));
    assert_eq!(serde_json::to_value(&b).expect("serializes"), written);
    let back: VcsBinding = serde_json::from_value(doc).expect("deserializes");
    assert_eq!(back, b);
}

#[test]
fn apply_modes_have_their_snake_case_names() {
    for (mode, name) in [
        (ApplyMode::AfterMerge, "after_merge"),
        (ApplyMode::BeforeMerge, "before_merge"),
        (ApplyMode::None, "none"),
    ] {
        assert_eq!(mode.as_str(), name);
        assert_eq!(serde_json::to_value(mode).expect("serializes"), json!(name));
    }
}

#[test]
fn every_problem_is_reported_at_its_path() {
    let problems = decode(json!({
        "repository": "acme",
        "directory": "../up",
        "branch": "bad branch",
        "when_modified": ["ok/**", "fine/*.tf", "/abs/**"],
        "apply": "sometimes",
        "requirements": {"approved": 0, "mergeable": "yes", "extra": 1},
        "colour": "blue"
    }))
    .expect_err("invalid");
    let at = paths(&problems);
    for want in [
        "vcs.repository",
        "vcs.directory",
        "vcs.branch",
        "vcs.when_modified[2]",
        "vcs.apply",
        "vcs.requirements.approved",
        "vcs.requirements.mergeable",
        "vcs.requirements.extra",
        "vcs.colour",
    ] {
        assert!(at.contains(&want), "no problem at {want}: {problems:?}");
    }
    assert!(!at.contains(&"vcs.when_modified[0]"));
}

#[test]
fn a_missing_repository_and_a_non_mapping_are_refused() {
    let problems = decode(json!({})).expect_err("invalid");
    assert_eq!(paths(&problems), ["vcs.repository"]);
    let problems = decode(json!("acme/infra")).expect_err("invalid");
    assert_eq!(paths(&problems), ["vcs"]);
}

#[test]
fn approvals_must_be_one_to_ten() {
    for n in [1, 10] {
        let b = decode(json!({"repository": "a/b", "requirements": {"approved": n}}));
        assert_eq!(b.expect("valid").requirements.approved, Some(n));
    }
    for n in [json!(0), json!(11), json!(-1), json!(1.5)] {
        let problems = decode(json!({"repository": "a/b", "requirements": {"approved": n}}))
            .expect_err("invalid");
        assert_eq!(paths(&problems), ["vcs.requirements.approved"]);
    }
}

#[test]
fn repositories_follow_githubs_rules() {
    let owner39 = "a".repeat(39);
    let name100 = "n".repeat(100);
    for ok in [
        "acme/infra".to_string(),
        "a/b".to_string(),
        "my-org-2/my.repo_name-x".to_string(),
        format!("{owner39}/{name100}"),
        "acme/.github".to_string(),
    ] {
        assert_eq!(repository_problem(&ok), None, "{ok}");
    }
    let owner40 = "a".repeat(40);
    let name101 = "n".repeat(101);
    for (bad, says) in [
        ("acme".to_string(), "owner/name"),
        ("acme/infra/x".to_string(), "exactly one"),
        ("/infra".to_string(), "the owner must be 1 to 39"),
        (format!("{owner40}/x"), "the owner must be 1 to 39"),
        ("-acme/x".to_string(), "hyphen"),
        ("acme-/x".to_string(), "hyphen"),
        ("ac--me/x".to_string(), "single hyphens"),
        ("ac_me/x".to_string(), "single hyphens"),
        ("acme/".to_string(), "the name must be 1 to 100"),
        (format!("acme/{name101}"), "the name must be 1 to 100"),
        ("acme/.".to_string(), "`.` or `..`"),
        ("acme/..".to_string(), "`.` or `..`"),
        ("acme/in fra".to_string(), "ASCII letters"),
        ("acme/infrä".to_string(), "ASCII letters"),
        ("acme/infra.git".to_string(), ".git"),
        ("acme/infra.wiki".to_string(), ".wiki"),
    ] {
        let problem = repository_problem(&bad).unwrap_or_default();
        assert!(problem.contains(says), "{bad}: {problem}");
    }
}

#[test]
fn branches_follow_gits_ref_name_rules() {
    for ok in ["main", "release/1.2", "feature/x-y_z", "v1.0", "a@b", "ünï"] {
        assert_eq!(branch_problem(ok), None, "{ok}");
    }
    let long = "b".repeat(BRANCH_MAX_BYTES + 1);
    for (bad, says) in [
        ("", "empty"),
        (long.as_str(), "at most 255 bytes"),
        ("a\u{7}b", "control"),
        ("a b", "` `"),
        ("a~1", "`~`"),
        ("a^", "`^`"),
        ("a:b", "`:`"),
        ("a?", "`?`"),
        ("a*", "`*`"),
        ("a[b", "`[`"),
        ("a\\b", "`\\`"),
        ("a..b", "`..`"),
        ("a@{1}", "`@{`"),
        ("@", "`@`"),
        ("-x", "`-`"),
        ("/x", "`/`"),
        ("x/", "`/`"),
        ("a//b", "`//`"),
        ("x.", "end with `.`"),
        ("x/.hidden", "begins with `.`"),
        (".x", "begins with `.`"),
        ("x.lock", "`.lock`"),
        ("x.lock/y", "`.lock`"),
    ] {
        let problem = branch_problem(bad).unwrap_or_default();
        assert!(problem.contains(says), "{bad:?}: {problem}");
    }
}

#[test]
fn directories_are_relative_and_plain() {
    for ok in ["", "infra", "envs/prod", "envs/prod/", "a b/[x]"] {
        assert_eq!(directory_problem(ok), None, "{ok}");
    }
    let long = "d".repeat(DIRECTORY_MAX_BYTES + 1);
    for (bad, says) in [
        ("/", "relative"),
        ("/infra", "relative"),
        ("infra\\prod", "`\\`"),
        ("../infra", "`..`"),
        ("infra/../x", "`..`"),
        ("./infra", "`.`"),
        ("a//b", "empty component"),
        ("a\nb", "control"),
        (long.as_str(), "at most 1024 bytes"),
    ] {
        let problem = directory_problem(bad).unwrap_or_default();
        assert!(problem.contains(says), "{bad:?}: {problem}");
    }
    let b = decode(json!({"repository": "a/b", "directory": "envs/prod/"})).expect("valid");
    assert_eq!(b.directory, "envs/prod");
}

#[test]
fn globs_are_bounded_relative_and_valid() {
    let many: Vec<String> = (0..=WHEN_MODIFIED_MAX)
        .map(|i| format!("d{i}/**"))
        .collect();
    let problems = decode(json!({"repository": "a/b", "when_modified": many})).expect_err("21");
    assert_eq!(paths(&problems), ["vcs.when_modified"]);
    let long = format!("{}/**", "g".repeat(GLOB_MAX_BYTES));
    for (bad, says) in [
        ("", "empty"),
        (long.as_str(), "at most 256 bytes"),
        ("/abs/**", "relative"),
        ("a/../b/*", "`..`"),
        ("a\\b", "`\\`"),
        ("infra/", "`/**`"),
        ("a[", "not a valid glob"),
        ("a**/b", "not a valid glob"),
        ("a\tb", "control"),
    ] {
        let problems =
            decode(json!({"repository": "a/b", "when_modified": ["ok/**", bad]})).expect_err(bad);
        assert_eq!(paths(&problems), ["vcs.when_modified[1]"], "{bad:?}");
        assert!(problems[0].1.contains(says), "{bad:?}: {}", problems[0].1);
    }
}

#[test]
fn effective_globs_default_to_the_directory() {
    assert_eq!(binding("").globs(), ["**"]);
    assert_eq!(binding("envs/prod").globs(), ["envs/prod/**"]);
    assert_eq!(binding("envs/prod/").globs(), ["envs/prod/**"]);
    assert_eq!(binding("a[1]*").globs(), ["a[[]1[]][*]/**"]);
    let mut b = binding("envs/prod");
    b.when_modified = vec!["modules/**".into()];
    assert_eq!(b.globs(), ["modules/**"]);
}

#[test]
fn a_star_stays_in_its_directory_and_a_double_star_does_not() {
    let mut b = binding("");
    b.when_modified = vec!["infra/*.tf".into()];
    assert!(b.matches(["infra/main.tf"]));
    assert!(!b.matches(["infra/modules/vpc.tf"]));
    b.when_modified = vec!["infra/**/*.tf".into()];
    assert!(b.matches(["infra/modules/vpc.tf"]));
    assert!(b.matches(["infra/main.tf"]));
    assert!(!b.matches(["infra/README.md"]));
    assert!(!binding("infra").matches(Vec::<&str>::new()));
}

#[test]
fn the_root_default_matches_dotfiles_and_deep_paths() {
    let b = binding("");
    assert!(b.matches([".github/workflows/ci.yml"]));
    assert!(b.matches(["main.tf"]));
    assert!(b.matches(["a/b/c/d.tf"]));
}

#[test]
fn owner_and_name_split_the_repository() {
    let b = binding("");
    assert_eq!((b.owner(), b.name()), ("acme", "infra"));
    let odd = VcsBinding {
        repository: "nobody".into(),
        ..VcsBinding::default()
    };
    assert_eq!((odd.owner(), odd.name()), ("nobody", ""));
}

/// One path component: letters, digits, glob specials, spaces and a non-ASCII letter.
fn component() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9_.\\-\\[\\]*?! é]{1,6}".prop_filter("not . or ..", |c| c != "." && c != "..")
}

fn relative_path(max: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(component(), 1..=max).prop_map(|c| c.join("/"))
}

proptest! {
    #[test]
    fn every_file_under_the_directory_matches_the_default(
        dir in relative_path(3),
        file in relative_path(4),
    ) {
        let path = format!("{dir}/{file}");
        prop_assert!(binding(&dir).matches([path.as_str()]), "{} misses {}", dir, path);
    }

    #[test]
    fn nothing_outside_the_directory_matches_the_default(
        dir in relative_path(3),
        path in relative_path(5),
    ) {
        prop_assume!(!path.starts_with(&format!("{dir}/")));
        prop_assert!(!binding(&dir).matches([path.as_str()]), "{} matches {}", dir, path);
    }

    #[test]
    fn a_renamed_file_counts_by_either_name(
        dir in relative_path(2),
        old in relative_path(3),
        new in relative_path(3),
        old_inside in any::<bool>(),
        new_inside in any::<bool>(),
    ) {
        let old = if old_inside { format!("{dir}/{old}") } else { old };
        let new = if new_inside { format!("{dir}/{new}") } else { new };
        let b = binding(&dir);
        let either = b.matches([old.as_str()]) || b.matches([new.as_str()]);
        prop_assert_eq!(b.matches([old.as_str(), new.as_str()]), either);
        if old_inside || new_inside {
            prop_assert!(b.matches([old.as_str(), new.as_str()]));
        }
    }

    #[test]
    fn valid_repositories_pass_and_one_bad_character_fails(
        owner in "[a-zA-Z0-9]{1,10}(-[a-zA-Z0-9]{1,10}){0,2}",
        name in "[a-zA-Z0-9_\\-][a-zA-Z0-9._\\-]{0,40}",
        bad in "[ /:@#%&+=,é~]",
    ) {
        prop_assume!(!name.to_ascii_lowercase().ends_with(".git")
            && !name.to_ascii_lowercase().ends_with(".wiki"));
        let good = format!("{owner}/{name}");
        let bad_name = format!("{owner}/{name}{bad}");
        let bad_owner = format!("{owner}{bad}/{name}");
        prop_assert_eq!(repository_problem(&good), None);
        prop_assert!(repository_problem(&bad_name).is_some());
        prop_assert!(repository_problem(&bad_owner).is_some());
    }

    #[test]
    fn decoding_never_panics_and_a_decoded_binding_is_valid(
        directory in "[a-z/.\\\\]{0,12}",
        branch in "[a-z/.@{~ ]{0,12}",
        glob in "[a-z/*.\\[\\]]{0,10}",
    ) {
        let doc = json!({"repository": "a/b", "directory": directory,
                         "branch": branch, "when_modified": [glob]});
        if let Ok(b) = decode(doc) {
            prop_assert_eq!(directory_problem(&b.directory), None);
            prop_assert_eq!(branch_problem(&b.branch), None);
            prop_assert!(b.globs().iter().all(|g| glob::Pattern::new(g).is_ok()));
        }
    }
}

#[test]
fn a_gitlab_project_is_its_full_path_under_nested_groups() {
    for ok in [
        "acme/infra",
        "acme/platform/infra",
        "acme/a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q/r/s/t/infra",
        "_acme/infra.v2",
        "acme-corp/infra_live",
    ] {
        assert_eq!(gitlab_project_problem(ok), None, "{ok}");
        assert_eq!(repository_problem_on(VcsProvider::Gitlab, ok), None, "{ok}");
    }
    for bad in [
        "infra",
        "acme//infra",
        "acme/infra/",
        "/acme/infra",
        "acme/-infra",
        "acme/.infra",
        "acme/in..fra",
        "acme/infra.git",
        "acme/infra.atom",
        "acme/in fra",
        "acme/a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q/r/s/t/u/infra",
    ] {
        assert!(
            gitlab_project_problem(bad).is_some(),
            "{bad:?} was accepted"
        );
    }
    // GitHub's rule stays GitHub's: a nested path is not a GitHub repository.
    assert!(repository_problem_on(VcsProvider::Github, "acme/platform/infra").is_some());
}

#[test]
fn a_gitlab_binding_takes_a_nested_project_path() {
    let mut p = Problems::default();
    let b = VcsBinding::from_value(
        &serde_json::json!({"provider": "gitlab", "repository": "acme/platform/infra"}),
        "vcs",
        &mut p,
    );
    assert!(p.0.is_empty(), "{:?}", p.0);
    assert_eq!(b.unwrap().provider, VcsProvider::Gitlab);
}
