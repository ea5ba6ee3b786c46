//! OIDC ID tokens verified by the API itself: agents of an agent pool authenticate with
//! their platform's token (an EKS projected service-account token, say), whose issuer is
//! per tenant, so API Gateway's JWT authorizer, configured with fixed issuers, cannot
//! verify it.
//!
//! [`JwksVerifier`] finds the issuer's keys by OIDC discovery
//! (`{issuer}/.well-known/openid-configuration` → `jwks_uri`), caches them per issuer for
//! [`KEYS_TTL`], and checks the signature (RS256 or ES256 only), `iss`, `aud`, `exp`,
//! `nbf` and `iat` with [`LEEWAY_SECONDS`] of clock skew. Key rotation: a token signed
//! by a key id the cache does not know makes it fetch the keys again, at most once per
//! [`REFETCH_INTERVAL`] per issuer, so tokens with made-up key ids cannot make the API
//! hammer an issuer.
//!
//! The token itself is never logged and never part of an error message.
//!
//! The `issuer` a token is verified against must come from trusted configuration (the
//! agent pool's), never from the token: the verifier fetches from the issuer's URL.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use http_body_util::{BodyExt, Empty, Limited};
use hyper::body::Bytes;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;
use serde_json::Value;

/// The claims of a verified token, every one of them.
pub type Claims = BTreeMap<String, Value>;

/// How long an issuer's keys are used before they are fetched again.
pub const KEYS_TTL: Duration = Duration::from_secs(600);
/// The shortest time between two fetches caused by an unknown key id, per issuer.
pub const REFETCH_INTERVAL: Duration = Duration::from_secs(30);
/// How long one fetch (discovery document or JWKS) may take, connection included.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest discovery document or JWKS read: 256 KiB.
pub const MAX_DOCUMENT_BYTES: usize = 256 * 1024;
/// Clock skew allowed on `exp`, `nbf` and `iat`, in seconds.
pub const LEEWAY_SECONDS: u64 = 60;
/// The longest token looked at; longer ones are refused unread.
const MAX_TOKEN_BYTES: usize = 16 * 1024;
/// How long the TCP connection to an issuer may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The CA bundle of Lambda's Amazon Linux runtimes.
const LAMBDA_CA_BUNDLE: &str = "/etc/pki/tls/certs/ca-bundle.crt";
/// The CA bundle of Debian and Ubuntu.
const DEBIAN_CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// Verifies OIDC ID tokens (JWTs) against their issuer's published keys.
#[async_trait::async_trait]
pub trait OidcVerifier: Send + Sync {
    /// Verifies `token`: signature by a key of `issuer`'s JWKS (found by OIDC discovery,
    /// `{issuer}/.well-known/openid-configuration` → `jwks_uri`), `iss == issuer`,
    /// `aud` contains `audience`, `exp` in the future and `nbf`/`iat` not in the future
    /// (60 s leeway). Returns every claim.
    async fn verify(&self, token: &str, issuer: &str, audience: &str) -> Result<Claims, OidcError>;
}

/// Why a token was not verified.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OidcError {
    /// The token is bad: malformed, unsupported algorithm, unknown key, bad signature,
    /// wrong issuer or audience, expired or not yet valid. The message never contains
    /// the token.
    #[error("the token is refused: {0}")]
    Invalid(String),
    /// The issuer's keys could not be fetched (unreachable, a timeout, an error status,
    /// an unusable document): nothing is known about the token.
    #[error("the issuer's keys are unavailable: {0}")]
    Unavailable(String),
}

/// A verifier that refuses every token (for wiring that has no OIDC).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoOidc;

#[async_trait::async_trait]
impl OidcVerifier for NoOidc {
    async fn verify(
        &self,
        _token: &str,
        _issuer: &str,
        _audience: &str,
    ) -> Result<Claims, OidcError> {
        Err(OidcError::Invalid(
            "this deployment verifies no OIDC tokens".into(),
        ))
    }
}

type HttpsClient = Client<HttpsConnector<HttpConnector>, Empty<Bytes>>;

