//! GitLab's webhook deliveries: their headers, the secret token, and the events Sortie acts
//! on, read into Sortie's host-neutral [`PullWork`]
//! (<https://docs.gitlab.com/user/project/integrations/webhook_events/>).
//!
//! GitLab does not sign a delivery: it sends the webhook's secret token as it is, in
//! `X-Gitlab-Token` (<https://docs.gitlab.com/user/project/integrations/webhooks/>).
//! [`verify_token`] compares it in constant time; the receiver calls it before [`parse`].
//! [`parse`] reads a "Merge Request Hook", a "Note Hook" on a merge request and a "Push
//! Hook"; every other event, or action of one, is `Ok(None)`; a body that is not the
//! documented shape is an error naming the field; nothing a sender writes can make it
//! panic, and every value kept is bounded.
//!
//! The "repository" of the work is the project's `path_with_namespace` (the target
//! project, for a merge request from a fork) and its "number" the merge request's `iid`.

use serde::Deserialize;
use sha2::{Digest, Sha256};
use sortie_core::vcs::command::parse_commands;
use sortie_core::vcs::work::{PullAction, PullWork};
use sortie_core::vcs::VcsProvider;

use crate::{GitlabError, ProjectPath};

/// The header naming the event, `"<EVENT> Hook"` (`Merge Request Hook`, `Note Hook`,
/// `Push Hook`, ...).
pub const EVENT_HEADER: &str = "x-gitlab-event";
/// The header holding the webhook's secret token, as it is.
pub const TOKEN_HEADER: &str = "x-gitlab-token";
/// The header holding an id unique to the event (GitLab 14.8 and later); webhooks a webhook
/// triggered share it.
pub const EVENT_UUID_HEADER: &str = "x-gitlab-event-uuid";
/// The header holding an id the same on every retry of one delivery (GitLab 17.4 and
/// later): the key to drop a repeat by.
pub const IDEMPOTENCY_KEY_HEADER: &str = "idempotency-key";
/// The header holding the webhook's own id (GitLab 16.2 and later).
pub const WEBHOOK_UUID_HEADER: &str = "x-gitlab-webhook-uuid";
/// The header naming the instance that sent the delivery (GitLab 15.5 and later).
pub const INSTANCE_HEADER: &str = "x-gitlab-instance";

/// `X-Gitlab-Event` of a merge request event.
pub const MERGE_REQUEST_HOOK: &str = "Merge Request Hook";
/// `X-Gitlab-Event` of a comment event.
pub const NOTE_HOOK: &str = "Note Hook";
/// `X-Gitlab-Event` of a push event.
pub const PUSH_HOOK: &str = "Push Hook";

/// The largest body a delivery has: GitLab does not send a webhook whose JSON is over 25 MB
/// (<https://gitlab.com/gitlab-org/gitlab/-/merge_requests/38687>). Read as 25 MiB, the
/// larger reading; a larger body is refused unread.
pub const MAX_PAYLOAD_BYTES: usize = 25 * 1024 * 1024;

/// The longest delivery key kept ([`delivery_key`]).
const MAX_KEY_CHARS: usize = 128;
/// The longest username kept (GitLab's own limit is 255 characters).
const MAX_USERNAME_CHARS: usize = 255;
/// The longest branch name kept.
const MAX_BRANCH_CHARS: usize = 1024;
/// What `after` is when a push deleted the branch.
const ZERO_SHA: u8 = b'0';

/// True when `header` (the `X-Gitlab-Token` of a delivery) is exactly the webhook's secret
/// `expected`, compared in constant time (SHA-256 digests of both, compared byte by byte
/// without stopping early, so neither the content nor the length of the secret shows in the
/// time taken). Always false for an empty secret (a webhook without a token proves nothing)
/// and for a missing header.
pub fn verify_token(expected: &[u8], header: Option<&str>) -> bool {
    let Some(header) = header else {
        return false;
    };
    if expected.is_empty() {
        return false;
    }
    let want = Sha256::digest(expected);
    let got = Sha256::digest(header.as_bytes());
    let diff = want
        .iter()
        .zip(got.iter())
        .fold(0u8, |acc, (a, b)| acc | (a ^ b));
    std::hint::black_box(diff) == 0
}

