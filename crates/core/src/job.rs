//! Jobs and their state machine.
//!
//! `queued → dispatching → running → succeeded | failed | canceled | timed_out`, and for a
//! reviewed apply or destroy `running → awaiting_approval → queued` (approved: a second
//! task applies the saved plan) or `→ discarded`.
//! A transition is checked here; an illegal one is an error value. The store
//! makes every transition a conditional write on the expected current state.

use std::collections::BTreeMap;
use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ids::JobId;
use crate::limits;
use crate::names::{EnvPath, RunnerId};
use crate::problems::{key_path, parse_document, Fields, Problems};
use crate::runner::check_secret_refs;
use crate::ValidationError;

/// What a job does to its environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    /// `terraform plan`: reads state, writes nothing.
    Plan,
    /// `terraform apply`.
    Apply,
    /// `terraform destroy`.
    Destroy,
}

impl Operation {
    /// True for operations that write state, which must never be re-run blindly.
    pub fn writes_state(self) -> bool {
        !matches!(self, Self::Plan)
    }

    /// The lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Plan => "plan",
            Self::Apply => "apply",
            Self::Destroy => "destroy",
        }
    }
}

/// The indefinite article for `word` as it is spelled: `an` before a vowel (`an apply`,
/// `an outputs upload`), `a` otherwise (`a plan`, `a destroy`).
pub fn a_or_an(word: &str) -> &'static str {
    match word.chars().next().map(|c| c.to_ascii_lowercase()) {
        Some('a' | 'e' | 'i' | 'o' | 'u') => "an",
        _ => "a",
    }
}

/// A job's lifecycle state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Waiting: for the environment's lock, or in the jobs queue.
    Queued,
    /// Claimed by a dispatcher that is launching it.
    Dispatching,
    /// Launched: a task or Kubernetes Job exists.
    Running,
    /// Finished with exit code 0.
    Succeeded,
    /// Finished unsuccessfully; the reason says why.
    Failed,
    /// Canceled by a user.
    Canceled,
    /// Stopped from outside after exceeding its runner's timeout.
    TimedOut,
    /// Its plan succeeded; it holds the environment's lock until a person approves the
    /// saved plan (a second task applies it) or discards it.
    AwaitingApproval,
    /// Its plan was discarded (by a person, or by the approval timeout): nothing applied.
    Discarded,
}

/// Every state, for tests and listings.
pub const ALL_STATES: [JobState; 9] = [
    JobState::Queued,
    JobState::Dispatching,
    JobState::Running,
    JobState::Succeeded,
    JobState::Failed,
    JobState::Canceled,
    JobState::TimedOut,
    JobState::AwaitingApproval,
    JobState::Discarded,
];

impl JobState {
    /// True for `succeeded`, `failed`, `canceled`, `timed_out` and `discarded`: nothing
    /// follows them.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Self::Succeeded | Self::Failed | Self::Canceled | Self::TimedOut | Self::Discarded
        )
    }

    /// True while the job holds its environment's lock (`dispatching` or `running`).
    pub fn is_active(self) -> bool {
        matches!(self, Self::Dispatching | Self::Running)
    }

    /// The allowed transitions:
    ///
    /// - `queued → dispatching` (claimed) or `canceled`;
    /// - `dispatching → running` (launched), `queued` (retryable launch failure, lease
    ///   expired), `failed` (not retryable) or `canceled`;
    /// - `running → succeeded | failed | canceled | timed_out`, or `queued` (a plan
    ///   interrupted on Spot is requeued), or `awaiting_approval` (a reviewed job's plan
    ///   phase succeeded);
    /// - `awaiting_approval → queued` (approved), `discarded` or `canceled`.
    pub fn can_become(self, to: JobState) -> bool {
        use JobState::*;
        matches!(
            (self, to),
            (Queued, Dispatching)
                | (Queued, Canceled)
                | (Dispatching, Running)
                | (Dispatching, Queued)
                | (Dispatching, Failed)
                | (Dispatching, Canceled)
                | (Running, Succeeded)
                | (Running, Failed)
                | (Running, Canceled)
                | (Running, TimedOut)
                | (Running, Queued)
                | (Running, AwaitingApproval)
                | (AwaitingApproval, Queued)
                | (AwaitingApproval, Discarded)
                | (AwaitingApproval, Canceled)
        )
    }

    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Dispatching => "dispatching",
            Self::Running => "running",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Canceled => "canceled",
            Self::TimedOut => "timed_out",
            Self::AwaitingApproval => "awaiting_approval",
            Self::Discarded => "discarded",
        }
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One recorded transition: from, to, when and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transition {
    /// The state before (`None` for the job's creation).
    pub from: Option<JobState>,
    /// The state after.
    pub to: JobState,
    /// When it happened.
    pub at: DateTime<Utc>,
    /// Why, in words.
    pub reason: String,
    /// How many times this same transition (same from, to and reason) happened in a row,
    /// folded into this one entry (see [`crate::retry::record_transition`]); 1 when once.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub count: u32,
    /// When it last happened, when folded (`count` > 1); `at` is the first time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_at: Option<DateTime<Utc>>,
}

