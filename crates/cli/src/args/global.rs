//! The options every command takes (`--api-url`, `--token`, `--context`, `--output`, ...),
//! listed once under "Global options", and the output formats.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

/// Options every command takes, listed once under "Global options".
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Global options")]
pub struct Global {
    /// The API's base URL (else `SORTIE_API_URL`, else the current context).
    #[arg(long, global = true, value_name = "URL")]
    pub api_url: Option<String>,
    /// The bearer token (else `SORTIE_TOKEN`, else the context's token or
    /// token_command). Never printed.
    #[arg(long, global = true, value_name = "TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Use this context of the config file instead of the current one.
    #[arg(long, global = true, value_name = "NAME")]
    pub context: Option<String>,
    /// The config file (else `SORTIE_CONFIG`, else `~/.config/sortie/config.yaml`).
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Output format.
    #[arg(short = 'o', long, global = true, value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// Say, on standard error, which API URL and credential are used and where each
    /// came from (a flag, a variable overriding the context, or the context).
    #[arg(short = 'v', long, global = true)]
    pub verbose: bool,
}

/// How results are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// A readable table (the default).
    Table,
    /// JSON, as the API answered it.
    Json,
    /// YAML, as the API answered it.
    Yaml,
}

#[cfg(test)]
mod tests {
    use crate::args::{Cli, Command, ContextCommand};
    use clap::{CommandFactory, Parser};

    #[test]
    fn global_options_are_listed_once_under_their_own_heading() {
        let mut cli = Cli::command();
        cli.build();
        let help = cli
            .find_subcommand_mut("run")
            .unwrap()
            .render_long_help()
            .to_string();
        let (own, global) = help.split_once("Global options:").expect(&help);
        assert!(
            own.contains("--wait") && !own.contains("--api-url"),
            "{help}"
        );
        assert!(
            global.contains("--api-url") && global.contains("--token"),
            "{help}"
        );
        assert_eq!(help.matches("--api-url").count(), 1, "{help}");
    }

    /// A command's own flag named like a global option is never read: the global one takes
    /// it (`vcs connect --api-url` once sent the CLI to GitHub's API instead of Sortie's).
    #[test]
    fn no_command_has_a_flag_named_like_a_global_option() {
        fn walk(
            cmd: &clap::Command,
            globals: &std::collections::BTreeSet<String>,
            path: &str,
            clashes: &mut Vec<String>,
        ) {
            for sub in cmd.get_subcommands() {
                let here = format!("{path} {}", sub.get_name());
                for arg in sub.get_arguments() {
                    if let Some(long) = arg.get_long() {
                        if globals.contains(long) {
                            clashes.push(format!("{here} --{long}"));
                        }
                    }
                }
                walk(sub, globals, &here, clashes);
            }
        }
        let cli = Cli::command();
        let globals = cli
            .get_arguments()
            .filter_map(|a| a.get_long().map(str::to_string))
            .collect();
        let mut clashes = Vec::new();
        walk(&cli, &globals, "sortie", &mut clashes);
        // `context set` writes the global options' own values to the config file: it
        // reads them as its own, as the parse below proves.
        clashes.retain(|c| !c.starts_with("sortie context set "));
        assert!(clashes.is_empty(), "{clashes:?}");
        assert!(globals.contains("api-url"), "{globals:?}");
        let parsed = Cli::try_parse_from([
            "sortie",
            "context",
            "set",
            "prod",
            "--api-url",
            "https://x",
            "--token",
            "t",
        ])
        .unwrap();
        match parsed.command {
            Command::Context(ContextCommand::Set { api_url, token, .. }) => {
                assert_eq!(
                    (api_url.as_deref(), token.as_deref()),
                    (Some("https://x"), Some("t"))
                );
            }
            other => panic!("{other:?}"),
        }
    }
}
