//! The app's key and JWT, and the bounded cache of installation tokens.

use std::collections::HashMap;

use base64::Engine;
use chrono::{DateTime, Duration as ChronoDuration, Utc};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde::Serialize;

use crate::{GithubError, InstallationToken, Permissions, RepoRef};

/// How far in the past a JWT's `iat` is set. GitHub: "To protect against clock drift, we
/// recommend that you set this 60 seconds in the past"
/// (<https://docs.github.com/en/apps/creating-github-apps/authenticating-with-a-github-app/generating-a-json-web-token-jwt-for-a-github-app>).
pub(crate) const JWT_BACKDATE_SECS: i64 = 60;
/// A JWT's lifetime from its `iat`. GitHub: `exp` "must be no more than 10 minutes into the
/// future" (same page); ten minutes after a back-dated `iat` is nine from now.
pub(crate) const JWT_LIFETIME_SECS: i64 = 600;
/// A cached installation token is used until this long before its `expires_at`.
pub(crate) const TOKEN_REFRESH_MARGIN_SECS: i64 = 5 * 60;
/// The most installation tokens kept: one per (repository, permissions) in use.
pub(crate) const MAX_CACHED_TOKENS: usize = 512;
/// The most repositories whose installation id is kept.
pub(crate) const MAX_CACHED_INSTALLATIONS: usize = 1024;

/// The app's RSA private key, as PKCS#1 DER (what jsonwebtoken's aws-lc-rs signer takes).
#[derive(Clone)]
pub(crate) struct AppKey {
    key: EncodingKey,
}

impl AppKey {
    /// Reads a PEM key: `RSA PRIVATE KEY` (PKCS#1, as GitHub generates it) or `PRIVATE KEY`
    /// (PKCS#8 holding an RSA key). Errors never quote the key.
    pub(crate) fn from_pem(pem: &str) -> Result<Self, GithubError> {
        let (label, der) = pem_block(pem)?;
        let pkcs1 = match label.as_str() {
            "RSA PRIVATE KEY" => der,
            "PRIVATE KEY" => pkcs8_rsa_key(&der)?,
            other => {
                let expected = r#"expected "RSA PRIVATE KEY" or "PRIVATE KEY""#;
                return Err(GithubError::InvalidKey(format!(
                    "a PEM block labelled {other:?}; {expected}"
                )));
            }
        };
        let key = Self {
            key: EncodingKey::from_rsa_der(&pkcs1),
        };
        // Sign once now so that a key aws-lc-rs refuses fails here, not at the first call.
        key.sign(1, Utc::now())
            .map_err(|_| GithubError::InvalidKey("not a usable RSA private key".into()))?;
        Ok(key)
    }

    /// An RS256 JWT for app `app_id`: `iat` 60 s before `now`, `exp` ten minutes after
    /// `iat`, `iss` the app id.
    pub(crate) fn sign(&self, app_id: u64, now: DateTime<Utc>) -> Result<String, GithubError> {
        #[derive(Serialize)]
        struct Claims {
            iat: i64,
            exp: i64,
            iss: String,
        }
        let iat = now.timestamp() - JWT_BACKDATE_SECS;
        let claims = Claims {
            iat,
            exp: iat + JWT_LIFETIME_SECS,
            iss: app_id.to_string(),
        };
        install_crypto_provider();
        jsonwebtoken::encode(&Header::new(Algorithm::RS256), &claims, &self.key)
            .map_err(|e| GithubError::Jwt(e.to_string()))
    }
}

/// jsonwebtoken picks aws-lc-rs from its features; installing it explicitly keeps that
/// true should another crate of the build enable a second backend (as sortie-api does).
fn install_crypto_provider() {
    let _ = jsonwebtoken::crypto::aws_lc::DEFAULT_PROVIDER.install_default();
}