/// The real verifier: fetches discovery documents and JWKS over HTTPS (plain http only to
/// a loopback host, for tests), caches each issuer's keys for [`KEYS_TTL`], refetches once on
/// an unknown `kid` (key rotation) but at most once per [`REFETCH_INTERVAL`] per issuer,
/// and bounds each fetch with [`FETCH_TIMEOUT`] and [`MAX_DOCUMENT_BYTES`].
///
/// Constructing one is cheap: the HTTPS client and its trusted roots (`SSL_CERT_FILE`,
/// else the Amazon Linux or Debian CA bundle, else the platform's store) are made at the
/// first fetch.
pub struct JwksVerifier {
    http: OnceLock<HttpsClient>,
    issuers: Mutex<HashMap<String, Arc<tokio::sync::Mutex<IssuerKeys>>>>,
}

impl std::fmt::Debug for JwksVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let issuers: Vec<String> = match self.issuers.lock() {
            Ok(map) => map.keys().cloned().collect(),
            Err(_) => Vec::new(),
        };
        f.debug_struct("JwksVerifier")
            .field("issuers", &issuers)
            .finish_non_exhaustive()
    }
}

impl Default for JwksVerifier {
    fn default() -> Self {
        Self::new()
    }
}

/// One issuer's cache entry.
#[derive(Default)]
struct IssuerKeys {
    /// The keys of the last successful fetch, and when it was.
    keys: Option<(Arc<Vec<PublicKey>>, Instant)>,
    /// When an unknown key id last caused a fetch.
    refetched_for_kid: Option<Instant>,
}

/// One usable key of a JWKS.
struct PublicKey {
    kid: Option<String>,
    alg: Algorithm,
    key: DecodingKey,
}

/// What the token's header says, before anything is verified.
struct TokenHeader {
    alg: Algorithm,
    kid: Option<String>,
}

impl JwksVerifier {
    /// A verifier with an empty cache. Makes no network call and reads no file.
    pub fn new() -> Self {
        // jsonwebtoken picks aws-lc-rs from its features; installing it explicitly keeps
        // that true should another crate of the build ever enable a second backend.
        let _ = jsonwebtoken::crypto::aws_lc::DEFAULT_PROVIDER.install_default();
        Self {
            http: OnceLock::new(),
            issuers: Mutex::new(HashMap::new()),
        }
    }

    /// The keys of `issuer` a token with key id `kid` needs: the cached ones while fresh,
    /// else fetched; fetched again once when `kid` is unknown, if the last such refetch
    /// is at least [`REFETCH_INTERVAL`] old.
    async fn keys(
        &self,
        issuer: &str,
        kid: Option<&str>,
    ) -> Result<Arc<Vec<PublicKey>>, OidcError> {
        let entry = {
            let mut map = self.issuers.lock().unwrap_or_else(|p| p.into_inner());
            Arc::clone(map.entry(issuer.to_string()).or_default())
        };
        // One fetch at a time per issuer: concurrent verifies wait for it and share it.
        let mut cached = entry.lock().await;
        let now = Instant::now();
        let (keys, fetched_now) = match &cached.keys {
            Some((keys, at)) if now.duration_since(*at) < KEYS_TTL => (Arc::clone(keys), false),
            _ => {
                let keys = Arc::new(self.fetch_keys(issuer).await?);
                cached.keys = Some((Arc::clone(&keys), Instant::now()));
                (keys, true)
            }
        };
        let Some(kid) = kid else { return Ok(keys) };
        if fetched_now || keys.iter().any(|k| k.kid.as_deref() == Some(kid)) {
            return Ok(keys);
        }
        let may_refetch = cached
            .refetched_for_kid
            .is_none_or(|at| now.duration_since(at) >= REFETCH_INTERVAL);
        if !may_refetch {
            return Ok(keys);
        }
        cached.refetched_for_kid = Some(now);
        tracing::info!(
            issuer,
            "a token names an unknown key id: fetching the issuer's keys again"
        );
        let keys = Arc::new(self.fetch_keys(issuer).await?);
        cached.keys = Some((Arc::clone(&keys), Instant::now()));
        Ok(keys)
    }

