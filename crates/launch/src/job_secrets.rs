//! The secrets that hold a job's sensitive variables for its life, behind one small
//! trait: created by the API at submit (one per job, holding every value), read for the
//! job's runner, deleted when the job ends, and listed by the sweep to delete any whose
//! job has ended ([`sortie_core::sensitive`]).
//!
//! [`AwsJobSecrets`] is Secrets Manager in the control plane's own account and region
//! (against moto in `sortie dev` and the tests). Its calls are retried under throttling
//! with full-jitter backoff, bounded in attempts and time ([`ThrottleRetry`]): CreateSecret,
//! DeleteSecret and ListSecrets are limited to 50 per second per account and Region, a
//! quota that cannot be raised. [`MemoryJobSecrets`] is the fake for unit tests. Errors are
//! one-line descriptions that never hold a value.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use aws_config::SdkConfig;
use aws_sdk_secretsmanager::config::retry::RetryConfig;
use aws_sdk_secretsmanager::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_secretsmanager::types::{Filter, FilterNameStringType, Tag};
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use chrono::{DateTime, Utc};
use sortie_core::sensitive::{JOB_TAG, SECRET_PREFIX};

/// One job secret as the sweep lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedSecret {
    /// Its ARN.
    pub arn: String,
    /// Its name (`sortie/jobs/…`).
    pub name: String,
    /// The job its [`JOB_TAG`] names.
    pub job: Option<String>,
    /// When it was made.
    pub created: Option<DateTime<Utc>>,
}

/// One page of job secrets, and where the next starts (`None` at the end).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecretPage {
    /// The secrets of the page.
    pub secrets: Vec<ListedSecret>,
    /// The token of the next page.
    pub next: Option<String>,
}

/// Creates, reads, deletes and lists the secrets of jobs' sensitive variables.
#[async_trait]
pub trait JobSecrets: Send + Sync {
    /// Creates the secret `name` holding `value`, tagged with `tags`; returns its ARN.
    async fn create(
        &self,
        name: &str,
        value: &str,
        tags: &[(&str, &str)],
    ) -> Result<String, String>;
    /// The value of the secret `arn`.
    async fn value(&self, arn: &str) -> Result<String, String>;
    /// Deletes the secret `arn` at once, without a recovery window. A secret already gone
    /// is deleted.
    async fn delete(&self, arn: &str) -> Result<(), String>;
    /// One page (at most `max` items) of the secrets named `sortie/jobs/…` that carry the
    /// [`JOB_TAG`] tag, from `token` (the first page when `None`). A double that keeps no
    /// secrets lists none.
    async fn list_page(&self, token: Option<&str>, max: i32) -> Result<SecretPage, String> {
        let _ = (token, max);
        Ok(SecretPage::default())
    }
}

/// How a throttled (or transiently failed) Secrets Manager call is tried again: "full
/// jitter" backoff from `base` doubling up to `cap`, at most `attempts` calls in all and no
/// retry that would end past `budget` since the first call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThrottleRetry {
    /// The most calls, the first included.
    pub attempts: u32,
    /// The first retry's ceiling.
    pub base: Duration,
    /// The largest ceiling.
    pub cap: Duration,
    /// The longest time from the first call to the start of the last.
    pub budget: Duration,
}

impl Default for ThrottleRetry {
    /// 10 calls, 100 ms doubling to 5 s, within 20 s: a burst of a few hundred calls at the
    /// 50-per-second quota spreads out and passes, and a job's end is never held longer.
    fn default() -> Self {
        Self {
            attempts: 10,
            base: Duration::from_millis(100),
            cap: Duration::from_secs(5),
            budget: Duration::from_secs(20),
        }
    }
}

impl ThrottleRetry {
    /// The longest a call retried under this policy can take, its last call's own time
    /// (`per_call`) included: callers that bound a call in time use this, never less.
    pub fn longest(&self, per_call: Duration) -> Duration {
        self.budget + self.cap + per_call
    }

