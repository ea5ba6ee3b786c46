//! Sortie as an OIDC issuer: a job identity token per job and phase, signed by a KMS key,
//! and the keys a cloud verifies it with (the JWKS behind the discovery document).
//!
//! Two KMS aliases name the keys. The **signing key** signs every token; the **standby
//! key**, when its alias exists, is published beside it. A key is rolled with no job
//! failing: point the standby alias at the new key (it is published), then swap the two
//! aliases (the new key signs, the old one still verifies the tokens it signed, which live
//! at most an hour). The keys are read from KMS at most once per [`KEYS_TTL`] per
//! instance; a signature is always made by the key whose `kid` the header names, even if
//! an alias moves in between.
//!
//! The token is never logged, stored or put in an event or an error.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use sortie_core::identity::{
    compact, discovery_document, jose_signature, jwk_from_spki, phase_refusal, signing_input,
    JobFacts, JobIdentityClaims, Jwk, Jwks, JwtHeader, Phase,
};
use sortie_core::protocol::pilot::IdentityToken;
use sortie_core::Job;
use sortie_launch::kms::{Kms, KmsError, ECC_NIST_P256, SIGN_VERIFY};

/// How long an instance uses the keys it read from KMS before reading them again, unless
/// configured otherwise ([`IssuerConfig::keys_ttl`]).
pub const KEYS_TTL: Duration = Duration::from_secs(60);

/// What the issuer is: its URL and its keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuerConfig {
    /// The `iss` of every token: the API's public URL, under which
    /// `/.well-known/openid-configuration` is served.
    pub url: String,
    /// The KMS key (an alias, as a rule) that signs.
    pub signing_key: String,
    /// A KMS key (an alias) published beside the signing key, while one rolls in or out.
    pub standby_key: Option<String>,
    /// How long a token lives (at most an hour).
    pub lifetime: chrono::Duration,
    /// How long the keys read from KMS are used before they are read again ([`KEYS_TTL`]).
    pub keys_ttl: Duration,
}

/// Why no token (or no key) was given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IssuerError {
    /// This job may not have the token asked for: its runner has no identity, or its task
    /// has no such phase.
    #[error("{0}")]
    Refused(String),
    /// KMS failed, or its key is not one that can sign ES256 tokens.
    #[error("{0}")]
    Unavailable(String),
}

/// One published key: KMS's id of it and its JWK.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Published {
    key_id: String,
    jwk: Jwk,
}

type KeyCache = Arc<Mutex<Option<(Instant, Arc<Vec<Published>>)>>>;

/// Mints job identity tokens and publishes their keys.
#[derive(Clone)]
pub struct Issuer {
    kms: Arc<dyn Kms>,
    config: IssuerConfig,
    keys: KeyCache,
}

impl Issuer {
    /// An issuer over `kms`, as `config` says.
    pub fn new(kms: Arc<dyn Kms>, config: IssuerConfig) -> Self {
        Self {
            kms,
            config,
            keys: Default::default(),
        }
    }

    /// The issuer's URL, its tokens' `iss`.
    pub fn url(&self) -> &str {
        self.config.url.trim_end_matches('/')
    }

    /// The OIDC discovery document.
    pub fn discovery(&self) -> sortie_core::identity::DiscoveryDocument {
        discovery_document(self.url())
    }

    /// The JWKS: the signing key first, then the standby key.
    pub async fn jwks(&self) -> Result<Jwks, IssuerError> {
        Ok(Jwks {
            keys: self.keys().await?.iter().map(|k| k.jwk.clone()).collect(),
        })
    }

    /// A token for `job`'s `phase`, issued at `now`.
    pub async fn mint(
        &self,
        job: &Job,
        phase: Phase,
        now: DateTime<Utc>,
    ) -> Result<IdentityToken, IssuerError> {
        let identity = job
            .runner_spec
            .as_ref()
            .and_then(|r| r.identity.as_ref())
            .ok_or_else(|| {
                IssuerError::Refused(format!(
                    "runner `{}` has no identity block: its jobs act with the runner's own credentials",
                    job.runner_id
                ))
            })?;
        if let Some(reason) = phase_refusal(job.request.operation, job.phase(), phase) {
            return Err(IssuerError::Refused(reason));
        }
        let facts = JobFacts {
            job_id: job.id.as_str(),
            environment: &job.environment,
            operation: job.request.operation,
            requested_by: &job.requested_by,
        };
        let claims = JobIdentityClaims::new(
            self.url(),
            &identity.audience,
            &facts,
            phase,
            now,
            self.config.lifetime,
        )
        .map_err(|e| IssuerError::Unavailable(format!("no token can be made: {e}")))?;
        let keys = self.keys().await?;
        let key = keys
            .first()
            .ok_or_else(|| IssuerError::Unavailable("the issuer has no signing key".into()))?;
        let input = signing_input(&JwtHeader::es256(&key.jwk.kid), &claims);
        let der = self
            .kms
            .sign(&key.key_id, input.as_bytes())
            .await
            .map_err(|e| IssuerError::Unavailable(e.to_string()))?;
        let signature = jose_signature(&der).map_err(|e| {
            IssuerError::Unavailable(format!(
                "KMS's signature by `{}` is unusable: {e}",
                self.config.signing_key
            ))
        })?;
        Ok(IdentityToken {
            token: compact(&input, &signature),
            expires_at: DateTime::from_timestamp(claims.exp, 0).unwrap_or(now),
        })
    }

    /// The published keys, the signing key first: from the cache while it is younger than
    /// [`IssuerConfig::keys_ttl`], else read from KMS.
    async fn keys(&self) -> Result<Arc<Vec<Published>>, IssuerError> {
        if let Some((at, keys)) = self.keys.lock().expect("issuer key cache").as_ref() {
            if at.elapsed() < self.config.keys_ttl {
                return Ok(keys.clone());
            }
        }
        let mut keys =
            vec![self
                .read_key(&self.config.signing_key)
                .await
                .map_err(|e| match e {
                    KmsError::NotFound(_) => IssuerError::Unavailable(format!(
                        "the signing key `{}` does not exist in KMS",
                        self.config.signing_key
                    )),
                    other => IssuerError::Unavailable(other.to_string()),
                })?];
        if let Some(standby) = &self.config.standby_key {
            match self.read_key(standby).await {
                Ok(key) if key.jwk.kid != keys[0].jwk.kid => keys.push(key),
                Ok(_) | Err(KmsError::NotFound(_)) => {}
                Err(other) => return Err(IssuerError::Unavailable(other.to_string())),
            }
        }
        let keys = Arc::new(keys);
        *self.keys.lock().expect("issuer key cache") = Some((Instant::now(), keys.clone()));
        Ok(keys)
    }

    async fn read_key(&self, key: &str) -> Result<Published, KmsError> {
        let public = self.kms.public_key(key).await?;
        if public.key_spec != ECC_NIST_P256 || public.key_usage != SIGN_VERIFY {
            return Err(KmsError::Failed(format!(
                "KMS key `{key}` is {} for {}: job identity tokens are signed by an {ECC_NIST_P256} key for {SIGN_VERIFY} (ES256)",
                public.key_spec, public.key_usage
            )));
        }
        let jwk = jwk_from_spki(&public.spki)
            .map_err(|e| KmsError::Failed(format!("KMS key `{key}`'s public key: {e}")))?;
        Ok(Published {
            key_id: public.key_id,
            jwk,
        })
    }
}

#[cfg(test)]
#[path = "issuer_tests.rs"]
mod tests;