    /// Discovery, then the JWKS: the issuer's usable keys.
    async fn fetch_keys(&self, issuer: &str) -> Result<Vec<PublicKey>, OidcError> {
        let result = async {
            let issuer_base = issuer.trim_end_matches('/');
            let discovery_url = format!("{issuer_base}/.well-known/openid-configuration");
            let discovery = self.get_json(&discovery_url).await?;
            let announced = discovery
                .get("issuer")
                .and_then(Value::as_str)
                .unwrap_or("");
            if announced.trim_end_matches('/') != issuer_base {
                return Err(format!(
                    "{discovery_url} announces the issuer `{announced}`, not `{issuer}`"
                ));
            }
            let jwks_uri = discovery
                .get("jwks_uri")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("{discovery_url} has no jwks_uri"))?;
            let jwks = self.get_json(jwks_uri).await?;
            let keys = usable_keys(&jwks).map_err(|e| format!("{jwks_uri}: {e}"))?;
            if keys.is_empty() {
                return Err(format!("{jwks_uri} holds no RS256 or ES256 signing key"));
            }
            Ok(keys)
        }
        .await;
        result.map_err(|e| {
            tracing::warn!(issuer, error = %e, "the issuer's keys could not be fetched");
            OidcError::Unavailable(e)
        })
    }

    /// GETs `url` (https, or http to a loopback host) as JSON, within [`FETCH_TIMEOUT`] and
    /// [`MAX_DOCUMENT_BYTES`].
    async fn get_json(&self, url: &str) -> Result<Value, String> {
        let uri = fetchable(url)?;
        let request = http::Request::get(uri)
            .header(http::header::ACCEPT, "application/json")
            .body(Empty::<Bytes>::new())
            .map_err(|e| format!("{url}: {e}"))?;
        let client = self.http.get_or_init(https_client);
        let exchange = async {
            let response = client
                .request(request)
                .await
                .map_err(|e| format!("could not fetch {url}: {}", sortie_http::error_chain(&e)))?;
            let status = response.status();
            if status != http::StatusCode::OK {
                return Err(format!("{url} answered {status}"));
            }
            let body = Limited::new(response.into_body(), MAX_DOCUMENT_BYTES)
                .collect()
                .await
                .map_err(|e| {
                    if e.is::<http_body_util::LengthLimitError>() {
                        format!("{url} answered more than {} KiB", MAX_DOCUMENT_BYTES / 1024)
                    } else {
                        format!("{url}: reading the answer: {e}")
                    }
                })?
                .to_bytes();
            serde_json::from_slice::<Value>(&body)
                .map_err(|e| format!("{url} did not answer JSON: {e}"))
        };
        tokio::time::timeout(FETCH_TIMEOUT, exchange)
            .await
            .map_err(|_| format!("{url} did not answer within {}s", FETCH_TIMEOUT.as_secs()))?
    }
}

#[async_trait::async_trait]
impl OidcVerifier for JwksVerifier {
    async fn verify(&self, token: &str, issuer: &str, audience: &str) -> Result<Claims, OidcError> {
        let header = token_header(token)?;
        let keys = self.keys(issuer, header.kid.as_deref()).await?;
        verify_with_keys(token, &header, &keys, issuer, audience)
    }
}

/// Parses the token's header: its algorithm must be RS256 or ES256.
fn token_header(token: &str) -> Result<TokenHeader, OidcError> {
    let invalid = |m: &str| OidcError::Invalid(m.to_string());
    if token.len() > MAX_TOKEN_BYTES {
        return Err(invalid("it is longer than 16 KiB"));
    }
    let mut parts = token.split('.');
    let (Some(encoded), Some(_), Some(_), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(invalid("it is not a JWT (three dot-separated parts)"));
    };
    let header: Value = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(encoded)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .filter(Value::is_object)
        .ok_or_else(|| invalid("its header is not base64url-encoded JSON"))?;
    if header.get("crit").is_some() {
        return Err(invalid(
            "its header has critical extensions (crit), which are not supported",
        ));
    }
    let alg = match header.get("alg").and_then(Value::as_str) {
        Some("RS256") => Algorithm::RS256,
        Some("ES256") => Algorithm::ES256,
        Some(other) => {
            return Err(OidcError::Invalid(format!(
                "its algorithm {} is not accepted: RS256 or ES256 only",
                shown(other)
            )))
        }
        None => return Err(invalid("its header names no algorithm (alg)")),
    };
    let kid = match header.get("kid") {
        None | Some(Value::Null) => None,
        Some(Value::String(kid)) => Some(kid.clone()),
        Some(_) => return Err(invalid("its key id (kid) is not a string")),
    };
    Ok(TokenHeader { alg, kid })
}