    /// Runs `call` until it succeeds, fails for good, or the attempts or the budget are
    /// spent; `retryable` says which errors are worth another call.
    pub async fn run<T, E, F, Fut>(
        &self,
        mut call: F,
        retryable: impl Fn(&E) -> bool,
    ) -> Result<T, E>
    where
        F: FnMut(u32) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let started = Instant::now();
        let mut attempt = 0u32;
        loop {
            let e = match call(attempt).await {
                Ok(v) => return Ok(v),
                Err(e) => e,
            };
            attempt += 1;
            if attempt >= self.attempts || !retryable(&e) {
                return Err(e);
            }
            let delay = Duration::from_millis(sortie_core::backoff::full_jitter_millis(
                attempt - 1,
                u64::try_from(self.base.as_millis()).unwrap_or(u64::MAX),
                u64::try_from(self.cap.as_millis()).unwrap_or(u64::MAX),
                random_seed(attempt),
            ));
            if started.elapsed() + delay > self.budget {
                return Err(e);
            }
            tokio::time::sleep(delay).await;
        }
    }
}

/// A fresh random seed (the standard library's per-process random hasher keys).
fn random_seed(attempt: u32) -> u64 {
    use std::hash::BuildHasher;
    std::collections::hash_map::RandomState::new().hash_one(attempt)
}

/// True for an error worth another call: Secrets Manager's throttling (`ThrottlingException`,
/// HTTP 429, "Rate exceeded"), a 5xx, a timeout or a connection failure.
fn is_transient<E: ProvideErrorMetadata>(e: &SdkError<E, HttpResponse>) -> bool {
    match e {
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => {
            true
        }
        SdkError::ServiceError(_) => {
            let status = e.raw_response().map(|r| r.status().as_u16());
            matches!(
                e.code(),
                Some("ThrottlingException" | "Throttling" | "TooManyRequestsException")
            ) || e.message().is_some_and(|m| m.contains("Rate exceeded"))
                || status.is_some_and(|s| s == 429 || s >= 500)
        }
        _ => false,
    }
}

/// Secrets Manager through the AWS SDK; every call retried as [`ThrottleRetry`] says (the
/// SDK's own retries are off, so the bound is this one).
pub struct AwsJobSecrets {
    client: aws_sdk_secretsmanager::Client,
    retry: ThrottleRetry,
}

impl AwsJobSecrets {
    /// A client from `config` (its credentials, region and endpoint), retried by
    /// [`ThrottleRetry::default`].
    pub fn new(config: &SdkConfig) -> Self {
        Self::with_retry(config, ThrottleRetry::default())
    }

    /// A client from `config` whose calls are retried as `retry` says.
    pub fn with_retry(config: &SdkConfig, retry: ThrottleRetry) -> Self {
        let config = aws_sdk_secretsmanager::config::Builder::from(config)
            .retry_config(RetryConfig::disabled())
            .build();
        Self {
            client: aws_sdk_secretsmanager::Client::from_conf(config),
            retry,
        }
    }

    /// The retry policy.
    pub fn retry(&self) -> ThrottleRetry {
        self.retry
    }
}

