//! Reading an `s3` source archive, behind one small trait: the real client (with the
//! task's own role) and an in-memory twin. The pilot never writes S3 with its role:
//! its logs and artifacts go through presigned URLs ([`crate::upload`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use async_trait::async_trait;
use aws_config::{Region, SdkConfig};

/// One object: bucket, key and, when known, the bucket's region.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectRef {
    /// The bucket's region; the client's default region when `None`.
    pub region: Option<String>,
    /// Bucket.
    pub bucket: String,
    /// Key.
    pub key: String,
}

impl ObjectRef {
    /// An object in `bucket` (in `region`, when known).
    pub fn new(region: Option<&str>, bucket: &str, key: &str) -> Self {
        Self {
            region: region.filter(|r| !r.is_empty()).map(str::to_string),
            bucket: bucket.to_string(),
            key: key.to_string(),
        }
    }
}

impl std::fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "s3://{}/{}", self.bucket, self.key)
    }
}

/// Gets whole objects. Errors are one-line descriptions.
#[async_trait]
pub trait ObjectStore: Send + Sync {
    /// Reads all of `object`.
    async fn get(&self, object: &ObjectRef) -> Result<Vec<u8>, String>;
}

/// The real S3, one client per region, path-style when a local endpoint is set.
pub struct S3Objects {
    config: SdkConfig,
    force_path_style: bool,
    clients: Mutex<HashMap<Option<String>, aws_sdk_s3::Client>>,
}

impl S3Objects {
    /// Clients built from `config`; `force_path_style` for a local endpoint (moto).
    pub fn new(config: SdkConfig, force_path_style: bool) -> Self {
        Self {
            config,
            force_path_style,
            clients: Mutex::new(HashMap::new()),
        }
    }

    /// From the ambient AWS configuration (`aws_config::load_from_env`), path-style
    /// when `AWS_ENDPOINT_URL` is set.
    pub async fn from_env() -> Self {
        let config = aws_config::load_from_env().await;
        let local = std::env::var(crate::env::AWS_ENDPOINT_URL)
            .map(|v| !v.trim().is_empty())
            .unwrap_or(false);
        Self::new(config, local)
    }

    fn client(&self, region: &Option<String>) -> aws_sdk_s3::Client {
        let mut clients = self
            .clients
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        clients
            .entry(region.clone())
            .or_insert_with(|| {
                let mut builder = aws_sdk_s3::config::Builder::from(&self.config)
                    .force_path_style(self.force_path_style);
                if let Some(r) = region {
                    builder = builder.region(Region::new(r.clone()));
                }
                aws_sdk_s3::Client::from_conf(builder.build())
            })
            .clone()
    }
}

#[async_trait]
impl ObjectStore for S3Objects {
    async fn get(&self, object: &ObjectRef) -> Result<Vec<u8>, String> {
        let out = self
            .client(&object.region)
            .get_object()
            .bucket(&object.bucket)
            .key(&object.key)
            .send()
            .await
            .map_err(|e| {
                format!(
                    "could not read {object}: {}",
                    aws_sdk_s3::error::DisplayErrorContext(&e)
                )
            })?;
        let bytes = out
            .body
            .collect()
            .await
            .map_err(|e| format!("could not read {object}: {e}"))?;
        Ok(bytes.into_bytes().to_vec())
    }
}

/// An in-memory object store for tests.
#[derive(Default)]
pub struct MemoryObjects {
    objects: Mutex<BTreeMap<(String, String), Vec<u8>>>,
}

impl MemoryObjects {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an object.
    pub fn insert(&self, bucket: &str, key: &str, body: Vec<u8>) {
        self.lock()
            .insert((bucket.to_string(), key.to_string()), body);
    }

    /// Every object in `bucket` whose key starts with `prefix`, in key order.
    pub fn list(&self, bucket: &str, prefix: &str) -> Vec<(String, Vec<u8>)> {
        self.lock()
            .iter()
            .filter(|((b, k), _)| b == bucket && k.starts_with(prefix))
            .map(|((_, k), v)| (k.clone(), v.clone()))
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<(String, String), Vec<u8>>> {
        self.objects
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[async_trait]
impl ObjectStore for MemoryObjects {
    async fn get(&self, object: &ObjectRef) -> Result<Vec<u8>, String> {
        self.lock()
            .get(&(object.bucket.clone(), object.key.clone()))
            .cloned()
            .ok_or_else(|| format!("could not read {object}: NoSuchKey"))
    }
}
