//! Decisions Sortie makes itself, recorded in the audit trail as a person's are: an
//! approval that timed out, a plan approved by the policy gate, an expired environment's
//! destroy. Each runs in an audit scope whose actor is the deciding part (credential
//! `system`), so the store writes its entry in the decision's own transaction.

use sortie_core::audit::{Actor, CredentialKind};
use sortie_store::audit::{AuditScope, Draft, ROOT_CHAIN};

/// The scope of a decision `action` by `by` (a principal of Sortie's own, such as
/// `sortie:policy`) about `target` (its API path), in `org`'s chain.
pub(crate) fn system_scope(
    by: &str,
    action: &str,
    target: String,
    org: Option<&str>,
) -> AuditScope {
    AuditScope::new(Draft {
        action: action.to_string(),
        target,
        request_id: sortie_core::tokens::new_id(),
        actor: Some(Actor {
            subject: by.to_string(),
            issuer: None,
            credential: CredentialKind::System,
        }),
        org: Some(org.unwrap_or(ROOT_CHAIN).to_string()),
        ..Draft::default()
    })
}
