//! Where a runner keeps Terraform state (`state_storage_configuration`): an S3 bucket,
//! Kubernetes secrets or a local directory.

use serde::{Deserialize, Serialize};

/// Where Terraform state lives, by `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum StateStorageConfiguration {
    /// An S3 bucket.
    S3(S3Storage),
    /// Kubernetes secrets in a namespace (`eks` runners only).
    Kubernetes(KubernetesStorage),
    /// A directory on the host (`local` runners only).
    Local(LocalStorage),
}

/// The `s3` state storage type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct S3Storage {
    /// Bucket name.
    pub bucket: String,
    /// Prefix of every state key: the key is `<key_prefix><environment path>/terraform.tfstate`.
    #[serde(default)]
    pub key_prefix: String,
    /// Bucket region.
    pub region: String,
    /// KMS key for server-side encryption of the state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kms_key_id: Option<String>,
    /// Lock with an S3 lock file (Terraform ≥ 1.10, OpenTofu ≥ 1.10).
    #[serde(default)]
    pub use_lockfile: bool,
    /// Lock with a DynamoDB table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dynamodb_table: Option<String>,
    /// An S3 endpoint override, for a local AWS in development.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
}

impl S3Storage {
    /// The state object's key for an environment: `<key_prefix><environment path>/terraform.tfstate`.
    pub fn state_key(&self, environment: &crate::EnvPath) -> String {
        format!("{}{}/terraform.tfstate", self.key_prefix, environment)
    }
}

/// The `kubernetes` state storage type: Terraform's `kubernetes` backend, one Secret per
/// environment (`secret_suffix` = the environment path, sanitised).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct KubernetesStorage {
    /// Namespace holding the state secrets; the runner's own namespace (`job.namespace`)
    /// when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// The `local` state storage type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LocalStorage {
    /// Directory holding one state file per environment.
    pub directory: String,
}

impl StateStorageConfiguration {
    /// The type name, as written in `state_storage_configuration.type`.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::S3(_) => "s3",
            Self::Kubernetes(_) => "kubernetes",
            Self::Local(_) => "local",
        }
    }
}
