//! The environment variables Sortie's functions read, in one place.
//!
//! The SAM template sets exactly these per function, and a test checks the
//! template against [`FUNCTIONS`], so the code and the template cannot drift.

/// DynamoDB table name (the single table).
pub const TABLE: &str = "SORTIE_TABLE";
/// URL of the jobs queue (SQS).
pub const JOBS_QUEUE_URL: &str = "SORTIE_JOBS_QUEUE_URL";
/// Name of Sortie's EventBridge bus, where `sortie.job.ended` is published.
pub const BUS_NAME: &str = "SORTIE_BUS_NAME";
/// Artifacts and logs bucket.
pub const BUCKET: &str = "SORTIE_BUCKET";
/// The live log's bucket: an S3 Express One Zone directory bucket
/// (`<name>--<zone id>--x-s3`) where a followed job's log is rewritten every second and
/// its follow marker kept (optional; read by `api`: without it a followed log ships a
/// chunk to [`BUCKET`] every second).
pub const LIVE_BUCKET: &str = "SORTIE_LIVE_BUCKET";
/// The public URL of the API, passed to runners so they can fetch their spec.
pub const API_URL: &str = "SORTIE_API_URL";
/// URL of the pull-request work queue (SQS): webhook work, job-end reports, reconciles.
/// Optional for `api` (without it the webhook answers 503), required for `pulls`.
pub const PULL_QUEUE_URL: &str = "SORTIE_PULL_QUEUE_URL";
/// URL of the notify queue (SQS): the bus's events for notification destinations, and the
/// deliveries they fan out to. Required for `notify`.
pub const NOTIFY_QUEUE_URL: &str = "SORTIE_NOTIFY_QUEUE_URL";
/// The audit trail's archive: an S3 bucket with Object Lock in compliance mode, where the
/// sweeper exports each organisation's sealed entries (required for `sweeper`).
pub const AUDIT_BUCKET: &str = "SORTIE_AUDIT_BUCKET";
/// How many minutes apart an organisation's audit exports are (optional; read by
/// `sweeper`; 15 when unset).
pub const AUDIT_EXPORT_MINUTES: &str = "SORTIE_AUDIT_EXPORT_MINUTES";
/// Enables the local development identity when set to `1`. Never set in AWS: the template test checks.
pub const DEV_IDENTITY: &str = "SORTIE_DEV_IDENTITY";
/// Comma-separated JWT subjects that are system administrators (optional; read by `api`).
pub const ADMIN_SUBJECTS: &str = "SORTIE_ADMIN_SUBJECTS";
/// The console's OAuth client id (optional; read by `api`): empty, the console says sign-in
/// is not configured.
pub const CONSOLE_CLIENT_ID: &str = "SORTIE_CONSOLE_CLIENT_ID";
/// The console's token endpoint, when its origin is not the issuer's (optional; read by `api`).
pub const CONSOLE_TOKEN_ENDPOINT: &str = "SORTIE_CONSOLE_TOKEN_ENDPOINT";
/// The issuer API Gateway's JWT authorizer trusts, which the console signs in against
/// (optional; read by `api`).
pub const JWT_ISSUER: &str = "SORTIE_JWT_ISSUER";
/// The audiences that authorizer accepts, comma separated; the console asks for the first
/// (optional; read by `api`).
pub const JWT_AUDIENCE: &str = "SORTIE_JWT_AUDIENCE";
/// The KMS key (an alias, as a rule) that signs job identity tokens (optional; read by
/// `api`): without it, runners' `identity` blocks get no token.
pub const IDENTITY_KEY: &str = "SORTIE_IDENTITY_KEY";
/// A KMS key (an alias) published beside the signing key while one rolls in or out
/// (optional; read by `api`).
pub const IDENTITY_STANDBY_KEY: &str = "SORTIE_IDENTITY_STANDBY_KEY";
/// How many seconds a job identity token lives, at most 3600, the default (optional; read
/// by `api`).
pub const IDENTITY_TOKEN_SECONDS: &str = "SORTIE_IDENTITY_TOKEN_SECONDS";

/// One function and the variables it reads.
#[derive(Debug, Clone, Copy)]
pub struct FunctionEnv {
    /// The function's crate name under `functions/`.
    pub name: &'static str,
    /// The SAM logical id of the function.
    pub logical_id: &'static str,
    /// Every variable the function requires.
    pub required: &'static [&'static str],
    /// Variables the function reads when set.
    pub optional: &'static [&'static str],
}

/// Every function and what it reads.
pub const FUNCTIONS: &[FunctionEnv] = &[
    FunctionEnv {
        name: "api",
        logical_id: "ApiFunction",
        required: &[TABLE, JOBS_QUEUE_URL, BUCKET],
        optional: &[
            LIVE_BUCKET,
            ADMIN_SUBJECTS,
            CONSOLE_CLIENT_ID,
            CONSOLE_TOKEN_ENDPOINT,
            JWT_ISSUER,
            JWT_AUDIENCE,
            // Pull requests: the webhook's queue, and the console's URL for checks' links.
            PULL_QUEUE_URL,
            API_URL,
            // Job identity tokens: the issuer's keys (its URL is API_URL).
            IDENTITY_KEY,
            IDENTITY_STANDBY_KEY,
            IDENTITY_TOKEN_SECONDS,
        ],
    },
    FunctionEnv {
        name: "dispatch",
        logical_id: "DispatchFunction",
        // The bus: a job that fails at launch completes there, and publishes it.
        required: &[TABLE, JOBS_QUEUE_URL, API_URL, BUS_NAME],
        optional: &[],
    },
    FunctionEnv {
        name: "task-events",
        logical_id: "TaskEventsFunction",
        // The bucket: the policy gate reads a plan's `plan.json` when a plan ends here.
        required: &[TABLE, JOBS_QUEUE_URL, BUS_NAME, BUCKET],
        optional: &[],
    },
    FunctionEnv {
        name: "sweeper",
        logical_id: "SweeperFunction",
        // The audit bucket: the sweeper seals the audit trail and exports it there.
        required: &[
            TABLE,
            JOBS_QUEUE_URL,
            API_URL,
            BUS_NAME,
            BUCKET,
            AUDIT_BUCKET,
        ],
        optional: &[AUDIT_EXPORT_MINUTES],
    },
    FunctionEnv {
        name: "pulls",
        logical_id: "PullsFunction",
        // Pull requests submit plans and applies (the jobs queue), queue reconciles (the
        // pull queue), and link checks to the console (the API's URL).
        required: &[TABLE, JOBS_QUEUE_URL, PULL_QUEUE_URL, API_URL, BUS_NAME],
        optional: &[],
    },
    FunctionEnv {
        name: "notify",
        logical_id: "NotifyFunction",
        // Destinations and their histories (the table), their deliveries (the notify
        // queue), a delivery given up on published (the bus), Slack's links (the API's
        // URL, where the console is).
        required: &[TABLE, NOTIFY_QUEUE_URL, BUS_NAME, API_URL],
        optional: &[],
    },
];

/// A required variable is missing or empty.
#[derive(Debug, thiserror::Error)]
#[error("environment variable {0} is not set")]
pub struct Missing(pub &'static str);

/// Reads a required variable.
pub fn required(name: &'static str) -> Result<String, Missing> {
    std::env::var(name)
        .ok()
        .filter(|v| !v.is_empty())
        .ok_or(Missing(name))
}
