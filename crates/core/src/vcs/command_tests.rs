use super::*;
use proptest::prelude::*;

fn plan(envs: &[&str]) -> Command {
    Command::Plan {
        environments: envs.iter().map(|e| e.to_string()).collect(),
    }
}

fn apply(envs: &[&str]) -> Command {
    Command::Apply {
        environments: envs.iter().map(|e| e.to_string()).collect(),
    }
}

fn unknown_says(command: &Command, words: &str) -> bool {
    matches!(command, Command::Unknown { text } if text.contains(words))
}

#[test]
fn plan_apply_and_help_are_read_with_their_environments() {
    let body = "Looks good.\n/sortie plan\n  /sortie apply prod staging\n/sortie help\n/sortie";
    assert_eq!(
        parse_commands(body),
        [
            plan(&[]),
            apply(&["prod", "staging"]),
            Command::Help,
            Command::Help
        ]
    );
}

#[test]
fn only_the_exact_first_word_makes_a_command() {
    for body in [
        "please /sortie apply",
        "/Sortie apply",
        "/sortied apply",
        "sortie apply",
        "`/sortie apply`",
        "- /sortie apply",
        "",
    ] {
        assert_eq!(parse_commands(body), [], "{body:?}");
    }
}

#[test]
fn repeated_environments_count_once_in_order() {
    assert_eq!(parse_commands("/sortie plan b a b a"), [plan(&["b", "a"])]);
}

#[test]
fn unknown_subcommands_and_options_say_what_was_wrong() {
    let got = parse_commands("/sortie destroy prod\n/sortie plan -p prod");
    assert!(
        unknown_says(&got[0], "“destroy” is not a Sortie command"),
        "{got:?}"
    );
    assert!(unknown_says(&got[1], "not options such as “-p”"), "{got:?}");
}

#[test]
fn a_quoted_word_is_cut_short() {
    let long = "x".repeat(1000);
    let got = parse_commands(&format!("/sortie {long}"));
    let Command::Unknown { text } = &got[0] else {
        panic!("{got:?}")
    };
    assert!(text.len() < 200, "{text}");
}

#[test]
fn environment_arguments_are_bounded() {
    let twenty: Vec<String> = (0..MAX_ENVIRONMENTS).map(|i| format!("e{i}")).collect();
    let got = parse_commands(&format!("/sortie apply {}", twenty.join(" ")));
    assert!(matches!(&got[0], Command::Apply { environments } if environments.len() == 20));

    let got = parse_commands(&format!("/sortie apply {} e20", twenty.join(" ")));
    assert!(unknown_says(&got[0], "at most 20 environments"), "{got:?}");

    let longest = "e".repeat(MAX_ENVIRONMENT_BYTES);
    let got = parse_commands(&format!("/sortie plan {longest}"));
    assert_eq!(got, [plan(&[longest.as_str()])]);
    let got = parse_commands(&format!("/sortie plan {longest}e"));
    assert!(unknown_says(&got[0], "at most 256 bytes"), "{got:?}");
}

#[test]
fn a_comment_holds_at_most_five_commands() {
    let body = "/sortie plan a\n".repeat(MAX_COMMANDS + 3);
    let got = parse_commands(&body);
    assert_eq!(got.len(), MAX_COMMANDS + 1);
    assert!(got[..MAX_COMMANDS].iter().all(|c| *c == plan(&["a"])));
    assert!(unknown_says(&got[MAX_COMMANDS], "at most 5 commands"));
}

#[test]
fn fenced_code_is_never_a_command() {
    for body in [
        "```\n/sortie apply\n```",
        "```sh\n/sortie apply\n```",
        "~~~\n/sortie apply\n~~~",
        "````\n```\n/sortie apply\n````",
        "~~~\n```\n/sortie apply\n~~~",
        "  ```\n/sortie apply\n  ```",
        "```\nnever closed\n/sortie apply",
    ] {
        assert_eq!(parse_commands(body), [], "{body:?}");
    }
    assert_eq!(
        parse_commands("```\n/sortie apply\n```\n/sortie plan"),
        [plan(&[])]
    );
    // Two backticks are inline code, not a fence.
    assert_eq!(parse_commands("``x``\n/sortie plan"), [plan(&[])]);
}

