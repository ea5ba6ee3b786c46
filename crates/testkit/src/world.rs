//! Test worlds: the whole control plane, put together by `sortie_wiring::assemble` as
//! the functions and `sortie dev` put it together, on one of two tiers.
//!
//! - [`World::fast`]: `MemoryStore` and the in-memory fakes of [`crate::fakes`]; needs
//!   nothing, runs in every `cargo test`.
//! - [`World::aws`]: the real SDK clients of `sortie_wiring::aws_parts` against moto
//!   (a fresh table, queue and bucket); needs the AWS tier ([`crate::require_aws!`]).
//!
//! Both are the same [`World`]: the same [`Composition`], the same API state, so a test
//! reads the same either way. A test that needs another part (a failing queue, a gated
//! launcher, a verifier that knows one token) edits the [`Setup`] before assembly with
//! [`World::fast_with`] or [`World::aws_with`].

use std::sync::Arc;

use aws_config::SdkConfig;
use sortie_api::AppState;
use sortie_launch::{MemoryJobSecrets, StaticRunnerChecker};
use sortie_store::{DynamoStore, JobMessage, MemoryStore, S3Artifacts};
use sortie_wiring::{Composition, Parts, Resources};

use crate::fakes::{MemoryArtifacts, MemoryBus, MemoryLauncher, MemoryQueue};
use crate::Aws;

/// The administrator every test world configures (`SORTIE_ADMIN_SUBJECTS`).
pub const BOOTSTRAP_ADMIN: &str = "bootstrap-admin";
/// The API URL every test world's runners call back.
pub const API_URL: &str = "https://api.sortie.example.com";

/// What a world is assembled from: its parts and its resources (names and settings).
pub struct Setup {
    /// The parts, as trait objects.
    pub parts: Parts,
    /// The resources and settings.
    pub resources: Resources,
}

/// The in-memory parts of a fast world, concrete, for tests to inspect.
pub struct Fakes {
    /// The store.
    pub store: Arc<MemoryStore>,
    /// The jobs queue.
    pub queue: Arc<MemoryQueue>,
    /// The event bus.
    pub bus: Arc<MemoryBus>,
    /// The artifacts bucket.
    pub artifacts: Arc<MemoryArtifacts>,
    /// The secrets of sensitive variables.
    pub secrets: Arc<MemoryJobSecrets>,
    /// The launcher (of every runner type).
    pub launcher: Arc<MemoryLauncher>,
    /// KMS, with a signing key behind [`IDENTITY_KEY`]: a world signs job identity tokens
    /// when its resources name that key.
    pub kms: sortie_launch::kms::MemoryKms,
}

/// The KMS alias of the fast world's identity signing key.
pub const IDENTITY_KEY: &str = "alias/sortie-identity";

/// The moto resources of an AWS world, concrete, for tests to inspect.
pub struct AwsResources {
    /// The SDK configuration pointing at moto.
    pub config: SdkConfig,
    /// The DynamoDB store (its table is created).
    pub store: Arc<DynamoStore>,
    /// The artifacts bucket (created), path-style as a loopback endpoint needs.
    pub artifacts: Arc<S3Artifacts>,
    /// The bucket's name.
    pub bucket: String,
    /// An SQS client for the jobs queue.
    pub sqs: aws_sdk_sqs::Client,
    /// The jobs queue's URL.
    pub queue_url: String,
    /// The secrets of sensitive variables (Secrets Manager on moto).
    pub secrets: Arc<sortie_launch::AwsJobSecrets>,
}

/// One tier's concrete parts.
pub enum Tier {
    /// The fast tier's fakes.
    Fast(Fakes),
    /// The AWS tier's moto resources.
    Aws(Box<AwsResources>),
}

/// The control plane on one tier.
pub struct World {
    /// The control plane, as `sortie_wiring::assemble` builds it.
    pub plane: Composition,
    /// The tier's concrete parts.
    pub tier: Tier,
}

/// The resources of a test world: the administrator, the API URL, the bucket.
pub fn resources(bucket: &str) -> Resources {
    Resources {
        bucket: Some(bucket.to_string()),
        api_url: API_URL.into(),
        admin_subjects: vec![BOOTSTRAP_ADMIN.into()],
        ..Resources::default()
    }
}

impl Fakes {
    /// Fresh fakes.
    pub fn new() -> Self {
        Self {
            store: Arc::new(MemoryStore::new()),
            queue: Arc::default(),
            bus: Arc::default(),
            artifacts: Arc::default(),
            secrets: Arc::default(),
            launcher: Arc::default(),
            kms: {
                let kms = sortie_launch::kms::MemoryKms::default();
                kms.set_alias(IDENTITY_KEY, &kms.create_key());
                kms
            },
        }
    }

    /// The fakes as [`Parts`]: no OIDC issuer, and a runner checker that finds nothing
    /// wrong.
    pub fn parts(&self) -> Parts {
        Parts {
            store: self.store.clone(),
            queue: self.queue.clone(),
            bus: self.bus.clone(),
            secrets: self.secrets.clone(),
            launcher: self.launcher.clone(),
            artifacts: Some(self.artifacts.clone()),
            checker: Some(Arc::new(StaticRunnerChecker(vec![]))),
            oidc: Some(Arc::new(sortie_api::oidc::NoOidc)),
            kms: Some(Arc::new(self.kms.clone())),
        }
    }
}

