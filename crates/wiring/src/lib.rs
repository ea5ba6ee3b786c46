//! Sortie's one composition root.
//!
//! [`compose`] builds, once, everything the control plane is made of: the
//! DynamoDB store, the jobs queue, the completion bus, the artifacts bucket, the
//! launchers, the [`JobService`], the [`Engine`] and the API's [`AppState`]. The
//! four Lambda functions build it from their `SORTIE_*` variables
//! ([`Resources::for_function`]); `sortie dev` builds it from its own resources
//! and adds the `local` launcher. No other place constructs these parts, so the
//! functions and local mode cannot drift apart.
//!
//! [`compose`] is [`aws_parts`] then [`assemble`]; the test kit (`sortie-testkit`)
//! calls [`assemble`] with `MemoryStore` and in-memory fakes for its fast tier, so
//! every test world is put together here too.

use std::sync::Arc;

mod function_config;
pub mod job_header;
pub use function_config::{
    function_sdk_config, trusted_roots_pem, DEBIAN_CA_BUNDLE, LAMBDA_CA_BUNDLE,
};

use aws_config::SdkConfig;
use sortie_api::oidc::OidcVerifier;
use sortie_api::{AppState, BucketConfig};
use sortie_launch::{
    AwsRunnerChecker, ByRunnerType, EcsLauncher, EksLauncher, JobSecrets, Launcher, LocalLauncher,
    RunnerChecker,
};
use sortie_lifecycle::{Bus, Engine, EventBridgeBus, JobService, SweepSettings};
use sortie_settings::{FunctionEnv, Missing};
use sortie_store::{
    Artifacts, DynamoStore, JobQueue, S3Artifacts, SqsJobQueue, SqsPullQueue, Store,
};

/// The AWS resources the control plane uses, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resources {
    /// The DynamoDB table.
    pub table: String,
    /// The jobs queue's URL.
    pub jobs_queue_url: String,
    /// The EventBridge bus `sortie.job.ended` goes to (`default` when not set).
    pub bus_name: String,
    /// The artifacts and logs bucket, for the functions that read or presign it.
    pub bucket: Option<String>,
    /// The live log's directory bucket (S3 Express One Zone), when there is one.
    pub live_bucket: Option<String>,
    /// The API's public URL, which runners call back (empty for functions that launch nothing).
    pub api_url: String,
    /// JWT subjects that are system administrators from configuration.
    pub admin_subjects: Vec<String>,
    /// The pull queue's URL, for the functions that read `SORTIE_PULL_QUEUE_URL` (the API
    /// takes webhooks only with it).
    pub pull_queue_url: Option<String>,
    /// The sweep's timing (the defaults in the functions; `sortie dev` may shorten them).
    pub sweep: SweepSettings,
    /// How the console signs in: OIDC in the `api` function, local tokens in `sortie dev`.
    pub console: sortie_api::ConsoleConfig,
    /// The KMS keys job identity tokens are signed with; `None`: no tokens.
    pub identity: Option<IdentityKeys>,
    /// The audit trail's archive bucket (Object Lock), for the function that exports it.
    pub audit_bucket: Option<String>,
}

/// The issuer's KMS keys and its tokens' lifetime; the issuer's URL is
/// [`Resources::api_url`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdentityKeys {
    /// The key (an alias) that signs.
    pub signing: String,
    /// A key (an alias) published beside it while one rolls in or out.
    pub standby: Option<String>,
    /// How many seconds a token lives (cut to an hour).
    pub token_seconds: u32,
    /// How long the keys read from KMS are used before they are read again.
    pub keys_ttl: std::time::Duration,
}

impl IdentityKeys {
    /// The issuer's configuration at `url`.
    pub fn issuer_config(&self, url: &str) -> sortie_lifecycle::IssuerConfig {
        sortie_lifecycle::IssuerConfig {
            url: url.to_string(),
            signing_key: self.signing.clone(),
            standby_key: self.standby.clone(),
            lifetime: sortie_core::identity::MAX_TOKEN_LIFETIME.min(chrono::Duration::seconds(
                i64::from(self.token_seconds.max(1)),
            )),
            keys_ttl: self.keys_ttl,
        }
    }
}

