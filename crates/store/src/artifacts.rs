//! Job logs and artifacts in S3: the runner writes log chunks and artifacts through URLs
//! the API presigns for it (with the API's own credentials), and the API reads them back.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use aws_sdk_s3::error::ProvideErrorMetadata;
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

/// Where a page of a listing starts ([`Artifacts::list_page`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageFrom<'a> {
    /// At the first key under the prefix.
    Start,
    /// At the first key that sorts after this one.
    After(&'a str),
    /// Where the previous page ended: its [`ObjectPage::next`].
    Next(&'a str),
}

impl PageFrom<'_> {
    /// The key the page starts after, for a store whose continuation is the last key read
    /// (the default [`Artifacts::list_page`]).
    fn after(&self) -> Option<&str> {
        match self {
            Self::Start => None,
            Self::After(key) | Self::Next(key) => Some(key),
        }
    }
}

/// One page of a listing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObjectPage {
    /// The objects, in key order.
    pub objects: Vec<ObjectInfo>,
    /// Where the next page starts ([`PageFrom::Next`]), or `None` when this page ends the
    /// listing (S3's `IsTruncated` is false). A short page with a `next` is not the end.
    pub next: Option<String>,
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
        self.list_page(key, PageFrom::Start, 1)
            .await?
            .objects
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
    /// One page of the objects under `prefix`, in key order, at most `max_keys` (fewer is
    /// not the end: S3 may answer a short page while more keys follow), starting where
    /// `from` says: a reader that knows where it is does not list what it has read. The
    /// page's [`ObjectPage::next`] says whether the listing goes on and where. The default
    /// filters [`Artifacts::list`].
    async fn list_page(
        &self,
        prefix: &str,
        from: PageFrom<'_>,
        max_keys: usize,
    ) -> Result<ObjectPage, StoreError> {
        let mut all = self.list(prefix).await?;
        if let Some(after) = from.after() {
            all.retain(|o| o.key.as_str() > after);
        }
        let more = all.len() > max_keys;
        all.truncate(max_keys);
        let next = if more {
            all.last().map(|o| o.key.clone())
        } else {
            None
        };
        Ok(ObjectPage { objects: all, next })
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
    /// [`Artifacts::presign_get`], with when the URL stops working (sooner than asked when
    /// the credentials that sign it end sooner). The default says `expires_in` from now.
    async fn presign_get_until(
        &self,
        key: &str,
        expires_in: Duration,
    ) -> Result<(String, DateTime<Utc>), StoreError> {
        let url = self.presign_get(key, expires_in).await?;
        Ok((
            url,
            Utc::now() + chrono::Duration::from_std(expires_in).unwrap_or(chrono::Duration::zero()),
        ))
    }
    /// Where job logs live while someone follows them (the live object and the follow
    /// marker), when that is a store of its own: an S3 Express One Zone directory bucket,
    /// whose requests cost a fraction of a general purpose bucket's. `None`: there is none,
    /// and the log ships as chunks at the followed pace.
    fn live(&self) -> Option<Arc<dyn Artifacts>> {
        None
    }
}

/// S3's ListObjectsV2 answers at most this many keys a page.
pub const MAX_LIST_PAGE: usize = 1000;

/// The artifacts bucket in S3.
#[derive(Debug, Clone)]
pub struct S3Artifacts {
    client: aws_sdk_s3::Client,
    bucket: String,
    /// The credentials presigned URLs are signed with, when known (their expiry bounds a
    /// URL's life); the client's own otherwise.
    signing: Option<aws_sdk_s3::config::SharedCredentialsProvider>,
    /// For a directory bucket (S3 Express One Zone), the session its URLs are signed in.
    sessions: Option<Arc<Mutex<Option<ExpressSession>>>>,
    /// The live log's store, when it is a bucket of its own ([`Artifacts::live`]).
    live: Option<Arc<S3Artifacts>>,
}

