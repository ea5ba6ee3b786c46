//! Harness for Sortie's integration tests.
//!
//! The tests run against a local AWS (a moto server) and real binaries
//! (Terraform 0.11.11), all installed into `.tools/` by `scripts/tools.sh`.
//! `scripts/with-moto.sh` starts moto on a free port and exports the
//! environment this module reads:
//!
//! | variable                   | read by            |
//! |----------------------------|--------------------|
//! | `SORTIE_TEST_AWS_ENDPOINT` | [`endpoint`]       |
//! | `SORTIE_TEST_TERRAFORM`    | [`terraform_bin`]  |
//! | `SORTIE_TEST_TERRAFORM_1`  | [`terraform1_bin`] |
//! | `SORTIE_TEST_TERRAFORM_111` | [`terraform111_bin`] |
//!
//! Run them with `make test`, or `scripts/with-moto.sh cargo test -p sortie-testkit`.
//! Without that environment the tests of the AWS tier return at once (each starts
//! with [`require_aws!`]) and the binary writes one line saying how to run them;
//! the helpers below still panic rather than ever talk to real AWS.
//!
//! The fast tier needs nothing: [`world::World::fast`] builds the control plane
//! through `sortie_wiring::assemble` on `MemoryStore` and the in-memory fakes of
//! [`fakes`]; [`world::World::aws`] builds the same shape on moto.
//!
//! Tests share one moto server, so every resource a test creates must be
//! named with [`unique`].

use std::ffi::OsStr;
use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_s3::config::Credentials;

/// Environment variable holding the local AWS endpoint, e.g. `http://127.0.0.1:40635`.
pub const ENDPOINT_VAR: &str = "SORTIE_TEST_AWS_ENDPOINT";
/// Environment variable holding the absolute path of the Terraform binary.
pub const TERRAFORM_VAR: &str = "SORTIE_TEST_TERRAFORM";
/// Environment variable holding the absolute path of the Terraform 1.0.3 binary.
pub const TERRAFORM_1_VAR: &str = "SORTIE_TEST_TERRAFORM_1";
/// Environment variable holding the absolute path of the machine's Terraform 1.11.x
/// (`terraform` on `PATH` outside `.tools`; its `terraform_data` needs no provider).
pub const TERRAFORM_111_VAR: &str = "SORTIE_TEST_TERRAFORM_111";
/// Region every test client and backend uses.
pub const REGION: &str = "us-east-1";
/// Access key id (and secret key) moto accepts.
pub const TEST_CREDENTIAL: &str = "testing";

const MISSING_ENV: &str =
    "integration tests need a local AWS: run them with `make test` or `scripts/with-moto.sh cargo test`";

/// A harness step that failed.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// A file-system operation on `path` failed.
    #[error("{action} {}: {source}", path.display())]
    Io {
        /// What was being done, e.g. "copy".
        action: &'static str,
        /// The path it was done to.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A Terraform command could not be started.
    #[error("could not run {}: {source}", program.display())]
    Spawn {
        /// The program that was run.
        program: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A Terraform command ran and exited unsuccessfully.
    #[error("{0}")]
    Failed(Box<CommandFailure>),
}

/// Everything known about a command that exited unsuccessfully.
#[derive(Debug)]
pub struct CommandFailure {
    /// The command line, for the message.
    pub command: String,
    /// Its captured output and exit status.
    pub output: Output,
}

impl fmt::Display for CommandFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "`{}` failed: {}", self.command, self.output.status)?;
        writeln!(
            f,
            "--- stdout\n{}",
            String::from_utf8_lossy(&self.output.stdout)
        )?;
        write!(
            f,
            "--- stderr\n{}",
            String::from_utf8_lossy(&self.output.stderr)
        )
    }
}

/// The one line a test binary writes when it skips the AWS tier.
pub const SKIP_LINE: &str =
    "sortie: AWS tier skipped (no moto): run `make test` or `scripts/with-moto.sh cargo test`";

/// The AWS tier's environment: a local AWS (moto) and the Terraform binaries, as
/// `scripts/with-moto.sh` exports them.
#[derive(Debug, Clone)]
pub struct Aws {
    /// The local AWS endpoint, e.g. `http://127.0.0.1:40635`.
    pub endpoint: String,
}

impl Aws {
    /// Shared SDK configuration for this local AWS (see [`sdk_config`]).
    pub async fn sdk_config(&self) -> SdkConfig {
        sdk_config_at(&self.endpoint).await
    }
}

