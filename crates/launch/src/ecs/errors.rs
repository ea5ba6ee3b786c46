//! AWS errors as [`LaunchError`]s: retry only what is safe to retry, and call final what no
//! retry heals.

use aws_sdk_ecs::error::{ProvideErrorMetadata, SdkError};

use crate::LaunchError;

/// Classifies an AWS error for a launch: retry only what is safe to retry.
pub fn classify(operation: &str, code: &str, message: &str, status: u16) -> LaunchError {
    let text = format!("{operation} failed: {code}: {message}");
    let lower = message.to_ascii_lowercase();
    let retryable = status >= 500
        || code.contains("Throttl")
        || code == "RequestLimitExceeded"
        || code == "ServerException"
        || code == "ServiceUnavailable"
        || code.starts_with("RESOURCE:")
        || lower.contains("capacity is unavailable")
        || lower.contains("rate exceeded")
        || is_concurrent_revision(&lower)
        || lower.contains("throttl");
    if retryable {
        LaunchError::Retryable(text)
    } else {
        LaunchError::Fatal(text)
    }
}

/// True for ECS's refusal of concurrent new revisions of one task definition family
/// (`ClientException: Too many concurrent attempts to create a new revision of the
/// specified family.`): another registration of the family is in progress, so this one is
/// worth trying again, after a look at what that one registered.
pub(super) fn is_concurrent_revision(message: &str) -> bool {
    message
        .to_ascii_lowercase()
        .contains("too many concurrent attempts to create a new revision")
}

/// An SDK error as a [`LaunchError`], in AWS's words (`<operation> failed: <code>: <message>`).
pub(crate) fn from_sdk<E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static>(
    operation: &str,
    err: SdkError<E>,
) -> LaunchError {
    match &err {
        SdkError::ServiceError(se) => {
            let status = se.raw().status().as_u16();
            let code = se.err().code().unwrap_or("Unknown");
            let message = se.err().message().unwrap_or_default();
            if operation == "RunTask" && status >= 500 {
                // ECS answered with a server error: the task may have been started.
                return LaunchError::Uncertain(format!("{operation} failed: {code}: {message}"));
            }
            classify(operation, code, message, status)
        }
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => {
            let text = aws_sdk_ecs::error::DisplayErrorContext(&err).to_string();
            // A failed AssumeRole surfaces here: access denied, and a refusal that never
            // heals, are final; anything else transient.
            if text.contains("AccessDenied")
                || text.contains("not authorized")
                || never_heals(&text)
            {
                let what = if is_identity_failure(&text) {
                    "could not assume the runner's role: "
                } else {
                    ""
                };
                LaunchError::Fatal(format!("{operation} failed: {what}{text}"))
            } else if operation == "RunTask" && !is_identity_failure(&text) {
                // The request may have reached ECS: only a lookup by `startedBy` can tell.
                LaunchError::Uncertain(format!("{operation} failed: {text}"))
            } else {
                LaunchError::Retryable(format!("{operation} failed: {text}"))
            }
        }
        _ => {
            let text = aws_sdk_ecs::error::DisplayErrorContext(&err).to_string();
            if text.contains("AccessDenied")
                || text.contains("not authorized")
                || text.contains("ExternalId")
                || never_heals(&text)
            {
                LaunchError::Fatal(format!(
                    "{operation} failed: could not assume the runner's role: {text}"
                ))
            } else {
                LaunchError::Retryable(format!("{operation} failed: {text}"))
            }
        }
    }
}

/// True for an STS refusal that no retry heals (issue 25 item 1): STS disabled in the
/// region (`RegionDisabledException`), or the control plane's own key refused
/// (`InvalidClientTokenId`). ECS's `ClusterNotFoundException` and
/// `InvalidParameterException` are 400s, so [`classify`] already calls them fatal.
pub(crate) fn never_heals(text: &str) -> bool {
    text.contains("RegionDisabledException") || text.contains("InvalidClientTokenId")
}

/// True for a refusal because the session's token expired (`ExpiredToken`,
/// `ExpiredTokenException`): a fresh session heals it once.
pub(super) fn is_expired_token(e: &LaunchError) -> bool {
    e.to_string().contains("ExpiredToken")
}

/// True when the error happened while getting the runner role's credentials: the request
/// itself was never sent.
fn is_identity_failure(text: &str) -> bool {
    text.contains("AssumeRole") || text.contains("credentials") || text.contains("identity")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_only_what_is_safe_to_retry() {
        assert!(classify("RunTask", "ThrottlingException", "Rate exceeded", 400).is_retryable());
        assert!(classify("RunTask", "RESOURCE:MEMORY", "", 200).is_retryable());
        assert!(classify(
            "RunTask",
            "ClientException",
            "Capacity is unavailable at this time. Please try again later",
            400
        )
        .is_retryable());
        assert!(classify("RunTask", "ServerException", "internal", 500).is_retryable());
        let denied = classify(
            "RunTask",
            "AccessDeniedException",
            "User is not authorized to perform ecs:RunTask",
            400,
        );
        assert!(!denied.is_retryable());
        assert_eq!(
            denied.to_string(),
            "RunTask failed: AccessDeniedException: User is not authorized to perform ecs:RunTask"
        );
        assert!(!classify(
            "RunTask",
            "ClusterNotFoundException",
            "Cluster not found.",
            400
        )
        .is_retryable());
        assert!(
            !classify("RunTask", "InvalidParameterException", "bad subnet", 400).is_retryable()
        );
        assert!(!classify(
            "RunTask",
            "ClientException",
            "Unable to find task definition",
            400
        )
        .is_retryable());
    }

    #[test]
    fn refusals_that_never_heal_are_fatal_and_throttling_stays_retryable() {
        // Issue 25 item 1: an unknown cluster and an invalid parameter are fatal at once.
        for (code, message) in [
            ("ClusterNotFoundException", "Cluster not found."),
            (
                "InvalidParameterException",
                "No Container Instances were found in your cluster.",
            ),
        ] {
            let e = classify("RunTask", code, message, 400);
            assert!(!e.is_retryable(), "{e}");
        }
        for (code, message, status) in [
            ("ThrottlingException", "Rate exceeded", 400),
            ("ServerException", "Service unavailable", 500),
            (
                "ClientException",
                "Capacity is unavailable at this time.",
                400,
            ),
        ] {
            let e = classify("RunTask", code, message, status);
            assert!(e.is_retryable(), "{e}");
        }
        // STS's refusals, as the credential provider words them, never heal.
        assert!(never_heals(
            "service error: RegionDisabledException: STS is not activated in this region"
        ));
        assert!(never_heals(
            "InvalidClientTokenId: The security token included in the request is invalid"
        ));
        assert!(!never_heals("ThrottlingException: Rate exceeded"));
    }
}
