//! The command line, as clap derives it: `sortie <verb> <resource> ...`, kubectl- and
//! canyon-style. Every verb the HTTP API has is here.
//!
//! The top level is here; `resources`, `settings` and `jobs` hold the arguments of the
//! resource verbs, of an environment's settings and of the job commands.

mod audit;
mod jobs;
mod notify;
mod resources;
mod settings;

pub use audit::{AuditCommand, AuditFilter};
pub use jobs::{JobCommand, JobsGet, JobsList, JobsListed, Operation, Run};
pub use notify::{DestinationArgs, NotifyCommand};
pub use resources::{
    CreateResource, DeleteResource, EnvCommand, GetResource, GroupCommand, ListResource,
    MembersCommand, RunnerCommand, UpdateResource, VcsCommand,
};
pub use settings::{
    ApprovalArg, Clearable, EnvSettingArgs, RemediationArg, ToolArg, TriggerOperationArg,
};

use std::path::PathBuf;

use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};

/// Sortie: Terraform and OpenTofu jobs on AWS with no always-on server.
#[derive(Debug, Parser)]
#[command(name = "sortie", version, about, propagate_version = true)]
pub struct Cli {
    /// Where and as whom to call the API.
    #[command(flatten)]
    pub global: Global,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

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

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create a resource: `runner NAME -f FILE`, `runner-rule --set k=v ...`, `env PATH --type T`.
    Create(Create),
    /// Show one resource: `runner ID`, `runner-rule ID`, `env PATH`, `job ID`, `jobs ENV`.
    Get(Get),
    /// List resources: `runners`, `runner-rules`, `envs`, `jobs ENV`.
    List(List),
    /// Change a resource.
    Update(Update),
    /// Delete a resource.
    Delete(Delete),
    /// Environment actions: `env refresh-runner PATH [--dry-run]`, `env outputs PATH`,
    /// `env lock PATH --reason TEXT`, `env unlock PATH`.
    #[command(subcommand)]
    Env(EnvCommand),
    /// Group actions: `group lock GROUP --reason TEXT` (a freeze), `group unlock GROUP`,
    /// `group expiry GROUP [--default-ttl 3d] [--max-ttl 14d]`.
    #[command(subcommand)]
    Group(GroupCommand),
    /// Submit a plan, apply or destroy to an environment.
    Run(Run),
    /// List an environment's jobs (`jobs list ENV`; the same as `list jobs ENV`).
    #[command(hide = true)]
    Jobs(JobsList),
    /// Job actions: get, cancel, approve, discard, logs, outputs.
    #[command(subcommand)]
    Job(JobCommand),
    /// Memberships of a group: grant, revoke, list.
    #[command(subcommand)]
    Members(MembersCommand),
    /// Policy actions: `policy test -f SET --plan PLAN.json [--env PATH]`.
    #[command(subcommand)]
    Policy(PolicyCommand),
    /// Runner actions: `runner check ID`.
    #[command(subcommand)]
    Runner(RunnerCommand),
    /// Pull requests: `vcs connect github ORG --app-id … --private-key-file …
    /// --webhook-secret-file …`, `vcs get github ORG`, `vcs disconnect github ORG`.
    #[command(subcommand)]
    Vcs(VcsCommand),
    /// Notification destinations of a group: `notify create acme/ops --webhook URL`,
    /// `notify list GROUP`, `notify deliveries acme/ops`, `notify test acme/ops`.
    #[command(subcommand)]
    Notify(NotifyCommand),
    /// The audit trail of an organisation: `audit list acme --actor alice`,
    /// `audit verify acme` (recomputes its hash chain and names the first broken link).
    #[command(subcommand)]
    Audit(AuditCommand),
    /// Named contexts (API URL and token source) in the config file.
    #[command(subcommand)]
    Context(ContextCommand),
    /// Who the API takes you for: its URL, your subject, your credential's source and your
    /// memberships.
    Whoami(Whoami),
    /// Print a shell completion script.
    Completion {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Run the API, dispatch, task-events and the sweeper in one process against a local AWS.
    Dev(crate::dev::DevArgs),
}

/// `create <resource>`.
#[derive(Debug, Args)]
pub struct Create {
    /// What to create.
    #[command(subcommand)]
    pub resource: CreateResource,
}

/// `get <resource> ID`.
#[derive(Debug, Args)]
pub struct Get {
    /// What to show.
    #[command(subcommand)]
    pub resource: GetAny,
}

/// What `get` shows: a resource of `resources`, or jobs.
#[derive(Debug, Subcommand)]
pub enum GetAny {
    /// Runners, rules and environments.
    #[command(flatten)]
    Resource(GetResource),
    /// Jobs.
    #[command(flatten)]
    Jobs(JobsGet),
}

/// `list <resources>`.
#[derive(Debug, Args)]
pub struct List {
    /// What to list.
    #[command(subcommand)]
    pub resource: ListAny,
}

/// What `list` lists: a resource of `resources`, or jobs.
#[derive(Debug, Subcommand)]
pub enum ListAny {
    /// Runners, rules and environments.
    #[command(flatten)]
    Resource(ListResource),
    /// Jobs.
    #[command(flatten)]
    Jobs(JobsListed),
}

/// `whoami`.
#[derive(Debug, Args)]
pub struct Whoami {
    /// Also list your memberships in this organisation (the root group's are always read).
    #[arg(long, value_name = "ORG")]
    pub org: Option<String>,
}

/// `update <resource>`.
#[derive(Debug, Args)]
pub struct Update {
    /// What to change.
    #[command(subcommand)]
    pub resource: UpdateResource,
}

/// `delete <resource> ID`.
#[derive(Debug, Args)]
pub struct Delete {
    /// What to delete.
    #[command(subcommand)]
    pub resource: DeleteResource,
}

/// `context ...`.
#[derive(Debug, Subcommand)]
pub enum ContextCommand {
    /// Make a context the current one.
    Use {
        /// The context's name.
        name: String,
    },
    /// Create or change a context.
    Set {
        /// The context's name.
        name: String,
        /// The API's base URL.
        #[arg(long)]
        api_url: Option<String>,
        /// A command whose standard output is the token (an OIDC helper).
        #[arg(long)]
        token_command: Option<String>,
        /// A token to store in the file (prefer `--token-command`).
        #[arg(long)]
        token: Option<String>,
    },
    /// List the contexts, marking the current one.
    List,
    /// Print the current context's name.
    Current,
}

#[cfg(test)]
mod tests {
    use super::settings::{parse_duration, CommaList};
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_tree_is_consistent() {
        // Among others: `--version` of `create env`/`update env` does not clash with the
        // version flag the other commands inherit.
        Cli::command().debug_assert();
    }

