//! A job's own cloud identity (issue 45): Sortie as an OpenID Connect issuer.
//!
//! Each job gets short-lived identity tokens (JWTs signed with ES256 by a KMS key), one per
//! phase, whose `sub` names the organisation, the environment, the operation and the phase:
//! `org:<org>:env:<environment path>:op:<plan|apply|destroy>:phase:<plan|apply>`. A cloud's
//! trust policy matches on it, so a plan can be given a read-only role and only one
//! environment's apply its write role. The pilot writes the token to a file that only
//! Terraform's process reads, points the cloud's own SDK variables at it
//! ([`token_setup`]), and writes a fresh one before the old one is two-thirds through its
//! life ([`refresh_due`]), so an apply of several hours never meets an expired credential.
//!
//! Everything here is pure: the claims ([`JobIdentityClaims`]), the JWT's signing input
//! ([`signing_input`]), KMS's DER signature as JOSE's `r || s` ([`jose_signature`]), the
//! public key's JWK from KMS's SubjectPublicKeyInfo ([`jwk_from_spki`]), the discovery
//! document ([`discovery_document`]), and a runner's `identity` block
//! ([`RunnerIdentity`]). The KMS calls and the routes are the API's.

use std::fmt;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::job::Operation;
use crate::names::EnvPath;
/// A runner's `identity` block lives with the runner (`crate::runner::identity`): a job
/// imports runners, so the block cannot import jobs.
pub use crate::runner::identity::{
    audience_problem, AwsIdentity, AzureIdentity, GcpIdentity, RunnerIdentity, AUDIENCE_MAX,
};

/// The longest a job identity token lives: one hour (the pilot refreshes it long before).
pub const MAX_TOKEN_LIFETIME: Duration = Duration::hours(1);

/// The JWS algorithm of every token: ECDSA P-256 with SHA-256 (a KMS `ECC_NIST_P256` key,
/// signing with `ECDSA_SHA_256`).
pub const ALGORITHM: &str = "ES256";

/// The phase a token is for: a job's plan (every job has one) or its apply (an apply's or a
/// destroy's second phase). A cloud's trust policy can give each its own role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Reads only: `terraform plan`.
    Plan,
    /// Writes: `terraform apply` (of an apply's or a destroy's plan).
    Apply,
}