/// The AWS tier, when this process runs it (`SORTIE_TEST_AWS_ENDPOINT` is set), or
/// `None`: the test returns at once, and the first `None` in the process writes
/// [`SKIP_LINE`] once to stderr (through the handle, which libtest does not capture).
///
/// Every test that needs moto or the Terraform binaries starts with
/// [`require_aws!`](crate::require_aws), which calls this.
pub fn aws_tier() -> Option<Aws> {
    match std::env::var(ENDPOINT_VAR) {
        Ok(endpoint) if !endpoint.is_empty() => Some(Aws { endpoint }),
        _ => {
            static SKIPPED: std::sync::Once = std::sync::Once::new();
            SKIPPED.call_once(|| {
                use std::io::Write;
                let _ = writeln!(std::io::stderr(), "{SKIP_LINE}");
            });
            None
        }
    }
}

/// Returns from the calling test when the AWS tier does not run in this process (see
/// [`aws_tier`]); otherwise evaluates to the tier's [`Aws`].
///
/// ```ignore
/// #[tokio::test]
/// async fn needs_moto() {
///     let aws = sortie_testkit::require_aws!();
///     let config = aws.sdk_config().await;
/// }
/// ```
#[macro_export]
macro_rules! require_aws {
    () => {
        match $crate::aws_tier() {
            Some(aws) => aws,
            None => return,
        }
    };
}

/// The local AWS endpoint the tests talk to, from `SORTIE_TEST_AWS_ENDPOINT`.
///
/// # Panics
///
/// When the variable is unset or empty, with a message saying how to run the
/// tests: integration tests never fall back to real AWS.
pub fn endpoint() -> String {
    match std::env::var(ENDPOINT_VAR) {
        Ok(value) if !value.is_empty() => value,
        _ => panic!("{MISSING_ENV}"),
    }
}

/// Shared SDK configuration for the local AWS: [`endpoint`], static test
/// credentials, region `us-east-1`, latest behavior version.
///
/// Ignores the ambient AWS profile and credential chain entirely.
pub async fn sdk_config() -> SdkConfig {
    sdk_config_at(&endpoint()).await
}

/// [`sdk_config`] for another endpoint of the local AWS, such as a loopback proxy in
/// front of it.
pub async fn sdk_config_at(endpoint: &str) -> SdkConfig {
    aws_config::defaults(BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .credentials_provider(Credentials::new(
            TEST_CREDENTIAL,
            TEST_CREDENTIAL,
            None,
            None,
            "sortie-testkit",
        ))
        .region(Region::new(REGION))
        .load()
        .await
}

/// An S3 client for `config` using path-style addressing
/// (`http://host:port/bucket/key`), which a loopback endpoint needs.
pub fn s3_client(config: &SdkConfig) -> aws_sdk_s3::Client {
    let s3_config = aws_sdk_s3::config::Builder::from(config)
        .force_path_style(true)
        .build();
    aws_sdk_s3::Client::from_conf(s3_config)
}

/// A DynamoDB client for `config`.
pub fn dynamodb_client(config: &SdkConfig) -> aws_sdk_dynamodb::Client {
    aws_sdk_dynamodb::Client::new(config)
}

/// A new standard queue named [`unique`]`(prefix)` on the local AWS; its URL.
pub async fn standard_queue(sqs: &aws_sdk_sqs::Client, prefix: &str) -> String {
    sqs.create_queue()
        .queue_name(unique(prefix))
        .send()
        .await
        .expect("CreateQueue on the local AWS")
        .queue_url
        .expect("a queue URL")
}

/// A name no other test (in this or another test process) will use:
/// `<prefix>-<time>-<pid>-<counter>`, lowercase ASCII letters, digits and
/// hyphens only, so it is valid as an S3 bucket or DynamoDB table name while
/// `prefix` stays under ~30 characters.
///
/// Characters of `prefix` outside `[a-z0-9-]` are lowercased or replaced by `-`.
pub fn unique(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let prefix: String = prefix
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9' | '-') => c,
            _ => '-',
        })
        .collect();
    // The low 48 bits of the nanosecond clock wrap every ~3 days: plenty,
    // with the pid and counter making collisions impossible within a run.
    format!(
        "{prefix}-{:x}-{:x}-{n}",
        nanos & 0xffff_ffff_ffff,
        std::process::id()
    )
}

/// The Terraform binary the tests run, from `SORTIE_TEST_TERRAFORM`
/// (Terraform 0.11.11 from `.tools/`, set by `scripts/with-moto.sh`).
///
/// # Panics
///
/// When the variable is unset or empty, like [`endpoint`].
pub fn terraform_bin() -> PathBuf {
    match std::env::var_os(TERRAFORM_VAR) {
        Some(value) if !value.is_empty() => PathBuf::from(value),
        _ => panic!("{MISSING_ENV}"),
    }
}

