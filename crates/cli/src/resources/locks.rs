//! `sortie env lock|unlock PATH` and `sortie group lock|unlock GROUP` (a freeze), and
//! `sortie env extend PATH --by 24h` (an expiring environment's new end), and
//! `sortie group expiry GROUP [--default-ttl 3d] [--max-ttl 14d]`.

use std::io::IsTerminal;

use serde_json::{json, Value};
use sortie_client::{endpoints, Call};

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
            apply_to_existing,
            dry_run,
            yes,
        } => {
            let change = ExpiryChange {
                default_ttl,
                max_ttl,
                apply_to_existing,
                dry_run,
                yes,
            };
            return group_expiry(api, &group, change, out).await;
        }
    };
    let group = group.trim_matches('/');
    if group.is_empty() {
        return Err(CliError::Usage(
            "name a group, such as `acme` or `acme/payments`: the root group spans every organisation and cannot be locked".into(),
        ));
    }
    let call = match reason {
        Some(_) => endpoints::freeze_group(group),
        None => endpoints::unfreeze_group(group),
    };
    lock(api, &call, reason.as_deref(), out).await
}

/// The options of `sortie group expiry`.
struct ExpiryChange {
    default_ttl: Option<String>,
    max_ttl: Option<String>,
    apply_to_existing: bool,
    dry_run: bool,
    yes: bool,
}

/// `sortie group expiry GROUP [--default-ttl D] [--max-ttl D] [--apply-to-existing]
/// [--dry-run] [--yes]`: reads the limits, and with an option sets them (the one not named
/// is kept; `none` unsets). With `--apply-to-existing` a dry run says first what would
/// expire, and a person confirms it (or `--yes`).
async fn group_expiry(
    api: &Api,
    group: &str,
    change: ExpiryChange,
    out: Output,
) -> Result<(), CliError> {
    let group = sortie_client::group(group);
    let current = api
        .send(&endpoints::get_group_expiry(group), None, &[])
        .await?
        .body;
    let set = endpoints::set_group_expiry(group);
    if change.default_ttl.is_none() && change.max_ttl.is_none() {
        if change.apply_to_existing || change.dry_run {
            return Err(CliError::Usage(
                "--apply-to-existing and --dry-run go with --default-ttl or --max-ttl".into(),
            ));
        }
        return emit(&current, out, || expiry_text(&current));
    }
    let pick = |given: &Option<String>, field: &str| match given.as_deref() {
        Some("none") => Value::Null,
        Some(d) => Value::String(d.to_string()),
        None => current[field].clone(),
    };
    let mut body = json!({
        "default_ttl": pick(&change.default_ttl, "default_ttl"),
        "max_ttl": pick(&change.max_ttl, "max_ttl"),
        "apply_to_existing": change.apply_to_existing,
        "dry_run": true,
    });
    if change.dry_run {
        let answer = api.send(&set, Some(&body), &[]).await?.body;
        return emit(&answer, out, || {
            format!(
                "{}{}",
                expiry_text(&answer),
                change_text(&answer["change"], true)
            )
        });
    }
    if change.apply_to_existing {
        let preview = api.send(&set, Some(&body), &[]).await?.body;
        let sooner = preview["change"]["sooner"].as_u64().unwrap_or(0);
        if sooner > 0 && !change.yes {
            let what = change_text(&preview["change"], true);
            if !std::io::stdin().is_terminal() || !std::io::stderr().is_terminal() {
                return Err(CliError::Usage(format!(
                    "{what}not changed: --apply-to-existing schedules existing environments for destruction; add --yes to confirm when not in a terminal"
                )));
            }
            eprint!("{what}Apply the default to them? [y/N] ");
            let mut line = String::new();
            std::io::stdin()
                .read_line(&mut line)
                .map_err(|e| CliError::Usage(format!("could not read the answer: {e}")))?;
            if !matches!(line.trim(), "y" | "Y" | "yes") {
                return Err(CliError::Usage("not changed".into()));
            }
        }
    }
    body["dry_run"] = Value::Bool(false);
    let answer = api.send(&set, Some(&body), &[]).await?.body;
    emit(&answer, out, || {
        format!(
            "{}{}",
            expiry_text(&answer),
            change_text(&answer["change"], false)
        )
    })
}

/// `acme: default TTL 3d, maximum 14d (in force below it: default 3d, maximum 14d)`, and
/// when the default reaches only the environments created since a time, that.
fn expiry_text(body: &Value) -> String {
    let show = |v: &Value| v.as_str().unwrap_or("none").to_string();
    let mut text = format!(
        "{}: default TTL {}, maximum {} (in force below it: default {}, maximum {})\n",
        body["group"].as_str().unwrap_or_default(),
        show(&body["default_ttl"]),
        show(&body["max_ttl"]),
        show(&body["inherited"]["default_ttl"]),
        show(&body["inherited"]["max_ttl"]),
    );
    if body["default_ttl"].is_string() && body["default_since"].is_string() {
        text.push_str(&format!(
            "its default reaches the environments created since {}\n",
            readable_time(&body["default_since"])
        ));
    }
    text
}

