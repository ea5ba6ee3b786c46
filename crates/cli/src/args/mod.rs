//! The command line, as clap derives it: `sortie <verb> <resource> ...`, kubectl- and
//! canyon-style. Every verb the HTTP API has is here.
//!
//! The top level is here: [`Cli`] and its commands; `help` lays out `sortie --help`,
//! `global` holds the options every command takes, and `resources`, `settings`, `jobs`,
//! `notify`, `audit`, `context` and `policy` hold the arguments of the resource verbs, of
//! an environment's settings and of the other commands.

mod audit;
mod context;
mod global;
mod help;
mod jobs;
mod notify;
mod policy;
mod resources;
mod settings;

pub use audit::{AuditCommand, AuditFilter};
pub use context::ContextCommand;
pub use global::{Global, Output};
pub use help::{command, DevCli, DevOnly};
pub use jobs::{JobCommand, JobsGet, JobsList, JobsListed, Operation, Run};
pub use notify::{DestinationArgs, NotifyCommand};
pub use policy::PolicyCommand;
pub use resources::{
    CreateResource, DeleteResource, EnvCommand, GetResource, GroupCommand, ListResource,
    MembersCommand, RunnerCommand, UpdateResource, VcsCommand, VcsProviderArg,
};
pub use settings::{
    ApprovalArg, Clearable, EnvSettingArgs, RemediationArg, ToolArg, TriggerOperationArg,
};

use clap::{Args, Parser, Subcommand};

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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_tree_is_consistent() {
        // Among others: `--version` of `create env`/`update env` does not clash with the
        // version flag the other commands inherit.
        Cli::command().debug_assert();
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
}
