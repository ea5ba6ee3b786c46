//! Job logs and artifacts in S3: the runner writes log chunks, the API reads them back.

use async_trait::async_trait;

use crate::StoreError;

/// One stored object: its key and size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectInfo {
    /// The key.
    pub key: String,
    /// Its size in bytes.
    pub size: u64,
}

/// Reads job logs and artifacts.
#[async_trait]
pub trait Artifacts: Send + Sync {
    /// Every object under `prefix`, in key order.
    async fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>, StoreError>;
    /// One object's bytes.
    async fn get(&self, key: &str) -> Result<Vec<u8>, StoreError>;
}

/// The artifacts bucket in S3.
#[derive(Debug, Clone)]
pub struct S3Artifacts {
    client: aws_sdk_s3::Client,
    bucket: String,
}

impl S3Artifacts {
    /// The bucket `bucket`.
    pub fn new(client: aws_sdk_s3::Client, bucket: impl Into<String>) -> Self {
        Self {
            client,
            bucket: bucket.into(),
        }
    }

    /// The bucket's name.
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// Creates the bucket if it does not exist (local mode and tests).
    pub async fn ensure_bucket(&self) -> Result<(), StoreError> {
        if self
            .client
            .head_bucket()
            .bucket(&self.bucket)
            .send()
            .await
            .is_ok()
        {
            return Ok(());
        }
        self.client
            .create_bucket()
            .bucket(&self.bucket)
            .send()
            .await
            .map_err(|e| s3_error(&e))?;
        Ok(())
    }
}

fn s3_error<E: std::error::Error + Send + Sync + 'static>(
    e: &aws_sdk_s3::error::SdkError<E>,
) -> StoreError {
    StoreError::Aws {
        service: "s3",
        message: aws_sdk_s3::error::DisplayErrorContext(e).to_string(),
        retryable: true,
    }
}

#[async_trait]
impl Artifacts for S3Artifacts {
    async fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>, StoreError> {
        let mut out = vec![];
        let mut token = None;
        loop {
            let page = self
                .client
                .list_objects_v2()
                .bucket(&self.bucket)
                .prefix(prefix)
                .set_continuation_token(token.take())
                .send()
                .await
                .map_err(|e| s3_error(&e))?;
            for o in page.contents() {
                out.push(ObjectInfo {
                    key: o.key().unwrap_or_default().to_string(),
                    size: o.size().unwrap_or_default().max(0) as u64,
                });
            }
            match page.next_continuation_token {
                Some(t) if page.is_truncated == Some(true) => token = Some(t),
                _ => break,
            }
        }
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }

    async fn get(&self, key: &str) -> Result<Vec<u8>, StoreError> {
        let out = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
            .map_err(|e| s3_error(&e))?;
        let bytes = out.body.collect().await.map_err(|e| StoreError::Aws {
            service: "s3",
            message: e.to_string(),
            retryable: true,
        })?;
        Ok(bytes.into_bytes().to_vec())
    }
}