#[test]
fn quotes_and_their_lazy_continuations_are_never_commands() {
    for body in [
        "> /sortie apply",
        ">/sortie apply",
        "  > /sortie apply",
        ">> /sortie apply",
        "> they said:\n/sortie apply",
        "> they said:\r\n/sortie apply",
        "> they said:\r/sortie apply",
    ] {
        assert_eq!(parse_commands(body), [], "{body:?}");
    }
    assert_eq!(
        parse_commands("> /sortie apply\n\n/sortie plan"),
        [plan(&[])]
    );
}

#[test]
fn windows_and_old_mac_line_ends_separate_lines() {
    assert_eq!(
        parse_commands("hi\r\n/sortie plan\r/sortie apply x\r\n"),
        [plan(&[]), apply(&["x"])]
    );
}

#[test]
fn help_names_every_command_and_the_bounds() {
    let help = help_text();
    for words in [
        "/sortie plan",
        "/sortie apply",
        "/sortie help",
        "at most 5",
        "at most 20",
    ] {
        assert!(help.contains(words), "{words}");
    }
}

/// A line that is not a command: any text whose first word is not `/sortie`.
fn other_line() -> impl Strategy<Value = String> {
    "[ a-z>`~/*#\\-]{0,30}".prop_filter("not a command", |l| {
        l.split_whitespace().next() != Some(COMMAND_WORD)
    })
}

fn command_line() -> impl Strategy<Value = String> {
    (
        "[ ]{0,3}",
        prop::sample::select(vec!["plan", "apply", "help", ""]),
        "[ a-z]{0,20}",
    )
        .prop_map(|(indent, verb, rest)| format!("{indent}/sortie {verb} {rest}"))
}

proptest! {
    #[test]
    fn text_without_a_sortie_line_parses_to_nothing(
        lines in prop::collection::vec(other_line(), 0..20),
        junk in "\\PC{0,200}",
    ) {
        prop_assume!(!junk.contains(COMMAND_WORD));
        let body = format!("{}\n{junk}", lines.join("\n"));
        prop_assert_eq!(parse_commands(&body), vec![]);
    }

    #[test]
    fn quoting_any_command_line_parses_to_nothing(
        lines in prop::collection::vec(prop_oneof![command_line(), other_line()], 0..20),
        mark in prop::sample::select(vec![">", "> ", "  > ", ">>", "> > "]),
    ) {
        let body: Vec<String> = lines
            .iter()
            .map(|l| if l.trim_start().starts_with(COMMAND_WORD) { format!("{mark}{l}") } else { l.clone() })
            .collect();
        prop_assert_eq!(parse_commands(&body.join("\n")), vec![]);
    }

    #[test]
    fn commands_inside_a_fence_parse_to_nothing(
        lines in prop::collection::vec(command_line(), 0..10),
        fence in prop::sample::select(vec!["```", "~~~", "````text"]),
    ) {
        let body = format!("{fence}\n{}", lines.join("\n"));
        prop_assert_eq!(parse_commands(&body), vec![]);
    }

    #[test]
    fn every_parse_is_bounded(body in "\\PC{0,400}", extra in prop::collection::vec(command_line(), 0..12)) {
        let body = format!("{body}\n{}", extra.join("\n"));
        let got = parse_commands(&body);
        prop_assert!(got.len() <= MAX_COMMANDS + 1);
        for c in got {
            if let Command::Plan { environments } | Command::Apply { environments } = c {
                prop_assert!(environments.len() <= MAX_ENVIRONMENTS);
                prop_assert!(environments.iter().all(|e| e.len() <= MAX_ENVIRONMENT_BYTES && !e.is_empty()));
            }
        }
    }
}
