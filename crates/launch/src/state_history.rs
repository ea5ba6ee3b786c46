//! State history: the S3 object versions of an environment's state key, read in the
//! runner's own account.
//!
//! The state bucket of an `ecs-fargate` or `eks` runner is in the runner's (target)
//! account, which the control plane reaches only through the runner's launcher role. So
//! the history is read with the same launcher session as a launch (AssumeRole with the
//! runner's ExternalId, session name and tags of [`SessionScope`]: organisation and
//! runner), and the launcher role needs `s3:ListBucketVersions` and `s3:GetObjectVersion`
//! on the state bucket. A `local` or `agent` runner has no launcher role: its bucket is read
//! with the control plane's own credentials (local mode against a local S3, through the
//! storage's `endpoint`). docs/decisions/environment-life.md, "State history".
//!
//! A restore's presigned URL of a version ([`StateHistory::presign_get`]) is signed with
//! fresh credentials of the same identity (a new launcher session), and lives no longer
//! than they do: a URL signed with a session dies with it, whatever its `X-Amz-Expires`
//! says ([`sortie_core::presign::lifetime`]). When even fresh credentials cannot make it
//! work as long as the restore needs ([`UrlLife::needed`]), no URL is given.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use aws_config::identity::IdentityCache;
use aws_config::{Region, SdkConfig};
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_credential_types::Credentials;
use chrono::{DateTime, Utc};
use sortie_core::runner::S3Storage;
use sortie_core::{EnvPath, RunnerSpec, StateStorageConfiguration};

use crate::session::SessionScope;
use crate::LaunchError;

/// The most versions one page lists.
pub const STATE_VERSIONS_PAGE_MAX: u32 = 100;

/// One version of a state object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateObjectVersion {
    /// The S3 version id.
    pub version_id: String,
    /// When it was written.
    pub last_modified: DateTime<Utc>,
    /// Its size in bytes.
    pub size: u64,
    /// True for the current version.
    pub is_latest: bool,
}

/// One page of versions, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StateVersionPage {
    /// The versions (delete markers are left out).
    pub versions: Vec<StateObjectVersion>,
    /// The cursor of the next page: the last version id of this one.
    pub next: Option<String>,
}

/// How long a presigned URL of a state version should work, and the least it must.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UrlLife {
    /// The life asked for: shortened to what the signing credentials have left, and to
    /// S3's longest ([`sortie_core::presign::LONGEST`]).
    pub wanted: Duration,
    /// The least the URL must work: when it could not, [`StateHistory::presign_get`] gives
    /// no URL but an error that says so.
    pub needed: Duration,
}

/// Where an environment's state history is read: its runner and its state key.
#[derive(Debug, Clone, Copy)]
pub struct StateAt<'a> {
    /// The environment.
    pub environment: &'a EnvPath,
    /// Its runner's id (`<group>/<name>`), for the launcher session's tags.
    pub runner_id: &'a str,
    /// Its runner's specification.
    pub runner: &'a RunnerSpec,
}

impl StateAt<'_> {
    /// The runner's `s3` state storage, or `None` when its state has no history here.
    pub fn s3(&self) -> Option<&S3Storage> {
        match &self.runner.state_storage_configuration {
            StateStorageConfiguration::S3(s) => Some(s),
            _ => None,
        }
    }
}