fn one() -> u32 {
    1
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Transition {
    /// A transition that happened once.
    pub fn new(
        from: Option<JobState>,
        to: JobState,
        at: DateTime<Utc>,
        reason: impl Into<String>,
    ) -> Self {
        Self {
            from,
            to,
            at,
            reason: reason.into(),
            count: 1,
            last_at: None,
        }
    }

    /// When it last happened (`last_at` for a folded entry, else `at`).
    pub fn latest_at(&self) -> DateTime<Utc> {
        self.last_at.unwrap_or(self.at)
    }

    /// True when `other` is the same transition (same from, to and reason), whenever.
    pub fn same_as(&self, other: &Transition) -> bool {
        self.from == other.from && self.to == other.to && self.reason == other.reason
    }
}

/// A transition the state machine does not allow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("job {job_id} cannot go from {from} to {to}")]
pub struct IllegalTransition {
    /// The job.
    pub job_id: JobId,
    /// Its current state.
    pub from: JobState,
    /// The state asked for.
    pub to: JobState,
}

/// Where a job's Terraform configuration comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Source {
    /// A git repository.
    Git {
        /// Clone URL (`https://`, `ssh://`, `git@host:` or, for local development, `file://`).
        url: String,
        /// Branch, tag or commit; the default branch when absent.
        #[serde(default, rename = "ref", skip_serializing_if = "Option::is_none")]
        git_ref: Option<String>,
        /// Directory inside the repository holding the configuration.
        #[serde(default)]
        path: String,
        /// A secret reference (ARN) for the clone credentials.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        credentials_secret: Option<String>,
    },
    /// A tar.gz archive in S3.
    S3 {
        /// Bucket.
        bucket: String,
        /// Object key.
        key: String,
        /// The archive's SHA-256, hex; the runner refuses an archive that does not match.
        sha256: String,
        /// Directory inside the archive holding the configuration.
        #[serde(default)]
        path: String,
    },
    /// No source: the configuration is made entirely of the job's `files`.
    Inline {
        /// True when the client chose the files itself, without being told which (the CLI's
        /// `run` with no `--source`). Such a job may not destroy: a destroy is refused at
        /// submit, and the runner refuses to apply a plan that destroys every resource and
        /// creates none.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        implicit: bool,
    },
}

impl Source {
    /// The inline source of files the client was told to send (`implicit: false`).
    pub fn inline() -> Self {
        Self::Inline { implicit: false }
    }

    /// True for an inline source whose files the client chose without being told which.
    pub fn is_implicit(&self) -> bool {
        matches!(self, Self::Inline { implicit: true })
    }
}

/// What a client submits: the job's specification.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRequest {
    /// Plan, apply or destroy.
    pub operation: Operation,
    /// Where the configuration comes from.
    pub source: Source,
    /// Terraform variables, written to `terraform.tfvars.json`.
    #[serde(default)]
    pub variables: BTreeMap<String, Value>,
    /// Extra files by relative path, written over the source.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub files: BTreeMap<String, String>,
    /// Secret references (ARNs) by environment variable name.
    #[serde(default)]
    pub secret_refs: BTreeMap<String, String>,
    /// Sensitive Terraform variables: each name with the ARN of the Secrets Manager secret
    /// that holds its value for the job's life ([`crate::sensitive`]). Never a value; set
    /// by the API at submit, never by a client.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sensitive_variables: BTreeMap<String, String>,
}

/// Largest total size of a job's inline files, in bytes.
pub const MAX_FILES_BYTES: usize = 128 * 1024;

