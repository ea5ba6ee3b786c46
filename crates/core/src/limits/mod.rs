//! Every limit that AWS, Kubernetes or DynamoDB places on a value Sortie passes on, in
//! one place, each with its source.
//!
//! The policy (docs/decisions/limits.md, "Limits"): what AWS or DynamoDB would refuse at launch
//! or at write is refused at the API, with a problem at the field's path. Validation in
//! [`crate::runner`], [`crate::job`], [`crate::rule`] and [`crate::environment`] calls the
//! checks here; nothing else hard-codes a limit.
//!
//! The checks are plain Rust, not regular expressions: each documented pattern is small
//! enough to spell out, and core stays free of a regex engine. Where AWS documents a
//! regular expression, it is quoted next to the check that implements it. In AWS's
//! patterns `\w` means `[A-Za-z0-9_]`.
//!
//! Where a source is silent or ambiguous, the doc comment says which reading was chosen;
//! the choice is always the stricter one.

use serde_json::Value;

mod container;
mod dynamodb;
mod ecs;
mod iam;
mod kubernetes;
mod s3;
mod secrets;
mod shape;

pub use container::*;
pub use dynamodb::*;
pub use ecs::*;
pub use iam::*;
pub use kubernetes::*;
pub use s3::*;
pub use secrets::*;
pub use shape::*;

// ---------------------------------------------------------------------------------------
// Characters
// ---------------------------------------------------------------------------------------

/// True when `s` has a control character: C0 (U+0000–U+001F), DEL (U+007F) or C1
/// (U+0080–U+009F), the Unicode general category `Cc`.
pub fn has_control(s: &str) -> bool {
    s.chars().any(char::is_control)
}

/// True when `s` has whitespace (any Unicode `White_Space`) or a control character.
pub fn has_space_or_control(s: &str) -> bool {
    s.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// `\w` in AWS's patterns: `[A-Za-z0-9_]`.
fn is_word(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

fn is_lower_alnum(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

fn is_hex_lower(s: &str) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

// ---------------------------------------------------------------------------------------
// Partitions, accounts and regions
// ---------------------------------------------------------------------------------------

/// The partitions Sortie accepts in an ARN: `aws`, `aws-cn`, `aws-us-gov`.
///
/// Source: <https://docs.aws.amazon.com/IAM/latest/UserGuide/reference-arns.html>
/// (`partition`). The ISO partitions (`aws-iso`, `aws-iso-b`, `aws-iso-e`, `aws-iso-f`)
/// and `aws-eusc` are **refused**: they are isolated from the public partitions (a role
/// there can never be assumed from a control plane outside it) and Sortie is not deployed
/// in them. Add them here if it ever is.
pub const PARTITIONS: [&str; 3] = ["aws", "aws-cn", "aws-us-gov"];

/// True for one of [`PARTITIONS`].
pub fn is_partition(s: &str) -> bool {
    PARTITIONS.contains(&s)
}

/// True for a 12-digit AWS account id.
///
/// Source: <https://docs.aws.amazon.com/accounts/latest/reference/manage-acct-identifiers.html>
/// ("a 12-digit number").
pub fn is_account_id(s: &str) -> bool {
    s.len() == 12 && s.bytes().all(|b| b.is_ascii_digit())
}

/// True for a region name such as `eu-west-1`, `us-gov-west-1` or `cn-north-1`: at least
/// three `-`-separated parts of `[a-z0-9]`, the last all digits, at most 32 characters.
///
/// Source: <https://docs.aws.amazon.com/global-infrastructure/latest/regions/aws-regions.html>.
/// AWS documents no pattern; the shape and the 32-character bound are this module's
/// reading of every published region code.
pub fn is_region(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    s.len() <= 32
        && parts.len() >= 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.chars().all(is_lower_alnum))
        && parts
            .last()
            .is_some_and(|p| p.bytes().all(|b| b.is_ascii_digit()))
}

/// The six `:`-separated parts of an ARN, with a known partition; `None` otherwise.
fn arn_parts(arn: &str) -> Option<[&str; 6]> {
    let mut it = arn.splitn(6, ':');
    let parts = [
        it.next()?,
        it.next()?,
        it.next()?,
        it.next()?,
        it.next()?,
        it.next()?,
    ];
    (parts[0] == "arn" && is_partition(parts[1])).then_some(parts)
}

#[cfg(test)]
mod tests;