impl Resources {
    /// Reads the variables of the function `name` (as listed in [`sortie_settings::FUNCTIONS`]):
    /// each required one must be set; optional ones default.
    pub fn for_function(name: &str) -> Result<Self, Missing> {
        let function = sortie_settings::FUNCTIONS
            .iter()
            .find(|f| f.name == name)
            .ok_or(Missing("(no such function in sortie_settings::FUNCTIONS)"))?;
        for variable in function.required {
            sortie_settings::required(variable)?;
        }
        let read = |variable: &'static str| read_if_listed(function, variable);
        Ok(Self {
            table: read(sortie_settings::TABLE).unwrap_or_default(),
            jobs_queue_url: read(sortie_settings::JOBS_QUEUE_URL).unwrap_or_default(),
            bus_name: read(sortie_settings::BUS_NAME).unwrap_or_else(|| "default".into()),
            bucket: read(sortie_settings::BUCKET),
            live_bucket: read(sortie_settings::LIVE_BUCKET),
            api_url: read(sortie_settings::API_URL).unwrap_or_default(),
            admin_subjects: read(sortie_settings::ADMIN_SUBJECTS)
                .unwrap_or_default()
                .split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect(),
            pull_queue_url: read(sortie_settings::PULL_QUEUE_URL),
            sweep: SweepSettings {
                audit_export_every: read(sortie_settings::AUDIT_EXPORT_MINUTES)
                    .and_then(|m| m.trim().parse::<i64>().ok())
                    .filter(|m| *m > 0)
                    .map(chrono::Duration::minutes)
                    .unwrap_or(SweepSettings::default().audit_export_every),
                ..SweepSettings::default()
            },
            audit_bucket: read(sortie_settings::AUDIT_BUCKET),
            console: console_config(function),
            identity: read(sortie_settings::IDENTITY_KEY).map(|signing| IdentityKeys {
                signing,
                standby: read(sortie_settings::IDENTITY_STANDBY_KEY),
                token_seconds: read(sortie_settings::IDENTITY_TOKEN_SECONDS)
                    .and_then(|s| s.trim().parse().ok())
                    .unwrap_or(3600),
                keys_ttl: sortie_lifecycle::issuer::KEYS_TTL,
            }),
        })
    }
}

/// The console's OIDC sign-in from the function's variables (the authorizer's issuer and
/// first audience, the client id and token endpoint): the local sign-in when the function
/// does not read them.
fn console_config(function: &FunctionEnv) -> sortie_api::ConsoleConfig {
    if !function
        .optional
        .contains(&sortie_settings::CONSOLE_CLIENT_ID)
    {
        return sortie_api::ConsoleConfig::local();
    }
    let read = |variable: &'static str| read_if_listed(function, variable).unwrap_or_default();
    let audience = read(sortie_settings::JWT_AUDIENCE);
    let audience = audience
        .split(',')
        .map(str::trim)
        .next()
        .unwrap_or_default();
    let mut config = sortie_api::ConsoleConfig::oidc(
        read(sortie_settings::JWT_ISSUER),
        read(sortie_settings::CONSOLE_CLIENT_ID).trim(),
        audience,
    );
    if let sortie_api::console::ConsoleMode::Oidc(oidc) = &mut config.mode {
        oidc.token_endpoint = read_if_listed(function, sortie_settings::CONSOLE_TOKEN_ENDPOINT);
    }
    config
}

/// A variable's value, only if the function lists it (so a function never depends on a
/// variable the template does not give it) and it is set.
fn read_if_listed(function: &FunctionEnv, variable: &'static str) -> Option<String> {
    let listed = function.required.contains(&variable) || function.optional.contains(&variable);
    listed
        .then(|| std::env::var(variable).ok())
        .flatten()
        .filter(|v| !v.is_empty())
}