/// The runner's Terraform for a test's `sortie dev`, passed as its `SORTIE_TERRAFORM` (the
/// operator's pin, which a job that names no tool or version runs): the test process's own
/// `SORTIE_TERRAFORM` when set, else Terraform 0.11.11 (`SORTIE_TEST_TERRAFORM`), which the
/// end-to-end tests' state and plan checks were written against; `None` when neither is
/// set. Without a pin a job runs the newest binary there (1.11.4 under
/// `scripts/with-moto.sh`), as a person's `make dev` does; the pilot's own tests cover that
/// default. A job that asks for a version gets it either way.
pub fn pinned_terraform() -> Option<std::ffi::OsString> {
    ["SORTIE_TERRAFORM", TERRAFORM_VAR]
        .into_iter()
        .filter_map(std::env::var_os)
        .find(|v| !v.is_empty())
}

/// The Terraform 1.0.3 binary, from `SORTIE_TEST_TERRAFORM_1`
/// (`.tools/bin/terraform-1.0.3`, set by `scripts/with-moto.sh`).
///
/// # Panics
///
/// When the variable is unset or empty, like [`endpoint`].
pub fn terraform1_bin() -> PathBuf {
    match std::env::var_os(TERRAFORM_1_VAR) {
        Some(value) if !value.is_empty() => PathBuf::from(value),
        _ => panic!("{MISSING_ENV}"),
    }
}

/// The machine's Terraform 1.11.x binary, from `SORTIE_TEST_TERRAFORM_111` (set by
/// `scripts/with-moto.sh` from `terraform` on `PATH` outside `.tools`).
///
/// # Panics
///
/// When the variable is unset, empty or names no file: a test that needs real
/// `terraform_data` diffs fails saying so, never passes silently.
pub fn terraform111_bin() -> PathBuf {
    match std::env::var_os(TERRAFORM_111_VAR) {
        Some(value) if !value.is_empty() && Path::new(&value).is_file() => PathBuf::from(value),
        Some(value) if !value.is_empty() => panic!(
            "{TERRAFORM_111_VAR}={} names no file: this test needs Terraform 1.11 (the machine's `terraform`)",
            Path::new(&value).display()
        ),
        _ => panic!(
            "{TERRAFORM_111_VAR} is not set: this test needs Terraform 1.11 (`terraform` on PATH outside .tools); run it through scripts/with-moto.sh on a machine that has one"
        ),
    }
}

/// The repository root (the directory holding `examples/`, `crates/`, ...).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crates/testkit sits two levels below the root")
        .to_path_buf()
}

/// The path of `examples/<name>` in the repository.
pub fn example_dir(name: &str) -> PathBuf {
    repo_root().join("examples").join(name)
}

/// A new, empty scratch directory `crates/testkit/.work/<unique(prefix)>` (git-ignored).
///
/// Tests remove it when they pass and leave it behind when they fail, so the
/// files can be inspected; `tests/.work` may be deleted at any time.
pub fn scratch_dir(prefix: &str) -> Result<PathBuf, HarnessError> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(".work")
        .join(unique(prefix));
    fs::create_dir_all(&dir).map_err(|source| HarnessError::Io {
        action: "create",
        path: dir.clone(),
        source,
    })?;
    Ok(dir)
}

/// Copies the regular files and directories under `src` into `dst`
/// (created if missing), skipping Terraform's `.terraform/` working data and
/// local state files.
pub fn copy_dir(src: &Path, dst: &Path) -> Result<(), HarnessError> {
    let io_err = |action, path: &Path| {
        let path = path.to_path_buf();
        move |source| HarnessError::Io {
            action,
            path,
            source,
        }
    };
    fs::create_dir_all(dst).map_err(io_err("create", dst))?;
    for entry in fs::read_dir(src).map_err(io_err("read", src))? {
        let entry = entry.map_err(io_err("read", src))?;
        let from = entry.path();
        let name = entry.file_name();
        if name == ".terraform"
            || from.extension() == Some(OsStr::new("tfstate"))
            || from.extension() == Some(OsStr::new("backup"))
        {
            continue;
        }
        let to = dst.join(&name);
        let kind = entry.file_type().map_err(io_err("stat", &from))?;
        if kind.is_dir() {
            copy_dir(&from, &to)?;
        } else if kind.is_file() {
            fs::copy(&from, &to).map_err(io_err("copy", &from))?;
        }
    }
    Ok(())
}

