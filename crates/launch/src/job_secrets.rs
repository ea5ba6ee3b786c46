//! The secrets that hold a job's sensitive variables for its life, behind one small
//! trait: created by the API at submit, read for the job's runner, deleted when the job
//! ends ([`sortie_core::sensitive`]).
//!
//! [`AwsJobSecrets`] is Secrets Manager in the control plane's own account and region
//! (against moto in `sortie dev` and the tests); [`MemoryJobSecrets`] is the fake for
//! unit tests. Errors are one-line descriptions that never hold a value.

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;
use aws_config::SdkConfig;
use aws_sdk_secretsmanager::error::DisplayErrorContext;
use aws_sdk_secretsmanager::types::Tag;

/// Creates, reads and deletes the secrets of jobs' sensitive variables.
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
}

/// Secrets Manager through the AWS SDK.
pub struct AwsJobSecrets {
    client: aws_sdk_secretsmanager::Client,
}

impl AwsJobSecrets {
    /// A client from `config` (its credentials, region and endpoint).
    pub fn new(config: &SdkConfig) -> Self {
        Self {
            client: aws_sdk_secretsmanager::Client::new(config),
        }
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
        let out = self
            .client
            .create_secret()
            .name(name)
            .secret_string(value)
            .set_tags(Some(
                tags.iter()
                    .map(|(k, v)| Tag::builder().key(*k).value(*v).build())
                    .collect(),
            ))
            .send()
            .await
            .map_err(|e| format!("CreateSecret {name} failed: {}", DisplayErrorContext(&e)))?;
        out.arn
            .ok_or_else(|| format!("CreateSecret {name} answered no ARN"))
    }

    async fn value(&self, arn: &str) -> Result<String, String> {
        let out = self
            .client
            .get_secret_value()
            .secret_id(arn)
            .send()
            .await
            .map_err(|e| format!("GetSecretValue {arn} failed: {}", DisplayErrorContext(&e)))?;
        out.secret_string
            .ok_or_else(|| format!("the secret {arn} has no string value"))
    }

    async fn delete(&self, arn: &str) -> Result<(), String> {
        match self
            .client
            .delete_secret()
            .secret_id(arn)
            .force_delete_without_recovery(true)
            .send()
            .await
        {
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
}

/// Secrets in memory, for tests: ARNs are `arn:aws:secretsmanager:local:000000000000:secret:<name>`.
/// Set `fail_create_after` to make creates fail once that many succeeded.
#[derive(Debug, Default)]
pub struct MemoryJobSecrets {
    /// The secrets by ARN.
    pub secrets: Mutex<BTreeMap<String, MemorySecret>>,
    /// Every ARN deleted, in order.
    pub deleted: Mutex<Vec<String>>,
    /// When set, a create fails once this many secrets exist.
    pub fail_create_after: Option<usize>,
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
        let arn = format!("arn:aws:secretsmanager:local:000000000000:secret:{name}");
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
        self.secrets.lock().expect("secrets lock").remove(arn);
        self.deleted
            .lock()
            .expect("deleted lock")
            .push(arn.to_string());
        Ok(())
    }
}
