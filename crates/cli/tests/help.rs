//! Every command of `sortie`, at every depth, prints its help and exits 0: the whole
//! grammar is walked from `sortie --help`, so a new command is covered the day it is
//! added. (The end-to-end tests, which run `sortie dev` with the pilot and Terraform, are
//! the workspace member `sortie-tests`, in `tests/` at the top.)

use std::process::Command;

/// The subcommands a help text lists: the first word of each two-space-indented line of
/// a command section (everything between `Usage:` and `Options:`), but `help`.
fn subcommands(help: &str) -> Vec<String> {
    let Some(start) = help.find("Usage:") else {
        return vec![];
    };
    let body = &help[start..];
    let end = body.find("\nOptions:").unwrap_or(body.len());
    body[..end]
        .lines()
        .filter(|line| line.starts_with("  ") && !line.starts_with("   "))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|word| *word != "help" && word.chars().all(|c| c.is_ascii_lowercase() || c == '-'))
        .map(str::to_string)
        .collect()
}

#[test]
fn every_command_prints_its_help_and_exits_zero() {
    let mut queue = vec![vec![]];
    let mut seen = 0;
    while let Some(path) = queue.pop() {
        let out = Command::new(env!("CARGO_BIN_EXE_sortie"))
            .args(&path)
            .arg("--help")
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        let shown = format!("sortie {} --help", path.join(" "));
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{shown} exited {:?}: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        );
        let usage = format!("Usage: sortie {}", path.join(" "));
        assert!(help.contains(usage.trim_end()), "{shown} printed:\n{help}");
        seen += 1;
        for sub in subcommands(&help) {
            let mut next = path.clone();
            next.push(sub);
            queue.push(next);
        }
    }
    // The top level alone lists 20 commands; each resource verb has several more.
    assert!(seen > 40, "only {seen} commands were walked");
}
