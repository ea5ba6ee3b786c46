//! Sortie's HTTP API v1: one axum [`router`] over the [`Store`]
//! and the jobs queue, served by the `api` Lambda behind API Gateway and by
//! `sortie dev` on a local port.
//!
//! Authentication: in AWS, API Gateway's JWT authorizer verifies the token and
//! the `api` function puts its claims on the request as [`VerifiedClaims`].
//! Locally, the development identity is used only when [`AppState::dev_identity`]
//! is set explicitly. Every route checks `sortie_core::can`; a caller who may not
//! read a group gets 404 for its resources, so other tenants' names never leak.
//!
//! Layout: [`routes`] holds the route table and one module per resource;
//! `extract` the extractors they share; [`model`] the typed bodies; [`openapi()`]
//! the document generated from the handlers' annotations.

#![warn(missing_docs)]

mod error;
mod extract;
mod memberships_cache;
pub mod model;
pub mod oidc;
mod openapi;
pub mod routes;

use std::collections::BTreeMap;
use std::sync::Arc;

use sortie_lifecycle::JobService;
use sortie_store::Store;

pub use error::{
    ApiError, ErrorBody, ErrorDetail, FieldProblem, ACCEPTED_MEDIA_TYPES, INVALID_TOKEN_CHALLENGE,
};
pub use memberships_cache::{MembershipCache, MEMBERSHIP_TTL};
pub use openapi::openapi;
pub use routes::{Auth, Route};
/// The console served next to the API (`/`, `/assets/…`), outside [`Route::ALL`].
pub use sortie_console::{self as console, ConsoleConfig};
pub use sortie_lifecycle::RuleIndexCache;

/// Largest request body accepted: 256 KiB.
pub const MAX_BODY_BYTES: usize = 256 * 1024;

/// Claims of a token the platform already verified (API Gateway's JWT authorizer).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VerifiedClaims(pub BTreeMap<String, serde_json::Value>);

/// Where a request came from, as API Gateway saw it: its request id and the caller's
/// address (for the audit trail). `sortie dev` sends none: a fresh id stands in.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestOrigin {
    /// API Gateway's request id.
    pub request_id: String,
    /// The caller's address.
    pub source_ip: Option<String>,
}

/// What every request handler shares.
#[derive(Clone)]
pub struct AppState {
    /// The repository.
    pub store: Arc<dyn Store>,
    /// Submit and cancel (with the environment lock's release-and-next), shared with the
    /// engine so both move jobs the same way.
    pub jobs: JobService,
    /// Use the local development identity for requests without verified claims.
    /// Never set in AWS; set only by `sortie dev` or tests that ask for it.
    pub dev_identity: bool,
    /// Where runners write logs and artifacts, and where the API reads them.
    pub artifacts: Arc<dyn sortie_store::Artifacts>,
    /// The artifacts bucket's name and region, given to runners in their spec.
    pub bucket: BucketConfig,
    /// The memberships requests are authorised against, cached per instance for at most
    /// [`MEMBERSHIP_TTL`].
    pub memberships: MembershipCache,
    /// JWT subjects that are system administrators (owners of the root group) from
    /// configuration: how the first administrator of a fresh deployment exists.
    pub admin_subjects: Vec<String>,
    /// `runner check`: the preflight of a runner against its platform.
    pub checker: Arc<dyn sortie_launch::RunnerChecker>,
    /// Compiled rule indexes per group, revalidated by the rule-set version on each use.
    pub rule_indexes: RuleIndexCache,
    /// Verifies the OIDC tokens agents present to pools that trust an issuer.
    pub oidc: Arc<dyn oidc::OidcVerifier>,
    /// The API's public URL, given to the runners agents start; when absent, the URL the
    /// agent's request reached (its `Host` and `X-Forwarded-Proto`).
    pub public_url: Option<String>,
    /// How often agents heartbeat their jobs ([`sortie_core::protocol::agent::HEARTBEAT_SECONDS`], or
    /// less when the sweeper's agent silence is short, so that three beats fit in it).
    pub agent_heartbeat_seconds: u32,
    /// Where environments' state versions are read (`s3` state storage, in the runner's
    /// account through its launcher role).
    pub state_history: Arc<dyn sortie_launch::state_history::StateHistory>,
    /// How the console served under `/` signs in: local tokens in `sortie dev`, OIDC against
    /// the authorizer's issuer in AWS.
    pub console: ConsoleConfig,
    /// Pull requests: each connection's host, where webhook work goes, and the webhook
    /// secrets read lately (`None`: this deployment takes no webhooks, and the
    /// pull-request routes answer 503 saying so).
    pub pulls: Option<PullParts>,
    /// Sortie as an OIDC issuer: job identity tokens and the keys that verify them (`None`:
    /// this deployment has no signing key, and its runners' `identity` blocks get no token).
    pub issuer: Option<sortie_lifecycle::Issuer>,
    /// How a test or a redelivery of a notification is sent, and the console it links to.
    pub notify: NotifyParts,
}

/// What the notification routes need beyond the store: the client that sends a test or a
/// redelivery (the SSRF-guarded one), and the console Slack messages link to.
#[derive(Clone)]
pub struct NotifyParts {
    /// Sends one delivery.
    pub sender: Arc<dyn sortie_lifecycle::Sender>,
    /// `sortie dev`: plain `http://` to loopback allowed in a destination's URL.
    pub local: bool,
    /// The console's URL.
    pub console_url: String,
}

