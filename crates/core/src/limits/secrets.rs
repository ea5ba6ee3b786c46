//! Secrets Manager and SSM Parameter Store references.

use super::*;

// ---------------------------------------------------------------------------------------
// Secrets Manager and SSM Parameter Store references
// ---------------------------------------------------------------------------------------

/// Longest secret reference ARN: 2048 characters.
///
/// Source: <https://docs.aws.amazon.com/secretsmanager/latest/apireference/API_GetSecretValue.html>
/// (`SecretId`, length 1–2048).
pub const SECRET_ARN_MAX: usize = 2048;

/// Longest SSM parameter ARN: 1011 characters, the ARN prefix included.
///
/// Source: <https://docs.aws.amazon.com/systems-manager/latest/APIReference/API_PutParameter.html>
/// (`Name`: "The maximum length for a parameter name that you create is 1011 characters.
/// This includes the characters in the ARN that precede the name you specify").
pub const SSM_PARAMETER_ARN_MAX: usize = 1011;

/// True for a Secrets Manager secret ARN or an SSM parameter ARN: a reference, never a
/// value. No whitespace or control character anywhere.
///
/// - Secrets Manager: `arn:<partition>:secretsmanager:<region>:<account>:secret:<name>`,
///   the name of `[A-Za-z0-9/_+=.@-]` (<https://docs.aws.amazon.com/secretsmanager/latest/apireference/API_CreateSecret.html>,
///   `Name`), optionally followed by ECS's `:<json-key>:<version-stage>:<version-id>`
///   (<https://docs.aws.amazon.com/AmazonECS/latest/developerguide/secrets-envvar-secrets-manager.html>),
///   whose parts are read as the same characters.
/// - SSM: `arn:<partition>:ssm:<region>:<account>:parameter/<name>`, the name of
///   `[A-Za-z0-9_.-/]` (<https://docs.aws.amazon.com/systems-manager/latest/userguide/sysman-paramstore-su-create.html>).
pub fn is_secret_ref(s: &str) -> bool {
    if has_space_or_control(s) {
        return false;
    }
    let Some([_, _, service, region, account, resource]) = arn_parts(s) else {
        return false;
    };
    if !is_region(region) || !is_account_id(account) {
        return false;
    }
    match service {
        "secretsmanager" => {
            s.len() <= SECRET_ARN_MAX
                && resource.strip_prefix("secret:").is_some_and(|rest| {
                    let mut parts = rest.split(':');
                    let name = parts.next().unwrap_or_default();
                    let ok = |p: &str| {
                        p.chars()
                            .all(|c| c.is_ascii_alphanumeric() || "/_+=.@-".contains(c))
                    };
                    !name.is_empty() && ok(name) && parts.count() <= 3 && rest.split(':').all(ok)
                })
        }
        "ssm" => {
            s.len() <= SSM_PARAMETER_ARN_MAX
                && resource.strip_prefix("parameter/").is_some_and(|name| {
                    !name.is_empty()
                        && name
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || "_.-/".contains(c))
                })
        }
        _ => false,
    }
}