/// Lists and reads the versions of environments' state.
#[async_trait]
pub trait StateHistory: Send + Sync {
    /// One page of the versions of the state key, newest first, at most `limit`, after
    /// the version `after` (a previous page's `next`).
    async fn list(
        &self,
        at: StateAt<'_>,
        after: Option<&str>,
        limit: u32,
    ) -> Result<StateVersionPage, LaunchError>;
    /// One version's bytes; `None` when the state key has no such version.
    async fn get(&self, at: StateAt<'_>, version_id: &str) -> Result<Option<Vec<u8>>, LaunchError>;
    /// A URL that reads one version (a restore's pilot downloads it), signed with fresh
    /// credentials of the same identity as [`StateHistory::get`]: it works for
    /// `life.wanted`, but no longer than those credentials last; an error when that is
    /// less than `life.needed`.
    async fn presign_get(
        &self,
        at: StateAt<'_>,
        version_id: &str,
        life: UrlLife,
    ) -> Result<String, LaunchError>;
}

/// Not an `s3` state storage: the caller checks [`StateAt::s3`] first.
fn not_s3(at: &StateAt<'_>) -> LaunchError {
    LaunchError::Fatal(format!(
        "environment `{}` keeps its state in `{}` storage, which has no version history",
        at.environment,
        at.runner.state_storage_configuration.type_name()
    ))
}

/// A cached client's key: the launcher role, its ExternalId, the session's scope (none
/// for a runner without a launcher role) and the storage's endpoint.
type ClientKey = (String, String, Option<SessionScope>, Option<String>);

/// A cached client, and where the credentials it signs with come from (a launcher
/// session's provider, or the control plane's own), for fresh ones.
type CachedClient = (aws_sdk_s3::Client, Option<SharedCredentialsProvider>);

/// The state bucket in S3, read in the runner's account.
pub struct S3StateHistory {
    base: SdkConfig,
    clients: Mutex<HashMap<ClientKey, CachedClient>>,
}

impl S3StateHistory {
    /// Reads with sessions assumed with `base`'s credentials (or `base`'s own, for runners
    /// without a launcher role).
    pub fn new(base: SdkConfig) -> Self {
        Self {
            base,
            clients: Mutex::new(HashMap::new()),
        }
    }

    async fn client(&self, at: &StateAt<'_>, s3: &S3Storage) -> CachedClient {
        let access = at.runner.runner_configuration.aws_access();
        let scope = access.map(|_| SessionScope {
            org: at.environment.org().to_string(),
            runner: at.runner_id.to_string(),
        });
        let key = (
            access.map(|a| a.role_arn.clone()).unwrap_or_default(),
            access.map(|a| a.external_id.clone()).unwrap_or_default(),
            scope.clone(),
            s3.endpoint.clone(),
        );
        if let Some(c) = self.clients.lock().expect("client cache lock").get(&key) {
            return c.clone();
        }
        let mut conf =
            aws_sdk_s3::config::Builder::from(&self.base).region(Region::new(s3.region.clone()));
        let mut signer = self.base.credentials_provider();
        if let (Some(access), Some(scope)) = (access, &scope) {
            let provider = SharedCredentialsProvider::new(
                crate::ecs::launcher_session(
                    &self.base,
                    access,
                    scope.session_name(),
                    scope.tags(),
                )
                .await,
            );
            signer = Some(provider.clone());
            conf = conf.credentials_provider(provider).identity_cache(
                IdentityCache::lazy()
                    .buffer_time(std::time::Duration::from_secs(300))
                    .build(),
            );
        }
        if let Some(endpoint) = &s3.endpoint {
            conf = conf.endpoint_url(endpoint).force_path_style(true);
        }
        let client = aws_sdk_s3::Client::from_conf(conf.build());
        self.clients
            .lock()
            .expect("client cache lock")
            .entry(key)
            .or_insert((client, signer))
            .clone()
    }
}

/// Fresh credentials from `signer` (an assumed role's provider assumes the role again, so
/// a session cached near its end is never used) and the life of a URL they sign:
/// `life.wanted`, no longer than they last ([`sortie_core::presign::lifetime`]). An error
/// when that is less than `life.needed`.
async fn signing(
    signer: Option<&SharedCredentialsProvider>,
    life: UrlLife,
) -> Result<(Option<Credentials>, Duration), LaunchError> {
    let credentials = match signer {
        Some(signer) => Some(signer.provide_credentials().await.map_err(|e| {
            LaunchError::Retryable(format!(
                "no credentials to sign the state version's URL with: {}",
                aws_sdk_s3::error::DisplayErrorContext(&e)
            ))
        })?),
        None => None,
    };
    // Read after the credentials arrive: the URL is signed now, not before the call.
    let expiry = credentials.as_ref().and_then(Credentials::expiry);
    let lifetime = sortie_core::presign::lifetime(life.wanted, SystemTime::now(), expiry)
        .map_err(LaunchError::Retryable)?;
    if lifetime < life.needed {
        return Err(LaunchError::Fatal(format!(
            "a URL of the state version would work for only {} s, as long as the credentials \
             that sign it (fresh ones) last, and the restore needs it for {} s",
            lifetime.as_secs(),
            life.needed.as_secs()
        )));
    }
    Ok((credentials, lifetime))
}

/// A configuration override that signs with exactly `credentials` (those whose expiry
/// bounded the URL's life, cached nowhere), or changes nothing.
fn signed_with(credentials: Option<Credentials>) -> aws_sdk_s3::config::Builder {
    let builder = aws_sdk_s3::config::Builder::default();
    match credentials {
        Some(c) => builder
            .credentials_provider(c)
            .identity_cache(IdentityCache::no_cache()),
        None => builder,
    }
}

fn s3_error<E: std::error::Error + Send + Sync + 'static>(
    e: &aws_sdk_s3::error::SdkError<E>,
) -> LaunchError {
    let text = aws_sdk_s3::error::DisplayErrorContext(e).to_string();
    match e {
        aws_sdk_s3::error::SdkError::ServiceError(s)
            if s.raw().status().as_u16() == 403 || s.raw().status().as_u16() == 404 =>
        {
            LaunchError::Fatal(text)
        }
        _ => LaunchError::Retryable(text),
    }
}

