//! The webhook reader against GitLab's documented example payloads
//! (<https://docs.gitlab.com/user/project/integrations/webhook_events/>), cut to what
//! matters and varied, and against hostile input.

use super::*;
use proptest::prelude::*;
use serde_json::{json, Value};
use sortie_core::vcs::command::Command;
use sortie_core::vcs::VcsProvider;

const ORG: &str = "acme";

fn project() -> Value {
    json!({
        "id": 1, "name": "Gitlab Test", "description": "Aut reprehenderit ut est.",
        "web_url": "http://example.com/gitlabhq/gitlab-test", "avatar_url": null,
        "git_ssh_url": "git@example.com:gitlabhq/gitlab-test.git",
        "git_http_url": "http://example.com/gitlabhq/gitlab-test.git",
        "namespace": "GitlabHQ", "visibility_level": 20,
        "path_with_namespace": "gitlabhq/gitlab-test", "default_branch": "master",
        "ci_config_path": "", "homepage": "http://example.com/gitlabhq/gitlab-test",
        "url": "http://example.com/gitlabhq/gitlab-test.git",
        "ssh_url": "git@example.com:gitlabhq/gitlab-test.git",
        "http_url": "http://example.com/gitlabhq/gitlab-test.git"
    })
}

/// The documented "Merge Request Hook" example, with `action` set.
fn merge_request_hook(action: &str) -> Value {
    json!({
        "object_kind": "merge_request",
        "event_type": "merge_request",
        "user": {"id": 1, "name": "Administrator", "username": "root", "email": "admin@example.com"},
        "project": project(),
        "repository": {"name": "Gitlab Test", "url": "http://example.com/gitlabhq/gitlab-test.git"},
        "object_attributes": {
            "id": 99, "iid": 1, "target_branch": "master", "source_branch": "ms-viewport",
            "source_project_id": 14, "author_id": 51, "assignee_ids": [6], "assignee_id": 6,
            "reviewer_ids": [6], "title": "MS-Viewport",
            "created_at": "2013-12-03T17:23:34Z", "updated_at": "2013-12-03T17:23:34Z",
            "milestone_id": null, "state_id": 1, "state": "opened",
            "blocking_discussions_resolved": true, "work_in_progress": false, "draft": false,
            "first_contribution": true, "merge_status": "unchecked", "target_project_id": 14,
            "description": "", "url": "http://example.com/diaspora/merge_requests/1",
            "source": project(), "target": project(),
            "last_commit": {
                "id": "da1560886d4f094c3e6c9ef40349f7d38b5d27d7",
                "message": "fixed readme", "title": "Update file README.md",
                "timestamp": "2012-01-03T23:36:29+02:00",
                "url": "http://example.com/awesome_space/awesome_project/commits/da1560886d4f094c3e6c9ef40349f7d38b5d27d7",
                "author": {"name": "GitLab dev user", "email": "gitlabdev@dv6700.(none)"}
            },
            "labels": [],
            "action": action,
            "detailed_merge_status": "mergeable"
        },
        "labels": [],
        "changes": {"draft": {"previous": true, "current": false}}
    })
}

/// The documented "Note Hook" example of a comment on a merge request, with `note` set.
fn note_hook(note: &str) -> Value {
    json!({
        "object_kind": "note",
        "event_type": "note",
        "user": {"id": 1, "name": "Administrator", "username": "root", "email": "admin@example.com"},
        "project_id": 5,
        "project": project(),
        "repository": {"name": "Gitlab Test", "url": "http://example.com/gitlab-org/gitlab-test.git"},
        "object_attributes": {
            "id": 1244, "note": note, "noteable_type": "MergeRequest", "author_id": 1,
            "created_at": "2015-05-17 18:21:36 UTC", "updated_at": "2015-05-17 18:21:36 UTC",
            "project_id": 5, "attachment": null, "line_code": null, "commit_id": "",
            "noteable_id": 7, "system": false, "st_diff": null, "action": "create",
            "url": "http://example.com/gitlab-org/gitlab-test/merge_requests/1#note_1244"
        },
        "merge_request": {
            "id": 7, "target_branch": "markdown", "source_branch": "master",
            "source_project_id": 5, "author_id": 8, "state": "opened",
            "merge_status": "cannot_be_merged", "target_project_id": 5, "iid": 1,
            "last_commit": {"id": "562e173be03b8ff2efb05345d12df18815438a4b"},
            "draft": false, "detailed_merge_status": "checking"
        }
    })
}

