//! The command line, as clap derives it: `sortie <verb> <resource> ...`, kubectl- and
//! canyon-style. Every verb the HTTP API has is here.

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
    ("Environments", &["env"]),
    ("Runners", &["runner"]),
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
    /// Environment actions: `env refresh-runner PATH [--dry-run]`, `env outputs PATH`.
    #[command(subcommand)]
    Env(EnvCommand),
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
    /// Runner actions: `runner check ID`.
    #[command(subcommand)]
    Runner(RunnerCommand),
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

/// What `create` makes.
#[derive(Debug, Subcommand)]
pub enum CreateResource {
    /// A runner, `GROUP/NAME` (or `NAME` for a shared runner), from a runner file.
    Runner {
        /// `GROUP/NAME`, or `NAME` for a shared runner.
        id: String,
        /// The runner file (YAML or JSON); `-` reads standard input.
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
    },
    /// A runner rule at a scope: `--set scope=acme --set id=prod --set runner_id=acme/fargate
    /// --set criteria.env_type=production --set priority=5`, or `-f FILE`.
    RunnerRule {
        /// `key=value` fields; dotted keys nest (`criteria.env_type=production`).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// A rule file (YAML or JSON) instead of, or under, `--set`.
        #[arg(short = 'f', long = "file")]
        file: Option<PathBuf>,
    },
    /// An environment, `GROUP/NAME`, with its approval, drift and tool settings.
    #[command(disable_version_flag = true)]
    Env {
        /// The environment's path, `GROUP/NAME`.
        path: String,
        /// Its type, such as `production`.
        #[arg(long = "type")]
        env_type: String,
        /// Labels, `key=value`.
        #[arg(long = "label", value_name = "KEY=VALUE")]
        labels: Vec<String>,
        /// Tags.
        #[arg(long = "tag")]
        tags: Vec<String>,
        /// Approval, drift detection, tool and version.
        #[command(flatten)]
        settings: EnvSettingArgs,
    },
}

/// `get <resource> ID`.
#[derive(Debug, Args)]
pub struct Get {
    /// What to show.
    #[command(subcommand)]
    pub resource: GetAny,
}

/// What `get` shows: a resource of `resources.rs`, or jobs.
#[derive(Debug, Subcommand)]
pub enum GetAny {
    /// Runners, rules and environments.
    #[command(flatten)]
    Resource(GetResource),
    /// Jobs.
    #[command(flatten)]
    Jobs(JobsGet),
}

/// `get job ID`, `get jobs ENV`.
#[derive(Debug, Subcommand)]
pub enum JobsGet {
    /// A job, with its transitions (the same as `job get ID`).
    Job {
        /// The job id.
        id: String,
    },
    /// An environment's newest jobs (the same as `list jobs ENV`).
    Jobs {
        /// The environment's path.
        env: String,
    },
}

/// What `get` shows.
#[derive(Debug, Subcommand)]
pub enum GetResource {
    /// A runner, `GROUP/NAME`.
    Runner {
        /// `GROUP/NAME`, or `NAME` for a shared runner.
        id: String,
    },
    /// A runner rule, `SCOPE/ID` (a rule id at its scope).
    RunnerRule {
        /// `SCOPE/ID`.
        id: String,
    },
    /// An environment, `GROUP/NAME`.
    Env {
        /// The environment's path.
        path: String,
    },
}

/// `list <resources>`.
#[derive(Debug, Args)]
pub struct List {
    /// What to list.
    #[command(subcommand)]
    pub resource: ListAny,
}

/// What `list` lists: a resource of `resources.rs`, or jobs.
#[derive(Debug, Subcommand)]
pub enum ListAny {
    /// Runners, rules and environments.
    #[command(flatten)]
    Resource(ListResource),
    /// Jobs.
    #[command(flatten)]
    Jobs(JobsListed),
}

/// `list jobs ENV`.
#[derive(Debug, Subcommand)]
pub enum JobsListed {
    /// An environment's newest jobs.
    #[command(alias = "job")]
    Jobs {
        /// The environment's path.
        env: String,
    },
}

/// `whoami`.
#[derive(Debug, Args)]
pub struct Whoami {
    /// Also list your memberships in this organisation (the root group's are always read).
    #[arg(long, value_name = "ORG")]
    pub org: Option<String>,
}