/// The parts of the control plane as trait objects: what [`assemble`] puts together.
///
/// [`aws_parts`] builds them on AWS; the test kit builds them on `MemoryStore` and
/// in-memory fakes (the fast tier) or on moto (the AWS tier).
pub struct Parts {
    /// The repository.
    pub store: Arc<dyn Store>,
    /// The jobs queue.
    pub queue: Arc<dyn JobQueue>,
    /// Where `sortie.job.ended` goes.
    pub bus: Arc<dyn Bus>,
    /// The secrets holding jobs' sensitive variables while they run.
    pub secrets: Arc<dyn JobSecrets>,
    /// Starts and controls tasks, by runner type.
    pub launcher: Arc<dyn Launcher>,
    /// The artifacts bucket, when there is one (the API needs it).
    pub artifacts: Option<Arc<dyn Artifacts>>,
    /// How the API checks runners; `None` builds the AWS checker in
    /// [`Composition::api_state`] (so only the API links the EC2 and IAM clients).
    pub checker: Option<Arc<dyn RunnerChecker>>,
    /// How the API verifies OIDC tokens; `None` fetches issuers' keys (JWKS).
    pub oidc: Option<Arc<dyn OidcVerifier>>,
    /// KMS, which signs job identity tokens; `None` builds the AWS client in
    /// [`Composition::api_state`] (only the API signs).
    pub kms: Option<Arc<dyn sortie_launch::kms::Kms>>,
}

/// Everything the control plane is made of, built once.
pub struct Composition {
    /// The repository.
    pub store: Arc<dyn Store>,
    /// The jobs queue.
    pub queue: Arc<dyn JobQueue>,
    /// Submit, cancel, complete and release-and-next, shared by the API and the engine.
    pub jobs: JobService,
    /// Dispatch, task events and the sweep.
    pub engine: Arc<Engine>,
    /// The artifacts bucket, when this composition has one.
    pub artifacts: Option<Arc<dyn Artifacts>>,
    checker: Option<Arc<dyn RunnerChecker>>,
    oidc: Option<Arc<dyn OidcVerifier>>,
    kms: Option<Arc<dyn sortie_launch::kms::Kms>>,
    /// The base AWS configuration, for the parts only the API builds (`runner check`).
    config: Option<SdkConfig>,
    /// True when this composition launches `local` runners (`sortie dev`).
    has_local: bool,
    resources: Resources,
    region: String,
    /// Pull requests: each connection's host and the queue of webhook work; `None` until
    /// a caller that has a pull-request queue sets it (`sortie dev`, the tests).
    pub pulls: Option<sortie_api::PullParts>,
    /// How the API sends a notification's test or redelivery; `None`: the guarded client
    /// with the system's CA certificates (plain `http://` to loopback in `sortie dev`).
    pub notify: Option<sortie_api::NotifyParts>,
}

/// The AWS composition: [`Composition`] (through `Deref`) plus the concrete AWS
/// parts that the functions and `sortie dev` use beyond their traits (creating the
/// table and bucket, delaying a redelivery).
pub struct AwsComposition {
    /// The DynamoDB store.
    pub store: Arc<DynamoStore>,
    /// The SQS jobs queue (the dispatch adapter delays redeliveries through it).
    pub queue: Arc<SqsJobQueue>,
    /// The S3 artifacts bucket, when there is one.
    pub artifacts: Option<Arc<S3Artifacts>>,
    /// The SQS pull queue, when the function reads `SORTIE_PULL_QUEUE_URL` (the pulls
    /// adapter queues reconciles and delays redeliveries through it).
    pub pull_queue: Option<SqsPullQueue>,
    /// The control plane over these parts.
    pub plane: Composition,
}

impl std::ops::Deref for AwsComposition {
    type Target = Composition;

    fn deref(&self) -> &Composition {
        &self.plane
    }
}

/// The control plane's AWS parts for `resources`, concrete where callers need them.
pub struct AwsParts {
    /// The DynamoDB store.
    pub store: Arc<DynamoStore>,
    /// The SQS jobs queue.
    pub queue: Arc<SqsJobQueue>,
    /// The S3 artifacts bucket, when `resources` names one.
    pub artifacts: Option<Arc<S3Artifacts>>,
    /// The parts as [`assemble`] takes them.
    pub parts: Parts,
}