/// The documented "Push Hook" example.
fn push_hook() -> Value {
    json!({
        "object_kind": "push",
        "event_name": "push",
        "before": "95790bf891e76fee5e1747ab589903a6a1f80f22",
        "after": "da1560886d4f094c3e6c9ef40349f7d38b5d27d7",
        "ref": "refs/heads/master",
        "ref_protected": true,
        "checkout_sha": "da1560886d4f094c3e6c9ef40349f7d38b5d27d7",
        "user_id": 4, "user_name": "John Smith", "user_username": "jsmith",
        "project_id": 15,
        "project": project(),
        "commits": [],
        "total_commits_count": 4
    })
}

fn read(event: &str, body: &Value) -> Result<Option<PullWork>, GitlabError> {
    parse(event, body.to_string().as_bytes(), ORG)
}

fn pull(action: PullAction, merged: bool) -> PullWork {
    PullWork::PullRequest {
        org: ORG.into(),
        provider: VcsProvider::Gitlab,
        repository: "gitlabhq/gitlab-test".into(),
        number: 1,
        action,
        head_sha: "da1560886d4f094c3e6c9ef40349f7d38b5d27d7".into(),
        merged,
    }
}

#[test]
fn opening_reopening_closing_and_merging_are_pull_request_work() {
    for (action, pull_action, merged) in [
        ("open", PullAction::Opened, false),
        ("reopen", PullAction::Reopened, false),
        ("close", PullAction::Closed, false),
        ("merge", PullAction::Closed, true),
    ] {
        assert_eq!(
            read(MERGE_REQUEST_HOOK, &merge_request_hook(action)).unwrap(),
            Some(pull(pull_action, merged)),
            "{action}"
        );
    }
}

#[test]
fn an_update_is_work_only_with_new_commits() {
    let mut body = merge_request_hook("update");
    assert_eq!(read(MERGE_REQUEST_HOOK, &body).unwrap(), None);
    body["object_attributes"]["oldrev"] = "".into();
    assert_eq!(read(MERGE_REQUEST_HOOK, &body).unwrap(), None);
    body["object_attributes"]["oldrev"] = "95790bf891e76fee5e1747ab589903a6a1f80f22".into();
    assert_eq!(
        read(MERGE_REQUEST_HOOK, &body).unwrap(),
        Some(pull(PullAction::Synchronize, false))
    );
}

#[test]
fn approvals_are_review_work() {
    for action in ["approved", "unapproved", "approval", "unapproval"] {
        assert_eq!(
            read(MERGE_REQUEST_HOOK, &merge_request_hook(action)).unwrap(),
            Some(PullWork::Review {
                org: ORG.into(),
                provider: VcsProvider::Gitlab,
                repository: "gitlabhq/gitlab-test".into(),
                number: 1
            }),
            "{action}"
        );
    }
}

#[test]
fn unknown_actions_and_events_are_no_work() {
    assert_eq!(
        read(MERGE_REQUEST_HOOK, &merge_request_hook("something_new")).unwrap(),
        None
    );
    assert_eq!(
        read(
            MERGE_REQUEST_HOOK,
            &json!({"object_attributes": {"iid": 1}})
        )
        .unwrap(),
        None
    );
    assert_eq!(
        read(
            MERGE_REQUEST_HOOK,
            &json!({"object_attributes": {"action": 7}})
        )
        .unwrap(),
        None
    );
    for event in [
        "Pipeline Hook",
        "Tag Push Hook",
        "System Hook",
        "Issue Hook",
        "",
    ] {
        assert_eq!(read(event, &push_hook()).unwrap(), None, "{event}");
    }
    // Any bytes at all, for an event Sortie does not read.
    assert_eq!(parse("Job Hook", b"\xff not json", ORG).unwrap(), None);
}

