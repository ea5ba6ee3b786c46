//! The arguments of the resource verbs (`create`, `get`, `list`, `update`, `delete` of
//! runners, runner rules and environments) and of `env`, `members` and `runner`.

use std::path::PathBuf;

use clap::Subcommand;

use super::settings::EnvSettingArgs;

/// What `create` makes.
// Parsed once per run: the environment variant's many flags cost nothing worth boxing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum CreateResource {
    /// A policy set of a group, `GROUP/NAME`, from a YAML or JSON file (Rego modules,
    /// enforcement, criteria, on_unavailable).
    PolicySet {
        /// `GROUP/NAME`.
        id: String,
        /// The policy set file; `-` reads standard input.
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
    },
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

/// What `get` shows.
#[derive(Debug, Subcommand)]
pub enum GetResource {
    /// A policy set, `GROUP/NAME`.
    PolicySet {
        /// `GROUP/NAME`.
        id: String,
    },
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
    /// The policy sets of a group (its own, not its ancestors').
    #[command(alias = "policy-set")]
    PolicySets {
        /// The group.
        #[arg(long)]
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

/// What `update` changes.
// Parsed once per run: the environment variant's many flags cost nothing worth boxing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum UpdateResource {
    /// A policy set of a group, `GROUP/NAME`, replaced from its file (with its ETag, so a
    /// concurrent change is a conflict).
    PolicySet {
        /// `GROUP/NAME`.
        id: String,
        /// The policy set file; `-` reads standard input.
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
    },
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

/// What `delete` removes.
#[derive(Debug, Subcommand)]
pub enum DeleteResource {
    /// A policy set, `GROUP/NAME`.
    PolicySet {
        /// `GROUP/NAME`.
        id: String,
    },
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
    /// The versions of the environment's state (`s3` state storage), newest first, with
    /// the job that wrote each.
    StateVersions {
        /// The environment's path.
        path: String,
        /// How many versions, 1 to 50.
        #[arg(long, default_value_t = 20)]
        limit: u32,
        /// The `next` cursor of an earlier page.
        #[arg(long)]
        cursor: Option<String>,
    },
    /// Restore the environment's state to a version: a job writes it back as the current
    /// state, then plans (its plan shows what the restore changed). Needs `manage`.
    #[command(disable_version_flag = true)]
    Restore {
        /// The environment's path.
        path: String,
        /// The state version id (from `env state-versions`).
        version: String,
        /// Why (recorded on the job).
        #[arg(long)]
        reason: String,
    },
    /// Lock the environment: it refuses new jobs until unlocked (a running job finishes).
    /// Needs `deploy`.
    Lock {
        /// The environment's path.
        path: String,
        /// Why (shown to everyone whose job is refused).
        #[arg(long)]
        reason: String,
    },
    /// Unlock the environment. Needs `deploy`.
    Unlock {
        /// The environment's path.
        path: String,
    },
    /// Extend an expiring environment's life (from the later of its current end and now),
    /// up to the maximum TTL set on its groups. Needs `deploy`.
    Extend {
        /// The environment's path.
        path: String,
        /// How much longer, such as `24h` (`s`, `m`, `h`, `d`).
        #[arg(long)]
        by: String,
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

/// `group ...`.
#[derive(Debug, Subcommand)]
pub enum GroupCommand {
    /// Freeze the group: every environment below it refuses new jobs until unlocked.
    /// Needs `manage`.
    Lock {
        /// The group, such as `acme/payments`.
        group: String,
        /// Why (shown to everyone whose job is refused).
        #[arg(long)]
        reason: String,
    },
    /// End the group's freeze. Needs `manage`.
    Unlock {
        /// The group.
        group: String,
    },
    /// Show the group's expiry limits, or set them with `--default-ttl` / `--max-ttl`
    /// (setting needs `manage`; `none` unsets one; the other is kept). A new default
    /// reaches the environments created from now on; those that exist now only with
    /// `--apply-to-existing`. Every change says which environments expire sooner.
    Expiry {
        /// The group, such as `acme`.
        group: String,
        /// The TTL of the environments below it that set none, such as `3d` (`none`: unset).
        #[arg(long)]
        default_ttl: Option<String>,
        /// The longest an environment below it may live from now on, such as `14d`
        /// (`none`: unset).
        #[arg(long)]
        max_ttl: Option<String>,
        /// A new default also reaches the environments that exist now: they get ends and
        /// are destroyed then. Says how many and when first, and asks (`--yes` to skip).
        #[arg(long)]
        apply_to_existing: bool,
        /// Say what the change would do, and list the environments that would expire
        /// sooner; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// With `--apply-to-existing`: do not ask (needed when not run in a terminal).
        #[arg(long, short = 'y')]
        yes: bool,
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
        /// Only tokens of this issuer: for a GitHub user, the connection's issuer (`sortie
        /// vcs get github ORG` prints it) with `--subject LOGIN`.
        #[arg(long)]
        issuer: Option<String>,
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

/// `vcs …`: an organisation's connection to its pull requests' host.
#[derive(Debug, Subcommand)]
pub enum VcsCommand {
    /// Connect an organisation to GitHub through a GitHub App, or to GitLab through an
    /// access token: its pull requests (merge requests) are then planned on the
    /// environments bound to their repositories (`update env --repository`).
    Connect {
        /// `github` or `gitlab`.
        #[arg(value_enum)]
        provider: VcsProviderArg,
        /// The organisation.
        org: String,
        /// GitHub: the App's id.
        #[arg(long, required_if_eq("provider", "github"))]
        app_id: Option<u64>,
        /// GitHub: the App's private key (the `.pem` GitHub generated), kept in Secrets
        /// Manager.
        #[arg(long, value_name = "FILE", required_if_eq("provider", "github"))]
        private_key_file: Option<std::path::PathBuf>,
        /// GitLab: a file holding a personal access token of a Maintainer of the projects
        /// (scope `api`; GitLab lets no group or project access token mint a job's
        /// read-only token), kept in Secrets Manager.
        #[arg(long, value_name = "FILE", required_if_eq("provider", "gitlab"))]
        token_file: Option<std::path::PathBuf>,
        /// A file holding the webhook's secret (GitHub) or secret token (GitLab), kept in
        /// Secrets Manager.
        #[arg(long, value_name = "FILE")]
        webhook_secret_file: std::path::PathBuf,
        /// GitHub: the REST API of a GitHub Enterprise Server (`https://HOST/api/v3`);
        /// GitHub.com's by default. (`--api-url` is Sortie's own API.)
        #[arg(long = "github-api-url", value_name = "URL")]
        github_api_url: Option<String>,
        /// GitLab: a self-managed instance's URL (`https://gitlab.example.com`);
        /// GitLab.com by default.
        #[arg(long = "gitlab-url", value_name = "URL")]
        gitlab_url: Option<String>,
    },
    /// Show an organisation's connection: its App or instance, its webhook URL and the
    /// issuer to grant the host's users roles with.
    Get {
        /// `github` or `gitlab`.
        #[arg(value_enum)]
        provider: VcsProviderArg,
        /// The organisation.
        org: String,
    },
    /// Disconnect an organisation: its connection and secrets are deleted.
    Disconnect {
        /// `github` or `gitlab`.
        #[arg(value_enum)]
        provider: VcsProviderArg,
        /// The organisation.
        org: String,
    },
}

/// The host of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum VcsProviderArg {
    /// GitHub.com or GitHub Enterprise Server.
    Github,
    /// GitLab.com or a self-managed GitLab.
    Gitlab,
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
