//! The options and subcommands of `sortie dev`, as clap derives them.

use std::path::PathBuf;

use super::DEV_IDENTITY_KEY;

/// Options of `sortie dev`.
#[derive(clap::Args, Debug, Clone)]
pub struct DevArgs {
    /// `status`: whether the `sortie dev` of a data dir is running, and its `export` line.
    #[command(subcommand)]
    pub(super) command: Option<DevCommand>,
    /// Port for the API on 127.0.0.1 [default: the one this data dir used last, else a free
    /// one; 0 picks a free one].
    #[arg(long)]
    pub(super) port: Option<u16>,
    /// DynamoDB table.
    #[arg(long, default_value = "sortie-dev")]
    pub(super) table: String,
    /// SQS jobs queue name.
    #[arg(long, default_value = "sortie-dev-jobs")]
    pub(super) queue: String,
    /// S3 bucket for logs and artifacts.
    #[arg(long, default_value = "sortie-dev-artifacts")]
    pub(super) bucket: String,
    /// S3 Express One Zone directory bucket (`<name>--<zone id>--x-s3`) where a followed
    /// job's log is rewritten every second; empty: none (a followed log ships a chunk every
    /// second to `--bucket`).
    #[arg(long, default_value = "sortie-dev-live--use1-az4--x-s3", value_parser = parse_live_bucket)]
    pub(super) live_bucket: String,
    /// EventBridge bus for `sortie.job.ended`.
    #[arg(long, default_value = "sortie-dev")]
    pub(super) bus: String,
    /// S3 bucket the audit trail is exported to, made with Object Lock in compliance mode
    /// (objects kept a day here; not kept in the data directory's snapshots).
    #[arg(long, default_value = "sortie-dev-audit")]
    pub(super) audit_bucket: String,
    /// Minutes between an organisation's audit exports (AWS: the template's
    /// `AuditExportMinutes`).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1440))]
    pub(super) audit_export_minutes: u32,
    /// The `sortie-pilot` binary local runners start (default: next to this binary).
    #[arg(long, env = "SORTIE_RUNNER_BINARY")]
    pub(super) runner: Option<PathBuf>,
    /// Where `sortie dev` keeps what survives a restart: its port and tokens, a snapshot of
    /// the table and buckets it uses, `env` (the `export` line), local runners' output and
    /// the agent's log.
    #[arg(long, visible_alias = "work-dir", default_value = ".sortie-dev")]
    pub(super) data_dir: PathBuf,
    /// Seconds between snapshots of the table and buckets into the data dir (taken only
    /// after a change; one more at a clean stop). 0: only the one at a clean stop.
    #[arg(long, default_value_t = 2)]
    pub(super) snapshot_every: u64,
    /// `json` (one object a line) or `human`; default: human on a terminal, else JSON.
    #[arg(long, value_name = "FORMAT", value_parser = ["json", "human"])]
    pub(super) log_format: Option<String>,
    /// Seconds between sweeper passes.
    #[arg(long, default_value_t = 5)]
    pub(super) sweep_every: u64,
    /// Seconds a job may stay `dispatching` before the sweeper looks its task up (and
    /// adopts it, or launches again).
    #[arg(long, default_value_t = 120)]
    pub(super) dispatch_lease: i64,
    /// Launches dispatched in process at the moment their job is sent to the jobs queue,
    /// beside the queue's own message (a send that finds them all taken waits for the
    /// queue); 0: every launch waits for the queue, as on AWS.
    #[arg(long, default_value_t = super::at_once::SLOTS)]
    pub(super) dispatch_at_once: usize,
    /// Write `{"url", "token", "users"}` here once ready (for scripts).
    #[arg(long)]
    pub(super) ready_file: Option<PathBuf>,
    /// A named user besides the development identity (repeatable): it gets its own token,
    /// printed at start, and acts as subject `<name>` (issuer `sortie:local-dev-user`) with
    /// only the memberships granted to it: a second person to approve a reviewed job.
    #[arg(long = "user", value_name = "NAME")]
    pub(super) users: Vec<String>,
    /// Start a `sortie-agent` beside the control plane, pulling the jobs of a new agent pool
    /// of this group (`agent` runners name the pool's id, printed at start).
    #[arg(long, value_name = "GROUP")]
    pub(super) agent: Option<String>,
    /// Seconds between reconciles of the connected organisations' open pull requests (a
    /// lost webhook is planned by the next one); 0 turns them off. AWS runs one every 5
    /// minutes.
    #[arg(long, default_value_t = 300)]
    pub(super) reconcile_every: u64,
    /// Seconds a claimed job's heartbeat may stop before the sweeper ends it ("agent lost").
    #[arg(long, default_value_t = sortie_core::agent_pool::DEFAULT_AGENT_SILENCE_SECONDS)]
    pub(super) agent_silence: i64,
    /// Seconds a job identity token lives (at most 3600). The pilot writes a fresh one when
    /// two-thirds of it have passed.
    #[arg(long, default_value_t = 3600, value_parser = clap::value_parser!(u32).range(10..=3600))]
    pub(super) identity_token_seconds: u32,
    /// The KMS alias of the key that signs job identity tokens (made on the local AWS at the
    /// first start); `<alias>-standby` is published beside it while a key rolls.
    #[arg(long, default_value = DEV_IDENTITY_KEY)]
    pub(super) identity_key: String,
    /// Seconds the API uses the identity keys it read from KMS before it reads them again
    /// (how soon a moved alias is seen).
    #[arg(long, default_value_t = 60)]
    pub(super) identity_keys_ttl: u64,
    /// Notifications: the longest wait, in seconds, before a failed delivery is tried again
    /// [default: the retry rule's own, 30 s doubling to an hour].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub(super) notify_retry_cap: Option<u64>,
    /// Notifications: resolve NAME to ADDRESS (as curl's `--resolve`), then the system's
    /// resolver; the guard still checks the address (repeatable; `NAME=ADDRESS`).
    #[arg(long = "resolve", value_name = "NAME=ADDRESS", value_parser = parse_pin)]
    pub(super) resolve: Vec<(String, std::net::IpAddr)>,
    /// Seconds an audit entry waits before the sweeper seals it into its organisation's
    /// chain (AWS: 60).
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u32).range(1..=3600))]
    pub(super) audit_settle: u32,
}

