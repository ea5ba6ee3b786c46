//! KMS behind one small trait, for Sortie as an OIDC issuer: the public key of an
//! asymmetric signing key (`GetPublicKey`) and a signature made by it (`Sign`). The private
//! key never leaves KMS.
//!
//! [`AwsKms`] calls KMS with the function's own credentials; [`MemoryKms`] is the in-memory
//! fake for fast tests, strict where KMS is: a key or alias that does not exist answers
//! "not found", a key that is not `SIGN_VERIFY` is refused, and a RAW message longer than
//! [`MAX_RAW_MESSAGE`] bytes is refused as KMS refuses it
//! (<https://docs.aws.amazon.com/kms/latest/APIReference/API_Sign.html>).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use aws_config::SdkConfig;
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_ASN1_SIGNING};

/// The longest message KMS signs with `MessageType` RAW: 4,096 bytes.
pub const MAX_RAW_MESSAGE: usize = 4096;

/// The key spec of a P-256 signing key.
pub const ECC_NIST_P256: &str = "ECC_NIST_P256";

/// The key usage of a signing key.
pub const SIGN_VERIFY: &str = "SIGN_VERIFY";

/// A public key as `GetPublicKey` answers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicKey {
    /// The key's id (its ARN on AWS), which `Sign` is then called with: a signature is made
    /// by the key whose public key was read, even if an alias moves in between.
    pub key_id: String,
    /// The DER SubjectPublicKeyInfo.
    pub spki: Vec<u8>,
    /// `ECC_NIST_P256`, `RSA_2048`, ...
    pub key_spec: String,
    /// `SIGN_VERIFY` or `ENCRYPT_DECRYPT`.
    pub key_usage: String,
}

/// Why a KMS call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KmsError {
    /// No such key or alias.
    #[error("KMS key `{0}` does not exist")]
    NotFound(String),
    /// KMS refused the call or could not be reached; the message quotes KMS.
    #[error("{0}")]
    Failed(String),
}

/// KMS's signing calls.
#[async_trait]
pub trait Kms: Send + Sync {
    /// The public key of `key` (a key id, key ARN, alias name or alias ARN).
    async fn public_key(&self, key: &str) -> Result<PublicKey, KmsError>;
    /// KMS's DER `ECDSA-Sig-Value` of `message` (RAW, `ECDSA_SHA_256`) by `key_id`.
    async fn sign(&self, key_id: &str, message: &[u8]) -> Result<Vec<u8>, KmsError>;
}

/// [`Kms`] on AWS.
#[derive(Clone)]
pub struct AwsKms {
    client: aws_sdk_kms::Client,
}

impl AwsKms {
    /// KMS with `config`'s credentials, region and endpoint.
    pub fn new(config: &SdkConfig) -> Self {
        Self {
            client: aws_sdk_kms::Client::new(config),
        }
    }
}

fn kms_failure<E, R>(call: &str, key: &str, e: aws_sdk_kms::error::SdkError<E, R>) -> KmsError
where
    E: aws_sdk_kms::error::ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    use aws_sdk_kms::error::ProvideErrorMetadata;
    if e.code() == Some("NotFoundException") {
        return KmsError::NotFound(key.to_string());
    }
    KmsError::Failed(format!(
        "KMS {call} of `{key}` failed: {}",
        aws_sdk_kms::error::DisplayErrorContext(&e)
    ))
}

#[async_trait]
impl Kms for AwsKms {
    async fn public_key(&self, key: &str) -> Result<PublicKey, KmsError> {
        let out = self
            .client
            .get_public_key()
            .key_id(key)
            .send()
            .await
            .map_err(|e| kms_failure("GetPublicKey", key, e))?;
        let spki = out
            .public_key()
            .map(|b| b.as_ref().to_vec())
            .ok_or_else(|| {
                KmsError::Failed(format!("KMS GetPublicKey of `{key}` answered no key"))
            })?;
        // `KeySpec` replaced `CustomerMasterKeySpec`; both are answered by KMS.
        #[allow(deprecated)]
        let key_spec = out
            .key_spec()
            .map(|s| s.as_str().to_string())
            .or_else(|| {
                out.customer_master_key_spec()
                    .map(|s| s.as_str().to_string())
            })
            .unwrap_or_default();
        Ok(PublicKey {
            key_id: out.key_id().unwrap_or(key).to_string(),
            spki,
            key_spec,
            key_usage: out
                .key_usage()
                .map(|u| u.as_str().to_string())
                .unwrap_or_default(),
        })
    }

    async fn sign(&self, key_id: &str, message: &[u8]) -> Result<Vec<u8>, KmsError> {
        if message.len() > MAX_RAW_MESSAGE {
            return Err(too_long(message.len()));
        }
        let out = self
            .client
            .sign()
            .key_id(key_id)
            .message(aws_sdk_kms::primitives::Blob::new(message))
            .message_type(aws_sdk_kms::types::MessageType::Raw)
            .signing_algorithm(aws_sdk_kms::types::SigningAlgorithmSpec::EcdsaSha256)
            .send()
            .await
            .map_err(|e| kms_failure("Sign", key_id, e))?;
        out.signature().map(|b| b.as_ref().to_vec()).ok_or_else(|| {
            KmsError::Failed(format!("KMS Sign by `{key_id}` answered no signature"))
        })
    }
}