#[test]
fn a_closed_merge_request_needs_no_head() {
    let mut body = merge_request_hook("close");
    body["object_attributes"]
        .as_object_mut()
        .unwrap()
        .remove("last_commit");
    let Some(PullWork::PullRequest { head_sha, .. }) = read(MERGE_REQUEST_HOOK, &body).unwrap()
    else {
        panic!("pull request work")
    };
    assert_eq!(head_sha, "");
    let mut opened = merge_request_hook("open");
    opened["object_attributes"]
        .as_object_mut()
        .unwrap()
        .remove("last_commit");
    let err = read(MERGE_REQUEST_HOOK, &opened).unwrap_err().to_string();
    assert!(err.contains("last_commit"), "{err}");
}

#[test]
fn a_nested_group_project_is_the_repository() {
    let mut body = merge_request_hook("open");
    body["project"]["path_with_namespace"] = "acme/platform/infra".into();
    let Some(PullWork::PullRequest { repository, .. }) = read(MERGE_REQUEST_HOOK, &body).unwrap()
    else {
        panic!("pull request work")
    };
    assert_eq!(repository, "acme/platform/infra");
}

#[test]
fn malformed_fields_are_named() {
    let mut body = merge_request_hook("open");
    body["project"]["path_with_namespace"] = "no-namespace".into();
    let err = read(MERGE_REQUEST_HOOK, &body).unwrap_err().to_string();
    assert!(err.contains("path_with_namespace"), "{err}");
    let mut body = merge_request_hook("open");
    body["object_attributes"]["last_commit"]["id"] = "not a sha; rm -rf /".into();
    let err = read(MERGE_REQUEST_HOOK, &body).unwrap_err().to_string();
    assert!(err.contains("hexadecimal"), "{err}");
    let mut body = merge_request_hook("open");
    body["object_attributes"]["iid"] = (-1).into();
    assert!(read(MERGE_REQUEST_HOOK, &body).is_err());
    body["object_attributes"]["iid"] = 0.into();
    assert!(read(MERGE_REQUEST_HOOK, &body).is_err());
    let body = json!({"object_attributes": {"action": "open"}});
    let err = read(MERGE_REQUEST_HOOK, &body).unwrap_err().to_string();
    assert!(
        err.contains("Merge Request Hook") && err.contains("missing field"),
        "{err}"
    );
}

#[test]
fn a_note_with_commands_is_comment_work() {
    let body = note_hook("Looks good.\n/sortie plan prod\n> /sortie apply");
    assert_eq!(
        read(NOTE_HOOK, &body).unwrap(),
        Some(PullWork::Comment {
            org: ORG.into(),
            provider: VcsProvider::Gitlab,
            repository: "gitlabhq/gitlab-test".into(),
            number: 1,
            author: "root".into(),
            commands: vec![Command::Plan {
                environments: vec!["prod".into()]
            }],
        })
    );
}

#[test]
fn notes_without_commands_edits_system_notes_and_other_targets_are_no_work() {
    assert_eq!(
        read(NOTE_HOOK, &note_hook("This MR needs work.")).unwrap(),
        None
    );
    let mut edited = note_hook("/sortie apply");
    edited["object_attributes"]["action"] = "update".into();
    assert_eq!(read(NOTE_HOOK, &edited).unwrap(), None);
    let mut system = note_hook("/sortie apply");
    system["object_attributes"]["system"] = true.into();
    assert_eq!(read(NOTE_HOOK, &system).unwrap(), None);
    let mut on_issue = note_hook("/sortie apply");
    on_issue["object_attributes"]["noteable_type"] = "Issue".into();
    on_issue.as_object_mut().unwrap().remove("merge_request");
    assert_eq!(read(NOTE_HOOK, &on_issue).unwrap(), None);
    // Before GitLab 16.11 a note delivery had no `action`: a creation.
    let mut old = note_hook("/sortie apply");
    old["object_attributes"]
        .as_object_mut()
        .unwrap()
        .remove("action");
    assert!(matches!(
        read(NOTE_HOOK, &old).unwrap(),
        Some(PullWork::Comment { .. })
    ));
}