/// A session of a directory bucket (CreateSession): its credentials and when they end.
#[derive(Debug, Clone)]
struct ExpressSession {
    credentials: aws_sdk_s3::config::Credentials,
    expires: SystemTime,
}

/// How long a directory bucket's session is used to sign URLs: from its fifth minute on a
/// new one is made, so a URL signed in it works at least four minutes (AWS ends a session
/// after five: <https://docs.aws.amazon.com/AmazonS3/latest/API/API_CreateSession.html>).
/// The SDK's own session cache renews ten seconds before the end, too late for a URL that
/// is handed out.
const SESSION_SIGNS_FOR: Duration = Duration::from_secs(60);

/// The `CreateBucketConfiguration` of a directory bucket in zone `zone` (an AZ ID such as
/// `use1-az4`): one Availability Zone, one zone's redundancy.
pub fn directory_bucket_configuration(zone: &str) -> aws_sdk_s3::types::CreateBucketConfiguration {
    use aws_sdk_s3::types::{
        BucketInfo, BucketType, CreateBucketConfiguration, DataRedundancy, LocationInfo,
        LocationType,
    };
    CreateBucketConfiguration::builder()
        .location(
            LocationInfo::builder()
                .r#type(LocationType::AvailabilityZone)
                .name(zone)
                .build(),
        )
        .bucket(
            BucketInfo::builder()
                .r#type(BucketType::Directory)
                .data_redundancy(DataRedundancy::SingleAvailabilityZone)
                .build(),
        )
        .build()
}

/// Whether `bucket` names a directory bucket (`<base>--<zone id>--x-s3`).
fn is_directory_bucket(bucket: &str) -> bool {
    bucket.ends_with("--x-s3")
}

impl S3Artifacts {
    /// The bucket `bucket` (a directory bucket's URLs are signed in a session of its own).
    pub fn new(client: aws_sdk_s3::Client, bucket: impl Into<String>) -> Self {
        let bucket = bucket.into();
        Self {
            sessions: is_directory_bucket(&bucket).then(|| Arc::new(Mutex::new(None))),
            client,
            bucket,
            signing: None,
            live: None,
        }
    }

    /// The live log in `live`, a directory bucket ([`Artifacts::live`]).
    pub fn with_live(mut self, live: S3Artifacts) -> Self {
        self.live = Some(Arc::new(live));
        self
    }

    /// Presigned URLs signed with `credentials` (the client's, from its `SdkConfig`), and
    /// living no longer than they do.
    pub fn with_signing_credentials(
        mut self,
        credentials: Option<aws_sdk_s3::config::SharedCredentialsProvider>,
    ) -> Self {
        self.signing = credentials;
        self
    }

    /// The S3 client.
    pub fn client(&self) -> &aws_sdk_s3::Client {
        &self.client
    }

    /// The bucket's name.
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// Creates the bucket if it does not exist (local mode and tests), and the live log's.
    pub async fn ensure_bucket(&self) -> Result<(), StoreError> {
        if let Some(live) = &self.live {
            Box::pin(live.ensure_bucket()).await?;
        }
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
        if let Some(zone) = self.directory_zone() {
            // CreateBucket is a regional call signed by IAM; against a custom endpoint the
            // SDK would otherwise sign it in a session of the bucket it creates.
            let control =
                aws_sdk_s3::config::Builder::default().disable_s3_express_session_auth(true);
            self.client
                .create_bucket()
                .bucket(&self.bucket)
                .create_bucket_configuration(directory_bucket_configuration(zone))
                .customize()
                .config_override(control)
                .send()
                .await
                .map(|_| ())
                .or_else(|e| made_meanwhile(&e))?;
            return Ok(());
        }
        self.client
            .create_bucket()
            .bucket(&self.bucket)
            .send()
            .await
            .map(|_| ())
            .or_else(|e| made_meanwhile(&e))
    }