impl JobRequest {
    /// Parses a job request from YAML or JSON and validates it, reporting every problem.
    pub fn parse(text: &str) -> Result<Self, ValidationError> {
        Self::from_value(&parse_document(text)?)
    }

    /// Decodes and validates a parsed job request.
    pub fn from_value(value: &Value) -> Result<Self, ValidationError> {
        let mut p = Problems::default();
        let Some(mut f) = Fields::new(value, "", &mut p) else {
            return Err(ValidationError { problems: p.0 });
        };
        let operation: Option<Operation> = f.required("operation", &mut p);
        let source = match f.raw("source") {
            Some(v) => decode_source(v, &mut p),
            None => Some(Source::inline()),
        };
        let variables: BTreeMap<String, Value> =
            f.optional("variables", &mut p).unwrap_or_default();
        for (name, value) in &variables {
            let path = key_path("variables", name);
            if name.is_empty() {
                p.push(&path, "a variable name must not be empty");
            }
            limits::check_dynamodb_value(
                value,
                &path,
                limits::JOB_VARIABLE_ENCLOSING_LEVELS,
                &mut p,
            );
        }
        let files: BTreeMap<String, String> = f.optional("files", &mut p).unwrap_or_default();
        let mut total = 0;
        for (path, content) in &files {
            total += content.len();
            if let Some(problem) = file_path_problem(path) {
                p.push(key_path("files", path), problem);
            }
        }
        if total > MAX_FILES_BYTES {
            p.push("files", format!("total {total} bytes is over the {MAX_FILES_BYTES}-byte limit; use a source instead"));
        }
        let secret_refs: BTreeMap<String, String> =
            f.optional("secret_refs", &mut p).unwrap_or_default();
        check_secret_refs(&secret_refs, "secret_refs", &mut p);
        let refs_size = serde_json::to_string(&secret_refs)
            .map(|j| limits::json_string_len(&j))
            .unwrap_or(usize::MAX);
        if refs_size > limits::JOB_SECRET_REFS_MAX {
            p.push(
                "secret_refs",
                format!(
                    "take {refs_size} characters in the runner's environment; at most {} are allowed (ECS container overrides are limited to {})",
                    limits::JOB_SECRET_REFS_MAX,
                    limits::ECS_OVERRIDES_MAX
                ),
            );
        }
        f.finish(&mut p);
        if let (Some(Operation::Destroy), Some(Source::Inline { implicit: true })) =
            (operation, &source)
        {
            p.push(
                "source.implicit",
                "a destroy needs an explicit source: name the configuration to destroy (the CLI's `--source DIR`)",
            );
        }
        if matches!(source, Some(Source::Inline { .. })) && files.is_empty() && p.is_empty() {
            p.push(
                "source",
                "is required unless the configuration is given inline in `files`",
            );
        }
        match (operation, source) {
            (Some(operation), Some(source)) if p.is_empty() => {
                let request = Self {
                    operation,
                    source,
                    variables,
                    files,
                    secret_refs,
                    sensitive_variables: BTreeMap::new(),
                };
                let size = request.item_size();
                if size > limits::JOB_REQUEST_ITEM_MAX {
                    p.push(
                        "",
                        format!(
                            "the job takes about {size} bytes in DynamoDB (variables, files, source and secret references); at most {} are allowed within DynamoDB's {}-byte item",
                            limits::JOB_REQUEST_ITEM_MAX,
                            limits::DYNAMODB_ITEM_MAX
                        ),
                    );
                }
                p.finish(request)
            }
            _ => Err(ValidationError { problems: p.0 }),
        }
    }

    /// The estimated DynamoDB size of this request's attributes in its job item (see
    /// [`limits::dynamodb_item_size`]).
    pub fn item_size(&self) -> usize {
        serde_json::to_value(self)
            .map(|v| limits::dynamodb_item_size(&v))
            .unwrap_or(usize::MAX)
    }
}

/// Why `path` is not a job file name Sortie accepts, or `None`: a relative path inside
/// the working directory (no `..`, `.` or empty segment, no `\`), without control
/// characters, each segment at most [`limits::FILE_NAME_SEGMENT_MAX`] bytes and the whole
/// at most [`limits::FILE_PATH_MAX`].
pub fn file_path_problem(path: &str) -> Option<String> {
    if path.is_empty() {
        return Some("a file name must not be empty".into());
    }
    if limits::has_control(path) {
        return Some("a file name must not contain control characters".into());
    }
    if !is_relative_safe_path(path) {
        return Some("must be a relative path inside the working directory, without `..`".into());
    }
    if path.len() > limits::FILE_PATH_MAX
        || path
            .split('/')
            .any(|s| s.len() > limits::FILE_NAME_SEGMENT_MAX)
    {
        return Some(format!(
            "must be at most {} bytes, each segment at most {}",
            limits::FILE_PATH_MAX,
            limits::FILE_NAME_SEGMENT_MAX
        ));
    }
    None
}