    fn env_settings(args: &[&str]) -> EnvSettingArgs {
        let mut all = vec!["sortie", "update", "env", "acme/prod"];
        all.extend_from_slice(args);
        match Cli::try_parse_from(all).unwrap().command {
            Command::Update(Update {
                resource: UpdateResource::Env { settings, .. },
            }) => settings,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_empty_value_clears_a_setting_and_four_eyes_takes_an_optional_value() {
        let s = env_settings(&[
            "--four-eyes",
            "--drift-schedule",
            "",
            "--tool",
            "",
            "--version",
            "",
            "--approval-timeout",
            "",
        ]);
        assert_eq!(s.four_eyes, Some(true));
        assert_eq!(s.drift_schedule, Some(Clearable::Clear));
        assert_eq!(s.tool, Some(Clearable::Clear));
        assert_eq!(s.tool_version, Some(Clearable::Clear));
        assert_eq!(s.approval_timeout, Some(Clearable::Clear));
        let s = env_settings(&[
            "--four-eyes=false",
            "--approval",
            "required",
            "--approval-timeout",
            "3600",
            "--tool",
            "opentofu",
            "--tool-version",
            "~> 1.6",
            "--drift-remediation",
            "apply",
        ]);
        assert_eq!(s.four_eyes, Some(false));
        assert_eq!(s.approval, Some(ApprovalArg::Required));
        assert_eq!(s.approval_timeout, Some(Clearable::Set(3600)));
        assert_eq!(s.tool, Some(Clearable::Set(ToolArg::Opentofu)));
        assert_eq!(s.tool_version, Some(Clearable::Set("~> 1.6".into())));
        assert_eq!(s.drift_remediation, Some(RemediationArg::Apply));
        assert!(env_settings(&[]).is_empty());
        for bad in [
            &["--tool", "terraformx"][..],
            &["--approval-timeout", "1x"][..],
            &["--four-eyes=maybe"][..],
            &["--approval", "sometimes"][..],
        ] {
            let mut all = vec!["sortie", "update", "env", "acme/prod"];
            all.extend_from_slice(bad);
            assert!(Cli::try_parse_from(all).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_duration_takes_units_as_get_env_prints_them_or_plain_seconds() {
        assert_eq!(parse_duration("24h"), Ok(86_400));
        assert_eq!(parse_duration("90m"), Ok(5_400));
        assert_eq!(parse_duration("2d"), Ok(172_800));
        assert_eq!(parse_duration("1h30m"), Ok(5_400));
        assert_eq!(parse_duration("45s"), Ok(45));
        assert_eq!(parse_duration("3600"), Ok(3_600));
        for bad in ["", "h", "1x", "30m1h", "1h1h", "-5m", "1.5h", "99999999d"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        assert_eq!(
            env_settings(&["--approval-timeout", "24h"]).approval_timeout,
            Some(Clearable::Set(86_400))
        );
    }

    #[test]
    fn jobs_read_as_get_and_list_verbs_and_the_old_forms_stay() {
        let parse = |args: &[&str]| {
            let mut all = vec!["sortie"];
            all.extend_from_slice(args);
            Cli::try_parse_from(all).unwrap().command
        };
        assert!(matches!(
            parse(&["get", "job", "01abc"]),
            Command::Get(Get { resource: GetAny::Jobs(JobsGet::Job { id }) }) if id == "01abc"
        ));
        assert!(matches!(
            parse(&["get", "jobs", "acme/prod"]),
            Command::Get(Get { resource: GetAny::Jobs(JobsGet::Jobs { env }) }) if env == "acme/prod"
        ));
        assert!(matches!(
            parse(&["list", "jobs", "acme/prod"]),
            Command::List(List { resource: ListAny::Jobs(JobsListed::Jobs { env }) }) if env == "acme/prod"
        ));
        assert!(matches!(
            parse(&["get", "env", "acme/prod"]),
            Command::Get(Get {
                resource: GetAny::Resource(GetResource::Env { .. })
            })
        ));
        assert!(matches!(
            parse(&["jobs", "list", "acme/prod"]),
            Command::Jobs(_)
        ));
        assert!(matches!(
            parse(&["job", "get", "01abc"]),
            Command::Job(JobCommand::Get { .. })
        ));
    }

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

    /// Values tried for a flag or positional whose value is free text, in order: the first
    /// that the flag's own parser accepts is used.
    const SAMPLES: &[&str] = &[
        "acme/demo/hello",
        "acme/demo/hello,acme/net/vpc",
        "3d",
        "1",
        "true",
        "0 */6 * * *",
        "a=b",
        "acme",
        "01m8h1gamjemvvhevamz61rdtf",
        "http://127.0.0.1:1",
        "",
    ];

    type Parse<'a> = &'a dyn Fn(&[String]) -> Result<(), clap::Error>;

    /// The values to try for `arg`: its possible values, else [`SAMPLES`].
    fn candidates(arg: &clap::Arg) -> Vec<String> {
        let possible: Vec<String> = arg
            .get_possible_values()
            .iter()
            .map(|v| v.get_name().to_string())
            .collect();
        if possible.is_empty() {
            SAMPLES.iter().map(|s| s.to_string()).collect()
        } else {
            possible
        }
    }

    /// The words of `arg` with its `n`th candidate value.
    fn words(arg: &clap::Arg, n: usize) -> Vec<String> {
        let value = || candidates(arg)[n].clone();
        match arg.get_long() {
            None => vec![value()],
            Some(long) if !arg.get_action().takes_values() => vec![format!("--{long}")],
            Some(long) => vec![format!("--{long}={}", value())],
        }
    }

    /// The arg of `cmd` that clap names in an error (`--runner <RUNNER>`, `<OPERATION>`).
    fn named<'c>(cmd: &'c clap::Command, text: &str) -> Option<&'c clap::Arg> {
        cmd.get_arguments().find(|a| {
            text.eq_ignore_ascii_case(&format!("<{}>", a.get_id()))
                || a.get_long().is_some_and(|l| {
                    text == format!("--{l}") || text.starts_with(&format!("--{l} "))
                })
                || a.get_value_names()
                    .is_some_and(|n| n.iter().any(|n| text == format!("<{n}>")))
        })
    }

    /// A command line reaching `cmd` (`path`) with `given` (an arg id and its candidate
    /// index), plus what clap says is missing, with values advanced until clap accepts
    /// them: the argv, or clap's last objection.
    fn solve(
        parse: Parse,
        cmd: &clap::Command,
        path: &[String],
        mut given: Vec<(String, usize)>,
    ) -> Result<Vec<String>, clap::error::ErrorKind> {
        use clap::error::{ContextKind, ContextValue, ErrorKind};
        for a in cmd.get_arguments().filter(|a| a.is_required_set()) {
            if !given.iter().any(|(id, _)| id == a.get_id().as_str()) {
                given.push((a.get_id().to_string(), 0));
            }
        }
        let arg = |id: &str| cmd.get_arguments().find(|a| a.get_id() == id);
        let mut last = ErrorKind::DisplayHelp;
        for _ in 0..64 {
            let mut argv = path.to_vec();
            // Options first, then positionals in their order.
            for (id, n) in &given {
                let a = arg(id).expect("an arg of the command");
                if a.get_long().is_some() {
                    argv.extend(words(a, *n));
                }
            }
            let mut positional: Vec<&(String, usize)> = given
                .iter()
                .filter(|(id, _)| arg(id).is_some_and(|a| a.get_long().is_none()))
                .collect();
            positional.sort_by_key(|(id, _)| cmd.get_positionals().position(|a| a.get_id() == id));
            for (id, n) in positional {
                argv.extend(words(arg(id).expect("an arg"), *n));
            }
            let e = match parse(&argv) {
                Ok(()) => return Ok(argv),
                Err(e) => e,
            };
            last = e.kind();
            let texts: Vec<String> = match e.get(ContextKind::InvalidArg) {
                Some(ContextValue::String(s)) => vec![s.clone()],
                Some(ContextValue::Strings(v)) => v.clone(),
                _ => vec![],
            };
            let mut moved = false;
            for text in texts {
                let Some(a) = named(cmd, &text) else { continue };
                let id = a.get_id().to_string();
                match (e.kind(), given.iter_mut().find(|(g, _)| *g == id)) {
                    (ErrorKind::MissingRequiredArgument, None) => {
                        given.push((id, 0));
                        moved = true;
                    }
                    (ErrorKind::InvalidValue | ErrorKind::ValueValidation, Some(g))
                        if g.1 + 1 < candidates(a).len() =>
                    {
                        g.1 += 1;
                        moved = true;
                    }
                    _ => {}
                }
            }
            if !moved {
                break;
            }
        }
        Err(last)
    }

    /// Each flag of `cmd` and its subcommands, on a command line that parses: clap's derive
    /// then reads every field, so a field whose type is not what its parser makes panics
    /// here ("Mismatch between definition and access"). Counts the flags read, and lists
    /// those no sample satisfied, with clap's reason.
    fn every_flag(
        parse: Parse,
        cmd: &clap::Command,
        path: Vec<String>,
        checked: &mut usize,
        unsatisfied: &mut Vec<String>,
    ) {
        if cmd.has_subcommands() {
            for sub in cmd.get_subcommands() {
                let mut next = path.clone();
                next.push(sub.get_name().to_string());
                every_flag(parse, sub, next, checked, unsatisfied);
            }
            return;
        }
        for arg in cmd.get_arguments() {
            let id = arg.get_id().as_str();
            if ["help", "version"].contains(&id) || arg.is_global_set() {
                continue;
            }
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                solve(parse, cmd, &path, vec![(id.to_string(), 0)])
            }));
            match outcome {
                Err(_) => panic!("`{} {id}` panics when read", path.join(" ")),
                Ok(Ok(_)) => *checked += 1,
                Ok(Err(kind)) => unsatisfied.push(format!("{} {id}: {kind:?}", path.join(" "))),
            }
        }
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

    /// Issue 47 item 1: `update env --triggers` crashed the CLI. The class, not the flag:
    /// every flag of every command is parsed and read, and none panics.
    #[test]
    fn every_flag_of_every_command_parses_and_reads_as_its_type() {
        let (mut checked, mut unsatisfied) = (0, vec![]);
        let parse = |argv: &[String]| {
            let mut all = vec!["sortie".to_string()];
            all.extend_from_slice(argv);
            Cli::try_parse_from(all).map(|_| ())
        };
        every_flag(
            &parse,
            &Cli::command(),
            vec![],
            &mut checked,
            &mut unsatisfied,
        );
        let parse_dev = |argv: &[String]| {
            let mut all = vec!["sortie".to_string()];
            all.extend_from_slice(argv);
            DevCli::try_parse_from(all).map(|_| ())
        };
        let mut dev = DevCli::command();
        dev.build();
        every_flag(&parse_dev, &dev, vec![], &mut checked, &mut unsatisfied);
        assert!(checked >= 117, "only {checked} flags were reached");
        // Every flag and positional of every command was reached (with what clap says it
        // needs): one that no sample satisfies is listed, so SAMPLES grows with the CLI.
        assert!(unsatisfied.is_empty(), "{unsatisfied:#?}");
    }

    #[test]
    fn triggers_and_trigger_inputs_are_lists() {
        let s = env_settings(&[
            "--triggers",
            "acme/net/vpc, acme/db/main",
            "--trigger-inputs",
            "",
        ]);
        assert_eq!(
            s.triggers,
            Some(CommaList(vec![
                "acme/net/vpc".into(),
                "acme/db/main".into()
            ]))
        );
        assert_eq!(s.trigger_inputs, Some(CommaList(vec![])));
    }
}

/// `policy ...`.
#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Evaluate a policy set locally against a saved plan (`terraform show -json`), with the
    /// input Sortie would build; exits 7 when a mandatory or review set denies.
    Test {
        /// The policy set file (YAML or JSON).
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
        /// The plan, as `terraform show -json` (or `GET /v1/jobs/ID/plan.json`) writes it.
        #[arg(long)]
        plan: PathBuf,
        /// An environment whose type, labels, tags and runner go in the input (read from the
        /// API); without it the input's job has none and criteria are not checked.
        #[arg(long)]
        env: Option<String>,
        /// The job's operation in the input.
        #[arg(long, default_value = "apply")]
        operation: String,
    },
}