impl Default for Fakes {
    fn default() -> Self {
        Self::new()
    }
}

impl World {
    /// The fast tier: `MemoryStore` and in-memory fakes.
    pub fn fast() -> Self {
        Self::fast_with(|_| {})
    }

    /// The fast tier, with `edit` changing parts or resources before assembly.
    pub fn fast_with(edit: impl FnOnce(&mut Setup)) -> Self {
        let fakes = Fakes::new();
        let mut setup = Setup {
            parts: fakes.parts(),
            resources: resources("artifacts"),
        };
        edit(&mut setup);
        Self {
            plane: sortie_wiring::assemble(setup.parts, setup.resources, None, false),
            tier: Tier::Fast(fakes),
        }
    }

    /// The AWS tier: `sortie_wiring::aws_parts` on moto, over a fresh table, jobs queue
    /// and bucket (the `default` bus, Secrets Manager, no OIDC issuer).
    pub async fn aws(aws: &Aws) -> Self {
        Self::aws_with(aws, |_, _| {}).await
    }

    /// The AWS tier, with `edit` changing parts or resources before assembly (it gets
    /// the moto resources too, for a store behind a fault proxy, say).
    pub async fn aws_with(aws: &Aws, edit: impl FnOnce(&mut Setup, &AwsResources)) -> Self {
        let config = aws.sdk_config().await;
        let sqs = aws_sdk_sqs::Client::new(&config);
        let queue_url = crate::standard_queue(&sqs, "jobs").await;
        let bucket = crate::unique("artifacts");
        let mut resources = resources(&bucket);
        resources.table = crate::unique("sortie");
        resources.jobs_queue_url = queue_url.clone();
        resources.bus_name = "default".into();
        let built = sortie_wiring::aws_parts(&config, &resources, None);
        built
            .store
            .ensure_table()
            .await
            .expect("create the table on moto");
        let artifacts = Arc::new(
            S3Artifacts::new(crate::s3_client(&config), bucket.clone())
                .with_signing_credentials(config.credentials_provider()),
        );
        artifacts
            .ensure_bucket()
            .await
            .expect("create the bucket on moto");
        let secrets = Arc::new(sortie_launch::AwsJobSecrets::new(&config));
        let moto = AwsResources {
            config: config.clone(),
            store: built.store,
            artifacts: artifacts.clone(),
            bucket,
            sqs,
            queue_url,
            secrets: secrets.clone(),
        };
        let mut setup = Setup {
            parts: Parts {
                artifacts: Some(artifacts),
                secrets,
                oidc: Some(Arc::new(sortie_api::oidc::NoOidc)),
                ..built.parts
            },
            resources,
        };
        edit(&mut setup, &moto);
        Self {
            plane: sortie_wiring::assemble(setup.parts, setup.resources, Some(&config), false),
            tier: Tier::Aws(Box::new(moto)),
        }
    }

    /// The fast tier's fakes.
    ///
    /// # Panics
    ///
    /// In an AWS world.
    pub fn fakes(&self) -> &Fakes {
        match &self.tier {
            Tier::Fast(fakes) => fakes,
            Tier::Aws(_) => panic!("an AWS world has no fakes"),
        }
    }

    /// The AWS tier's moto resources.
    ///
    /// # Panics
    ///
    /// In a fast world.
    pub fn moto(&self) -> &AwsResources {
        match &self.tier {
            Tier::Aws(moto) => moto,
            Tier::Fast(_) => panic!("a fast world has no moto resources"),
        }
    }

    /// The API's state over this world.
    pub fn api_state(&self) -> AppState {
        self.plane
            .api_state(false)
            .expect("a test world has a bucket and a runner checker")
    }

    /// The messages in the jobs queue, removed from it.
    pub async fn drain_queue(&self) -> Vec<JobMessage> {
        match &self.tier {
            Tier::Fast(fakes) => fakes.queue.take().into_iter().map(|(m, _)| m).collect(),
            Tier::Aws(moto) => drain_sqs(&moto.sqs, &moto.queue_url).await,
        }
    }
}

/// The messages of the SQS queue at `url`, received and deleted.
pub async fn drain_sqs(sqs: &aws_sdk_sqs::Client, url: &str) -> Vec<JobMessage> {
    let mut out = vec![];
    loop {
        let got = sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .wait_time_seconds(0)
            .send()
            .await
            .expect("receive from the jobs queue");
        let messages = got.messages.unwrap_or_default();
        if messages.is_empty() {
            return out;
        }
        for m in messages {
            out.push(serde_json::from_str(m.body().unwrap_or_default()).expect("a job message"));
            sqs.delete_message()
                .queue_url(url)
                .receipt_handle(m.receipt_handle().unwrap_or_default())
                .send()
                .await
                .expect("delete from the jobs queue");
        }
    }
}