/// An S3 client: path-style addressing only against a local S3 (moto); AWS wants virtual
/// hosts.
fn s3_client(config: &SdkConfig) -> aws_sdk_s3::Client {
    aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(config)
            .force_path_style(std::env::var_os("AWS_ENDPOINT_URL").is_some())
            .build(),
    )
}

/// Builds the AWS parts for `resources`. `local` adds the `local` runner type's
/// launcher (only `sortie dev` has one); `ecs-fargate` runners always get `EcsLauncher`,
/// and `eks` runners `EksLauncher`.
pub fn aws_parts(
    config: &SdkConfig,
    resources: &Resources,
    local: Option<LocalLauncher>,
) -> AwsParts {
    // Against a local AWS, each request says which job it is for (moto's timing).
    let mut dynamodb = aws_sdk_dynamodb::config::Builder::from(config);
    let mut sqs = aws_sdk_sqs::config::Builder::from(config);
    if job_header::local_aws() {
        dynamodb = dynamodb.interceptor(job_header::JobHeader);
        sqs = sqs.interceptor(job_header::JobHeader);
    }
    let mut store = DynamoStore::new(
        aws_sdk_dynamodb::Client::from_conf(dynamodb.build()),
        &resources.table,
    );
    if let Some(bucket) = &resources.audit_bucket {
        store = store.with_audit_archive(Arc::new(sortie_store::S3AuditArchive::new(
            s3_client(config),
            bucket.clone(),
        )));
    }
    let store = Arc::new(store);
    let queue = Arc::new(SqsJobQueue::new(
        aws_sdk_sqs::Client::from_conf(sqs.build()),
        &resources.jobs_queue_url,
    ));
    let launcher = ByRunnerType {
        ecs: Some(Arc::new(EcsLauncher::new(config.clone()))),
        eks: Some(Arc::new(EksLauncher::new(config.clone()))),
        local: local.map(|l| Arc::new(l) as Arc<dyn Launcher>),
    };
    let artifacts = resources.bucket.as_ref().map(|bucket| {
        let s3 = s3_client(config);
        // Presigned URLs live no longer than these credentials (a role session's die with it).
        let mut artifacts = S3Artifacts::new(s3.clone(), bucket.clone())
            .with_signing_credentials(config.credentials_provider());
        if let Some(live) = &resources.live_bucket {
            // A directory bucket's URLs are signed in sessions of its own.
            artifacts = artifacts.with_live(S3Artifacts::new(s3, live.clone()));
        }
        Arc::new(artifacts)
    });
    let parts = Parts {
        store: store.clone(),
        queue: queue.clone(),
        bus: Arc::new(EventBridgeBus::new(
            aws_sdk_eventbridge::Client::new(config),
            &resources.bus_name,
        )),
        secrets: Arc::new(sortie_launch::AwsJobSecrets::new(config)),
        launcher: Arc::new(launcher),
        artifacts: artifacts.clone().map(|a| a as Arc<dyn Artifacts>),
        checker: None,
        oidc: None,
        kms: None,
    };
    AwsParts {
        store,
        queue,
        artifacts,
        parts,
    }
}

