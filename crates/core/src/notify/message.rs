//! What a delivery says: a webhook's JSON body, and a Slack message.
//!
//! A webhook receives the event as Sortie published it: `{"id", "type", "time", "detail"}`
//! (the delivery's id, the event's `detail-type`, when it happened, its detail). A Slack
//! incoming webhook receives `{"text"}` in Slack's `mrkdwn`: what happened, in which
//! environment, and a link to the job in the console. Everything that comes from a user
//! (environment paths, reasons, names) is escaped as Slack asks (`&`, `<`, `>`), so it can
//! neither make a link nor mention anyone
//! (<https://api.slack.com/reference/surfaces/formatting#escaping>).

use serde_json::{json, Value};

use super::EventKind;

/// The JSON body a webhook receives.
pub fn webhook_body(delivery_id: &str, detail_type: &str, time: &str, detail: &Value) -> Value {
    json!({
        "id": delivery_id,
        "type": detail_type,
        "time": time,
        "detail": detail,
    })
}

/// Text as Slack's `mrkdwn` shows it literally: `&`, `<` and `>` escaped, and control
/// characters (a newline among them) as spaces, so one value stays on its line.
pub fn slack_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// The most characters of a user's text (a reason) put in a Slack message.
const SLACK_REASON_CHARS: usize = 300;

fn field<'a>(detail: &'a Value, name: &str) -> &'a str {
    detail.get(name).and_then(Value::as_str).unwrap_or("")
}

fn clipped(text: &str) -> String {
    let mut cut: String = text.chars().take(SLACK_REASON_CHARS).collect();
    if cut.len() < text.len() {
        cut.push('…');
    }
    slack_escape(&cut)
}

/// The Slack message of an event of `kind` whose detail is `detail`, linking to the console
/// at `console_url`.
pub fn slack_message(kind: EventKind, detail: &Value, console_url: &str) -> Value {
    let console = console_url.trim_end_matches('/');
    let env = slack_escape(field(detail, "environment"));
    let job_id = field(detail, "job_id");
    // A job id is a ULID (letters and digits); anything else is not linked.
    let job_link = if !job_id.is_empty() && job_id.chars().all(|c| c.is_ascii_alphanumeric()) {
        format!(" (<{console}/jobs/{job_id}|job {job_id}>)")
    } else {
        String::new()
    };
    let operation = slack_escape(field(detail, "operation"));
    let by = slack_escape(field(detail, "requested_by"));
    let text = match kind {
        EventKind::JobCompleted => format!(
            ":white_check_mark: {operation} of `{env}` {}{job_link}",
            slack_escape(field(detail, "state"))
        ),
        EventKind::JobFailed => format!(
            ":x: {operation} of `{env}` {}: {}{job_link}",
            slack_escape(field(detail, "state")),
            clipped(field(detail, "reason"))
        ),
        EventKind::AwaitingApproval => format!(
            ":hourglass: {operation} of `{env}` requested by {by} awaits approval{}",
            if job_link.is_empty() {
                String::new()
            } else {
                format!(": review the plan{job_link}")
            }
        ),
        EventKind::PolicyViolation => format!(
            ":no_entry: policy denied the {operation} of `{env}` requested by {by}{job_link}"
        ),
        EventKind::DriftDetected => {
            format!(":warning: `{env}` has drifted from its configuration{job_link}")
        }
        EventKind::ExpiryReminder => format!(
            ":alarm_clock: `{env}` expires in {} ({})",
            slack_escape(field(detail, "left")),
            slack_escape(field(detail, "expires_at"))
        ),
        EventKind::LockChanged => format!(
            ":lock: {} was {} by {}: {}",
            if env.is_empty() {
                format!("group `{}`", slack_escape(field(detail, "group")))
            } else {
                format!("`{env}`")
            },
            slack_escape(field(detail, "action")),
            slack_escape(field(detail, "by")),
            clipped(field(detail, "reason"))
        ),
        EventKind::ConfigurationChanged => format!(
            ":gear: {} {} by {}",
            slack_escape(field(detail, "action")),
            slack_escape(field(detail, "target")),
            slack_escape(field(detail, "by"))
        ),
    };
    json!({ "text": text })
}
