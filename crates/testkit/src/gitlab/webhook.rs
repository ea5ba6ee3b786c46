//! Webhook deliveries as GitLab sends them: GitLab's headers (the secret token as-is, an
//! event UUID, a per-webhook UUID, an `Idempotency-Key` kept across retries) and payloads
//! shaped like the "Webhook events" page's examples, built from the double's state
//! (<https://docs.gitlab.com/user/project/integrations/webhook_events/>).

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};

use super::server::{mr_hook_attributes, project_hook_json, user_hook_json};
use super::{rules, GitlabDouble, MergeRequest, Project, World};

/// `X-Gitlab-Event` of merge request events.
pub const MERGE_REQUEST_HOOK: &str = "Merge Request Hook";
/// `X-Gitlab-Event` of comment events.
pub const NOTE_HOOK: &str = "Note Hook";
/// `X-Gitlab-Event` of push events.
pub const PUSH_HOOK: &str = "Push Hook";

/// A random UUID (version 4), as GitLab's UUID headers carry.
pub fn uuid() -> String {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).expect("the OS random source");
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

/// A project webhook: where deliveries go, its secret token and its UUID.
#[derive(Debug, Clone)]
pub struct Hook {
    /// The receiver's URL.
    pub url: String,
    /// The secret token, sent as-is in `X-Gitlab-Token` (none when empty).
    pub secret_token: String,
    /// `X-Gitlab-Webhook-UUID`: the same for every delivery of this webhook.
    pub webhook_uuid: String,
    /// `X-Gitlab-Instance`: the instance that sends.
    pub instance: String,
}

impl Hook {
    /// A webhook delivering to `url` with `secret_token`.
    pub fn new(url: &str, secret_token: &str) -> Self {
        Self {
            url: url.to_string(),
            secret_token: secret_token.to_string(),
            webhook_uuid: uuid(),
            instance: "https://gitlab.example.com".into(),
        }
    }

    /// A new delivery of `payload` as `event` (`Merge Request Hook`, `Note Hook`, `Push
    /// Hook`...): its own event UUID and idempotency key.
    pub fn delivery(&self, event: &str, payload: Value) -> Delivery {
        Delivery {
            hook: self.clone(),
            event: event.to_string(),
            payload,
            event_uuid: uuid(),
            idempotency_key: uuid(),
        }
    }
}

/// One webhook event. Sending it again is a retry: the same `X-Gitlab-Event-UUID` and the
/// same `Idempotency-Key` ("Unique ID consistent across webhook retries", GitLab 17.4).
#[derive(Debug, Clone)]
pub struct Delivery {
    /// The webhook it is delivered by.
    pub hook: Hook,
    /// `X-Gitlab-Event`.
    pub event: String,
    /// The JSON body.
    pub payload: Value,
    /// `X-Gitlab-Event-UUID`.
    pub event_uuid: String,
    /// `Idempotency-Key`.
    pub idempotency_key: String,
}

impl Delivery {
    /// POSTs the delivery with GitLab's headers; the receiver's status and body (status 0
    /// when it could not be reached).
    pub async fn send(&self) -> (u16, String) {
        let body = serde_json::to_vec(&self.payload).unwrap_or_default();
        let mut request = hyper::Request::post(&self.hook.url)
            .header("content-type", "application/json")
            .header("user-agent", rules::USER_AGENT)
            .header("x-gitlab-event", &self.event)
            .header("x-gitlab-instance", &self.hook.instance)
            .header("x-gitlab-webhook-uuid", &self.hook.webhook_uuid)
            .header("x-gitlab-event-uuid", &self.event_uuid)
            .header("idempotency-key", &self.idempotency_key);
        if !self.hook.secret_token.is_empty() {
            request = request.header("x-gitlab-token", &self.hook.secret_token);
        }
        let Ok(request) = request.body(Full::new(Bytes::from(body))) else {
            return (0, "not a valid request".into());
        };
        let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
        match tokio::time::timeout(std::time::Duration::from_secs(30), client.request(request))
            .await
        {
            Ok(Ok(response)) => {
                let status = response.status().as_u16();
                let body = response
                    .into_body()
                    .collect()
                    .await
                    .map(|b| String::from_utf8_lossy(&b.to_bytes()).into_owned())
                    .unwrap_or_default();
                (status, body)
            }
            Ok(Err(e)) => (0, e.to_string()),
            Err(_) => (0, "no answer within 30 s".into()),
        }
    }
}