/// Puts `parts` together into the control plane for `resources`: the [`JobService`]
/// and the [`Engine`] over them. `config` is the AWS configuration the API's runner
/// checker uses when `parts` brings none; `has_local` says the launcher runs `local`
/// runners (`sortie dev`), which the checker then accepts.
pub fn assemble(
    parts: Parts,
    resources: Resources,
    config: Option<&SdkConfig>,
    has_local: bool,
) -> Composition {
    let jobs = JobService {
        store: parts.store.clone(),
        queue: parts.queue.clone(),
        bus: parts.bus,
        secrets: parts.secrets,
        gate: sortie_lifecycle::PolicyGate {
            artifacts: parts.artifacts.clone(),
            memory_bytes: sortie_lifecycle::PolicyGate::lambda_memory_bytes(),
            ..Default::default()
        },
    };
    let engine = Arc::new(Engine {
        jobs: jobs.clone(),
        launcher: parts.launcher,
        api_url: resources.api_url.clone(),
        settings: resources.sweep,
    });
    Composition {
        store: parts.store,
        queue: parts.queue,
        jobs,
        engine,
        artifacts: parts.artifacts,
        checker: parts.checker,
        oidc: parts.oidc,
        kms: parts.kms,
        region: config
            .and_then(|c| c.region())
            .map(|r| r.to_string())
            .unwrap_or_else(|| "us-east-1".into()),
        config: config.cloned(),
        has_local,
        resources,
        pulls: None,
        notify: None,
    }
}

/// Builds the composition for `resources` on AWS: [`aws_parts`] then [`assemble`].
pub fn compose(
    config: &SdkConfig,
    resources: Resources,
    local: Option<LocalLauncher>,
) -> AwsComposition {
    compose_with_pulls(config, resources, local, None, None, None)
}

/// Wraps the composition's SQS jobs queue in the queue every part sends through
/// (`sortie dev`'s dispatch at once).
pub type WrapQueue = Box<dyn FnOnce(Arc<SqsJobQueue>) -> Arc<dyn JobQueue> + Send>;

/// [`compose`] with pull requests in process (`sortie dev`): the API takes webhooks into
/// `pulls`' queue, and every pull-request job's end queues a report of its pull request
/// there ([`sortie_lifecycle::pull_requests::PullReportingBus`]). Without `pulls`, a
/// function that reads `SORTIE_PULL_QUEUE_URL` gets pull requests on that SQS queue; there
/// a job's end reaches the queue through the template's rule on `sortie.job.ended`.
/// `events`, when given, gets every event published as well (`sortie dev`'s notification
/// worker). `wrap_queue`, when given, is the queue the parts send through instead of the
/// SQS queue itself (which [`AwsComposition::queue`] still is).
pub fn compose_with_pulls(
    config: &SdkConfig,
    resources: Resources,
    local: Option<LocalLauncher>,
    pulls: Option<sortie_api::PullParts>,
    events: Option<sortie_lifecycle::notify_worker::EventSink>,
    wrap_queue: Option<WrapQueue>,
) -> AwsComposition {
    let has_local = local.is_some();
    let mut aws = aws_parts(config, &resources, local);
    if let Some(wrap) = wrap_queue {
        aws.parts.queue = wrap(aws.queue.clone());
    }
    if let Some(events) = events {
        aws.parts.bus = Arc::new(sortie_lifecycle::notify_worker::TeeBus {
            inner: aws.parts.bus.clone(),
            events,
        });
    }
    let mut pull_queue = None;
    let pulls = match pulls {
        Some(p) => {
            aws.parts.bus = Arc::new(sortie_lifecycle::pull_requests::PullReportingBus {
                inner: aws.parts.bus.clone(),
                queue: p.queue.clone(),
            });
            Some(p)
        }
        None => resources.pull_queue_url.as_ref().map(|url| {
            let queue = SqsPullQueue::new(aws_sdk_sqs::Client::new(config), url);
            pull_queue = Some(queue.clone());
            sortie_api::PullParts::new(
                Arc::new(sortie_lifecycle::pull_requests::AnyHosts::new(Arc::new(
                    sortie_launch::AwsJobSecrets::new(config),
                ))),
                Arc::new(queue),
                resources.api_url.clone(),
            )
        }),
    };
    let mut plane = assemble(aws.parts, resources, Some(config), has_local);
    plane.pulls = pulls;
    AwsComposition {
        store: aws.store,
        queue: aws.queue,
        artifacts: aws.artifacts,
        pull_queue,
        plane,
    }
}