/// Where an S3 backend keeps a Terraform state.
#[derive(Debug, Clone)]
pub struct S3Backend {
    /// The state bucket (must exist before `terraform init`).
    pub bucket: String,
    /// The state object's key, e.g. `acme/payments/prod/terraform.tfstate`.
    pub key: String,
}

impl S3Backend {
    /// File name of the backend stub [`S3Backend::write_stub`] writes.
    pub const STUB_FILE: &'static str = "sortie_backend.tf";

    /// Writes `sortie_backend.tf` declaring an empty (partial) `backend "s3" {}`
    /// into `dir`; [`S3Backend::init_args`] supplies the settings at init time.
    pub fn write_stub(&self, dir: &Path) -> Result<(), HarnessError> {
        let path = dir.join(Self::STUB_FILE);
        fs::write(&path, "terraform {\n  backend \"s3\" {}\n}\n").map_err(|source| {
            HarnessError::Io {
                action: "write",
                path,
                source,
            }
        })
    }

    /// `-backend-config` flags pointing this backend at the local AWS.
    ///
    /// Every option here is accepted by Terraform 0.11.11's S3 backend;
    /// the `skip_*` ones stop it from calling STS, IAM, EC2 or the instance
    /// metadata service, none of which a local endpoint needs.
    pub fn init_args(&self) -> Vec<String> {
        let endpoint = endpoint();
        [
            ("bucket", self.bucket.as_str()),
            ("key", self.key.as_str()),
            ("region", REGION),
            ("endpoint", endpoint.as_str()),
            ("force_path_style", "true"),
            ("skip_credentials_validation", "true"),
            ("skip_metadata_api_check", "true"),
            ("skip_region_validation", "true"),
            ("skip_requesting_account_id", "true"),
            ("skip_get_ec2_platforms", "true"),
        ]
        .iter()
        .map(|(k, v)| format!("-backend-config={k}={v}"))
        .collect()
    }
}

/// A `terraform` [`Command`] ([`terraform_bin`]) run in `dir`, its
/// environment pointed at the local AWS: test credentials and region, no
/// update check, no prompts, no colour, and no user CLI configuration.
pub fn terraform_command(dir: &Path) -> Command {
    let mut cmd = Command::new(terraform_bin());
    cmd.current_dir(dir)
        .env("AWS_ACCESS_KEY_ID", TEST_CREDENTIAL)
        .env("AWS_SECRET_ACCESS_KEY", TEST_CREDENTIAL)
        .env("AWS_REGION", REGION)
        .env("AWS_DEFAULT_REGION", REGION)
        .env("CHECKPOINT_DISABLE", "1")
        .env("TF_IN_AUTOMATION", "1")
        .env("TF_INPUT", "0")
        .env_remove("AWS_PROFILE")
        .env_remove("AWS_SESSION_TOKEN")
        .env_remove("TF_CLI_CONFIG_FILE")
        .env_remove("TF_CLI_ARGS")
        .env_remove("TF_LOG");
    cmd
}

/// Runs `terraform <subcommand> -no-color <args>` in `dir` (see
/// [`terraform_command`]) and returns its output, or [`HarnessError::Failed`]
/// carrying stdout and stderr when it exits unsuccessfully.
pub fn terraform<I, S>(dir: &Path, subcommand: &str, args: I) -> Result<Output, HarnessError>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut cmd = terraform_command(dir);
    cmd.arg(subcommand).arg("-no-color").args(args);
    let output = cmd.output().map_err(|source| HarnessError::Spawn {
        program: terraform_bin(),
        source,
    })?;
    if output.status.success() {
        Ok(output)
    } else {
        let command = std::iter::once(cmd.get_program())
            .chain(cmd.get_args())
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ");
        Err(HarnessError::Failed(Box::new(CommandFailure {
            command,
            output,
        })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_names_differ_and_are_valid_bucket_names() {
        let a = unique("Sortie_Test");
        let b = unique("Sortie_Test");
        assert_ne!(a, b);
        assert!(a.starts_with("sortie-test-"), "{a}");
        assert!(a.len() <= 63, "{a}");
        assert!(
            a.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
            "{a}"
        );
    }
}
pub mod fakes;
pub mod github;
pub mod gitlab;
pub mod http;
pub mod kube;
pub mod proxy;
pub mod receiver;
pub mod runtime;
mod tarball;
pub mod world;

/// The composition root the test worlds go through, for tests that assemble their own.
pub use sortie_wiring as wiring;