#[test]
fn a_push_to_a_branch_is_push_work() {
    assert_eq!(
        read(PUSH_HOOK, &push_hook()).unwrap(),
        Some(PullWork::Push {
            org: ORG.into(),
            provider: VcsProvider::Gitlab,
            repository: "gitlabhq/gitlab-test".into(),
            branch: "master".into(),
            after: "da1560886d4f094c3e6c9ef40349f7d38b5d27d7".into(),
        })
    );
    let mut deleted = push_hook();
    deleted["after"] = "0000000000000000000000000000000000000000".into();
    deleted["checkout_sha"] = Value::Null;
    assert_eq!(read(PUSH_HOOK, &deleted).unwrap(), None);
    let mut tag = push_hook();
    tag["ref"] = "refs/tags/v1.0.0".into();
    assert_eq!(read(PUSH_HOOK, &tag).unwrap(), None);
    let mut nested = push_hook();
    nested["ref"] = "refs/heads/release/2026".into();
    assert!(matches!(
        read(PUSH_HOOK, &nested).unwrap(),
        Some(PullWork::Push { branch, .. }) if branch == "release/2026"
    ));
}

#[test]
fn an_oversized_payload_is_refused_unread() {
    let body = vec![b' '; MAX_PAYLOAD_BYTES + 1];
    let err = parse(PUSH_HOOK, &body, ORG).unwrap_err().to_string();
    assert!(err.contains("over"), "{err}");
}

#[test]
fn the_token_must_match_exactly() {
    assert!(verify_token(b"s3cret", Some("s3cret")));
    assert!(!verify_token(b"s3cret", Some("s3cret ")));
    assert!(!verify_token(b"s3cret", Some("S3CRET")));
    assert!(!verify_token(b"s3cret", Some("")));
    assert!(!verify_token(b"s3cret", None));
    assert!(!verify_token(b"", Some("")));
    assert!(!verify_token(b"", None));
}

#[test]
fn the_delivery_key_prefers_the_idempotency_key() {
    assert_eq!(
        delivery_key(Some("f5e5f430-f57b"), Some("13792a34")).as_deref(),
        Some("f5e5f430-f57b")
    );
    assert_eq!(
        delivery_key(None, Some("13792a34")).as_deref(),
        Some("13792a34")
    );
    assert_eq!(
        delivery_key(Some(""), Some("13792a34")).as_deref(),
        Some("13792a34")
    );
    assert_eq!(delivery_key(Some(&"k".repeat(129)), None), None);
    assert_eq!(delivery_key(Some("a b"), None), None);
    assert_eq!(delivery_key(None, None), None);
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(
        event in prop::sample::select(vec![MERGE_REQUEST_HOOK, NOTE_HOOK, PUSH_HOOK, "Other Hook"]),
        body in proptest::collection::vec(any::<u8>(), 0..512)
    ) {
        let _ = parse(event, &body, ORG);
    }

    #[test]
    fn json_of_any_shape_never_panics(
        event in prop::sample::select(vec![MERGE_REQUEST_HOOK, NOTE_HOOK, PUSH_HOOK]),
        action in prop::sample::select(vec!["open", "update", "merge", "approved", "create", ""]),
        iid in any::<i64>(),
        text in "\\PC{0,24}",
        depth in 0usize..300
    ) {
        let nested = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        let body = format!(
            r#"{{"ref":{text:?},"after":{text:?},"user":{{"username":{text:?}}},"project":{{"path_with_namespace":{text:?}}},"object_attributes":{{"iid":{iid},"action":"{action}","oldrev":{text:?},"note":{text:?},"noteable_type":"MergeRequest","last_commit":{{"id":{text:?}}},"extra":{nested}}},"merge_request":{{"iid":{iid}}}}}"#
        );
        if let Ok(Some(work)) = parse(event, body.as_bytes(), ORG) {
            prop_assert_eq!(work.org(), ORG);
            prop_assert_eq!(work.provider(), VcsProvider::Gitlab);
        }
    }

    #[test]
    fn verify_token_agrees_with_equality(a in proptest::collection::vec(any::<u8>(), 0..64), b in "\\PC{0,64}") {
        prop_assert_eq!(verify_token(&a, Some(&b)), !a.is_empty() && a == b.as_bytes());
    }
}