#[async_trait]
impl StateHistory for S3StateHistory {
    async fn list(
        &self,
        at: StateAt<'_>,
        after: Option<&str>,
        limit: u32,
    ) -> Result<StateVersionPage, LaunchError> {
        let s3 = at.s3().ok_or_else(|| not_s3(&at))?;
        let key = s3.state_key(at.environment);
        let limit = limit.clamp(1, STATE_VERSIONS_PAGE_MAX);
        let (client, _) = self.client(&at, s3).await;
        let mut page = StateVersionPage::default();
        let mut marker = after.map(String::from);
        // Delete markers are skipped, so a page may take a few calls: bounded.
        for _ in 0..10 {
            let mut req = client
                .list_object_versions()
                .bucket(&s3.bucket)
                .prefix(&key)
                .max_keys(i32::try_from(limit + 1).unwrap_or(i32::MAX));
            if let Some(m) = &marker {
                req = req.key_marker(&key).version_id_marker(m);
            }
            let out = req.send().await.map_err(|e| s3_error(&e))?;
            // Versions of this exact key only (a lock file `<key>.tflock` shares the
            // prefix), newest first as S3 lists them; delete markers are left out.
            for v in out.versions() {
                if v.key() != Some(key.as_str()) {
                    continue;
                }
                let id = v.version_id().unwrap_or("null").to_string();
                if page.versions.len() == limit as usize {
                    page.next = page.versions.last().map(|v| v.version_id.clone());
                    return Ok(page);
                }
                page.versions.push(StateObjectVersion {
                    version_id: id,
                    last_modified: v
                        .last_modified()
                        .and_then(|t| DateTime::<Utc>::from_timestamp(t.secs(), t.subsec_nanos()))
                        .unwrap_or_default(),
                    size: v.size().and_then(|s| u64::try_from(s).ok()).unwrap_or(0),
                    is_latest: v.is_latest().unwrap_or(false),
                });
            }
            let more =
                out.is_truncated().unwrap_or(false) && out.next_key_marker() == Some(key.as_str());
            match out.next_version_id_marker() {
                Some(next) if more => marker = Some(next.to_string()),
                _ => return Ok(page),
            }
        }
        page.next = page.versions.last().map(|v| v.version_id.clone());
        Ok(page)
    }

    async fn get(&self, at: StateAt<'_>, version_id: &str) -> Result<Option<Vec<u8>>, LaunchError> {
        let s3 = at.s3().ok_or_else(|| not_s3(&at))?;
        let (client, _) = self.client(&at, s3).await;
        let out = client
            .get_object()
            .bucket(&s3.bucket)
            .key(s3.state_key(at.environment))
            .version_id(version_id)
            .send()
            .await;
        match out {
            Ok(o) => {
                let bytes = o
                    .body
                    .collect()
                    .await
                    .map_err(|e| LaunchError::Retryable(e.to_string()))?;
                Ok(Some(bytes.into_bytes().to_vec()))
            }
            Err(e)
                if e.as_service_error().is_some_and(|s| s.is_no_such_key())
                    || e.raw_response().map(|r| r.status().as_u16()) == Some(400)
                    || e.raw_response().map(|r| r.status().as_u16()) == Some(404) =>
            {
                Ok(None)
            }
            Err(e) => Err(s3_error(&e)),
        }
    }