/// Refuses a value git would read as an option (a leading `-`), or that has whitespace or
/// control characters.
fn git_argument_problem(v: &str) -> Option<&'static str> {
    if v.starts_with('-') {
        Some("must not start with `-`")
    } else if limits::has_space_or_control(v) {
        Some("must not contain whitespace or control characters")
    } else {
        None
    }
}

/// True for a relative path that stays inside its base directory.
pub fn is_relative_safe_path(path: &str) -> bool {
    !path.is_empty()
        && !path.starts_with('/')
        && !path.contains('\\')
        && !path.contains('\0')
        && path
            .split('/')
            .all(|s| !s.is_empty() && s != ".." && s != ".")
}

/// The optional `path` of a source: empty, or a relative path without `..`.
fn decode_source_path(f: &mut Fields<'_>, p: &mut Problems) -> String {
    let path: String = f.optional("path", p).unwrap_or_default();
    if !path.is_empty() {
        if let Some(problem) = file_path_problem(&path) {
            p.push("source.path", problem);
        }
    }
    path
}

fn decode_source(value: &Value, p: &mut Problems) -> Option<Source> {
    let mut f = Fields::new(value, "source", p)?;
    let t: String = f.required("type", p)?;
    let out = match t.as_str() {
        "git" => {
            let url = f.required_str("url", p);
            if let Some(u) = &url {
                if let Some(problem) = crate::urls::git_url_problem(u) {
                    p.push("source.url", problem);
                } else if let Some(problem) = git_argument_problem(u) {
                    p.push("source.url", problem);
                }
            }
            let git_ref: Option<String> = f.optional("ref", p);
            if let Some(problem) = git_ref.as_deref().and_then(|r| {
                if r.is_empty() {
                    Some("must not be empty when set")
                } else {
                    git_argument_problem(r)
                }
            }) {
                p.push("source.ref", problem);
            }
            let path = decode_source_path(&mut f, p);
            let credentials_secret: Option<String> = f.optional("credentials_secret", p);
            if let Some(c) = &credentials_secret {
                if !limits::is_secret_ref(c) {
                    p.push(
                        "source.credentials_secret",
                        "must be the ARN of a Secrets Manager secret or SSM parameter",
                    );
                }
            }
            url.map(|url| Source::Git {
                url,
                git_ref,
                path,
                credentials_secret,
            })
        }
        "s3" => {
            let bucket = f.required_str("bucket", p);
            if let Some(why) = bucket.as_deref().and_then(limits::bucket_name_problem) {
                p.push(
                    "source.bucket",
                    format!("is not a valid S3 bucket name: it {why}"),
                );
            }
            let key = f.required_str("key", p);
            if let Some(why) = key.as_deref().and_then(limits::object_key_problem) {
                p.push(
                    "source.key",
                    format!("is not a valid S3 object key: it {why}"),
                );
            }
            let sha256 = f.required_str("sha256", p);
            if let Some(s) = &sha256 {
                if s.len() != 64 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
                    p.push("source.sha256", "must be 64 hexadecimal characters");
                }
            }
            let path = decode_source_path(&mut f, p);
            match (bucket, key, sha256) {
                (Some(bucket), Some(key), Some(sha256)) => Some(Source::S3 {
                    bucket,
                    key,
                    sha256,
                    path,
                }),
                _ => None,
            }
        }
        "inline" => {
            let implicit: Option<bool> = f.optional("implicit", p);
            Some(Source::Inline {
                implicit: implicit.unwrap_or(false),
            })
        }
        other => {
            p.push(
                "source.type",
                format!("`{other}` is not a known source type; known types: git, s3, inline"),
            );
            return None;
        }
    };
    f.finish(p);
    out
}