    /// The zone id a directory bucket is named for.
    fn directory_zone(&self) -> Option<&str> {
        let rest = self.bucket.strip_suffix("--x-s3")?;
        rest.rsplit_once("--").map(|(_, zone)| zone)
    }

    /// A session of this directory bucket to sign a URL in, made when none has signed for
    /// less than [`SESSION_SIGNS_FOR`].
    async fn express_session(
        &self,
        sessions: &Mutex<Option<ExpressSession>>,
    ) -> Result<ExpressSession, StoreError> {
        let fresh = |s: &ExpressSession| {
            s.expires
                .duration_since(SystemTime::now())
                .is_ok_and(|left| left + SESSION_SIGNS_FOR > Duration::from_secs(300))
        };
        if let Some(s) = sessions.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            if fresh(s) {
                return Ok(s.clone());
            }
        }
        let made = self
            .client
            .create_session()
            .bucket(&self.bucket)
            .send()
            .await
            .map_err(|e| s3_error(&e))?;
        let c = made.credentials.ok_or_else(|| StoreError::Aws {
            service: "s3",
            message: "CreateSession answered no credentials".to_string(),
            retryable: true,
        })?;
        let expires = SystemTime::try_from(*c.expiration()).unwrap_or_else(|_| SystemTime::now());
        let session = ExpressSession {
            credentials: aws_sdk_s3::config::Credentials::new(
                c.access_key_id(),
                c.secret_access_key(),
                Some(c.session_token().to_string()),
                Some(expires),
                "sortie-s3-express-session",
            ),
            expires,
        };
        *sessions.lock().unwrap_or_else(|p| p.into_inner()) = Some(session.clone());
        Ok(session)
    }
}

type SdkError<E> = aws_sdk_s3::error::SdkError<E, aws_sdk_s3::config::http::HttpResponse>;

/// Builds [`StoreError::Aws`] from an S3 error: retryable for throttling (`SlowDown`), a
/// 5xx, a timeout or a transport failure, and for the few 4xx that a retry can cure (an
/// expired token, a request timeout); not for any other answer (a 403 stays a 403).
fn s3_error<E>(e: &SdkError<E>) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let retryable = match e {
        aws_sdk_s3::error::SdkError::ServiceError(se) => {
            let status = se.raw().status().as_u16();
            let code = se.err().code().unwrap_or_default();
            status >= 500
                || status == 429
                || status == 408
                || matches!(
                    code,
                    "SlowDown" | "RequestTimeout" | "ExpiredToken" | "TokenRefreshRequired"
                )
                || code.contains("Throttl")
        }
        _ => true,
    };
    StoreError::Aws {
        service: "s3",
        message: aws_sdk_s3::error::DisplayErrorContext(e).to_string(),
        retryable,
    }
}

/// A CreateBucket refused because this account made the bucket meanwhile (another
/// process's `ensure_bucket` between the HeadBucket and the CreateBucket) is done.
fn made_meanwhile<E>(e: &SdkError<E>) -> Result<(), StoreError>
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    match e {
        aws_sdk_s3::error::SdkError::ServiceError(se)
            if se.err().code() == Some("BucketAlreadyOwnedByYou") =>
        {
            Ok(())
        }
        _ => Err(s3_error(e)),
    }
}