/// A `--resolve` pin: `NAME=ADDRESS`.
/// A directory bucket's name (`<name>--<zone id>--x-s3`), or empty for none: a general
/// purpose bucket would take the live log at a general purpose bucket's price, unsaid.
fn parse_live_bucket(raw: &str) -> Result<String, String> {
    let named = raw
        .strip_suffix("--x-s3")
        .and_then(|rest| rest.rsplit_once("--"))
        .is_some_and(|(base, zone)| !base.is_empty() && zone.contains("-az"));
    if raw.is_empty() || named {
        return Ok(raw.to_string());
    }
    Err(format!(
        "`{raw}` is not a directory bucket's name: `<name>--<zone id>--x-s3`, such as \
         `sortie-dev-live--use1-az4--x-s3` (or \"\" for none)"
    ))
}

#[test]
fn a_live_bucket_is_a_directory_buckets_name_or_none() {
    for ok in ["", "sortie-dev-live--use1-az4--x-s3", "a--usw2-az1--x-s3"] {
        assert_eq!(parse_live_bucket(ok).as_deref(), Ok(ok));
    }
    for bad in [
        "my-live-bucket",
        "--use1-az4--x-s3",
        "live--x-s3",
        "live--us-east-1a--x-s3",
    ] {
        let e = parse_live_bucket(bad).unwrap_err();
        assert!(e.contains("<name>--<zone id>--x-s3"), "{bad}: {e}");
    }
}

fn parse_pin(raw: &str) -> Result<(String, std::net::IpAddr), String> {
    let (name, address) = raw
        .split_once('=')
        .ok_or_else(|| format!("`{raw}` is not NAME=ADDRESS"))?;
    let address = address
        .parse()
        .map_err(|e| format!("`{address}` is not an IP address: {e}"))?;
    if name.is_empty() {
        return Err(format!("`{raw}` names no host"));
    }
    Ok((name.to_string(), address))
}

/// `sortie dev` subcommands.
#[derive(clap::Subcommand, Debug, Clone)]
pub enum DevCommand {
    /// Print the `export` line and hints of the data dir's `sortie dev`, and whether it runs:
    /// `running at URL` (its `/v1/health` answers) or `not running` (exit 1).
    Status {
        /// The data dir [default: the one given to `dev`, else `.sortie-dev`].
        #[arg(long = "data-dir", visible_alias = "work-dir")]
        data_dir: Option<PathBuf>,
    },
}
