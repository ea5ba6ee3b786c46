//! `sortie env lock|unlock PATH` and `sortie group lock|unlock GROUP` (a freeze), and
//! `sortie env extend PATH --by 24h` (an expiring environment's new end), and
//! `sortie group expiry GROUP [--default-ttl 3d] [--max-ttl 14d]`.

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
        GroupCommand::Expiry {
            group,
            default_ttl,
            max_ttl,
        } => return group_expiry(api, &group, default_ttl, max_ttl, out).await,
    };
    let group = group.trim_matches('/');
    if group.is_empty() {
        return Err(CliError::Usage(
            "name a group, such as `acme` or `acme/payments`: the root group spans every organisation and cannot be locked".into(),
        ));
    }
    lock(api, &group_url(group), reason.as_deref(), out).await
}

/// `sortie group expiry GROUP [--default-ttl D] [--max-ttl D]`: reads the limits, and
/// with an option sets them (the one not named is kept; `none` unsets).
async fn group_expiry(
    api: &Api,
    group: &str,
    default_ttl: Option<String>,
    max_ttl: Option<String>,
    out: Output,
) -> Result<(), CliError> {
    let url = format!("{}/expiry", group_url(group.trim_matches('/')));
    let current = api.send(Method::GET, &url, None, &[]).await?.body;
    let body = if default_ttl.is_none() && max_ttl.is_none() {
        current
    } else {
        let pick = |given: Option<String>, field: &str| match given.as_deref() {
            Some("none") => Value::Null,
            Some(d) => Value::String(d.to_string()),
            None => current[field].clone(),
        };
        let body = json!({
            "default_ttl": pick(default_ttl, "default_ttl"),
            "max_ttl": pick(max_ttl, "max_ttl"),
        });
        api.send(Method::PUT, &url, Some(&body), &[]).await?.body
    };
    emit(&body, out, || expiry_text(&body))
}

/// `acme: default TTL 3d, maximum 14d (in force below it: default 3d, maximum 14d)`.
fn expiry_text(body: &Value) -> String {
    let show = |v: &Value| v.as_str().unwrap_or("none").to_string();
    format!(
        "{}: default TTL {}, maximum {} (in force below it: default {}, maximum {})\n",
        body["group"].as_str().unwrap_or_default(),
        show(&body["default_ttl"]),
        show(&body["max_ttl"]),
        show(&body["inherited"]["default_ttl"]),
        show(&body["inherited"]["max_ttl"]),
    )
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
            readable_time(&body["expires_at"])
        )
    })
}

/// An RFC 3339 time of an answer as the CLI prints times (`2026-11-25 12:03:00 UTC`);
/// `?` when absent, the text itself when it is not one.
fn readable_time(value: &Value) -> String {
    match value.as_str() {
        None => "?".to_string(),
        Some(text) => chrono::DateTime::parse_from_rfc3339(text).map_or_else(
            |_| text.to_string(),
            |t| crate::output::when(t.with_timezone(&chrono::Utc)),
        ),
    }
}

/// `locked acme/pay/prod: alice at 2026-11-26 10:00:00 UTC: "incident 42"`, or what an
/// unlock removed.
fn lock_text(body: &Value) -> String {
    let target = body["target"].as_str().unwrap_or_default();
    let lock = &body["lock"];
    let who = || {
        format!(
            "{} at {}: \"{}\"",
            lock["by"].as_str().unwrap_or("?"),
            readable_time(&lock["at"]),
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
        assert_eq!(
            text,
            "locked acme/pay/prod: alice at 2026-11-26 10:00:00 UTC: \"incident 42\"\n"
        );
        let removed = json!({"target": "acme", "locked": false,
            "lock": {"by": "bob", "at": "2026-11-26T10:00:00Z", "reason": "freeze"}});
        assert!(lock_text(&removed).starts_with("unlocked acme"));
        assert_eq!(
            lock_text(&json!({"target": "acme", "locked": false})),
            "acme was not locked\n"
        );
    }

    #[test]
    fn times_read_as_the_cli_prints_them_not_as_rfc_3339_nanoseconds() {
        assert_eq!(
            readable_time(&json!("2026-11-29T12:10:38.123456789Z")),
            "2026-11-29 12:10:38 UTC"
        );
        assert_eq!(readable_time(&json!("soon")), "soon");
        assert_eq!(readable_time(&Value::Null), "?");
    }

    #[test]
    fn the_expiry_text_shows_own_and_inherited_limits() {
        let body = json!({"group": "acme/team", "max_ttl": "7d",
            "inherited": {"default_ttl": "3d", "max_ttl": "7d"}});
        assert_eq!(
            expiry_text(&body),
            "acme/team: default TTL none, maximum 7d (in force below it: default 3d, maximum 7d)\n"
        );
    }
}
