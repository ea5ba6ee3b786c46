//! Splitting ARNs into their parts. Every AWS limit and shape check lives in [`crate::limits`].

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

/// True when an event whose envelope names account `from` may speak of resource `arn`: the
/// ARN is in that account, or either account is unknown (a local event has no envelope
/// account). EventBridge sets the envelope's account to the account the event came from,
/// so an event naming a resource in another account is forged or misrouted.
pub fn same_account(from: Option<&str>, arn: &str) -> bool {
    match (from, parse(arn).map(|a| a.account)) {
        (Some(from), Some(account)) => from == account,
        _ => true,
    }
}

/// True for a region name such as `eu-west-1` (see [`crate::limits::is_region`]).
pub fn is_region(s: &str) -> bool {
    crate::limits::is_region(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts() {
        let a = parse("arn:aws:iam::123456789012:role/sortie-launcher").unwrap();
        assert_eq!(
            (a.service, a.account, a.resource),
            ("iam", "123456789012", "role/sortie-launcher")
        );
        assert!(parse("hunter2").is_none() && parse("arn:gcp:iam::1:role/x").is_none());
        assert!(is_region("eu-west-1") && is_region("us-gov-west-1"));
        assert!(!is_region("mars") && !is_region("EU-west-1"));
    }

    #[test]
    fn an_event_speaks_only_of_its_own_account() {
        let cluster = "arn:aws:ecs:us-east-1:123456789012:cluster/sortie";
        assert!(same_account(Some("123456789012"), cluster));
        assert!(!same_account(Some("999999999999"), cluster));
        assert!(
            same_account(None, cluster),
            "no envelope account: nothing to compare"
        );
        assert!(same_account(Some("123456789012"), "not-an-arn"));
    }
}