/// What `list` lists.
#[derive(Debug, Subcommand)]
pub enum ListResource {
    /// A group's runners, with inherited and shared ones.
    #[command(alias = "runner")]
    Runners {
        /// The group (the root, for shared runners, when absent).
        #[arg(long, default_value = "")]
        group: String,
    },
    /// The runner rules of a scope.
    #[command(alias = "runner-rule")]
    RunnerRules {
        /// The scope.
        #[arg(long)]
        scope: String,
    },
    /// A group's environments.
    #[command(alias = "env")]
    Envs {
        /// The group.
        #[arg(long)]
        group: String,
        /// Also every group below it (without it, the count of those left out is shown).
        #[arg(long, short = 'r')]
        recursive: bool,
    },
}

/// `update <resource>`.
#[derive(Debug, Args)]
pub struct Update {
    /// What to change.
    #[command(subcommand)]
    pub resource: UpdateResource,
}

/// What `update` changes.
#[derive(Debug, Subcommand)]
pub enum UpdateResource {
    /// Replace a runner's file (with its ETag, so a concurrent change is a conflict).
    Runner {
        /// `GROUP/NAME`.
        id: String,
        /// The runner file; `-` reads standard input.
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
    },
    /// Change an environment's type, labels, tags or settings; only what is given changes.
    ///
    /// An empty value clears a setting that may be unset, so it takes its default (or the
    /// runner's): `--approval-timeout ''`, `--drift-schedule ''`, `--tool ''`,
    /// `--tool-version ''`. The others are reset by naming the default: `--approval auto`,
    /// `--four-eyes=false`, `--drift-remediation off`.
    #[command(disable_version_flag = true)]
    Env {
        /// The environment's path.
        path: String,
        /// A new type.
        #[arg(long = "type")]
        env_type: Option<String>,
        /// New labels (replacing the old ones), `key=value`.
        #[arg(long = "label", value_name = "KEY=VALUE")]
        labels: Vec<String>,
        /// New tags (replacing the old ones).
        #[arg(long = "tag")]
        tags: Vec<String>,
        /// Approval, drift detection, tool and version.
        #[command(flatten)]
        settings: EnvSettingArgs,
    },
}

/// An environment's settings, for `create env` and `update env`. With `update env`, an
/// empty value (`''`) clears the settings that may be unset.
#[derive(Debug, Clone, Default, Args)]
pub struct EnvSettingArgs {
    /// Whether an apply or destroy waits for a person between its plan and its apply:
    /// `auto` (the default) or `required` (approve with `sortie job approve ID`).
    #[arg(long, value_enum, value_name = "auto|required")]
    pub approval: Option<ApprovalArg>,
    /// How long a job may await approval before it is discarded: `24h`, `90m`, `2d`,
    /// `1h30m` or plain seconds (5 minutes to 30 days; default 24h), as `get env` prints
    /// it. With `update env`, `''` restores the default.
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout)]
    pub approval_timeout: Option<Clearable<u32>>,
    /// Four eyes: the approver must not be the job's requester (`--four-eyes` or
    /// `--four-eyes=true`; `--four-eyes=false` turns it off).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub four_eyes: Option<bool>,
    /// When to check for drift: a 5-field cron expression in UTC (or `@daily`, ...), at
    /// least 15 minutes apart, such as `0 */6 * * *`. With `update env`, `''` stops the
    /// checks.
    #[arg(long, value_name = "CRON", value_parser = parse_text)]
    pub drift_schedule: Option<Clearable<String>>,
    /// What a detected drift does: `off` (the default: it is reported) or `apply` (an apply
    /// is submitted, subject to the approval setting).
    #[arg(long, value_enum, value_name = "off|apply")]
    pub drift_remediation: Option<RemediationArg>,
    /// The tool jobs run, `terraform` or `opentofu` (wins over the runner's). With
    /// `update env`, `''` clears it (the runner's applies again).
    #[arg(long, value_name = "terraform|opentofu", value_parser = parse_tool)]
    pub tool: Option<Clearable<ToolArg>>,
    /// The tool's version (`tool_version`): exact (`1.5.7`) or a constraint (`~> 1.5`,
    /// `>= 1.0, < 2.0`); wins over the runner's. With `update env`, `''` clears it.
    /// `--version` is an alias.
    #[arg(long = "tool-version", visible_alias = "version", value_name = "VERSION", value_parser = parse_text)]
    pub tool_version: Option<Clearable<String>>,
}

