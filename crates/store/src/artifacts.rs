//! Job logs and artifacts in S3: the runner writes log chunks and artifacts through URLs
//! the API presigns for it (with the API's own credentials), and the API reads them back.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::StoreError;

/// One stored object: its key and size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectInfo {
    /// The key.
    pub key: String,
    /// Its size in bytes.
    pub size: u64,
}

/// A presigned request that writes one object: send `method` to `url` with `headers`
/// and the object's bytes as the body, before `expires_at`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PresignedPut {
    /// The URL, with its signature in the query.
    pub url: String,
    /// The method, `PUT`.
    pub method: String,
    /// Headers the signature covers; the request must carry them unchanged.
    pub headers: BTreeMap<String, String>,
    /// When the URL stops working.
    pub expires_at: DateTime<Utc>,
}

/// Reads job logs and artifacts, and presigns their uploads.
#[async_trait]
pub trait Artifacts: Send + Sync {
    /// A URL that writes `key` (with `content_type`) for `expires_in`, signed with this
    /// process's credentials.
    async fn presign_put(
        &self,
        key: &str,
        content_type: &str,
        expires_in: Duration,
    ) -> Result<PresignedPut, StoreError>;
    /// Every object under `prefix`, in key order.
    async fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>, StoreError>;
    /// One object's bytes.
    async fn get(&self, key: &str) -> Result<Vec<u8>, StoreError>;
    /// One object's size, without reading it (S3's HeadObject); `NotFound` when there is no
    /// such object. A reader with a memory bound checks the size before it reads. The
    /// default looks for the key in a one-key listing.
    async fn head(&self, key: &str) -> Result<ObjectInfo, StoreError> {
        self.list_page(key, None, 1)
            .await?
            .into_iter()
            .find(|o| o.key == key)
            .ok_or_else(|| StoreError::NotFound {
                kind: "object",
                id: key.to_string(),
            })
    }
    /// A URL that reads `key` for `expires_in`, signed with this process's credentials
    /// (the second phase of a reviewed job downloads its saved plan with it).
    async fn presign_get(&self, key: &str, expires_in: Duration) -> Result<String, StoreError> {
        let _ = expires_in;
        Err(StoreError::NotFound {
            kind: "object",
            id: key.to_string(),
        })
    }
    /// One page of the objects under `prefix` whose keys sort after `start_after` (all
    /// when `None`), in key order, at most `max_keys`: a reader that knows where it is
    /// does not list what it has read. The default filters [`Artifacts::list`].
    async fn list_page(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        max_keys: usize,
    ) -> Result<Vec<ObjectInfo>, StoreError> {
        let mut all = self.list(prefix).await?;
        all.retain(|o| start_after.is_none_or(|after| o.key.as_str() > after));
        all.truncate(max_keys);
        Ok(all)
    }
    /// `len` bytes of `key` from byte `from` (fewer at the object's end). The default
    /// reads the whole object.
    async fn get_range(&self, key: &str, from: u64, len: u64) -> Result<Vec<u8>, StoreError> {
        let bytes = self.get(key).await?;
        let start = (from as usize).min(bytes.len());
        let end = start.saturating_add(len as usize).min(bytes.len());
        Ok(bytes[start..end].to_vec())
    }
    /// Writes `bytes` at `key` with this process's credentials (the API's follow marker).
    async fn write(&self, key: &str, bytes: Vec<u8>, content_type: &str) -> Result<(), StoreError> {
        let _ = (bytes, content_type);
        Err(StoreError::NotFound {
            kind: "bucket",
            id: key.to_string(),
        })
    }
}

/// S3's ListObjectsV2 answers at most this many keys a page.
pub const MAX_LIST_PAGE: usize = 1000;

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

    /// The S3 client.
    pub fn client(&self) -> &aws_sdk_s3::Client {
        &self.client
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
    async fn presign_put(
        &self,
        key: &str,
        content_type: &str,
        expires_in: Duration,
    ) -> Result<PresignedPut, StoreError> {
        let invalid = |message: String| StoreError::Aws {
            service: "s3",
            message,
            retryable: false,
        };
        let config = aws_sdk_s3::presigning::PresigningConfig::expires_in(expires_in)
            .map_err(|e| invalid(e.to_string()))?;
        let request = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .content_type(content_type)
            .presigned(config)
            .await
            .map_err(|e| s3_error(&e))?;
        Ok(PresignedPut {
            url: request.uri().to_string(),
            method: request.method().to_string(),
            headers: request
                .headers()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            expires_at: Utc::now()
                + chrono::Duration::from_std(expires_in).unwrap_or(chrono::Duration::zero()),
        })
    }

    async fn presign_get(&self, key: &str, expires_in: Duration) -> Result<String, StoreError> {
        let config =
            aws_sdk_s3::presigning::PresigningConfig::expires_in(expires_in).map_err(|e| {
                StoreError::Aws {
                    service: "s3",
                    message: e.to_string(),
                    retryable: false,
                }
            })?;
        let request = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .presigned(config)
            .await
            .map_err(|e| s3_error(&e))?;
        Ok(request.uri().to_string())
    }

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

    async fn list_page(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        max_keys: usize,
    ) -> Result<Vec<ObjectInfo>, StoreError> {
        let page = self
            .client
            .list_objects_v2()
            .bucket(&self.bucket)
            .prefix(prefix)
            .set_start_after(start_after.map(str::to_string))
            .max_keys(max_keys.clamp(1, MAX_LIST_PAGE) as i32)
            .send()
            .await
            .map_err(|e| s3_error(&e))?;
        let mut out: Vec<ObjectInfo> = page
            .contents()
            .iter()
            .map(|o| ObjectInfo {
                key: o.key().unwrap_or_default().to_string(),
                size: o.size().unwrap_or_default().max(0) as u64,
            })
            .collect();
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }

    async fn get_range(&self, key: &str, from: u64, len: u64) -> Result<Vec<u8>, StoreError> {
        if len == 0 {
            return Ok(vec![]);
        }
        let out = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .range(format!("bytes={from}-{}", from + len - 1))
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

    async fn write(&self, key: &str, bytes: Vec<u8>, content_type: &str) -> Result<(), StoreError> {
        self.client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .content_type(content_type)
            .body(bytes.into())
            .send()
            .await
            .map_err(|e| s3_error(&e))?;
        Ok(())
    }

    /// HeadObject. A 404 is `NotFound`; a 403 is not retryable (S3 answers it for a missing
    /// key to a caller without `s3:ListBucket`, and for a key it may not read): either way
    /// the object cannot be read, and trying again changes nothing.
    async fn head(&self, key: &str) -> Result<ObjectInfo, StoreError> {
        let res = self
            .client
            .head_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await;
        let e = match res {
            Ok(out) => {
                return Ok(ObjectInfo {
                    key: key.to_string(),
                    size: out.content_length().unwrap_or_default().max(0) as u64,
                })
            }
            Err(e) => e,
        };
        let status = e.raw_response().map(|r| r.status().as_u16());
        if status == Some(404) || e.as_service_error().is_some_and(|s| s.is_not_found()) {
            return Err(StoreError::NotFound {
                kind: "object",
                id: key.to_string(),
            });
        }
        match status {
            Some(code @ 400..=499) if code != 429 => Err(StoreError::Aws {
                service: "s3",
                message: format!(
                    "HeadObject of `{key}` answered {code}: {}",
                    aws_sdk_s3::error::DisplayErrorContext(&e)
                ),
                retryable: false,
            }),
            _ => Err(s3_error(&e)),
        }
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