/// A job: one operation on one environment, with its full transition history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    /// The job's id.
    pub id: JobId,
    /// The environment it runs against.
    pub environment: EnvPath,
    /// The runner linked to the environment when the job was submitted.
    pub runner_id: RunnerId,
    /// What was asked for.
    #[serde(flatten)]
    pub request: JobRequest,
    /// The subject of the principal who submitted it.
    pub requested_by: String,
    /// The current state.
    pub state: JobState,
    /// Every transition, oldest first; the first records the creation. Repeats in a row are
    /// folded, and a long history keeps its first and last entries
    /// ([`crate::retry::record_transition`]).
    pub transitions: Vec<Transition>,
    /// How many entries of a long history were dropped between its first and last ones.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub transitions_dropped: u32,
    /// The runner's specification when the job was submitted: the job runs with it,
    /// whatever later updates change, and dispatch needs no second read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner_spec: Option<crate::runner::RunnerSpec>,
    /// For an apply or destroy on an environment with `approval: required`, the policy taken
    /// at submit: the job plans, then awaits approval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review: Option<Review>,
    /// True for a scheduled drift check (a plan with `-detailed-exitcode`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub drift_check: bool,
    /// The tool asked for at submit (the environment's, else the runner's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<crate::tool::ToolName>,
    /// The tool version asked for at submit (the environment's, else the runner's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_version: Option<String>,
}

/// A reviewed job's approval policy (taken at submit) and, once made, the decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Review {
    /// When true, the approver must not be the requester.
    #[serde(default)]
    pub four_eyes: bool,
    /// How long the job may await approval, in seconds.
    pub timeout_seconds: u32,
    /// Which phase the job is in: `plan` until approved, then `apply`.
    pub phase: crate::spec::JobPhase,
    /// When it started awaiting approval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub awaiting_since: Option<DateTime<Utc>>,
    /// The decision, once made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<Decision>,
}

/// Approved or discarded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReviewVerdict {
    /// The saved plan is applied.
    Approved,
    /// The saved plan is thrown away.
    Discarded,
}

/// A decision on a reviewed job: who, when, what and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    /// Approved or discarded.
    pub verdict: ReviewVerdict,
    /// The subject of who decided (`sortie:approval-timeout` for the timeout).
    pub by: String,
    /// When.
    pub at: DateTime<Utc>,
    /// The decider's comment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

/// The longest decision comment, in bytes.
pub const DECISION_COMMENT_MAX: usize = 1024;

/// Why `by` may not approve or discard `job` now, or `None`: the job must be
/// `awaiting_approval` (else [`ReviewRefusal::NotAwaiting`]), and under `four_eyes` an
/// approval must not come from the requester ([`ReviewRefusal::OwnJob`]).
pub fn review_refusal(job: &Job, by: &str, verdict: ReviewVerdict) -> Option<ReviewRefusal> {
    if job.state != JobState::AwaitingApproval {
        return Some(ReviewRefusal::NotAwaiting(job.state));
    }
    let four_eyes = job.review.as_ref().is_some_and(|r| r.four_eyes);
    if four_eyes && verdict == ReviewVerdict::Approved && job.requested_by == by {
        return Some(ReviewRefusal::OwnJob);
    }
    None
}

/// Why a decision is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReviewRefusal {
    /// The job is not awaiting approval; its state.
    NotAwaiting(JobState),
    /// Four eyes: the requester may not approve their own job.
    OwnJob,
}

impl Job {
    /// The phase the job's next task runs (`None`: one task does the whole operation).
    pub fn phase(&self) -> Option<crate::spec::JobPhase> {
        self.review.as_ref().map(|r| r.phase)
    }

    /// A new job in `queued`, with its creation recorded.
    pub fn new(
        id: impl Into<JobId>,
        environment: EnvPath,
        runner_id: RunnerId,
        request: JobRequest,
        requested_by: String,
        at: DateTime<Utc>,
    ) -> Self {
        let reason = format!("submitted by {requested_by}");
        Self {
            id: id.into(),
            environment,
            runner_id,
            request,
            requested_by,
            state: JobState::Queued,
            transitions: vec![Transition::new(None, JobState::Queued, at, reason)],
            transitions_dropped: 0,
            runner_spec: None,
            review: None,
            drift_check: false,
            tool: None,
            tool_version: None,
        }
    }