/// The one PEM block of `pem`: its label and its decoded bytes.
fn pem_block(pem: &str) -> Result<(String, Vec<u8>), GithubError> {
    let bad = |why: &str| GithubError::InvalidKey(why.to_string());
    let text = pem.trim();
    let rest = text
        .strip_prefix("-----BEGIN ")
        .ok_or_else(|| bad("not PEM: no -----BEGIN line"))?;
    let (label, rest) = rest
        .split_once("-----")
        .ok_or_else(|| bad("not PEM: the BEGIN line does not end"))?;
    let end = format!("-----END {label}-----");
    let body = rest
        .trim_end()
        .strip_suffix(end.as_str())
        .ok_or_else(|| bad("not PEM: no matching -----END line"))?;
    let b64: String = body.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    let der = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|_| bad("not PEM: the body is not base64"))?;
    Ok((label.to_string(), der))
}

/// One DER element: tag, contents and what follows. Lengths of up to four bytes.
fn der_element(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |acc, &b| (acc << 8) | usize::from(b));
        (len, &rest[n..])
    };
    if rest.len() < len {
        return None;
    }
    Some((tag, &rest[..len], &rest[len..]))
}

/// The rsaEncryption OID, 1.2.840.113549.1.1.1, DER-encoded.
const RSA_ENCRYPTION_OID: [u8; 11] = [
    0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01,
];

/// The PKCS#1 `RSAPrivateKey` inside a PKCS#8 `PrivateKeyInfo` (RFC 5208: a SEQUENCE of
/// version, algorithm identifier and an OCTET STRING holding the key).
fn pkcs8_rsa_key(der: &[u8]) -> Result<Vec<u8>, GithubError> {
    let bad = || GithubError::InvalidKey("not a PKCS#8 RSA private key".into());
    let (0x30, info, _) = der_element(der).ok_or_else(bad)? else {
        return Err(bad());
    };
    let (0x02, _version, rest) = der_element(info).ok_or_else(bad)? else {
        return Err(bad());
    };
    let (0x30, algorithm, rest) = der_element(rest).ok_or_else(bad)? else {
        return Err(bad());
    };
    if !algorithm.starts_with(&RSA_ENCRYPTION_OID) {
        return Err(GithubError::InvalidKey(
            "a PKCS#8 key that is not RSA (GitHub Apps use RSA keys)".into(),
        ));
    }
    let (0x04, key, _) = der_element(rest).ok_or_else(bad)? else {
        return Err(bad());
    };
    Ok(key.to_vec())
}

/// Installation tokens by (repository, permissions), and installation ids by repository;
/// both bounded.
#[derive(Default)]
pub(crate) struct TokenCache {
    tokens: HashMap<(RepoRef, Permissions), InstallationToken>,
    installations: HashMap<RepoRef, u64>,
}

impl TokenCache {
    /// The cached token for `key`, while it is valid for longer than the refresh margin.
    pub(crate) fn token(
        &self,
        repo: &RepoRef,
        permissions: &Permissions,
        now: DateTime<Utc>,
    ) -> Option<InstallationToken> {
        self.tokens
            .get(&(repo.clone(), *permissions))
            .filter(|t| t.expires_at - ChronoDuration::seconds(TOKEN_REFRESH_MARGIN_SECS) > now)
            .cloned()
    }

    /// Keeps `token`; at the bound, first drops tokens past their refresh margin, then the
    /// one that expires soonest.
    pub(crate) fn keep_token(
        &mut self,
        repo: &RepoRef,
        permissions: &Permissions,
        token: InstallationToken,
        now: DateTime<Utc>,
    ) {
        let key = (repo.clone(), *permissions);
        if !self.tokens.contains_key(&key) && self.tokens.len() >= MAX_CACHED_TOKENS {
            let margin = ChronoDuration::seconds(TOKEN_REFRESH_MARGIN_SECS);
            self.tokens.retain(|_, t| t.expires_at - margin > now);
            if self.tokens.len() >= MAX_CACHED_TOKENS {
                if let Some(soonest) = self
                    .tokens
                    .iter()
                    .min_by_key(|(_, t)| t.expires_at)
                    .map(|(k, _)| k.clone())
                {
                    self.tokens.remove(&soonest);
                }
            }
        }
        self.tokens.insert(key, token);
    }