impl EnvSettingArgs {
    /// True when no setting was given.
    pub fn is_empty(&self) -> bool {
        self.approval.is_none()
            && self.approval_timeout.is_none()
            && self.four_eyes.is_none()
            && self.drift_schedule.is_none()
            && self.drift_remediation.is_none()
            && self.tool.is_none()
            && self.tool_version.is_none()
    }
}

/// A setting's new value, or `Clear` (given as `''`): `update env` then sends `null`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Clearable<T> {
    /// Set it to this value.
    Set(T),
    /// Unset it: its default, or the runner's, applies.
    Clear,
}

fn parse_timeout(s: &str) -> Result<Clearable<u32>, String> {
    if s.is_empty() {
        return Ok(Clearable::Clear);
    }
    parse_duration(s).map(Clearable::Set)
}

/// A duration in whole seconds: plain seconds (`3600`), or numbers each with a unit
/// `d`, `h`, `m` or `s`, largest first (`24h`, `90m`, `2d`, `1h30m`).
pub fn parse_duration(s: &str) -> Result<u32, String> {
    let bad = || {
        format!("`{s}` is not a duration: give seconds (`3600`) or a number with a unit, such as `24h`, `90m`, `2d` or `1h30m`")
    };
    let text = s.trim();
    if let Ok(seconds) = text.parse::<u32>() {
        return Ok(seconds);
    }
    let mut total: u64 = 0;
    let mut number = String::new();
    let mut last_unit = u64::MAX;
    for c in text.chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let unit = match c {
            'd' => 86_400,
            'h' => 3_600,
            'm' => 60,
            's' => 1,
            _ => return Err(bad()),
        };
        if number.is_empty() || unit >= last_unit {
            return Err(bad());
        }
        let n: u64 = number.parse().map_err(|_| bad())?;
        total = total.saturating_add(n.saturating_mul(unit));
        last_unit = unit;
        number.clear();
    }
    if !number.is_empty() || last_unit == u64::MAX {
        return Err(bad());
    }
    u32::try_from(total).map_err(|_| bad())
}

fn parse_text(s: &str) -> Result<Clearable<String>, String> {
    Ok(if s.is_empty() {
        Clearable::Clear
    } else {
        Clearable::Set(s.to_string())
    })
}

fn parse_tool(s: &str) -> Result<Clearable<ToolArg>, String> {
    if s.is_empty() {
        return Ok(Clearable::Clear);
    }
    ToolArg::from_str(s, false)
        .map(Clearable::Set)
        .map_err(|_| format!("`{s}` is not a tool: `terraform` or `opentofu`"))
}

/// `--approval`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ApprovalArg {
    /// Plan and apply that plan at once.
    Auto,
    /// Plan, then wait for `sortie job approve` before applying the saved plan.
    Required,
}

/// `--drift-remediation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RemediationArg {
    /// Report a drift, nothing more.
    Off,
    /// Submit an apply when a drift is found.
    Apply,
}

/// `--tool`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ToolArg {
    /// HashiCorp Terraform.
    Terraform,
    /// OpenTofu.
    Opentofu,
}

/// `delete <resource> ID`.
#[derive(Debug, Args)]
pub struct Delete {
    /// What to delete.
    #[command(subcommand)]
    pub resource: DeleteResource,
}

/// What `delete` removes.
#[derive(Debug, Subcommand)]
pub enum DeleteResource {
    /// A runner.
    Runner {
        /// `GROUP/NAME`.
        id: String,
    },
    /// A runner rule, `SCOPE/ID`.
    RunnerRule {
        /// `SCOPE/ID`.
        id: String,
    },
    /// An environment.
    Env {
        /// The environment's path.
        path: String,
    },
}

