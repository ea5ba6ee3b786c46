//! The command line, as clap derives it: `sortie <verb> <resource> ...`, kubectl- and
//! canyon-style. Every verb the HTTP API has is here.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

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

/// Options every command takes.
#[derive(Debug, Clone, Args)]
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
    /// Show one resource.
    Get(Get),
    /// List resources.
    List(List),
    /// Change a resource.
    Update(Update),
    /// Delete a resource.
    Delete(Delete),
    /// Environment actions: `env refresh-runner PATH [--dry-run]`.
    #[command(subcommand)]
    Env(EnvCommand),
    /// Submit a plan, apply or destroy to an environment.
    Run(Run),
    /// List an environment's jobs.
    Jobs(JobsList),
    /// Job actions: get, cancel, logs.
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
    /// An environment, `GROUP/NAME`.
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
    },
}

/// `get <resource> ID`.
#[derive(Debug, Args)]
pub struct Get {
    /// What to show.
    #[command(subcommand)]
    pub resource: GetResource,
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
    pub resource: ListResource,
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
    /// Change an environment's type, labels or tags.
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
    },
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
    /// A directory of `.tf` files sent inline (default: the current directory), or a git
    /// URL (`git::https://...//path?ref=main`).
    #[arg(long)]
    pub source: Option<String>,
    /// A Terraform variable, `name=value` (a JSON value, else a string).
    #[arg(long = "var", value_name = "NAME=VALUE")]
    pub vars: Vec<String>,
    /// A variables file (`.tfvars.json`, or YAML/JSON).
    #[arg(long = "var-file")]
    pub var_files: Vec<PathBuf>,
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