    /// Forgets the token for `key` (GitHub refused it).
    pub(crate) fn forget_token(&mut self, repo: &RepoRef, permissions: &Permissions) {
        self.tokens.remove(&(repo.clone(), *permissions));
    }

    /// How many tokens are kept.
    #[cfg(test)]
    pub(crate) fn token_count(&self) -> usize {
        self.tokens.len()
    }

    /// The installation id of `repo`, if known.
    pub(crate) fn installation(&self, repo: &RepoRef) -> Option<u64> {
        self.installations.get(repo).copied()
    }

    /// Keeps `repo`'s installation id; at the bound, forgets them all first (they are one
    /// JWT call each to find again).
    pub(crate) fn keep_installation(&mut self, repo: &RepoRef, id: u64) {
        if self.installations.len() >= MAX_CACHED_INSTALLATIONS {
            self.installations.clear();
        }
        self.installations.insert(repo.clone(), id);
    }

    /// Forgets `repo`'s installation id (the app was uninstalled or moved).
    pub(crate) fn forget_installation(&mut self, repo: &RepoRef) {
        self.installations.remove(repo);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn token(secs_left: i64, now: DateTime<Utc>) -> InstallationToken {
        InstallationToken {
            token: format!("t{secs_left}"),
            expires_at: now + ChronoDuration::seconds(secs_left),
        }
    }

    #[test]
    fn a_token_is_used_until_five_minutes_before_it_expires() {
        let now = Utc::now();
        let repo = RepoRef::parse("a/b").unwrap();
        let mut cache = TokenCache::default();
        cache.keep_token(&repo, &Permissions::PULLS_READ, token(301, now), now);
        assert!(cache.token(&repo, &Permissions::PULLS_READ, now).is_some());
        assert!(cache
            .token(&repo, &Permissions::CHECKS_WRITE, now)
            .is_none());
        let later = now + ChronoDuration::seconds(2);
        assert!(cache
            .token(&repo, &Permissions::PULLS_READ, later)
            .is_none());
    }

    #[test]
    fn the_cache_is_bounded_and_drops_the_soonest_to_expire() {
        let now = Utc::now();
        let mut cache = TokenCache::default();
        for i in 0..MAX_CACHED_TOKENS + 10 {
            let repo = RepoRef::parse(&format!("o/r{i}")).unwrap();
            cache.keep_token(
                &repo,
                &Permissions::PULLS_READ,
                token(3600 + i as i64, now),
                now,
            );
        }
        assert_eq!(cache.token_count(), MAX_CACHED_TOKENS);
        let first = RepoRef::parse("o/r0").unwrap();
        let last = RepoRef::parse(&format!("o/r{}", MAX_CACHED_TOKENS + 9)).unwrap();
        assert!(cache.token(&first, &Permissions::PULLS_READ, now).is_none());
        assert!(cache.token(&last, &Permissions::PULLS_READ, now).is_some());
    }

    #[test]
    fn a_pem_that_is_not_a_key_is_refused_without_quoting_it() {
        for pem in [
            "not pem at all",
            "-----BEGIN RSA PRIVATE KEY-----\nc2VjcmV0c2VjcmV0\n-----END RSA PRIVATE KEY-----",
            "-----BEGIN PRIVATE KEY-----\nc2VjcmV0c2VjcmV0\n-----END PRIVATE KEY-----",
            "-----BEGIN CERTIFICATE-----\nc2VjcmV0\n-----END CERTIFICATE-----",
            "-----BEGIN RSA PRIVATE KEY-----\n!!!\n-----END RSA PRIVATE KEY-----",
        ] {
            let err = AppKey::from_pem(pem).err().expect("refused").to_string();
            assert!(!err.contains("c2VjcmV0"), "{err}");
            assert!(err.starts_with("the GitHub App private key"), "{err}");
        }
    }

    proptest! {
        #[test]
        fn der_reading_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = der_element(&bytes);
            let _ = pkcs8_rsa_key(&bytes);
        }
    }
}