fn too_long(len: usize) -> KmsError {
    KmsError::Failed(format!(
        "KMS signs a RAW message of at most {MAX_RAW_MESSAGE} bytes; this one has {len}"
    ))
}

/// The in-memory [`Kms`]: P-256 keys made on the spot (aws-lc-rs, which signs in DER as KMS
/// does), and aliases that can be moved from key to key as `UpdateAlias` moves them.
#[derive(Clone, Default)]
pub struct MemoryKms {
    inner: Arc<Mutex<MemoryKeys>>,
}

#[derive(Default)]
struct MemoryKeys {
    keys: HashMap<String, Arc<EcdsaKeyPair>>,
    aliases: HashMap<String, String>,
    signatures: u64,
}

impl MemoryKms {
    /// A new P-256 signing key; its id.
    pub fn create_key(&self) -> String {
        let pair = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_ASN1_SIGNING)
            .expect("aws-lc-rs makes a P-256 key");
        let mut inner = self.inner.lock().expect("memory KMS lock");
        let id = format!(
            "arn:aws:kms:us-east-1:123456789012:key/{:08x}-0000-4000-8000-{:012x}",
            inner.keys.len() + 1,
            inner.keys.len() + 1
        );
        inner.keys.insert(id.clone(), Arc::new(pair));
        id
    }

    /// Points `alias` (`alias/<name>`) at `key_id`, creating it or moving it.
    pub fn set_alias(&self, alias: &str, key_id: &str) {
        let mut inner = self.inner.lock().expect("memory KMS lock");
        inner.aliases.insert(alias.to_string(), key_id.to_string());
    }

    /// How many signatures were made: a test reads how often KMS was called.
    pub fn signatures(&self) -> u64 {
        self.inner.lock().expect("memory KMS lock").signatures
    }

    fn pair(&self, key: &str) -> Result<(String, Arc<EcdsaKeyPair>), KmsError> {
        let inner = self.inner.lock().expect("memory KMS lock");
        let id = inner.aliases.get(key).map_or(key, String::as_str);
        inner
            .keys
            .get(id)
            .map(|pair| (id.to_string(), pair.clone()))
            .ok_or_else(|| KmsError::NotFound(key.to_string()))
    }
}

#[async_trait]
impl Kms for MemoryKms {
    async fn public_key(&self, key: &str) -> Result<PublicKey, KmsError> {
        let (key_id, pair) = self.pair(key)?;
        let spki = aws_lc_rs::encoding::AsDer::<aws_lc_rs::encoding::PublicKeyX509Der>::as_der(
            pair.public_key(),
        )
        .map_err(|_| KmsError::Failed("aws-lc-rs could not encode the public key".into()))?;
        Ok(PublicKey {
            key_id,
            spki: spki.as_ref().to_vec(),
            key_spec: ECC_NIST_P256.into(),
            key_usage: SIGN_VERIFY.into(),
        })
    }

    async fn sign(&self, key_id: &str, message: &[u8]) -> Result<Vec<u8>, KmsError> {
        if message.len() > MAX_RAW_MESSAGE {
            return Err(too_long(message.len()));
        }
        let (_, pair) = self.pair(key_id)?;
        let signature = pair
            .sign(&SystemRandom::new(), message)
            .map_err(|_| KmsError::Failed("aws-lc-rs could not sign".into()))?;
        self.inner.lock().expect("memory KMS lock").signatures += 1;
        Ok(signature.as_ref().to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_memory_kms_signs_in_der_by_alias_and_refuses_what_kms_refuses() {
        let kms = MemoryKms::default();
        let first = kms.create_key();
        let second = kms.create_key();
        kms.set_alias("alias/sortie-identity", &first);
        let key = kms.public_key("alias/sortie-identity").await.unwrap();
        assert_eq!(key.key_id, first);
        assert_eq!(key.key_spec, ECC_NIST_P256);
        let der = kms.sign(&key.key_id, b"header.claims").await.unwrap();
        assert_eq!(der[0], 0x30, "a DER SEQUENCE");
        // The signature verifies with the key's SubjectPublicKeyInfo.
        let point = &key.spki[key.spki.len() - 65..];
        aws_lc_rs::signature::UnparsedPublicKey::new(
            &aws_lc_rs::signature::ECDSA_P256_SHA256_ASN1,
            point,
        )
        .verify(b"header.claims", &der)
        .unwrap();
        kms.set_alias("alias/sortie-identity", &second);
        assert_eq!(
            kms.public_key("alias/sortie-identity")
                .await
                .unwrap()
                .key_id,
            second
        );
        assert_eq!(
            kms.public_key("alias/nothing").await,
            Err(KmsError::NotFound("alias/nothing".into()))
        );
        let long = vec![b'a'; MAX_RAW_MESSAGE + 1];
        assert!(
            matches!(kms.sign(&first, &long).await, Err(KmsError::Failed(m)) if m.contains("4096"))
        );
        assert_eq!(kms.signatures(), 1);
    }
}