impl Phase {
    /// `plan` or `apply`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Plan => "plan",
            Self::Apply => "apply",
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a token, a signature or a key could not be made or read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdentityError {
    /// A plan job has no apply phase.
    #[error("a {operation} job has no apply phase")]
    NoApplyPhase {
        /// The job's operation.
        operation: String,
    },
    /// The issuer is not a URL a cloud could fetch the discovery document from.
    #[error("the issuer {issuer} {problem}")]
    Issuer {
        /// The issuer given.
        issuer: String,
        /// What is wrong with it.
        problem: String,
    },
    /// The audience is empty, too long or has control characters.
    #[error("the audience {problem}")]
    Audience {
        /// What is wrong with it.
        problem: String,
    },
    /// A lifetime of zero or less.
    #[error("a token must live longer than zero seconds")]
    Lifetime,
    /// KMS's signature is not a DER ECDSA P-256 signature.
    #[error("not a DER-encoded ECDSA P-256 signature: {0}")]
    Signature(&'static str),
    /// KMS's public key is not a P-256 SubjectPublicKeyInfo.
    #[error("not a DER-encoded P-256 public key (SubjectPublicKeyInfo): {0}")]
    PublicKey(&'static str),
}

/// What a job's token says about the job: the facts the claims are made of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobFacts<'a> {
    /// The job's id.
    pub job_id: &'a str,
    /// Its environment.
    pub environment: &'a EnvPath,
    /// Its operation.
    pub operation: Operation,
    /// Who asked for it.
    pub requested_by: &'a str,
}

/// `org:<org>:env:<environment path>:op:<operation>:phase:<phase>`, the `sub` a trust
/// policy matches (with `StringLike` on a prefix or an exact value).
pub fn subject(environment: &EnvPath, operation: Operation, phase: Phase) -> String {
    format!(
        "org:{}:env:{}:op:{}:phase:{}",
        environment.org(),
        environment,
        operation.as_str(),
        phase
    )
}

/// Why a task may not have a token for `phase`, if it may not: a plan job has no apply
/// phase, and the task that plans a reviewed apply or destroy (`task_phase` plan) gets no
/// apply token: that is minted only for the task that applies the approved plan. Every
/// task may have a plan token (the apply phase's `init` and refresh read too).
pub fn phase_refusal(
    operation: Operation,
    task_phase: Option<crate::JobPhase>,
    phase: Phase,
) -> Option<String> {
    if phase == Phase::Plan {
        return None;
    }
    if operation == Operation::Plan {
        return Some(format!(
            "a {} job has no apply phase: only a plan token is minted for it",
            operation.as_str()
        ));
    }
    (task_phase == Some(crate::JobPhase::Plan)).then(|| {
        "this task plans for review: the apply token is minted only for the task that \
         applies the approved plan"
            .to_string()
    })
}

/// The claims of one job identity token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobIdentityClaims {
    /// The issuer: the API's URL, where `/.well-known/openid-configuration` is served.
    pub iss: String,
    /// The audience: the runner's, as the cloud's trust expects it.
    pub aud: String,
    /// See [`subject`].
    pub sub: String,
    /// Issued at (seconds since the epoch).
    pub iat: i64,
    /// Not before: the same as `iat`.
    pub nbf: i64,
    /// Expires at: at most [`MAX_TOKEN_LIFETIME`] after `iat`.
    pub exp: i64,
    /// This token's own id: the job's id and the second it was issued, with its phase.
    pub jti: String,
    /// The organisation.
    pub organisation: String,
    /// The environment's group path.
    pub group: String,
    /// The environment's path.
    pub environment: String,
    /// The job's id.
    pub job_id: String,
    /// Who asked for the job.
    pub requested_by: String,
    /// The job's operation.
    pub operation: String,
    /// The phase the token is for.
    pub phase: Phase,
}

impl JobIdentityClaims {
    /// The claims of a token for `job`'s `phase`, issued by `issuer` for `audience` at
    /// `now`, living `lifetime` (cut to [`MAX_TOKEN_LIFETIME`]).
    pub fn new(
        issuer: &str,
        audience: &str,
        job: &JobFacts<'_>,
        phase: Phase,
        now: DateTime<Utc>,
        lifetime: Duration,
    ) -> Result<Self, IdentityError> {
        if let Some(problem) = crate::urls::issuer_problem(issuer) {
            return Err(IdentityError::Issuer {
                issuer: issuer.to_string(),
                problem,
            });
        }
        if let Some(problem) = audience_problem(audience) {
            return Err(IdentityError::Audience { problem });
        }
        if phase == Phase::Apply && job.operation == Operation::Plan {
            return Err(IdentityError::NoApplyPhase {
                operation: job.operation.as_str().to_string(),
            });
        }
        if lifetime <= Duration::zero() {
            return Err(IdentityError::Lifetime);
        }
        let lifetime = lifetime.min(MAX_TOKEN_LIFETIME);
        let iat = now.timestamp();
        Ok(Self {
            iss: issuer.trim_end_matches('/').to_string(),
            aud: audience.to_string(),
            sub: subject(job.environment, job.operation, phase),
            iat,
            nbf: iat,
            exp: iat + lifetime.num_seconds().max(1),
            jti: format!("{}.{}.{}", job.job_id, phase, iat),
            organisation: job.environment.org().to_string(),
            group: job.environment.group().to_string(),
            environment: job.environment.to_string(),
            job_id: job.job_id.to_string(),
            requested_by: job.requested_by.to_string(),
            operation: job.operation.as_str().to_string(),
            phase,
        })
    }
}

/// The JWS header of every token: ES256, a JWT, and the id of the key that signs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JwtHeader {
    /// Always [`ALGORITHM`].
    pub alg: String,
    /// Always `JWT`.
    pub typ: String,
    /// The signing key's id in the JWKS ([`Jwk::kid`]).
    pub kid: String,
}