#[async_trait]
impl JobSecrets for AwsJobSecrets {
    async fn create(
        &self,
        name: &str,
        value: &str,
        tags: &[(&str, &str)],
    ) -> Result<String, String> {
        let tags: Vec<Tag> = tags
            .iter()
            .map(|(k, v)| Tag::builder().key(*k).value(*v).build())
            .collect();
        let created = self
            .retry
            .run(
                |_| {
                    self.client
                        .create_secret()
                        .name(name)
                        .secret_string(value)
                        .set_tags(Some(tags.clone()))
                        .send()
                },
                is_transient,
            )
            .await;
        match created {
            Ok(out) => out
                .arn
                .ok_or_else(|| format!("CreateSecret {name} answered no ARN")),
            // A retry after an answer that was lost: the name is this job's, so the secret
            // that exists is the one the first call made.
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_resource_exists_exception()) =>
            {
                let out = self
                    .retry
                    .run(
                        |_| self.client.describe_secret().secret_id(name).send(),
                        is_transient,
                    )
                    .await
                    .map_err(|e| {
                        format!("DescribeSecret {name} failed: {}", DisplayErrorContext(&e))
                    })?;
                out.arn
                    .ok_or_else(|| format!("DescribeSecret {name} answered no ARN"))
            }
            Err(e) => Err(format!(
                "CreateSecret {name} failed: {}",
                DisplayErrorContext(&e)
            )),
        }
    }

    async fn value(&self, arn: &str) -> Result<String, String> {
        let out = self
            .retry
            .run(
                |_| self.client.get_secret_value().secret_id(arn).send(),
                is_transient,
            )
            .await
            .map_err(|e| format!("GetSecretValue {arn} failed: {}", DisplayErrorContext(&e)))?;
        out.secret_string
            .ok_or_else(|| format!("the secret {arn} has no string value"))
    }

    async fn delete(&self, arn: &str) -> Result<(), String> {
        let deleted = self
            .retry
            .run(
                |_| {
                    self.client
                        .delete_secret()
                        .secret_id(arn)
                        .force_delete_without_recovery(true)
                        .send()
                },
                is_transient,
            )
            .await;
        match deleted {
            Ok(_) => Ok(()),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_resource_not_found_exception()) =>
            {
                Ok(())
            }
            Err(e) => Err(format!(
                "DeleteSecret {arn} failed: {}",
                DisplayErrorContext(&e)
            )),
        }
    }

    async fn list_page(&self, token: Option<&str>, max: i32) -> Result<SecretPage, String> {
        let filter = |key: FilterNameStringType, value: &str| {
            Filter::builder().key(key).values(value).build()
        };
        let out = self
            .retry
            .run(
                |_| {
                    self.client
                        .list_secrets()
                        .filters(filter(FilterNameStringType::TagKey, JOB_TAG))
                        .filters(filter(FilterNameStringType::Name, SECRET_PREFIX))
                        .max_results(max)
                        .set_next_token(token.map(str::to_string))
                        .send()
                },
                is_transient,
            )
            .await
            .map_err(|e| format!("ListSecrets failed: {}", DisplayErrorContext(&e)))?;
        let secrets = out
            .secret_list()
            .iter()
            .filter_map(|s| {
                let (arn, name) = (s.arn()?, s.name()?);
                // The name filter matches a prefix of any word: keep only the job secrets.
                name.starts_with(SECRET_PREFIX).then(|| ListedSecret {
                    arn: arn.to_string(),
                    name: name.to_string(),
                    job: s
                        .tags()
                        .iter()
                        .find(|t| t.key() == Some(JOB_TAG))
                        .and_then(|t| t.value().map(str::to_string)),
                    created: s
                        .created_date()
                        .and_then(|d| DateTime::from_timestamp(d.secs(), d.subsec_nanos())),
                })
            })
            .collect();
        Ok(SecretPage {
            secrets,
            next: out.next_token.filter(|t| !t.is_empty()),
        })
    }
}

/// One secret of [`MemoryJobSecrets`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemorySecret {
    /// Its name.
    pub name: String,
    /// Its value.
    pub value: String,
    /// Its tags.
    pub tags: BTreeMap<String, String>,
    /// When it was made.
    pub created: DateTime<Utc>,
}

/// Secrets in memory, for tests: ARNs are `arn:aws:secretsmanager:local:000000000000:secret:<name>`.
/// Set `fail_create_after` to make creates fail once that many succeeded, and
/// `fail_delete` to make the deletes of some ARNs fail.
#[derive(Debug, Default)]
pub struct MemoryJobSecrets {
    /// The secrets by ARN.
    pub secrets: Mutex<BTreeMap<String, MemorySecret>>,
    /// Every ARN deleted, in order.
    pub deleted: Mutex<Vec<String>>,
    /// When set, a create fails once this many secrets exist.
    pub fail_create_after: Option<usize>,
    /// The ARNs whose delete fails.
    pub fail_delete: Mutex<BTreeSet<String>>,
}

impl MemoryJobSecrets {
    /// The ARN the fake gives the secret `name`.
    pub fn arn_of(name: &str) -> String {
        format!("arn:aws:secretsmanager:local:000000000000:secret:{name}")
    }
}

#[async_trait]
impl JobSecrets for MemoryJobSecrets {
    async fn create(
        &self,
        name: &str,
        value: &str,
        tags: &[(&str, &str)],
    ) -> Result<String, String> {
        let mut secrets = self.secrets.lock().expect("secrets lock");
        if self.fail_create_after.is_some_and(|n| secrets.len() >= n) {
            return Err(format!("CreateSecret {name} failed: refused by the test"));
        }
        let arn = Self::arn_of(name);
        if secrets.contains_key(&arn) {
            return Err(format!("CreateSecret {name} failed: it already exists"));
        }
        secrets.insert(
            arn.clone(),
            MemorySecret {
                name: name.to_string(),
                value: value.to_string(),
                tags: tags
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                created: Utc::now(),
            },
        );
        Ok(arn)
    }

    async fn value(&self, arn: &str) -> Result<String, String> {
        self.secrets
            .lock()
            .expect("secrets lock")
            .get(arn)
            .map(|s| s.value.clone())
            .ok_or_else(|| format!("GetSecretValue {arn} failed: no such secret"))
    }

