//! How `sortie --help` lists the commands (grouped by resource, the global options once),
//! and `sortie dev` parsed alone so its help lists only its own flags.

use clap::{CommandFactory, Parser, Subcommand};

use super::Cli;

/// The top-level commands by resource, as `sortie --help` groups them (every visible
/// command is in exactly one group; a test checks it).
pub const COMMAND_GROUPS: &[(&str, &[&str])] = &[
    (
        "Resources (kubectl-style: `get jobs ENV`, `get job ID`, `list envs --group G`)",
        &["get", "list", "create", "update", "delete"],
    ),
    ("Jobs", &["run", "job"]),
    ("Environments", &["env", "group"]),
    ("Runners", &["runner"]),
    ("Pull requests", &["vcs"]),
    ("Notifications and audit", &["notify", "audit"]),
    ("Policy", &["policy"]),
    ("Access", &["whoami", "members", "context"]),
    ("Local mode and shell", &["dev", "completion", "help"]),
];

/// The command line as `sortie` parses it: [`Cli`], with its commands grouped by
/// resource in `--help` and the global options listed once.
pub fn command() -> clap::Command {
    let cli = Cli::command();
    let mut groups = String::new();
    for (heading, names) in COMMAND_GROUPS {
        groups.push_str(&format!("{heading}:\n"));
        for name in *names {
            let about = match *name {
                "help" => "Print this message or the help of the given command".to_string(),
                _ => cli
                    .find_subcommand(name)
                    .and_then(|c| c.get_about())
                    .map(|a| a.to_string())
                    .unwrap_or_default(),
            };
            groups.push_str(&format!("  {name:<11} {about}\n"));
        }
        groups.push('\n');
    }
    // `{options}` lists every option of `sortie` itself: all of them are global.
    cli.help_template(format!(
        "{{about-with-newline}}\n{{usage-heading}} {{usage}}\n\n{groups}Global options:\n{{options}}{{after-help}}"
    ))
}

/// `sortie dev ...` parsed alone, so `sortie dev --help` lists only `dev`'s own flags (the
/// global options of the API commands mean nothing to it).
#[derive(Debug, Parser)]
#[command(name = "sortie", version)]
pub struct DevCli {
    /// `dev`.
    #[command(subcommand)]
    pub command: DevOnly,
}

/// The one command of [`DevCli`].
#[derive(Debug, Subcommand)]
pub enum DevOnly {
    /// Run the API, dispatch, task-events and the sweeper in one process against a local AWS.
    Dev(crate::dev::DevArgs),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_help_groups_every_visible_command_once_and_dev_has_only_its_own_flags() {
        let cli = Cli::command();
        let grouped: Vec<&str> = COMMAND_GROUPS
            .iter()
            .flat_map(|(_, n)| n.iter().copied())
            .collect();
        for sub in cli.get_subcommands().filter(|c| !c.is_hide_set()) {
            let name = sub.get_name();
            assert_eq!(grouped.iter().filter(|n| **n == name).count(), 1, "{name}");
        }
        for name in &grouped {
            assert!(
                *name == "help" || cli.find_subcommand(name).is_some(),
                "{name}"
            );
        }
        let help = command().render_help().to_string();
        assert!(
            help.contains("Jobs:\n  run ") && help.contains("Global options:"),
            "{help}"
        );
        assert!(!help.contains("\nCommands:"), "listed once: {help}");
        DevCli::command().debug_assert();
        let mut dev = DevCli::command();
        let dev_help = dev
            .find_subcommand_mut("dev")
            .unwrap()
            .render_long_help()
            .to_string();
        for global in ["--api-url", "--token", "--context", "--output"] {
            assert!(!dev_help.contains(global), "{global}: {dev_help}");
        }
    }
}