/// Verifies the token's signature with the key it names (or, without a key id, any
/// key of its algorithm), then its claims.
fn verify_with_keys(
    token: &str,
    header: &TokenHeader,
    keys: &[PublicKey],
    issuer: &str,
    audience: &str,
) -> Result<Claims, OidcError> {
    let candidates: Vec<&PublicKey> = match &header.kid {
        Some(kid) => {
            let named: Vec<&PublicKey> = keys
                .iter()
                .filter(|k| k.kid.as_deref() == Some(kid.as_str()))
                .collect();
            if named.is_empty() {
                return Err(OidcError::Invalid(format!(
                    "the issuer publishes no key {}",
                    shown(kid)
                )));
            }
            let of_alg: Vec<&PublicKey> =
                named.into_iter().filter(|k| k.alg == header.alg).collect();
            if of_alg.is_empty() {
                return Err(OidcError::Invalid(format!(
                    "the issuer's key {} is not an {:?} key",
                    shown(kid),
                    header.alg
                )));
            }
            of_alg
        }
        None => {
            let of_alg: Vec<&PublicKey> = keys.iter().filter(|k| k.alg == header.alg).collect();
            if of_alg.is_empty() {
                return Err(OidcError::Invalid(format!(
                    "it names no key (kid) and the issuer has no {:?} key",
                    header.alg
                )));
            }
            of_alg
        }
    };
    let mut validation = Validation::new(header.alg);
    validation.leeway = LEEWAY_SECONDS;
    validation.validate_exp = true;
    validation.validate_nbf = true;
    validation.validate_aud = true;
    validation.set_required_spec_claims(&["exp", "iss", "aud"]);
    validation.set_issuer(&[issuer]);
    validation.set_audience(&[audience]);
    let mut refusal = None;
    for key in candidates {
        match jsonwebtoken::decode::<Claims>(token, &key.key, &validation) {
            Ok(data) => {
                check_issued_at(&data.claims)?;
                return Ok(data.claims);
            }
            // Without a key id, another key of the issuer may have signed it.
            Err(e) if *e.kind() == ErrorKind::InvalidSignature => {
                refusal.get_or_insert_with(|| refused(&e, issuer, audience));
            }
            Err(e) => return Err(refused(&e, issuer, audience)),
        }
    }
    Err(refusal.unwrap_or_else(|| OidcError::Invalid("no key of the issuer verifies it".into())))
}

