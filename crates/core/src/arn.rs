//! Shape checks for AWS names: ARNs, regions and bucket names. Pure string checks, no AWS calls.

/// The parts of an ARN: `arn:<partition>:<service>:<region>:<account>:<resource>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arn<'a> {
    /// `aws`, `aws-cn` or `aws-us-gov`.
    pub partition: &'a str,
    /// The service, such as `iam`.
    pub service: &'a str,
    /// The region (empty for global services).
    pub region: &'a str,
    /// The 12-digit account id (empty for some resources).
    pub account: &'a str,
    /// The resource part, such as `role/launcher`.
    pub resource: &'a str,
}

/// Splits an ARN into its parts, or `None` if it is not shaped like one.
pub fn parse(arn: &str) -> Option<Arn<'_>> {
    let mut parts = arn.splitn(6, ':');
    if parts.next()? != "arn" {
        return None;
    }
    let partition = parts.next()?;
    if !partition.starts_with("aws") {
        return None;
    }
    let out = Arn {
        partition,
        service: parts.next()?,
        region: parts.next()?,
        account: parts.next()?,
        resource: parts.next()?,
    };
    (!out.service.is_empty() && !out.resource.is_empty()).then_some(out)
}

fn is_account(s: &str) -> bool {
    s.len() == 12 && s.bytes().all(|b| b.is_ascii_digit())
}

/// True for `arn:aws:iam::<12 digits>:role/<path/name>`.
pub fn is_role_arn(s: &str) -> bool {
    parse(s).is_some_and(|a| {
        a.service == "iam"
            && a.region.is_empty()
            && is_account(a.account)
            && a.resource
                .strip_prefix("role/")
                .is_some_and(|n| !n.is_empty())
    })
}

/// True for a Secrets Manager secret ARN or an SSM parameter ARN: a reference, never a value.
pub fn is_secret_ref(s: &str) -> bool {
    parse(s).is_some_and(|a| {
        is_account(a.account)
            && !a.region.is_empty()
            && match a.service {
                "secretsmanager" => a.resource.starts_with("secret:") && a.resource.len() > 7,
                "ssm" => a.resource.starts_with("parameter/") && a.resource.len() > 10,
                _ => false,
            }
    })
}

/// True for a region name such as `eu-west-1` or `us-gov-west-1`.
pub fn is_region(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.len() >= 3
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        })
        && parts
            .last()
            .is_some_and(|p| p.bytes().all(|b| b.is_ascii_digit()))
}

/// True for a valid S3 bucket name (3–63 of `[a-z0-9.-]`, starting and ending with a letter or digit).
pub fn is_bucket_name(s: &str) -> bool {
    let b = s.as_bytes();
    (3..=63).contains(&b.len())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'.' || *c == b'-')
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && !s.contains("..")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes() {
        assert!(is_role_arn(
            "arn:aws:iam::123456789012:role/sortie-launcher"
        ));
        assert!(!is_role_arn("arn:aws:iam::1234:role/x"));
        assert!(!is_role_arn("arn:aws:iam::123456789012:user/x"));
        assert!(is_secret_ref(
            "arn:aws:secretsmanager:eu-west-1:123456789012:secret:db-AbCdEf"
        ));
        assert!(is_secret_ref(
            "arn:aws:ssm:eu-west-1:123456789012:parameter/app/token"
        ));
        assert!(!is_secret_ref("hunter2"));
        assert!(is_region("eu-west-1") && is_region("us-gov-west-1"));
        assert!(!is_region("mars") && !is_region("EU-west-1"));
        assert!(
            is_bucket_name("sortie-state.eu") && !is_bucket_name("Sortie") && !is_bucket_name("ab")
        );
    }
}
