//! The audit trail (issue 44, section 3): one entry per change to configuration and per
//! decision, and a hash chain over each organisation's entries that names the first entry
//! edited, removed or reordered. Everything here is pure; the store keeps the entries and
//! their seals.
//!
//! - [`AuditEntry`]: who (the subject and the credential's kind), what (the action and the
//!   target's path), when, the request (its id, source address and user agent), and a digest
//!   of the body before and after the change, never the body itself (a body may hold a
//!   secret).
//! - [`entry_json`] and [`entry_digest`]: the entry's stored form (its JSON, fields in
//!   their declared order) and the SHA-256 of exactly those bytes, so any byte of a stored
//!   entry that changes changes its digest.
//! - [`Seal`]: an entry's place in its organisation's chain: its sequence number and
//!   `hash = SHA-256(previous hash ‖ entry digest)`, the first link starting from
//!   [`genesis`].
//! - [`verify`]: recomputes a chain from its stored entries and seals and names the first
//!   broken link.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// How the actor proved who it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum CredentialKind {
    /// A user's or CI system's OIDC token, verified by API Gateway's authorizer.
    User,
    /// `sortie dev`'s development token.
    Development,
    /// A job's own token (a pilot's callback).
    JobToken,
    /// An agent pool's credential.
    Agent,
    /// Sortie itself: a schedule, the sweeper, the policy gate, an expiry.
    System,
}

/// Who made a change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Actor {
    /// The subject (`sub`), or the system part that acted (`sweeper`, `policy gate`).
    pub subject: String,
    /// The token's issuer, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// How it proved it.
    pub credential: CredentialKind,
}

/// One change to configuration, or one decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AuditEntry {
    /// The organisation whose chain holds it (`-` for the root group's configuration).
    pub org: String,
    /// Its id: a ULID, so ids sort by time.
    pub id: String,
    /// When the change was made.
    pub at: DateTime<Utc>,
    /// Who made it.
    pub actor: Actor,
    /// What was done: the API operation (`create_runner`, `approve_job`, …).
    pub action: String,
    /// What it was done to: the resource's path (`/v1/groups/acme/-/runners/local`).
    pub target: String,
    /// The request's id (API Gateway's), to find its logs.
    #[serde(default)]
    pub request_id: String,
    /// The caller's address, as API Gateway saw it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_ip: Option<String>,
    /// The caller's `User-Agent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_agent: Option<String>,
    /// The version the change replaced, as the caller's `If-Match` named it (the resource
    /// as it was: the entry that wrote that version holds its digest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<String>,
    /// SHA-256 of the body the change sent, when it sent one: proves what was written
    /// without keeping it (a body may hold a secret).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
}

/// The smallest entry id of the millisecond `at`: ids below it are older.
pub fn id_bound(at: DateTime<Utc>) -> String {
    let ms = u64::try_from(at.timestamp_millis()).unwrap_or(0);
    ulid::Ulid::from_parts(ms, 0).to_string().to_lowercase()
}

/// A new entry id made at `at`: sorts after every id of an earlier millisecond.
pub fn new_id_at(at: DateTime<Utc>) -> String {
    let ms = u64::try_from(at.timestamp_millis()).unwrap_or(0);
    // A ULID's 80 random bits, from the one read of the OS random source.
    let random = u128::from_str_radix(&crate::tokens::random_hex(10), 16).unwrap_or(0);
    ulid::Ulid::from_parts(ms, random)
        .to_string()
        .to_lowercase()
}

/// `entry`'s stored form: its JSON, fields in their declared order.
pub fn entry_json(entry: &AuditEntry) -> String {
    serde_json::to_string(entry).expect("an audit entry serialises")
}

/// SHA-256 (hex) of an entry's stored form: over its exact bytes, so any byte that
/// changes, even one that would read back as the same entry, changes it.
pub fn entry_digest(stored: &str) -> String {
    hex(&Sha256::digest(stored.as_bytes()))
}

/// Lower-case hex of `bytes`.
fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 0x0f)] as char);
    }
    out
}