    /// A new `queued` job on `env` with everything taken at submit: the runner's
    /// specification, the review policy (when the environment's `approval` is `required`
    /// and the operation writes state), and the tool and version (the environment's, else
    /// the runner's).
    pub fn for_environment(
        id: impl Into<JobId>,
        env: &crate::environment::Environment,
        runner: crate::runner::RunnerSpec,
        request: JobRequest,
        requested_by: String,
        at: DateTime<Utc>,
    ) -> Self {
        let settings = &env.settings;
        let mut job = Self::new(
            id,
            env.path.clone(),
            env.runner.runner_id.clone(),
            request,
            requested_by,
            at,
        );
        if settings.approval == crate::environment::Approval::Required
            && job.request.operation.writes_state()
        {
            job.review = Some(Review {
                four_eyes: settings.four_eyes,
                timeout_seconds: settings
                    .approval_timeout_seconds
                    .unwrap_or(crate::environment::APPROVAL_TIMEOUT_DEFAULT_SECONDS),
                phase: crate::spec::JobPhase::Plan,
                awaiting_since: None,
                decision: None,
            });
        }
        job.tool = settings.tool.or(runner.tool);
        job.tool_version = settings
            .tool_version
            .clone()
            .or_else(|| runner.tool_version.clone());
        job.runner_spec = Some(runner);
        job
    }

    /// Moves the job to `to`, recording when and why, or returns the illegal transition unchanged.
    pub fn transition(
        &mut self,
        to: JobState,
        at: DateTime<Utc>,
        reason: impl Into<String>,
    ) -> Result<&Transition, IllegalTransition> {
        if !self.state.can_become(to) {
            return Err(IllegalTransition {
                job_id: self.id.clone(),
                from: self.state,
                to,
            });
        }
        let t = Transition::new(Some(self.state), to, at, reason);
        crate::retry::record_transition(&mut self.transitions, &mut self.transitions_dropped, t);
        self.state = to;
        Ok(self.transitions.last().expect("just recorded"))
    }

    /// The reason of the latest transition.
    pub fn reason(&self) -> &str {
        self.transitions
            .last()
            .map(|t| t.reason.as_str())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod implicit_source_tests {
    use super::*;

    #[test]
    fn the_article_follows_the_first_letter() {
        assert_eq!(a_or_an("apply"), "an");
        assert_eq!(a_or_an("outputs"), "an");
        assert_eq!(a_or_an("Error"), "an");
        assert_eq!(a_or_an("plan"), "a");
        assert_eq!(a_or_an("destroy"), "a");
        assert_eq!(a_or_an(""), "a");
    }

    #[test]
    fn an_inline_source_may_be_marked_implicit_and_then_may_not_destroy() {
        let parse = |op: &str, source: &str| {
            JobRequest::parse(&format!(
                r#"{{"operation":"{op}","source":{source},"files":{{"main.tf":"output \"x\" {{ value = 1 }}"}}}}"#
            ))
        };
        let apply = parse("apply", r#"{"type":"inline","implicit":true}"#).unwrap();
        assert_eq!(apply.source, Source::Inline { implicit: true });
        assert!(apply.source.is_implicit());
        // It travels as `implicit: true`, and an explicit one as a plain inline source.
        let json = serde_json::to_value(&apply.source).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"type": "inline", "implicit": true})
        );
        let plain = parse("apply", r#"{"type":"inline"}"#).unwrap();
        assert_eq!(plain.source, Source::inline());
        assert!(!plain.source.is_implicit());
        assert_eq!(
            serde_json::to_value(&plain.source).unwrap(),
            serde_json::json!({"type": "inline"})
        );
        let back: Source = serde_json::from_value(serde_json::json!({"type": "inline"})).unwrap();
        assert_eq!(back, Source::inline());

        let e = parse("destroy", r#"{"type":"inline","implicit":true}"#).unwrap_err();
        assert_eq!(e.problems.len(), 1, "{e}");
        assert_eq!(e.problems[0].path, "source.implicit");
        assert!(e.problems[0].problem.contains("explicit source"), "{e}");
        assert!(parse("destroy", r#"{"type":"inline","implicit":false}"#).is_ok());
        let e = parse("apply", r#"{"type":"inline","implicit":"yes"}"#).unwrap_err();
        assert_eq!(e.problems[0].path, "source.implicit", "{e}");
        let e = parse(
            "apply",
            r#"{"type":"git","url":"https://h/r.git","implicit":true}"#,
        )
        .unwrap_err();
        assert_eq!(e.problems[0].path, "source.implicit", "{e}");
    }
}
