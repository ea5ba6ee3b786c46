//! `sortie env lock|unlock PATH` and `sortie group lock|unlock GROUP` (a freeze), and
//! `sortie env extend PATH --by 24h` (an expiring environment's new end).

use http::Method;
use serde_json::{json, Value};

use super::shared::group_url;
use crate::args::{GroupCommand, Output};
use crate::client::Api;
use crate::exit::CliError;
use crate::output::emit;

/// `sortie group lock GROUP --reason TEXT` and `sortie group unlock GROUP`.
pub async fn group(api: &Api, command: GroupCommand, out: Output) -> Result<(), CliError> {
    let (group, reason) = match command {
        GroupCommand::Lock { group, reason } => (group, Some(reason)),
        GroupCommand::Unlock { group } => (group, None),
    };
    let group = group.trim_matches('/');
    if group.is_empty() {
        return Err(CliError::Usage(
            "name a group, such as `acme` or `acme/payments`: the root group spans every organisation and cannot be locked".into(),
        ));
    }
    lock(api, &group_url(group), reason.as_deref(), out).await
}

/// Locks (with a reason) or unlocks the environment or group whose URL, up to its `/-`,
/// is `base`, and says what it did.
pub(super) async fn lock(
    api: &Api,
    base: &str,
    reason: Option<&str>,
    out: Output,
) -> Result<(), CliError> {
    let answer = match reason {
        Some(reason) => {
            let body = json!({ "reason": reason });
            api.send(Method::POST, &format!("{base}/lock"), Some(&body), &[])
                .await?
        }
        None => {
            api.send(Method::POST, &format!("{base}/unlock"), None, &[])
                .await?
        }
    };
    let body = answer.body;
    emit(&body, out, || lock_text(&body))
}

/// Extends the environment whose URL, up to its `/-`, is `base` by `by`, and prints its
/// new end.
pub(super) async fn extend(api: &Api, base: &str, by: &str, out: Output) -> Result<(), CliError> {
    let body = json!({ "by": by });
    let answer = api
        .send(Method::POST, &format!("{base}/extend"), Some(&body), &[])
        .await?;
    let body = answer.body;
    emit(&body, out, || {
        format!(
            "{} now expires at {}\n",
            body["environment"].as_str().unwrap_or_default(),
            body["expires_at"].as_str().unwrap_or("?")
        )
    })
}

/// `locked acme/pay/prod: alice at 2026-…: "incident 42"`, or what an unlock removed.
fn lock_text(body: &Value) -> String {
    let target = body["target"].as_str().unwrap_or_default();
    let lock = &body["lock"];
    let who = || {
        format!(
            "{} at {}: \"{}\"",
            lock["by"].as_str().unwrap_or("?"),
            lock["at"].as_str().unwrap_or("?"),
            lock["reason"].as_str().unwrap_or_default()
        )
    };
    match (body["locked"].as_bool(), lock.is_object()) {
        (Some(true), _) => format!("locked {target}: {}\n", who()),
        (_, true) => format!("unlocked {target} (it was locked by {})\n", who()),
        _ => format!("{target} was not locked\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_names_who_when_and_why() {
        let locked = json!({"target": "acme/pay/prod", "locked": true,
            "lock": {"by": "alice", "at": "2026-11-26T10:00:00Z", "reason": "incident 42"}});
        let text = lock_text(&locked);
        assert!(
            text.contains("alice") && text.contains("incident 42") && text.contains("2026-11-26")
        );
        let removed = json!({"target": "acme", "locked": false,
            "lock": {"by": "bob", "at": "2026-11-26T10:00:00Z", "reason": "freeze"}});
        assert!(lock_text(&removed).starts_with("unlocked acme"));
        assert_eq!(
            lock_text(&json!({"target": "acme", "locked": false})),
            "acme was not locked\n"
        );
    }
}
