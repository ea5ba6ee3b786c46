//! What the GitLab double does not serve: an instance older than GitLab 15.7 (no
//! `/merge_requests/:iid/diffs`), a proxy that drops GitLab's paging headers, an instance
//! that sends approvals without `approved_at`, a merge request without a diff version yet,
//! and one gone between two calls.

use serde_json::json;
use sortie_gitlab::{DiffSource, Gitlab, ProjectPath, Secret};

mod common;

use common::scripted;

fn client(url: &str) -> Gitlab {
    Gitlab::new(url, Secret::new("glpat-test")).unwrap()
}

fn project() -> ProjectPath {
    ProjectPath::parse("acme/platform/infra").unwrap()
}

#[tokio::test]
async fn an_instance_older_than_15_7_is_read_through_changes() {
    let url = scripted(|method, target| {
        assert_eq!(method, "GET");
        if target.starts_with("/api/v4/projects/acme%2Fplatform%2Finfra/merge_requests/7/diffs") {
            return (404, vec![], json!({"error": "404 Not Found"}).to_string());
        }
        if target == "/api/v4/projects/acme%2Fplatform%2Finfra/merge_requests/7/changes?access_raw_diffs=true" {
            let body = json!({
                "id": 21, "iid": 7, "state": "opened", "sha": "8888888888888888888888888888888888888888",
                "changes": [
                    {"old_path": "VERSION", "new_path": "VERSION", "a_mode": "100644", "b_mode": "100644",
                     "diff": "@@ -1 +1 @@\n-1.9.7\n+1.9.8", "new_file": false, "renamed_file": false, "deleted_file": false},
                    {"old_path": "old.tf", "new_path": "new.tf", "a_mode": "100644", "b_mode": "100644",
                     "diff": "", "new_file": false, "renamed_file": true, "deleted_file": false}
                ],
                "overflow": true
            });
            return (200, vec![], body.to_string());
        }
        (404, vec![], json!({"message": "404 Not found"}).to_string())
    })
    .await;
    let files = client(&url).changed_files(&project(), 7).await.unwrap();
    assert_eq!(files.source, DiffSource::Changes);
    assert!(files.possibly_cut, "GitLab said the diff overflowed");
    assert_eq!(files.paths(), vec!["VERSION", "new.tf", "old.tf"]);
}

#[tokio::test]
async fn without_paging_headers_full_pages_are_followed_to_a_short_one() {
    let url = scripted(|_, target| {
        let page: usize = target
            .split("page=")
            .last()
            .and_then(|p| p.parse().ok())
            .unwrap_or(0);
        // 100, 100, then 3 merge requests; no x-next-page (a proxy dropped it).
        let count = match page {
            1 | 2 => 100,
            3 => 3,
            _ => 0,
        };
        let items: Vec<_> = (0..count)
            .map(|i| {
                let iid = (page - 1) * 100 + i + 1;
                json!({
                    "iid": iid, "state": "opened", "sha": format!("{iid:040x}"),
                    "source_branch": format!("topic-{iid}"), "target_branch": "main",
                    "source_project_id": 1, "target_project_id": 1,
                    "author": {"username": "alice"}
                })
            })
            .collect();
        (200, vec![], serde_json::Value::Array(items).to_string())
    })
    .await;
    let gitlab = client(&url);
    let open = gitlab
        .open_merge_requests(&project(), "main")
        .await
        .unwrap();
    assert_eq!(open.len(), 203);
    assert_eq!(
        gitlab.calls().get("GET /projects/:id/merge_requests"),
        Some(&3)
    );
}

#[tokio::test]
async fn a_next_page_that_goes_back_is_refused_not_looped() {
    let url = scripted(|_, _| {
        let items: Vec<_> = (0..100)
            .map(|i| json!({"old_path": format!("f{i}"), "new_path": format!("f{i}")}))
            .collect();
        (
            200,
            vec![("x-next-page", "1".to_string())],
            serde_json::Value::Array(items).to_string(),
        )
    })
    .await;
    let err = client(&url)
        .changed_files(&project(), 7)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("x-next-page"), "{err}");
}