/// `iat`, when present, is a number not in the future (beyond the leeway).
fn check_issued_at(claims: &Claims) -> Result<(), OidcError> {
    let Some(iat) = claims.get("iat") else {
        return Ok(());
    };
    let Some(iat) = iat.as_f64() else {
        return Err(OidcError::Invalid("its `iat` claim is not a number".into()));
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    if iat > now + LEEWAY_SECONDS as f64 {
        return Err(OidcError::Invalid(
            "it was issued in the future (iat)".into(),
        ));
    }
    Ok(())
}

/// A validation error as an [`OidcError::Invalid`] in words of its own: none of
/// jsonwebtoken's texts, so nothing of the token.
fn refused(error: &jsonwebtoken::errors::Error, issuer: &str, audience: &str) -> OidcError {
    let message = match error.kind() {
        ErrorKind::InvalidSignature => {
            "its signature does not verify with the issuer's key".to_string()
        }
        ErrorKind::ExpiredSignature => "it has expired (exp)".to_string(),
        ErrorKind::ImmatureSignature => "it is not valid yet (nbf)".to_string(),
        ErrorKind::InvalidIssuer => format!("its issuer (iss) is not {issuer}"),
        ErrorKind::InvalidAudience => format!("its audience (aud) does not include {audience}"),
        ErrorKind::MissingRequiredClaim(claim) => format!("it has no {} claim", shown(claim)),
        ErrorKind::InvalidClaimFormat(claim) => format!("its {} claim is malformed", shown(claim)),
        ErrorKind::InvalidAlgorithm => "its algorithm does not match the issuer's key".to_string(),
        ErrorKind::InvalidRsaKey(_) | ErrorKind::InvalidEcdsaKey | ErrorKind::InvalidKeyFormat => {
            "the issuer's key cannot verify it".to_string()
        }
        _ => "it is not a well-formed JWT".to_string(),
    };
    OidcError::Invalid(message)
}

/// A value from the token, quoted when short and plain, else withheld: a message
/// never carries more of a token than a key id or an algorithm name.
fn shown(value: &str) -> String {
    let plain = value.len() <= 64
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'));
    if plain {
        format!("`{value}`")
    } else {
        "(not shown)".to_string()
    }
}

/// The RS256 and ES256 (P-256) signing keys of a JWKS; other keys are skipped.
fn usable_keys(jwks: &Value) -> Result<Vec<PublicKey>, String> {
    let listed = jwks
        .get("keys")
        .and_then(Value::as_array)
        .ok_or("the JWKS has no `keys` array")?;
    let text =
        |jwk: &Value, field: &str| jwk.get(field).and_then(Value::as_str).map(str::to_string);
    let mut keys = Vec::new();
    for jwk in listed {
        if text(jwk, "use").is_some_and(|u| u != "sig") {
            continue;
        }
        let declared = text(jwk, "alg");
        let parsed = match text(jwk, "kty").as_deref() {
            Some("RSA") if declared.as_deref().is_none_or(|a| a == "RS256") => {
                match (text(jwk, "n"), text(jwk, "e")) {
                    (Some(n), Some(e)) => DecodingKey::from_rsa_components(&n, &e)
                        .ok()
                        .map(|key| (Algorithm::RS256, key)),
                    _ => None,
                }
            }
            Some("EC")
                if text(jwk, "crv").as_deref() == Some("P-256")
                    && declared.as_deref().is_none_or(|a| a == "ES256") =>
            {
                match (text(jwk, "x"), text(jwk, "y")) {
                    (Some(x), Some(y)) => DecodingKey::from_ec_components(&x, &y)
                        .ok()
                        .map(|key| (Algorithm::ES256, key)),
                    _ => None,
                }
            }
            _ => None,
        };
        if let Some((alg, key)) = parsed {
            keys.push(PublicKey {
                kid: text(jwk, "kid"),
                alg,
                key,
            });
        }
    }
    Ok(keys)
}

/// `url` as a URI, if the verifier may fetch it: https, or plain http only to a loopback
/// host (tests), judged on the parsed host by [`sortie_core::urls::web_url`], the rule the
/// API applies to a pool's issuer; the discovery document's `jwks_uri` is held to it too.
fn fetchable(url: &str) -> Result<http::Uri, String> {
    let parsed = sortie_core::urls::web_url(url).map_err(|problem| {
        format!(
            "`{}` {problem} (the verifier fetches only https:// URLs, or plain http:// to a \
             loopback host)",
            url.escape_debug()
        )
    })?;
    parsed
        .as_str()
        .parse()
        .map_err(|_| format!("`{}` is not an https:// URL", url.escape_debug()))
}

/// The HTTPS client every fetch shares (rustls on aws-lc-rs, HTTP/1.1).
fn https_client() -> HttpsClient {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("aws-lc-rs supports rustls's default protocol versions")
        .with_root_certificates(trusted_roots())
        .with_no_client_auth();
    let mut connector = HttpConnector::new();
    connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
    connector.enforce_http(false);
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .wrap_connector(connector);
    Client::builder(TokioExecutor::new()).build(https)
}

/// The roots of one CA bundle, as the functions' AWS clients read them: `SSL_CERT_FILE`
/// when set, else Amazon Linux's, else Debian's; without any, the platform's store.
fn trusted_roots() -> rustls::RootCertStore {
    let mut roots = rustls::RootCertStore::empty();
    let bundles = std::env::var_os("SSL_CERT_FILE")
        .map(std::path::PathBuf::from)
        .into_iter()
        .chain([LAMBDA_CA_BUNDLE, DEBIAN_CA_BUNDLE].map(std::path::PathBuf::from));
    for bundle in bundles {
        if let Ok(pem) = std::fs::read(&bundle) {
            let (added, _) = roots.add_parsable_certificates(
                CertificateDer::pem_slice_iter(&pem).filter_map(Result::ok),
            );
            if added > 0 {
                return roots;
            }
        }
    }
    let native = rustls_native_certs::load_native_certs();
    roots.add_parsable_certificates(native.certs);
    if roots.is_empty() {
        tracing::warn!(
            "no trusted root certificates found: OIDC issuers cannot be reached over HTTPS"
        );
    }
    roots
}