impl NotifyParts {
    /// The guarded client with the system's CA certificates (`SSL_CERT_FILE` is honoured).
    pub fn system(local: bool, console_url: impl Into<String>) -> Self {
        Self {
            sender: Arc::new(sortie_http::deliver::GuardedClient::system(local)),
            local,
            console_url: console_url.into(),
        }
    }
}

/// What the pull-request routes need beyond the store.
#[derive(Clone)]
pub struct PullParts {
    /// Each connection's host (GitHub).
    pub hosts: Arc<dyn sortie_lifecycle::pull_requests::CodeHosts>,
    /// Where a verified delivery's work goes.
    pub queue: Arc<dyn sortie_store::PullQueue>,
    /// The console's URL, for the links of checks and comments.
    pub console_url: String,
    /// Webhook secrets read from Secrets Manager, by host and organisation, for at most
    /// [`WEBHOOK_SECRET_TTL`]: a burst of deliveries reads the secret once.
    pub webhook_secrets: Arc<std::sync::Mutex<WebhookSecrets>>,
}

/// Webhook secrets by host and organisation, each with when it was read.
pub type WebhookSecrets = std::collections::HashMap<
    (sortie_core::vcs::VcsProvider, String),
    (String, std::time::Instant),
>;

/// How long an instance keeps a connection's webhook secret: a new secret (a reconnect)
/// is used by every instance within this time.
pub const WEBHOOK_SECRET_TTL: std::time::Duration = std::time::Duration::from_secs(300);

impl PullParts {
    /// The pull-request service over `jobs` and these parts.
    pub fn service(&self, jobs: &JobService) -> sortie_lifecycle::pull_requests::PullRequests {
        sortie_lifecycle::pull_requests::PullRequests {
            jobs: jobs.clone(),
            hosts: self.hosts.clone(),
            console_url: self.console_url.clone(),
        }
    }

    /// Parts over `hosts` and `queue`, linking to the console at `console_url`.
    pub fn new(
        hosts: Arc<dyn sortie_lifecycle::pull_requests::CodeHosts>,
        queue: Arc<dyn sortie_store::PullQueue>,
        console_url: impl Into<String>,
    ) -> Self {
        Self {
            hosts,
            queue,
            console_url: console_url.into(),
            webhook_secrets: Default::default(),
        }
    }
}

impl AppState {
    /// The agent-pool service over this state's store.
    pub fn pools(&self) -> sortie_lifecycle::AgentPools {
        sortie_lifecycle::AgentPools::new(self.store.clone())
    }

    /// The runner service over this state's store.
    pub fn runners(&self) -> sortie_lifecycle::Runners {
        sortie_lifecycle::Runners::new(self.store.clone())
    }

    /// The membership service over this state's store.
    pub fn memberships(&self) -> sortie_lifecycle::Memberships {
        sortie_lifecycle::Memberships::new(self.store.clone())
    }

    /// An organisation's audit trail, over this state's store.
    pub fn audit_trail(&self) -> sortie_lifecycle::AuditTrail {
        sortie_lifecycle::AuditTrail::new(self.store.clone())
    }

    /// A job's log, over this state's artifacts bucket.
    pub fn logs(&self) -> sortie_lifecycle::Logs {
        sortie_lifecycle::Logs::new(self.artifacts.clone())
    }

    /// A job's files (uploads, the saved plan, `plan.json`, outputs), over this state's
    /// artifacts bucket.
    pub fn job_artifacts(&self) -> sortie_lifecycle::JobArtifacts {
        sortie_lifecycle::JobArtifacts::new(self.artifacts.clone())
    }

    /// Code host connections and the webhook deliveries taken, over this state's store.
    pub fn connections(&self) -> sortie_lifecycle::pull_requests::Connections {
        sortie_lifecycle::pull_requests::Connections::new(self.store.clone())
    }

    /// The rule service over this state's store.
    pub fn rules(&self) -> sortie_lifecycle::Rules {
        sortie_lifecycle::Rules::new(self.store.clone())
    }

    /// The notification service over this state's store, secrets and bus.
    pub fn notifications(&self) -> sortie_lifecycle::Notifications {
        sortie_lifecycle::Notifications {
            store: self.store.clone(),
            secrets: self.jobs.secrets.clone(),
            local: self.notify.local,
            bus: self.jobs.bus.clone(),
        }
    }

    /// The policy set service over this state's store.
    pub fn policy_sets(&self) -> sortie_lifecycle::PolicySets {
        sortie_lifecycle::PolicySets::new(self.store.clone())
    }

    /// The pull-request service, when this deployment has one.
    pub fn pull_requests(&self) -> Option<sortie_lifecycle::pull_requests::PullRequests> {
        self.pulls.as_ref().map(|p| p.service(&self.jobs))
    }

    /// The environment service over this state's store and rule cache.
    pub fn environments(&self) -> sortie_lifecycle::Environments {
        sortie_lifecycle::Environments::new(self.store.clone(), self.rule_indexes.clone())
    }
}

/// The artifacts bucket, as runners are told about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketConfig {
    /// Bucket name.
    pub name: String,
    /// Bucket region.
    pub region: String,
}

/// The API router: every v1 route of [`Route::ALL`] and the console (`/`, `/assets/…`;
/// [`console::router`]), answering JSON errors for anything else (404 for an unknown
/// path, 405 with `Allow` for a wrong method).
pub fn router(state: AppState) -> axum::Router {
    routes::build(state)
}