    async fn delete(&self, arn: &str) -> Result<(), String> {
        if self.fail_delete.lock().expect("fail lock").contains(arn) {
            return Err(format!("DeleteSecret {arn} failed: refused by the test"));
        }
        self.secrets.lock().expect("secrets lock").remove(arn);
        self.deleted
            .lock()
            .expect("deleted lock")
            .push(arn.to_string());
        Ok(())
    }

    async fn list_page(&self, token: Option<&str>, max: i32) -> Result<SecretPage, String> {
        let max = usize::try_from(max.max(1)).unwrap_or(1);
        let secrets = self.secrets.lock().expect("secrets lock");
        let mut listed: Vec<ListedSecret> = secrets
            .iter()
            .filter(|(_, s)| s.name.starts_with(SECRET_PREFIX) && s.tags.contains_key(JOB_TAG))
            .filter(|(arn, _)| token.is_none_or(|t| arn.as_str() > t))
            .take(max + 1)
            .map(|(arn, s)| ListedSecret {
                arn: arn.clone(),
                name: s.name.clone(),
                job: s.tags.get(JOB_TAG).cloned(),
                created: Some(s.created),
            })
            .collect();
        let next = (listed.len() > max).then(|| {
            listed.truncate(max);
            listed.last().map(|s| s.arn.clone()).unwrap_or_default()
        });
        Ok(SecretPage {
            secrets: listed,
            next,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn quick(attempts: u32, budget_ms: u64) -> ThrottleRetry {
        ThrottleRetry {
            attempts,
            base: Duration::from_millis(1),
            cap: Duration::from_millis(4),
            budget: Duration::from_millis(budget_ms),
        }
    }

    #[tokio::test]
    async fn a_throttled_call_is_tried_again_until_it_passes_within_its_bounds() {
        let calls = AtomicU32::new(0);
        let got: Result<u32, &str> = quick(10, 5_000)
            .run(
                |attempt| {
                    calls.fetch_add(1, Ordering::SeqCst);
                    async move {
                        if attempt < 4 {
                            Err("throttled")
                        } else {
                            Ok(attempt)
                        }
                    }
                },
                |_| true,
            )
            .await;
        assert_eq!(got, Ok(4));
        assert_eq!(calls.load(Ordering::SeqCst), 5);
    }

    #[tokio::test]
    async fn retries_stop_at_the_attempts_the_budget_or_an_error_for_good() {
        for (policy, want) in [(quick(3, 5_000), 3), (quick(1_000, 30), 0)] {
            let calls = AtomicU32::new(0);
            let started = Instant::now();
            let got: Result<(), &str> = policy
                .run(
                    |_| {
                        calls.fetch_add(1, Ordering::SeqCst);
                        async { Err("throttled") }
                    },
                    |_| true,
                )
                .await;
            assert!(got.is_err());
            let n = calls.load(Ordering::SeqCst);
            if want > 0 {
                assert_eq!(n, want);
            } else {
                assert!(n > 1 && n < 1_000, "stopped by the budget after {n} calls");
                assert!(started.elapsed() < policy.longest(Duration::ZERO) * 2);
            }
        }
        let calls = AtomicU32::new(0);
        let got: Result<(), &str> = quick(10, 5_000)
            .run(
                |_| {
                    calls.fetch_add(1, Ordering::SeqCst);
                    async { Err("denied") }
                },
                |_| false,
            )
            .await;
        assert_eq!((got, calls.load(Ordering::SeqCst)), (Err("denied"), 1));
    }

    #[tokio::test]
    async fn the_fake_lists_job_secrets_page_by_page_to_the_end() {
        let fake = MemoryJobSecrets::default();
        for i in 0..7 {
            fake.create(&format!("sortie/jobs/j{i}"), "{}", &[(JOB_TAG, "j")])
                .await
                .unwrap();
        }
        fake.create("other/x", "v", &[(JOB_TAG, "j")])
            .await
            .unwrap();
        fake.create("sortie/jobs/untagged", "v", &[]).await.unwrap();
        let (mut seen, mut token, mut pages) = (vec![], None, 0);
        loop {
            let page = fake.list_page(token.as_deref(), 3).await.unwrap();
            pages += 1;
            seen.extend(page.secrets.into_iter().map(|s| s.name));
            token = page.next;
            if token.is_none() {
                break;
            }
        }
        assert_eq!(pages, 3);
        assert_eq!(
            seen,
            (0..7)
                .map(|i| format!("sortie/jobs/j{i}"))
                .collect::<Vec<_>>()
        );
    }
}