/// What a change of a group's limits does (did) to the environments below it: those that
/// expire sooner (each listed for a dry run, else the first), those a new default leaves
/// alone, and how to reach them.
fn change_text(change: &Value, dry_run: bool) -> String {
    let n = |field: &str| change[field].as_u64().unwrap_or(0);
    let named = change["environments"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut text = String::new();
    match n("sooner") {
        0 => text.push_str(&format!(
            "no environment below it {} expire sooner\n",
            if dry_run { "would" } else { "will" }
        )),
        sooner => {
            // An answer that names none (it always names the first) reads as `?`, never a panic.
            let first = named.first().cloned().unwrap_or(Value::Null);
            let verb = match (dry_run, sooner) {
                (true, _) => "would expire",
                (false, 1) => "now expires",
                (false, _) => "now expire",
            };
            text.push_str(&format!(
                "{sooner} environment{} {verb} sooner than before (or at all), the first {} at {}\n",
                if sooner == 1 { "" } else { "s" },
                first["environment"].as_str().unwrap_or("?"),
                readable_time(&first["expires_at"])
            ));
            if dry_run {
                for e in &named {
                    text.push_str(&format!(
                        "  {}  {}\n",
                        e["environment"].as_str().unwrap_or("?"),
                        readable_time(&e["expires_at"])
                    ));
                }
                if sooner > named.len() as u64 {
                    text.push_str(&format!("  … and {} more\n", sooner - named.len() as u64));
                }
            }
        }
    }
    if n("kept") > 0 {
        text.push_str(&format!(
            "{} existing environment{} keep{} {} end{}: the default reaches them only with --apply-to-existing\n",
            n("kept"),
            if n("kept") == 1 { "" } else { "s" },
            if n("kept") == 1 { "s" } else { "" },
            if n("kept") == 1 { "its" } else { "their" },
            if n("kept") == 1 { "" } else { "s" },
        ));
    }
    if n("later") > 0 {
        text.push_str(&format!(
            "{} environment{} {} later or no longer\n",
            n("later"),
            if n("later") == 1 { "" } else { "s" },
            match (dry_run, n("later")) {
                (true, _) => "would expire",
                (false, 1) => "now expires",
                (false, _) => "now expire",
            },
        ));
    }
    if change["truncated"].as_bool() == Some(true) {
        text.push_str(
            "(more than 1,000 environments below it: the rest are corrected when they come due)\n",
        );
    }
    text
}

/// Locks (with a reason) or unlocks an environment or a group by `call` (its `lock` or
/// `unlock` endpoint), and says what it did.
pub(super) async fn lock(
    api: &Api,
    call: &Call,
    reason: Option<&str>,
    out: Output,
) -> Result<(), CliError> {
    let answer = match reason {
        Some(reason) => {
            let body = json!({ "reason": reason });
            api.send(call, Some(&body), &[]).await?
        }
        None => api.send(call, None, &[]).await?,
    };
    let body = answer.body;
    emit(&body, out, || lock_text(&body))
}

/// Extends an environment by `by` (`call` is its `extend` endpoint), and prints its new
/// end.
pub(super) async fn extend(api: &Api, call: &Call, by: &str, out: Output) -> Result<(), CliError> {
    let body = json!({ "by": by });
    let answer = api.send(call, Some(&body), &[]).await?;
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
    fn a_change_says_what_expires_and_what_a_default_left_alone() {
        let change = json!({"dry_run": true, "sooner": 2, "later": 0, "kept": 0,
            "environments": [
                {"environment": "acme/a", "expires_at": "2026-12-02T10:00:00Z"},
                {"environment": "acme/b", "expires_at": "2026-12-02T11:00:00Z"}]});
        assert_eq!(
            change_text(&change, true),
            "2 environments would expire sooner than before (or at all), the first acme/a at 2026-12-02 10:00:00 UTC\n  acme/a  2026-12-02 10:00:00 UTC\n  acme/b  2026-12-02 11:00:00 UTC\n"
        );
        let kept = json!({"sooner": 0, "later": 1, "kept": 3, "environments": []});
        assert_eq!(
            change_text(&kept, false),
            "no environment below it will expire sooner\n3 existing environments keep their ends: the default reaches them only with --apply-to-existing\n1 environment now expires later or no longer\n"
        );
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