/// The key to drop a repeated delivery by: the `Idempotency-Key` (the same on every retry;
/// GitLab 17.4 and later), else the `X-Gitlab-Event-UUID`. `None` when neither is present
/// or fit to keep (empty, over 128 characters, or not printable ASCII).
pub fn delivery_key(idempotency_key: Option<&str>, event_uuid: Option<&str>) -> Option<String> {
    let fit = |key: &&str| {
        !key.is_empty() && key.len() <= MAX_KEY_CHARS && key.bytes().all(|b| b.is_ascii_graphic())
    };
    idempotency_key
        .map(str::trim)
        .filter(fit)
        .or_else(|| event_uuid.map(str::trim).filter(fit))
        .map(str::to_string)
}

/// The leniently read part of a merge request or note delivery: enough to decide whether
/// Sortie acts on it, whatever else the body holds.
#[derive(Deserialize)]
struct Kind {
    #[serde(default)]
    object_attributes: Option<KindAttributes>,
}

#[derive(Deserialize)]
struct KindAttributes {
    #[serde(default)]
    action: Option<serde_json::Value>,
    #[serde(default)]
    noteable_type: Option<serde_json::Value>,
    #[serde(default)]
    system: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct ProjectPayload {
    path_with_namespace: String,
}

#[derive(Deserialize)]
struct CommitPayload {
    id: String,
}

#[derive(Deserialize)]
struct MergeRequestEvent {
    project: ProjectPayload,
    object_attributes: MergeRequestAttributes,
    /// What an `update` changed (its keys only are read).
    #[serde(default)]
    changes: Option<serde_json::Map<String, serde_json::Value>>,
}

#[derive(Deserialize)]
struct MergeRequestAttributes {
    iid: u64,
    #[serde(default)]
    oldrev: Option<String>,
    #[serde(default)]
    last_commit: Option<CommitPayload>,
}

#[derive(Deserialize)]
struct UserPayload {
    username: String,
}

#[derive(Deserialize)]
struct NoteEvent {
    user: UserPayload,
    project: ProjectPayload,
    object_attributes: NoteAttributes,
    merge_request: NotedMergeRequest,
}

#[derive(Deserialize)]
struct NoteAttributes {
    note: String,
}

#[derive(Deserialize)]
struct NotedMergeRequest {
    iid: u64,
}

#[derive(Deserialize)]
struct PushEvent {
    #[serde(rename = "ref")]
    ref_name: String,
    after: String,
    project: ProjectPayload,
}

/// Reads a delivery of event `event` (its `X-Gitlab-Event` header) for organisation `org`'s
/// connection into the work it makes, `None` for one Sortie does not act on:
///
/// - "Merge Request Hook": `open`, `reopen`, `close`, `merge`, and `update` with new commits
///   (`oldrev` present) or a new target branch (`changes.target_branch`) are
///   [`PullWork::PullRequest`]; `approved`, `unapproved`, `approval` and `unapproval` are
///   [`PullWork::Review`] (the requirements may hold now); any other update (title,
///   labels, draft) is `None`.
/// - "Note Hook" on a merge request, created (not edited), not a system note: its `/sortie`
///   commands as [`PullWork::Comment`]; `None` without any.
/// - "Push Hook" to a branch, not deleting it: [`PullWork::Push`] (a merge request's target
///   branch moving changes how far its source is behind).
pub fn parse(event: &str, body: &[u8], org: &str) -> Result<Option<PullWork>, GitlabError> {
    let fail = |reason: String| GitlabError::Webhook {
        event: event.chars().take(64).collect(),
        reason,
    };
    if body.len() > MAX_PAYLOAD_BYTES {
        return Err(fail(format!(
            "the payload is over {MAX_PAYLOAD_BYTES} bytes"
        )));
    }
    let typed = |e: serde_json::Error| fail(e.to_string());
    match event {
        MERGE_REQUEST_HOOK => {
            let kind: Kind = serde_json::from_slice(body).map_err(typed)?;
            let action = kind
                .object_attributes
                .and_then(|a| a.action)
                .and_then(|a| a.as_str().map(str::to_string));
            let Some(action) = action else {
                return Ok(None);
            };
            let pull_action = match action.as_str() {
                "open" => PullAction::Opened,
                "reopen" => PullAction::Reopened,
                "update" => PullAction::Synchronize,
                "close" | "merge" => PullAction::Closed,
                "approved" | "unapproved" | "approval" | "unapproval" => {
                    let e: MergeRequestEvent = serde_json::from_slice(body).map_err(typed)?;
                    return Ok(Some(PullWork::Review {
                        org: org.to_string(),
                        provider: VcsProvider::Gitlab,
                        repository: repository(&e.project).map_err(fail)?,
                        number: iid(e.object_attributes.iid).map_err(fail)?,
                    }));
                }
                _ => return Ok(None),
            };
            let e: MergeRequestEvent = serde_json::from_slice(body).map_err(typed)?;
            let attributes = e.object_attributes;
            // GitLab sends `oldrev` "only when there are actual code changes"; a new target
            // branch (`changes.target_branch`) changes which environments are bound.
            let new_commits = attributes.oldrev.as_deref().is_some_and(|r| !r.is_empty());
            let retargeted = e
                .changes
                .as_ref()
                .is_some_and(|c| c.contains_key("target_branch"));
            if pull_action == PullAction::Synchronize && !new_commits && !retargeted {
                return Ok(None);
            }
            let head_sha = match attributes.last_commit {
                Some(commit) => sha(&commit.id).map_err(fail)?,
                // A closed merge request's work re-reads it; its head is not needed.
                None if pull_action == PullAction::Closed => String::new(),
                None => return Err(fail("missing field `object_attributes.last_commit`".into())),
            };
            Ok(Some(PullWork::PullRequest {
                org: org.to_string(),
                provider: VcsProvider::Gitlab,
                repository: repository(&e.project).map_err(fail)?,
                number: iid(attributes.iid).map_err(fail)?,
                action: pull_action,
                head_sha,
                merged: action == "merge",
            }))
        }
        NOTE_HOOK => {
            let kind: Kind = serde_json::from_slice(body).map_err(typed)?;
            let Some(attributes) = kind.object_attributes else {
                return Ok(None);
            };
            let on_merge_request =
                attributes.noteable_type.as_ref().and_then(|t| t.as_str()) == Some("MergeRequest");
            // `action` came in GitLab 16.11; before it, every delivery was a creation.
            let created = match &attributes.action {
                None | Some(serde_json::Value::Null) => true,
                Some(a) => a.as_str() == Some("create"),
            };
            let system = attributes.system.as_ref().and_then(|s| s.as_bool()) == Some(true);
            if !on_merge_request || !created || system {
                return Ok(None);
            }
            let e: NoteEvent = serde_json::from_slice(body).map_err(typed)?;
            let commands = parse_commands(&e.object_attributes.note);
            if commands.is_empty() {
                return Ok(None);
            }
            Ok(Some(PullWork::Comment {
                org: org.to_string(),
                provider: VcsProvider::Gitlab,
                repository: repository(&e.project).map_err(fail)?,
                number: iid(e.merge_request.iid).map_err(fail)?,
                author: username(&e.user.username).map_err(fail)?,
                commands,
            }))
        }
        PUSH_HOOK => {
            let e: PushEvent = serde_json::from_slice(body).map_err(typed)?;
            let Some(branch) = e.ref_name.strip_prefix("refs/heads/") else {
                return Ok(None);
            };
            if e.after.bytes().all(|b| b == ZERO_SHA) {
                // The branch was deleted.
                return Ok(None);
            }
            if branch.is_empty()
                || branch.chars().count() > MAX_BRANCH_CHARS
                || branch.chars().any(char::is_control)
            {
                return Err(fail("`ref` is not a branch Sortie keeps".into()));
            }
            Ok(Some(PullWork::Push {
                org: org.to_string(),
                provider: VcsProvider::Gitlab,
                repository: repository(&e.project).map_err(fail)?,
                branch: branch.to_string(),
                after: sha(&e.after).map_err(fail)?,
            }))
        }
        _ => Ok(None),
    }
}

fn repository(project: &ProjectPayload) -> Result<String, String> {
    ProjectPath::parse(&project.path_with_namespace)
        .map(String::from)
        .map_err(|e| format!("`project.path_with_namespace`: {e}"))
}

fn iid(value: u64) -> Result<u64, String> {
    if value == 0 {
        return Err("the merge request's `iid` is 0".into());
    }
    Ok(value)
}

fn sha(value: &str) -> Result<String, String> {
    if (7..=64).contains(&value.len()) && value.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Ok(value.to_string());
    }
    Err("a commit id is not 7 to 64 hexadecimal digits".into())
}

fn username(value: &str) -> Result<String, String> {
    if value.is_empty()
        || value.chars().count() > MAX_USERNAME_CHARS
        || value.chars().any(char::is_control)
    {
        return Err("`user.username` is not a username".into());
    }
    Ok(value.to_string())
}

#[cfg(test)]
#[path = "webhook_tests.rs"]
mod tests;