/// `env ...`.
#[derive(Debug, Subcommand)]
pub enum EnvCommand {
    /// The outputs of the environment's latest successful apply (sensitive ones hidden).
    Outputs {
        /// The environment's path.
        path: String,
    },
    /// Resolve the environment's runner again; print the chosen runner, the winning rule
    /// and the explanation table.
    RefreshRunner {
        /// The environment's path.
        path: String,
        /// Show what would change, change nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

/// The operation of `run`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Operation {
    /// `terraform plan`.
    Plan,
    /// `terraform apply`.
    Apply,
    /// `terraform destroy`.
    Destroy,
}

/// `run plan|apply|destroy ENV`.
#[derive(Debug, Args)]
pub struct Run {
    /// Plan, apply or destroy.
    #[arg(value_enum)]
    pub operation: Operation,
    /// The environment's path.
    pub env: String,
    /// A directory of `.tf` files sent inline, or a git URL
    /// (`git::https://...//path?ref=main`). A directory sends its own files, never its
    /// subfolders except the local modules it calls (`source = "./modules/..."`), and needs
    /// a `.tf` file of its own. Default: the current directory, for plan and apply only; a
    /// destroy needs an explicit --source, and an apply from the default that would destroy
    /// every resource is refused by the runner.
    #[arg(long)]
    pub source: Option<String>,
    /// A Terraform variable, `name=value` (a JSON value, else a string).
    #[arg(long = "var", value_name = "NAME=VALUE")]
    pub vars: Vec<String>,
    /// A variables file (`.tfvars.json`, or YAML/JSON).
    #[arg(long = "var-file")]
    pub var_files: Vec<PathBuf>,
    /// A sensitive Terraform variable: `name` reads its value from `TF_VAR_<name>`, else
    /// asks for it on a terminal (not echoed); `name=value` takes it from the command line
    /// (and so the shell's history). The value is kept in Secrets Manager for the job's
    /// life only, never stored in the job, logged or shown (`name = (sensitive)`).
    #[arg(long = "sensitive-var", value_name = "NAME[=VALUE]")]
    pub sensitive_vars: Vec<String>,
    /// Follow the job to its end: its state, its log as it grows, its change summary.
    #[arg(long)]
    pub wait: bool,
    /// An idempotency key, so a retried submit makes one job.
    #[arg(long)]
    pub idempotency_key: Option<String>,
}

/// `jobs list ENV`.
#[derive(Debug, Args)]
pub struct JobsList {
    /// `list`.
    #[arg(value_parser = ["list"])]
    pub verb: String,
    /// The environment's path.
    pub env: String,
}

/// `job ...`.
#[derive(Debug, Subcommand)]
pub enum JobCommand {
    /// Show a job.
    Get {
        /// The job id.
        id: String,
    },
    /// Cancel a job.
    Cancel {
        /// The job id.
        id: String,
    },
    /// Approve a job awaiting approval: a second task applies exactly the plan it saved.
    Approve {
        /// The job id.
        id: String,
        /// Why, recorded with the decision (at most 1024 bytes).
        #[arg(long)]
        comment: Option<String>,
    },
    /// Discard a job awaiting approval: nothing is applied, and the environment is released.
    Discard {
        /// The job id.
        id: String,
        /// Why, recorded with the decision (at most 1024 bytes).
        #[arg(long)]
        comment: Option<String>,
    },
    /// The outputs of a succeeded apply (sensitive ones hidden).
    Outputs {
        /// The job id.
        id: String,
    },
    /// Print a job's log; `-f` follows it until the job ends.
    Logs {
        /// The job id.
        id: String,
        /// Follow the log as it grows, until the job ends.
        #[arg(short = 'f', long)]
        follow: bool,
    },
}

/// `members ...`.
#[derive(Debug, Subcommand)]
pub enum MembersCommand {
    /// Grant a role on a group to a subject (or a claim pattern).
    Grant {
        /// The group.
        #[arg(long)]
        group: String,
        /// `viewer`, `deployer`, `maintainer` or `owner`.
        #[arg(long)]
        role: String,
        /// The subject (`sub` claim).
        #[arg(long)]
        subject: Option<String>,
        /// Claim `key=value` patterns instead of a subject.
        #[arg(long = "claim", value_name = "KEY=VALUE")]
        claims: Vec<String>,
    },
    /// Revoke a membership by id.
    Revoke {
        /// The group.
        #[arg(long)]
        group: String,
        /// The membership id.
        id: String,
    },
    /// List a group's memberships.
    List {
        /// The group.
        #[arg(long)]
        group: String,
    },
}

/// `runner ...`.
#[derive(Debug, Subcommand)]
pub enum RunnerCommand {
    /// Preflight a runner against its platform, launching nothing.
    Check {
        /// `GROUP/NAME`, or `NAME` for a shared runner.
        id: String,
        /// For a shared runner: the organisation to check for.
        #[arg(long)]
        org: Option<String>,
    },
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
}
