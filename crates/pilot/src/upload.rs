//! Uploads to the control plane's bucket, behind one small trait: through URLs the API
//! presigns for this job ([`ApiUploader`]), or in memory for tests ([`MemoryUploads`]).
//!
//! The pilot holds no AWS credentials for the control plane's bucket: it asks the API
//! (with its job token) for a presigned PUT of one object of its own, then sends the
//! bytes straight to S3, so a plan or a log chunk never passes through Lambda.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use sortie_core::protocol::pilot::UploadKind;

use crate::api::ApiClient;

/// Writes one of the job's objects. Errors are one-line descriptions.
#[async_trait]
pub trait Uploader: Send + Sync {
    /// Writes `body` as the job's object of `kind` named `name` (a log chunk's
    /// 12-digit start offset; `None` for the plan, the summary and the outputs).
    async fn upload(
        &self,
        kind: UploadKind,
        name: Option<&str>,
        body: Vec<u8>,
    ) -> Result<(), String>;
}

/// How many times an upload is tried (each with a fresh URL) before it is given up.
const ATTEMPTS: u32 = 3;

/// Uploads through presigned URLs from the API.
pub struct ApiUploader {
    api: Arc<ApiClient>,
    first_delay: Duration,
}

impl ApiUploader {
    /// Uploads for `api`'s job.
    pub fn new(api: Arc<ApiClient>) -> Self {
        Self {
            api,
            first_delay: Duration::from_millis(300),
        }
    }
}

#[async_trait]
impl Uploader for ApiUploader {
    async fn upload(
        &self,
        kind: UploadKind,
        name: Option<&str>,
        body: Vec<u8>,
    ) -> Result<(), String> {
        let what = match name {
            Some(n) => format!("{} {n}", kind.as_str()),
            None => kind.as_str().to_string(),
        };
        let mut delay = self.first_delay;
        let mut last = String::new();
        for attempt in 1..=ATTEMPTS {
            let result = match self.api.upload_grant(kind, name).await {
                Ok(grant) => self.api.send_upload(&grant, body.clone()).await,
                Err(e) => Err(e.reason()),
            };
            match result {
                Ok(()) => return Ok(()),
                Err(e) => {
                    tracing::warn!(upload = %what, attempt, error = %e, "upload failed");
                    last = e;
                }
            }
            if attempt < ATTEMPTS {
                tokio::time::sleep(delay).await;
                delay = delay.saturating_mul(2);
            }
        }
        Err(format!(
            "could not upload the {what} (after {ATTEMPTS} attempts): {last}"
        ))
    }
}

/// In-memory uploads for tests; can be told to fail the next ones.
#[derive(Default)]
pub struct MemoryUploads {
    objects: Mutex<BTreeMap<(UploadKind, String), Vec<u8>>>,
    failing: AtomicU32,
}

impl MemoryUploads {
    /// Nothing uploaded yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The next `n` uploads fail.
    pub fn fail_next(&self, n: u32) {
        self.failing.store(n, Ordering::SeqCst);
    }

    /// Every upload of `kind`, by name, in name order.
    pub fn of(&self, kind: UploadKind) -> Vec<(String, Vec<u8>)> {
        self.objects
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|((k, _), _)| *k == kind)
            .map(|((_, n), v)| (n.clone(), v.clone()))
            .collect()
    }
}

#[async_trait]
impl Uploader for MemoryUploads {
    async fn upload(
        &self,
        kind: UploadKind,
        name: Option<&str>,
        body: Vec<u8>,
    ) -> Result<(), String> {
        if self
            .failing
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            return Err(format!(
                "could not upload the {}: injected failure",
                kind.as_str()
            ));
        }
        self.objects
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert((kind, name.unwrap_or_default().to_string()), body);
        Ok(())
    }
}