/// What a failed read of `key` says. A 404 (`NoSuchKey`) is [`StoreError::NotFound`]. A
/// 403 is not retryable and says the object is missing or unreadable: S3 answers 403 for a
/// missing key to a caller without `s3:ListBucket` on the bucket, so that caller cannot
/// tell a missing object from one it may not read
/// (<https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html>, "Permissions").
/// `NoSuchBucket` (also a 404) is a missing bucket, not a missing object.
fn read_error<E>(key: &str, e: &SdkError<E>) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    if let aws_sdk_s3::error::SdkError::ServiceError(se) = e {
        let status = se.raw().status().as_u16();
        let code = se.err().code().unwrap_or_default();
        if code != "NoSuchBucket" && (status == 404 || code == "NoSuchKey") {
            return StoreError::NotFound {
                kind: "object",
                id: key.to_string(),
            };
        }
        if status == 403 {
            return StoreError::Aws {
                service: "s3",
                message: format!(
                    "object `{key}` is missing or unreadable: S3 answered 403 {} (without \
                     s3:ListBucket on the bucket S3 answers 403 for a missing key too, so \
                     the two cannot be told apart)",
                    if code.is_empty() {
                        "AccessDenied"
                    } else {
                        code
                    }
                ),
                retryable: false,
            };
        }
    }
    s3_error(e)
}

/// A GetObject answer's body.
async fn body_bytes(
    out: aws_sdk_s3::operation::get_object::GetObjectOutput,
) -> Result<Vec<u8>, StoreError> {
    let bytes = out.body.collect().await.map_err(|e| StoreError::Aws {
        service: "s3",
        message: e.to_string(),
        retryable: true,
    })?;
    Ok(bytes.into_bytes().to_vec())
}

/// The presigning configuration for a URL that lives `lifetime`.
fn presigning(lifetime: Duration) -> Result<aws_sdk_s3::presigning::PresigningConfig, StoreError> {
    aws_sdk_s3::presigning::PresigningConfig::expires_in(lifetime).map_err(|e| StoreError::Aws {
        service: "s3",
        message: e.to_string(),
        retryable: false,
    })
}

/// A configuration override that signs with exactly `credentials` (those whose expiry
/// bounded the URL's life), or changes nothing.
fn signed_with(
    credentials: Option<aws_sdk_s3::config::Credentials>,
) -> aws_sdk_s3::config::Builder {
    let builder = aws_sdk_s3::config::Builder::default();
    match credentials {
        Some(c) => builder.credentials_provider(c),
        None => builder,
    }
}

impl S3Artifacts {
    /// How a presigned URL is signed, and its life: `requested`, but no longer than the
    /// credentials that sign it have left ([`sortie_core::presign::lifetime`]; a role
    /// session's URL dies with the session, and a directory bucket's with the bucket's
    /// session, made for it: [`S3Artifacts::express_session`]).
    async fn signing(
        &self,
        requested: Duration,
    ) -> Result<(aws_sdk_s3::config::Builder, Duration), StoreError> {
        if let Some(sessions) = &self.sessions {
            let session = self.express_session(sessions).await?;
            let lifetime =
                sortie_core::presign::lifetime(requested, SystemTime::now(), Some(session.expires))
                    .map_err(|message| StoreError::Aws {
                        service: "s3",
                        message,
                        retryable: true,
                    })?;
            let builder = aws_sdk_s3::config::Builder::default()
                .express_credentials_provider(session.credentials);
            return Ok((builder, lifetime));
        }
        let (credentials, lifetime) = self.iam_signing(requested).await?;
        Ok((signed_with(credentials), lifetime))
    }