    async fn presign_get(
        &self,
        at: StateAt<'_>,
        version_id: &str,
        life: UrlLife,
    ) -> Result<String, LaunchError> {
        let s3 = at.s3().ok_or_else(|| not_s3(&at))?;
        let (client, signer) = self.client(&at, s3).await;
        let (credentials, lifetime) = signing(signer.as_ref(), life).await?;
        let config = aws_sdk_s3::presigning::PresigningConfig::expires_in(lifetime)
            .map_err(|e| LaunchError::Fatal(e.to_string()))?;
        let request = client
            .get_object()
            .bucket(&s3.bucket)
            .key(s3.state_key(at.environment))
            .version_id(version_id)
            .customize()
            .config_override(signed_with(credentials))
            .presigned(config)
            .await
            .map_err(|e| s3_error(&e))?;
        Ok(request.uri().to_string())
    }
}

/// One version kept in memory, with its bytes.
type Stored = (StateObjectVersion, Vec<u8>);

/// State history in memory, for tests: versions per environment, oldest first.
#[derive(Default)]
pub struct MemoryStateHistory {
    versions: Mutex<BTreeMap<EnvPath, Vec<Stored>>>,
}

impl MemoryStateHistory {
    /// Writes a new current version of `env`'s state at `at`; returns its version id.
    pub fn put(&self, env: &EnvPath, at: DateTime<Utc>, bytes: impl Into<Vec<u8>>) -> String {
        let bytes = bytes.into();
        let mut all = self.versions.lock().expect("memory lock");
        let list = all.entry(env.clone()).or_default();
        list.iter_mut().for_each(|(v, _)| v.is_latest = false);
        let id = format!("v{:04}", list.len() + 1);
        list.push((
            StateObjectVersion {
                version_id: id.clone(),
                last_modified: at,
                size: bytes.len() as u64,
                is_latest: true,
            },
            bytes,
        ));
        id
    }
}

#[async_trait]
impl StateHistory for MemoryStateHistory {
    async fn list(
        &self,
        at: StateAt<'_>,
        after: Option<&str>,
        limit: u32,
    ) -> Result<StateVersionPage, LaunchError> {
        at.s3().ok_or_else(|| not_s3(&at))?;
        let limit = limit.clamp(1, STATE_VERSIONS_PAGE_MAX) as usize;
        let all = self.versions.lock().expect("memory lock");
        let newest_first: Vec<&StateObjectVersion> = all
            .get(at.environment)
            .into_iter()
            .flatten()
            .rev()
            .map(|(v, _)| v)
            .collect();
        let start = match after {
            Some(a) => newest_first
                .iter()
                .position(|v| v.version_id == a)
                .map_or(newest_first.len(), |i| i + 1),
            None => 0,
        };
        let versions: Vec<StateObjectVersion> = newest_first
            .iter()
            .skip(start)
            .take(limit)
            .map(|v| (*v).clone())
            .collect();
        let next = (start + versions.len() < newest_first.len())
            .then(|| versions.last().map(|v| v.version_id.clone()))
            .flatten();
        Ok(StateVersionPage { versions, next })
    }

    async fn get(&self, at: StateAt<'_>, version_id: &str) -> Result<Option<Vec<u8>>, LaunchError> {
        at.s3().ok_or_else(|| not_s3(&at))?;
        let all = self.versions.lock().expect("memory lock");
        Ok(all
            .get(at.environment)
            .into_iter()
            .flatten()
            .find(|(v, _)| v.version_id == version_id)
            .map(|(_, b)| b.clone()))
    }

    async fn presign_get(
        &self,
        at: StateAt<'_>,
        version_id: &str,
        _life: UrlLife,
    ) -> Result<String, LaunchError> {
        at.s3().ok_or_else(|| not_s3(&at))?;
        Ok(format!("memory://{}/{version_id}", at.environment))
    }
}

#[cfg(test)]
#[path = "state_history_presign_tests.rs"]
mod presign_tests;