/// Delivers `payload` as `event` to `url` with `secret_token` once, as a new webhook's first
/// delivery: the receiver's status and body.
pub async fn send_webhook(
    url: &str,
    secret_token: &str,
    event: &str,
    payload: &Value,
) -> (u16, String) {
    Hook::new(url, secret_token)
        .delivery(event, payload.clone())
        .send()
        .await
}

/// Builds delivery payloads from the double's state (what GitLab would send now).
pub struct WebhookPayloads<'a> {
    double: &'a GitlabDouble,
}

impl GitlabDouble {
    /// A webhook delivering to `url` with `secret_token`, sent from this instance
    /// (`X-Gitlab-Instance` is the double's URL).
    pub fn hook(&self, url: &str, secret_token: &str) -> Hook {
        Hook {
            instance: self.url().to_string(),
            ..Hook::new(url, secret_token)
        }
    }

    /// Payloads built from this double's projects and merge requests.
    pub fn payloads(&self) -> WebhookPayloads<'_> {
        WebhookPayloads { double: self }
    }
}

impl WebhookPayloads<'_> {
    fn with_mr<T>(
        &self,
        project: &str,
        iid: u64,
        f: impl FnOnce(&World, &Project, &MergeRequest) -> T,
    ) -> T {
        let world = self.double.world();
        let id = world
            .project_id(project)
            .unwrap_or_else(|| panic!("no project {project} in the double"));
        let p = &world.projects[&id];
        let mr = p
            .merge_requests
            .get(&iid)
            .unwrap_or_else(|| panic!("no merge request {project}!{iid}"));
        f(&world, p, mr)
    }

    /// A `Merge Request Hook` for merge request `iid` with `object_attributes.action`
    /// `action` (`open`, `update`, `reopen`, `close`, `merge`, `approved`, `unapproved`,
    /// `approval`, `unapproval`), sent by its author. An `update` built here carries no
    /// `oldrev` (no new commits): see [`WebhookPayloads::merge_request_push`].
    pub fn merge_request(&self, project: &str, iid: u64, action: &str) -> Value {
        let author = self.with_mr(project, iid, |_, _, mr| mr.spec.author.clone());
        self.merge_request_by(project, iid, action, &author)
    }

    /// [`WebhookPayloads::merge_request`] sent by `username` (an approver, say).
    pub fn merge_request_by(&self, project: &str, iid: u64, action: &str, username: &str) -> Value {
        self.with_mr(project, iid, |world, p, mr| {
            let mut attributes = mr_hook_attributes(world, p, mr);
            attributes["action"] = json!(action);
            json!({
                "object_kind": "merge_request",
                "event_type": "merge_request",
                "user": user_hook_json(world, username),
                "project": project_hook_json(world, p),
                "repository": repository_json(world, p),
                "object_attributes": attributes,
                "labels": [],
                "changes": {},
                "assignees": [],
                "reviewers": [],
            })
        })
    }

    /// The `Merge Request Hook` (`update`) that new commits on merge request `iid` send:
    /// `object_attributes.oldrev` is its head before the last [`GitlabDouble::push`].
    ///
    /// # Panics
    ///
    /// When nothing was pushed to it since it was opened.
    pub fn merge_request_push(&self, project: &str, iid: u64) -> Value {
        let oldrev = self.with_mr(project, iid, |_, _, mr| {
            mr.heads()
                .rev()
                .nth(1)
                .map(str::to_string)
                .unwrap_or_else(|| panic!("nothing was pushed to {project}!{iid}"))
        });
        let mut value = self.merge_request(project, iid, "update");
        value["object_attributes"]["oldrev"] = json!(oldrev);
        value
    }

    /// A `Note Hook` for note `note_id` on merge request `iid` (`noteable_type:
    /// MergeRequest`, with the `merge_request` object).
    pub fn note(&self, project: &str, iid: u64, note_id: u64) -> Value {
        self.with_mr(project, iid, |world, p, mr| {
            let note = p
                .notes
                .iter()
                .find(|n| n.id == note_id && n.merge_request_iid == iid)
                .unwrap_or_else(|| panic!("no note {note_id} on {project}!{iid}"));
            let url = format!(
                "{}/{}/-/merge_requests/{iid}#note_{note_id}",
                world.base_url, p.path_with_namespace
            );
            json!({
                "object_kind": "note",
                "event_type": "note",
                "user": user_hook_json(world, &note.author),
                "project_id": p.id,
                "project": project_hook_json(world, p),
                "repository": repository_json(world, p),
                "object_attributes": {
                    "id": note.id,
                    "note": note.body,
                    "noteable_type": "MergeRequest",
                    "author_id": world.users.get(&note.author).copied().unwrap_or(0),
                    "project_id": p.id,
                    "noteable_id": mr.id,
                    "system": false,
                    "action": if note.history.is_empty() { "create" } else { "update" },
                    "url": url,
                    "type": null,
                    "internal": false,
                    "confidential": false,
                    "discussion_id": format!("{:0>40x}", note.id),
                },
                "merge_request": mr_hook_attributes(world, p, mr),
            })
        })
    }

    /// A `Push Hook` of `git_ref` (`refs/heads/main`) from `before` to `after` by `username`.
    pub fn push(
        &self,
        project: &str,
        git_ref: &str,
        before: &str,
        after: &str,
        username: &str,
    ) -> Value {
        let guard = self.double.world();
        let world: &World = &guard;
        let id = world
            .project_id(project)
            .unwrap_or_else(|| panic!("no project {project} in the double"));
        let p = &world.projects[&id];
        let deleted = after.chars().all(|c| c == '0');
        let commits = if deleted {
            json!([])
        } else {
            json!([{
                "id": after,
                "message": "Change\n",
                "title": "Change",
                "timestamp": "2026-01-01T00:00:00+00:00",
                "url": format!("{}/{}/-/commit/{after}", world.base_url, p.path_with_namespace),
                "author": {"name": username, "email": "[REDACTED]"},
                "added": [], "modified": [], "removed": [],
            }])
        };
        json!({
            "object_kind": "push",
            "event_name": "push",
            "before": before,
            "after": after,
            "ref": git_ref,
            "ref_protected": git_ref == format!("refs/heads/{}", p.default_branch),
            "checkout_sha": if deleted { Value::Null } else { json!(after) },
            "user_id": world.users.get(username).copied().unwrap_or(0),
            "user_name": username,
            "user_username": username,
            "user_email": "[REDACTED]",
            "user_avatar": null,
            "project_id": p.id,
            "project": project_hook_json(world, p),
            "repository": repository_json(world, p),
            "total_commits_count": if deleted { 0 } else { 1 },
            "commits": commits,
        })
    }
}

fn repository_json(world: &World, p: &Project) -> Value {
    let web_url = format!("{}/{}", world.base_url, p.path_with_namespace);
    json!({
        "name": p.path(),
        "url": format!("{web_url}.git"),
        "description": "",
        "homepage": web_url,
        "git_http_url": format!("{web_url}.git"),
        "git_ssh_url": format!("git@127.0.0.1:{}.git", p.path_with_namespace),
        "visibility_level": 0,
    })
}