#[tokio::test]
async fn a_list_longer_than_the_bound_is_an_error_not_a_cut() {
    let url = scripted(|_, target| {
        let page: u32 = target
            .split("page=")
            .last()
            .and_then(|p| p.parse().ok())
            .unwrap_or(1);
        let items: Vec<_> = (0..100)
            .map(|i| {
                json!({"id": page * 1000 + i, "body": "chatter", "author": {"id": 2, "username": "bob"}, "system": false})
            })
            .collect();
        let headers = vec![("x-next-page", (page + 1).to_string())];
        if target.starts_with("/api/v4/user") {
            return (200, vec![], json!({"id": 1, "username": "sortie-bot"}).to_string());
        }
        (200, headers, serde_json::Value::Array(items).to_string())
    })
    .await;
    let err = client(&url)
        .find_note(&project(), 7, "<!-- sortie:pull-request -->")
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            sortie_gitlab::GitlabError::TooManyPages { limit: 100, .. }
        ),
        "{err}"
    );
}

#[tokio::test]
async fn an_answer_over_the_cap_is_refused() {
    let url = scripted(|_, _| {
        let big = "x".repeat(17 * 1024 * 1024);
        (200, vec![], format!("{{\"pad\":\"{big}\"}}"))
    })
    .await;
    let err = client(&url).merge_request(&project(), 7).await.unwrap_err();
    assert!(
        matches!(err, sortie_gitlab::GitlabError::TooLarge { .. }),
        "{err}"
    );
}

/// A diff version of merge request 105, made at `created_at`.
fn version(id: u64, head: char, created_at: &str) -> serde_json::Value {
    json!({"id": id, "head_commit_sha": head.to_string().repeat(40),
           "base_commit_sha": "0".repeat(40), "start_commit_sha": "0".repeat(40),
           "created_at": created_at, "merge_request_id": 105, "state": "collected",
           "real_size": "1"})
}

#[tokio::test]
async fn an_approval_without_a_time_counts_nowhere_and_the_newest_version_is_by_id() {
    // The double dates every approval; an older instance sends none, and a proxy may
    // reorder the versions.
    let url = scripted(|_, target| {
        if target.contains("/versions") {
            let body = json!([
                version(11, '1', "2026-11-30T10:00:00.000Z"),
                version(12, '2', "2026-11-30T12:00:00.000Z"),
            ]);
            return (200, vec![], body.to_string());
        }
        let body = json!({
            "approved": true,
            "approved_by": [
                {"user": {"username": "before"}, "approved_at": "2026-11-30T11:00:00.000Z"},
                {"user": {"username": "after"}, "approved_at": "2026-11-30T12:30:00.000Z"},
                {"user": {"username": "undated"}}
            ]
        });
        (200, vec![], body.to_string())
    })
    .await;
    assert_eq!(
        client(&url).approvals_on_head(&project(), 7).await.unwrap(),
        vec!["after"]
    );
}

#[tokio::test]
async fn without_versions_no_approval_counts_and_a_404_is_an_error() {
    let approvals = || {
        json!({"approved": true, "approved_by": [
            {"user": {"username": "bob"}, "approved_at": "2026-11-30T12:30:00.000Z"}
        ]})
        .to_string()
    };
    // The diff not computed yet: no version, so no approval on the head.
    let computing = scripted(move |_, target| {
        if target.contains("/versions") {
            return (200, vec![], "[]".to_string());
        }
        (200, vec![], approvals())
    })
    .await;
    assert!(client(&computing)
        .approvals_on_head(&project(), 7)
        .await
        .unwrap()
        .is_empty());
    // Gone between the two calls: the error, never "every approval counts".
    let gone = scripted(move |_, target| {
        if target.contains("/versions") {
            return (404, vec![], json!({"message": "404 Not found"}).to_string());
        }
        (200, vec![], approvals())
    })
    .await;
    let err = client(&gone)
        .approvals_on_head(&project(), 7)
        .await
        .unwrap_err();
    assert!(
        matches!(err, sortie_gitlab::GitlabError::Refused { status: 404, .. }),
        "{err}"
    );
}