impl JwtHeader {
    /// The header of a token signed by the key `kid`.
    pub fn es256(kid: &str) -> Self {
        Self {
            alg: ALGORITHM.into(),
            typ: "JWT".into(),
            kid: kid.into(),
        }
    }
}

/// The JWS signing input, `base64url(header) "." base64url(claims)`: what KMS signs
/// (`MessageType` RAW, `ECDSA_SHA_256`).
pub fn signing_input(header: &JwtHeader, claims: &JobIdentityClaims) -> String {
    format!("{}.{}", base64url_json(header), base64url_json(claims))
}

/// base64url (no padding) of a plain struct's JSON (which cannot fail to serialize).
fn base64url_json<T: Serialize>(value: &T) -> String {
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(value).unwrap_or_default())
}

/// A compact JWT: the signing input and the JOSE signature ([`jose_signature`]).
pub fn compact(signing_input: &str, signature: &[u8; 64]) -> String {
    format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(signature))
}

/// KMS's ECDSA signature (DER, `ECDSA-Sig-Value ::= SEQUENCE { r INTEGER, s INTEGER }`) as
/// JWS's ES256 signature: `r` and `s`, each 32 bytes big-endian (RFC 7518 §3.4). The DER is
/// read strictly: minimal lengths and integers, positive, each under 2^256, nothing after.
pub fn jose_signature(der: &[u8]) -> Result<[u8; 64], IdentityError> {
    let err = IdentityError::Signature;
    let (tag, body, rest) = der_element(der).ok_or(err("truncated"))?;
    if tag != 0x30 || !rest.is_empty() {
        return Err(err("not one SEQUENCE"));
    }
    let (r, after_r) = der_integer(body).ok_or(err("r is not a DER INTEGER"))?;
    let (s, after_s) = der_integer(after_r).ok_or(err("s is not a DER INTEGER"))?;
    if !after_s.is_empty() {
        return Err(err("more than r and s"));
    }
    let mut out = [0u8; 64];
    let (r_half, s_half) = out.split_at_mut(32);
    for (value, half) in [(r, r_half), (s, s_half)] {
        if value.len() > 32 {
            return Err(err("an integer over 256 bits"));
        }
        if value.is_empty() {
            return Err(err("a zero integer"));
        }
        half[32 - value.len()..].copy_from_slice(value);
    }
    Ok(out)
}

/// One DER element: its tag, its contents and what follows. Short and long definite
/// lengths, each minimal; `None` if truncated or not minimal.
fn der_element(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else if first == 0x81 {
        let (&len, rest) = rest.split_first()?;
        if len < 0x80 {
            return None;
        }
        (usize::from(len), rest)
    } else {
        return None;
    };
    (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
}

/// A positive, minimally encoded DER INTEGER's magnitude (leading zero dropped) and what
/// follows it.
fn der_integer(input: &[u8]) -> Option<(&[u8], &[u8])> {
    let (tag, body, rest) = der_element(input)?;
    // Not an INTEGER, empty, or negative.
    if tag != 0x02 || body.is_empty() || body[0] & 0x80 != 0 {
        return None;
    }
    // A leading zero only when the next byte's high bit is set: else it is not minimal.
    if body.len() > 1 && body[0] == 0 && body[1] & 0x80 == 0 {
        return None;
    }
    let magnitude = if body[0] == 0 { &body[1..] } else { body };
    Some((magnitude, rest))
}

/// The DER prefix of every P-256 SubjectPublicKeyInfo: id-ecPublicKey, prime256v1, and the
/// BIT STRING of a 65-byte uncompressed point.
const P256_SPKI_PREFIX: [u8; 26] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a,
    0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];

