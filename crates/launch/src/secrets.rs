//! Secret values behind one small trait, for the `local` launcher: what ECS does with a
//! task definition's `secrets` (`valueFrom` = an ARN) before it starts a container.
//!
//! [`AwsSecretValues`] reads Secrets Manager (`GetSecretValue`) and SSM Parameter Store
//! (`GetParameter`, decrypted) with the caller's credentials, in the ARN's region;
//! [`StaticSecretValues`] is the in-memory fake for unit tests.

use std::collections::HashMap;

use async_trait::async_trait;
use aws_config::{Region, SdkConfig};

/// Resolves a secret reference (an ARN) to its value. Errors are one-line descriptions.
#[async_trait]
pub trait SecretValues: Send + Sync {
    /// The value `arn` names.
    async fn value(&self, arn: &str) -> Result<String, String>;
}

/// What an ARN names: a Secrets Manager secret or an SSM parameter, and its region.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretRef {
    /// A Secrets Manager secret (its full ARN is its id).
    SecretsManager {
        /// The ARN's region.
        region: String,
    },
    /// An SSM parameter.
    Parameter {
        /// The ARN's region.
        region: String,
        /// The parameter's name (`/a/b` for a hierarchical one).
        name: String,
    },
}

impl SecretRef {
    /// Reads `arn:<partition>:secretsmanager:<region>:<account>:secret:<name>` or
    /// `arn:<partition>:ssm:<region>:<account>:parameter/<name>`.
    pub fn parse(arn: &str) -> Result<Self, String> {
        let parts: Vec<&str> = arn.splitn(6, ':').collect();
        let bad = || format!("`{arn}` is not a Secrets Manager secret or SSM parameter ARN");
        if parts.len() != 6 || parts[0] != "arn" || parts[3].is_empty() {
            return Err(bad());
        }
        let region = parts[3].to_string();
        match parts[2] {
            "secretsmanager" if parts[5].starts_with("secret:") => {
                Ok(Self::SecretsManager { region })
            }
            "ssm" => {
                let name = parts[5].strip_prefix("parameter/").ok_or_else(bad)?;
                if name.is_empty() {
                    return Err(bad());
                }
                // `parameter/a/b` names `/a/b`; `parameter/a` names `a`.
                let name = if name.contains('/') {
                    format!("/{name}")
                } else {
                    name.to_string()
                };
                Ok(Self::Parameter { region, name })
            }
            _ => Err(bad()),
        }
    }
}

/// Secrets Manager and SSM through the AWS SDK.
pub struct AwsSecretValues {
    secrets: aws_sdk_secretsmanager::Client,
    ssm: aws_sdk_ssm::Client,
}

impl AwsSecretValues {
    /// Clients from `config` (its credentials and endpoint; the region comes from each ARN).
    pub fn new(config: &SdkConfig) -> Self {
        Self {
            secrets: aws_sdk_secretsmanager::Client::new(config),
            ssm: aws_sdk_ssm::Client::new(config),
        }
    }
}

#[async_trait]
impl SecretValues for AwsSecretValues {
    async fn value(&self, arn: &str) -> Result<String, String> {
        match SecretRef::parse(arn)? {
            SecretRef::SecretsManager { region } => {
                let out = self
                    .secrets
                    .get_secret_value()
                    .secret_id(arn)
                    .customize()
                    .config_override(
                        aws_sdk_secretsmanager::config::Builder::default()
                            .region(Region::new(region)),
                    )
                    .send()
                    .await
                    .map_err(|e| {
                        format!(
                            "GetSecretValue failed: {}",
                            aws_sdk_secretsmanager::error::DisplayErrorContext(&e)
                        )
                    })?;
                out.secret_string
                    .ok_or_else(|| "the secret has no string value".to_string())
            }
            SecretRef::Parameter { region, name } => {
                let out = self
                    .ssm
                    .get_parameter()
                    .name(name)
                    .with_decryption(true)
                    .customize()
                    .config_override(
                        aws_sdk_ssm::config::Builder::default().region(Region::new(region)),
                    )
                    .send()
                    .await
                    .map_err(|e| {
                        format!(
                            "GetParameter failed: {}",
                            aws_sdk_ssm::error::DisplayErrorContext(&e)
                        )
                    })?;
                out.parameter
                    .and_then(|p| p.value)
                    .ok_or_else(|| "the parameter has no value".to_string())
            }
        }
    }
}

/// Fixed values by ARN, for tests.
#[derive(Debug, Default, Clone)]
pub struct StaticSecretValues(pub HashMap<String, String>);

#[async_trait]
impl SecretValues for StaticSecretValues {
    async fn value(&self, arn: &str) -> Result<String, String> {
        self.0
            .get(arn)
            .cloned()
            .ok_or_else(|| format!("no secret {arn}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arns_name_a_secret_or_a_parameter() {
        assert_eq!(
            SecretRef::parse("arn:aws:secretsmanager:eu-west-1:123456789012:secret:db-AbCdEf"),
            Ok(SecretRef::SecretsManager {
                region: "eu-west-1".into()
            })
        );
        assert_eq!(
            SecretRef::parse("arn:aws:ssm:us-east-1:123456789012:parameter/acme/db"),
            Ok(SecretRef::Parameter {
                region: "us-east-1".into(),
                name: "/acme/db".into()
            })
        );
        assert_eq!(
            SecretRef::parse("arn:aws:ssm:us-east-1:123456789012:parameter/plain"),
            Ok(SecretRef::Parameter {
                region: "us-east-1".into(),
                name: "plain".into()
            })
        );
        for bad in [
            "hunter2",
            "arn:aws:s3:::bucket",
            "arn:aws:ssm:us-east-1:1:document/x",
            "arn:aws:secretsmanager::1:secret:x",
        ] {
            assert!(SecretRef::parse(bad).is_err(), "{bad}");
        }
    }
}