impl Composition {
    /// The notification service over this composition's store, secrets and bus (plain
    /// `http://` to loopback allowed where `local` runners are: `sortie dev`).
    pub fn notifications(&self) -> sortie_lifecycle::Notifications {
        sortie_lifecycle::Notifications {
            store: self.store.clone(),
            secrets: self.jobs.secrets.clone(),
            local: self.has_local,
            bus: self.jobs.bus.clone(),
        }
    }

    /// The API's state. `dev_identity` is only ever true in `sortie dev`. The API reads the
    /// artifacts bucket, so a composition without one is refused.
    pub fn api_state(&self, dev_identity: bool) -> Result<AppState, Missing> {
        let artifacts = self
            .artifacts
            .clone()
            .ok_or(Missing(sortie_settings::BUCKET))?;
        // Built here, not in `aws_parts`: only the API checks runners, so the other
        // functions do not link the EC2 and IAM clients.
        let checker = match (&self.checker, &self.config) {
            (Some(checker), _) => checker.clone(),
            (None, Some(config)) => {
                Arc::new(AwsRunnerChecker::new(config.clone(), self.has_local)) as _
            }
            (None, None) => return Err(Missing("(a runner checker or an AWS configuration)")),
        };
        Ok(AppState {
            store: self.store.clone(),
            jobs: self.jobs.clone(),
            dev_identity,
            artifacts,
            bucket: BucketConfig {
                name: self.resources.bucket.clone().unwrap_or_default(),
                region: self.region.clone(),
            },
            memberships: Default::default(),
            admin_subjects: self.resources.admin_subjects.clone(),
            checker,
            rule_indexes: Default::default(),
            oidc: self
                .oidc
                .clone()
                .unwrap_or_else(|| Arc::new(sortie_api::oidc::JwksVerifier::new())),
            public_url: None,
            // Three beats fit in the silence that declares an agent lost.
            agent_heartbeat_seconds: u32::try_from(
                self.resources.sweep.agent_silence.num_seconds() / 3,
            )
            .unwrap_or(1)
            .clamp(1, sortie_core::protocol::agent::HEARTBEAT_SECONDS),
            // Without an AWS configuration (fast test worlds), an empty history in memory.
            state_history: match &self.config {
                Some(config) => Arc::new(sortie_launch::state_history::S3StateHistory::new(
                    config.clone(),
                )) as _,
                None => Arc::new(sortie_launch::state_history::MemoryStateHistory::default()) as _,
            },
            // `sortie dev` signs in with the tokens it prints, whatever the resources say.
            console: if dev_identity {
                sortie_api::ConsoleConfig::local()
            } else {
                self.resources.console.clone()
            },
            pulls: self.pulls.clone(),
            // Only the API signs (so only it links KMS), and only with a URL to be found at.
            issuer: self.issuer(),
            notify: self.notify.clone().unwrap_or_else(|| {
                sortie_api::NotifyParts::system(self.has_local, self.resources.api_url.clone())
            }),
        })
    }

    /// The job identity issuer, when the resources name a signing key and the API has a URL
    /// to be found at: over the parts' KMS, else KMS on AWS.
    fn issuer(&self) -> Option<sortie_lifecycle::Issuer> {
        let keys = self.resources.identity.as_ref()?;
        if self.resources.api_url.is_empty() {
            return None;
        }
        let kms = match (&self.kms, &self.config) {
            (Some(kms), _) => kms.clone(),
            (None, Some(config)) => Arc::new(sortie_launch::kms::AwsKms::new(config)) as _,
            (None, None) => return None,
        };
        Some(sortie_lifecycle::Issuer::new(
            kms,
            keys.issuer_config(&self.resources.api_url),
        ))
    }

    /// The pull-request service over this composition, when it has pull requests.
    pub fn pull_requests(&self) -> Option<sortie_lifecycle::pull_requests::PullRequests> {
        self.pulls.as_ref().map(|p| p.service(&self.jobs))
    }

    /// The API router over [`Composition::api_state`].
    pub fn router(&self, dev_identity: bool) -> Result<axum::Router, Missing> {
        Ok(sortie_api::router(self.api_state(dev_identity)?))
    }
}