/// A public key in a JWKS (RFC 7517), EC P-256 only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Jwk {
    /// `EC`.
    pub kty: String,
    /// `P-256`.
    pub crv: String,
    /// The point's x, base64url.
    pub x: String,
    /// The point's y, base64url.
    pub y: String,
    /// The key's id: its RFC 7638 thumbprint, base64url.
    pub kid: String,
    /// `ES256`.
    pub alg: String,
    /// `sig`.
    #[serde(rename = "use")]
    pub use_: String,
}

/// A JWK Set: the keys a token's `kid` is looked up in (two while a new key rolls in).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Jwks {
    /// The keys.
    pub keys: Vec<Jwk>,
}

/// The JWK of KMS's public key (`GetPublicKey`'s `PublicKey`: a DER SubjectPublicKeyInfo
/// of an `ECC_NIST_P256` key), its `kid` the RFC 7638 thumbprint.
pub fn jwk_from_spki(spki: &[u8]) -> Result<Jwk, IdentityError> {
    let err = IdentityError::PublicKey;
    if spki.len() != P256_SPKI_PREFIX.len() + 65 || spki[..26] != P256_SPKI_PREFIX {
        return Err(err("not an id-ecPublicKey on prime256v1"));
    }
    let point = &spki[26..];
    if point[0] != 0x04 {
        return Err(err("the point is not uncompressed"));
    }
    let x = URL_SAFE_NO_PAD.encode(&point[1..33]);
    let y = URL_SAFE_NO_PAD.encode(&point[33..65]);
    // RFC 7638 §3.2: the required members in lexicographic order, no whitespace.
    let canonical = format!(r#"{{"crv":"P-256","kty":"EC","x":"{x}","y":"{y}"}}"#);
    let kid = URL_SAFE_NO_PAD.encode(Sha256::digest(canonical.as_bytes()));
    Ok(Jwk {
        kty: "EC".into(),
        crv: "P-256".into(),
        x,
        y,
        kid,
        alg: ALGORITHM.into(),
        use_: "sig".into(),
    })
}

/// The OpenID Connect discovery document of `issuer` (served at
/// `<issuer>/.well-known/openid-configuration`): where its keys are and what its tokens
/// hold. AWS IAM, Google's workload identity federation and Azure's federated credentials
/// read `issuer`, `jwks_uri` and `id_token_signing_alg_values_supported`.
pub fn discovery_document(issuer: &str) -> DiscoveryDocument {
    let issuer = issuer.trim_end_matches('/');
    let strings = |items: &[&str]| items.iter().map(|s| s.to_string()).collect();
    DiscoveryDocument {
        issuer: issuer.to_string(),
        jwks_uri: format!("{issuer}/.well-known/jwks.json"),
        response_types_supported: strings(&["id_token"]),
        subject_types_supported: strings(&["public"]),
        id_token_signing_alg_values_supported: strings(&[ALGORITHM]),
        claims_supported: strings(&[
            "iss",
            "aud",
            "sub",
            "iat",
            "nbf",
            "exp",
            "jti",
            "organisation",
            "group",
            "environment",
            "job_id",
            "requested_by",
            "operation",
            "phase",
        ]),
    }
}

/// The issuer's OpenID Connect discovery document (the members clouds read).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DiscoveryDocument {
    /// The issuer: every token's `iss`.
    pub issuer: String,
    /// Where the keys are: `<issuer>/.well-known/jwks.json`.
    pub jwks_uri: String,
    /// `id_token`.
    pub response_types_supported: Vec<String>,
    /// `public`.
    pub subject_types_supported: Vec<String>,
    /// `ES256`.
    pub id_token_signing_alg_values_supported: Vec<String>,
    /// The claims a token carries.
    pub claims_supported: Vec<String>,
}