    /// The IAM credentials a presigned URL of a general purpose bucket is signed with.
    async fn iam_signing(
        &self,
        requested: Duration,
    ) -> Result<(Option<aws_sdk_s3::config::Credentials>, Duration), StoreError> {
        use aws_sdk_s3::config::ProvideCredentials;
        let Some(provider) = &self.signing else {
            return Ok((None, requested));
        };
        let credentials = provider
            .provide_credentials()
            .await
            .map_err(|e| StoreError::Aws {
                service: "s3",
                message: format!("no credentials to sign a URL with: {e}"),
                retryable: true,
            })?;
        let lifetime = sortie_core::presign::lifetime(
            requested,
            std::time::SystemTime::now(),
            credentials.expiry(),
        )
        .map_err(|message| StoreError::Aws {
            service: "s3",
            message,
            retryable: true,
        })?;
        Ok((Some(credentials), lifetime))
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
        let (signer, lifetime) = self.signing(expires_in).await?;
        let request = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .content_type(content_type)
            .customize()
            .config_override(signer)
            .presigned(presigning(lifetime)?)
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
                + chrono::Duration::from_std(lifetime).unwrap_or(chrono::Duration::zero()),
        })
    }

    async fn presign_get(&self, key: &str, expires_in: Duration) -> Result<String, StoreError> {
        Ok(self.presign_get_until(key, expires_in).await?.0)
    }

    async fn presign_get_until(
        &self,
        key: &str,
        expires_in: Duration,
    ) -> Result<(String, DateTime<Utc>), StoreError> {
        let (signer, lifetime) = self.signing(expires_in).await?;
        let request = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .customize()
            .config_override(signer)
            .presigned(presigning(lifetime)?)
            .await
            .map_err(|e| s3_error(&e))?;
        Ok((
            request.uri().to_string(),
            Utc::now() + chrono::Duration::from_std(lifetime).unwrap_or(chrono::Duration::zero()),
        ))
    }

    fn live(&self) -> Option<Arc<dyn Artifacts>> {
        self.live.clone().map(|l| l as Arc<dyn Artifacts>)
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
        from: PageFrom<'_>,
        max_keys: usize,
    ) -> Result<ObjectPage, StoreError> {
        let request = self
            .client
            .list_objects_v2()
            .bucket(&self.bucket)
            .prefix(prefix)
            .max_keys(max_keys.clamp(1, MAX_LIST_PAGE) as i32);
        let request = match from {
            PageFrom::Start => request,
            PageFrom::After(key) => request.start_after(key),
            PageFrom::Next(token) => request.continuation_token(token),
        };
        let page = request.send().await.map_err(|e| s3_error(&e))?;
        let mut objects: Vec<ObjectInfo> = page
            .contents()
            .iter()
            .map(|o| ObjectInfo {
                key: o.key().unwrap_or_default().to_string(),
                size: o.size().unwrap_or_default().max(0) as u64,
            })
            .collect();
        objects.sort_by(|a, b| a.key.cmp(&b.key));
        // The listing goes on exactly when S3 says so (`IsTruncated`), however short the page.
        let next = match (
            page.is_truncated == Some(true),
            page.next_continuation_token,
        ) {
            (false, _) => None,
            (true, Some(token)) if !token.is_empty() => Some(token),
            (true, _) => {
                return Err(StoreError::Aws {
                    service: "s3",
                    message: format!(
                        "ListObjectsV2 under `{prefix}` said more keys follow but gave no \
                         continuation token"
                    ),
                    retryable: true,
                })
            }
        };
        Ok(ObjectPage { objects, next })
    }

    async fn get_range(&self, key: &str, from: u64, len: u64) -> Result<Vec<u8>, StoreError> {
        if len == 0 {
            return Ok(vec![]);
        }
        let last = from.saturating_add(len - 1);
        let out = match self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .range(format!("bytes={from}-{last}"))
            .send()
            .await
        {
            Ok(out) => out,
            // A range that starts at or past the object's end (416 InvalidRange): no bytes.
            Err(aws_sdk_s3::error::SdkError::ServiceError(se))
                if se.raw().status().as_u16() == 416 =>
            {
                return Ok(vec![]);
            }
            Err(e) => return Err(read_error(key, &e)),
        };
        let mut bytes = body_bytes(out).await?;
        bytes.truncate(len as usize);
        Ok(bytes)
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
        match res {
            Ok(out) => Ok(ObjectInfo {
                key: key.to_string(),
                size: out.content_length().unwrap_or_default().max(0) as u64,
            }),
            Err(e) => Err(read_error(key, &e)),
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
            .map_err(|e| read_error(key, &e))?;
        body_bytes(out).await
    }
}

#[cfg(test)]
#[path = "artifacts_presign_tests.rs"]
mod presign_tests;