/// SHA-256 (hex) of a resource's stored form, for an entry's `before` and `after`.
pub fn body_digest(body: &[u8]) -> String {
    crate::tokens::sha256_hex(body)
}

/// The hash an organisation's chain starts from.
pub fn genesis(org: &str) -> String {
    crate::tokens::sha256_hex(format!("sortie-audit:{org}").as_bytes())
}

/// The next link's hash: SHA-256 of the previous hash and the entry's digest.
pub fn link(previous: &str, digest: &str) -> String {
    let mut h = Sha256::new();
    h.update(previous.as_bytes());
    h.update(b"\n");
    h.update(digest.as_bytes());
    hex(&h.finalize())
}

/// An entry's place in its organisation's chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Seal {
    /// Its sequence number, from 1, without gaps.
    pub seq: u64,
    /// The entry's digest when it was sealed.
    pub digest: String,
    /// The chain's hash through it.
    pub hash: String,
}

/// The seals of `entries` (their stored forms), in order, continuing a chain whose last
/// seal is `after` (`None`: the chain's start).
pub fn seal(org: &str, after: Option<&Seal>, entries: &[&str]) -> Vec<Seal> {
    let (mut seq, mut hash) = match after {
        Some(s) => (s.seq, s.hash.clone()),
        None => (0, genesis(org)),
    };
    entries
        .iter()
        .map(|stored| {
            seq += 1;
            let digest = entry_digest(stored);
            hash = link(&hash, &digest);
            Seal {
                seq,
                digest,
                hash: hash.clone(),
            }
        })
        .collect()
}

/// One stored link: the entry's stored form and its seal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// The entry as stored ([`entry_json`]).
    pub body: String,
    /// Its seal.
    pub seal: Seal,
}

impl Stored {
    /// The entry's id, when its stored form still reads as an entry.
    pub fn id(&self) -> Option<String> {
        serde_json::from_str::<AuditEntry>(&self.body)
            .ok()
            .map(|e| e.id)
    }
}

/// The first broken link of a chain.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Broken {
    /// The entry at `seq` is not the one sealed there: it was edited.
    #[error("entry {seq} ({}) was edited after it was sealed", id.as_deref().unwrap_or("no longer readable"))]
    Edited {
        /// Its sequence number.
        seq: u64,
        /// Its id, when it still reads as an entry.
        id: Option<String>,
    },
    /// The seal at `seq` does not follow from the one before it: an entry before it was
    /// removed or reordered, or the seal was edited.
    #[error(
        "the chain breaks at entry {seq}: an entry was removed or reordered, or its seal edited"
    )]
    Chain {
        /// The sequence number where the recomputed hash first differs.
        seq: u64,
    },
    /// Sequence numbers skip from `after` to `next`: entries were removed.
    #[error("entries {} to {} are missing", after + 1, next - 1)]
    Gap {
        /// The last sequence number present before the gap.
        after: u64,
        /// The next one present.
        next: u64,
    },
}

/// What a chain that verifies holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// How many entries.
    pub entries: u64,
    /// The chain's hash through its last entry (the genesis for an empty chain).
    pub head: String,
}

/// Recomputes `org`'s chain over `links` (in sequence order, from 1) and names the first
/// broken link: an entry edited after it was sealed, a missing sequence number, or a seal
/// that does not follow from its predecessor.
pub fn verify(org: &str, links: &[Stored]) -> Result<Verified, Broken> {
    let mut hash = genesis(org);
    let mut expected = 1u64;
    for stored in links {
        let seq = stored.seal.seq;
        if seq != expected {
            return Err(Broken::Gap {
                after: expected - 1,
                next: seq,
            });
        }
        let digest = entry_digest(&stored.body);
        if digest != stored.seal.digest {
            return Err(Broken::Edited {
                seq,
                id: stored.id(),
            });
        }
        hash = link(&hash, &digest);
        if hash != stored.seal.hash {
            return Err(Broken::Chain { seq });
        }
        expected += 1;
    }
    Ok(Verified {
        entries: expected - 1,
        head: hash,
    })
}

#[cfg(test)]
mod tests;