/// Whether the pilot writes a fresh token now: once two-thirds of the current one's life
/// (`iat` to `exp`) has passed, so the cloud's SDK, which reads the file again when its
/// credentials near their end, always finds a token with a third of its life left.
pub fn refresh_due(claims: &JobIdentityClaims, now: DateTime<Utc>) -> bool {
    let lifetime = claims.exp - claims.iat;
    now.timestamp() >= claims.iat + lifetime * 2 / 3
}

/// What the pilot sets up for Terraform's process so each cloud's own SDK exchanges the
/// token: variables, and files to write beside the token.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TokenSetup {
    /// Environment variables for Terraform's process.
    pub env: Vec<(String, String)>,
    /// Files to write (a path, its contents), mode 0600, readable by Terraform's process.
    pub files: Vec<(String, String)>,
}

/// The variables and files that point each cloud's SDK at `token_file` for `phase`:
/// - AWS: `AWS_ROLE_ARN` (the phase's role), `AWS_WEB_IDENTITY_TOKEN_FILE` and
///   `AWS_ROLE_SESSION_NAME` (`session_name`, made one STS accepts by
///   [`crate::limits::session_name`]), which the AWS provider and SDKs read natively;
/// - Google Cloud: an external-account credential file in `dir` whose `credential_source`
///   is the token file, named by `GOOGLE_APPLICATION_CREDENTIALS`;
/// - Azure: `ARM_USE_OIDC`, `ARM_OIDC_TOKEN_FILE_PATH`, `ARM_CLIENT_ID`, `ARM_TENANT_ID`
///   (azurerm), and the same as `AZURE_FEDERATED_TOKEN_FILE`, `AZURE_CLIENT_ID`,
///   `AZURE_TENANT_ID` (Azure's SDKs and CLI).
pub fn token_setup(
    identity: &RunnerIdentity,
    phase: Phase,
    token_file: &str,
    dir: &str,
    session_name: &str,
) -> TokenSetup {
    let mut setup = TokenSetup::default();
    let mut set = |k: &str, v: &str| setup.env.push((k.to_string(), v.to_string()));
    if let Some(aws) = &identity.aws {
        let role = match phase {
            Phase::Plan => &aws.plan_role_arn,
            Phase::Apply => &aws.apply_role_arn,
        };
        set("AWS_ROLE_ARN", role);
        set("AWS_WEB_IDENTITY_TOKEN_FILE", token_file);
        set(
            "AWS_ROLE_SESSION_NAME",
            &crate::limits::session_name(session_name),
        );
    }
    if let Some(azure) = &identity.azure {
        set("ARM_USE_OIDC", "true");
        set("ARM_OIDC_TOKEN_FILE_PATH", token_file);
        set("ARM_CLIENT_ID", &azure.client_id);
        set("ARM_TENANT_ID", &azure.tenant_id);
        set("AZURE_FEDERATED_TOKEN_FILE", token_file);
        set("AZURE_CLIENT_ID", &azure.client_id);
        set("AZURE_TENANT_ID", &azure.tenant_id);
    }
    if let Some(gcp) = &identity.gcp {
        let path = format!("{}/gcp-credentials.json", dir.trim_end_matches('/'));
        set("GOOGLE_APPLICATION_CREDENTIALS", &path);
        let mut credential = serde_json::json!({
            "type": "external_account",
            "audience": gcp.workload_identity_provider,
            "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
            "token_url": "https://sts.googleapis.com/v1/token",
            "credential_source": { "file": token_file },
        });
        if let Some(account) = &gcp.service_account {
            credential["service_account_impersonation_url"] = serde_json::Value::String(format!(
                "https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/{account}:generateAccessToken"
            ));
        }
        setup.files.push((path, credential.to_string()));
    }
    setup
}

#[cfg(test)]
#[path = "identity_tests.rs"]
mod tests;
