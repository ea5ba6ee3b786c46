//! Writes the double checks: commit statuses through GitLab's state machine, and notes.

use serde_json::{json, Value};

use super::super::*;
use super::{api, get, one_mr, send, PROJECT};

#[tokio::test]
async fn status_transitions_are_refused_as_gitlab_refuses_them() {
    let (double, token) = one_mr(MergeRequestSpec::new("alice", "h1")).await;
    let path = api("/statuses/h1");
    let post = |body: Value| send(&double, "POST", &path, &token, body);
    let running = post(json!({"state": "running", "name": "sortie/plan", "target_url": "https://sortie.example/jobs/1"})).await;
    assert_eq!(running.status, 201);
    assert_eq!(
        running.json()["ref"],
        "topic",
        "the ref is the merge request's source branch"
    );
    let again = post(json!({"state": "running", "name": "sortie/plan"})).await;
    assert_eq!(again.status, 400);
    assert_eq!(again.json()["message"], "Cannot transition status via :run from :running (Reason(s): Status cannot transition via \"run\")");
    let back = post(json!({"state": "pending", "context": "sortie/plan"})).await;
    assert_eq!(back.json()["message"], "Cannot transition status via :enqueue from :running (Reason(s): Status cannot transition via \"enqueue\")");
    assert_eq!(
        post(json!({"state": "success", "name": "sortie/plan", "description": "planned"}))
            .await
            .status,
        201
    );
    assert_eq!(
        post(json!({"state": "pending", "name": "other"}))
            .await
            .status,
        201
    );
    assert_eq!(
        post(json!({"state": "pending", "name": "other"}))
            .await
            .status,
        400,
        "pending twice"
    );
    assert_eq!(
        post(json!({"state": "running", "name": "sortie/plan"}))
            .await
            .status,
        201,
        "a finished job starts a new one"
    );
    let jobs = double.statuses(PROJECT, "h1");
    assert_eq!(jobs.len(), 3);
    assert_eq!(jobs[0].history, vec!["running", "success"]);
    assert_eq!(
        jobs[0].target_url.as_deref(),
        Some("https://sortie.example/jobs/1")
    );
    let latest = get(&double, &api("/repository/commits/h1/statuses"), &token)
        .await
        .json();
    assert_eq!(
        latest.as_array().unwrap().len(),
        2,
        "the newest of each name"
    );
    let all = get(
        &double,
        &api("/repository/commits/h1/statuses?all=true"),
        &token,
    )
    .await
    .json();
    assert_eq!(all.as_array().unwrap().len(), 3);
    for (body, why) in [
        (json!({"state": "done", "name": "x"}), "an unknown state"),
        (json!({"name": "x"}), "no state"),
        (
            json!({"state": "success", "name": "x", "description": "d".repeat(256)}),
            "a 256-character description",
        ),
        (
            json!({"state": "success", "name": "x", "target_url": "ftp://example.com/job"}),
            "a non-http target_url",
        ),
        (
            json!({"state": "success", "name": "x", "target_url": format!("https://e.x/{}", "u".repeat(250))}),
            "a long target_url",
        ),
    ] {
        assert_eq!(post(body).await.status, 400, "{why}");
    }
    let at_limit =
        post(json!({"state": "success", "name": "x", "description": "d".repeat(255)})).await;
    assert_eq!(at_limit.status, 201);
    let unknown = send(
        &double,
        "POST",
        &api("/statuses/nope"),
        &token,
        json!({"state": "success"}),
    )
    .await;
    assert_eq!(
        (unknown.status, unknown.json()),
        (404, json!({"message": "404 Commit Not Found"}))
    );
    double.add_commit(PROJECT, "loose", &[]);
    let no_ref = send(
        &double,
        "POST",
        &api("/statuses/loose"),
        &token,
        json!({"state": "success"}),
    )
    .await;
    assert_eq!(
        no_ref.json()["message"],
        "404 References for commit Not Found"
    );
    // A fork's merge request: its head is readable in the target project (under the merge
    // request's ref), but no branch there holds it, so a status is refused there.
    let iid = double.add_merge_request(
        PROJECT,
        MergeRequestSpec::new("mallory", "f0f0").from_fork("mallory/infra"),
    );
    assert_eq!(iid, 2);
    let on_fork = send(
        &double,
        "POST",
        &api("/statuses/f0f0"),
        &token,
        json!({"state": "pending", "name": "sortie: acme/web-dev"}),
    )
    .await;
    assert_eq!(
        (on_fork.status, on_fork.json()),
        (
            404,
            json!({"message": "404 References for commit Not Found"})
        )
    );
    assert_eq!(
        get(&double, &api("/repository/commits/f0f0/statuses"), &token)
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn notes_over_the_limit_are_refused_and_edits_kept() {
    let (double, token) = one_mr(MergeRequestSpec::new("alice", "h1")).await;
    let path = api("/merge_requests/1/notes");
    let at_limit = "x".repeat(rules::MAX_NOTE_CHARS);
    let ok = send(&double, "POST", &path, &token, json!({"body": at_limit})).await;
    assert_eq!(ok.status, 201);
    assert_eq!(ok.json()["author"]["username"], "sortie");
    let over = send(
        &double,
        "POST",
        &path,
        &token,
        json!({"body": format!("{at_limit}x")}),
    )
    .await;
    assert_eq!(over.status, 400);
    assert_eq!(
        over.json()["message"],
        "400 Bad request - Note {:note=>[\"is too long (maximum is 1000000 characters)\"]}"
    );
    assert_eq!(
        send(&double, "POST", &path, &token, json!({})).await.json(),
        json!({"error": "body is missing"})
    );
    let id = ok.json()["id"].as_u64().unwrap();
    let edit = send(
        &double,
        "PUT",
        &format!("{path}/{id}"),
        &token,
        json!({"body": "short"}),
    )
    .await;
    assert_eq!(edit.status, 200);
    let long_edit = send(
        &double,
        "PUT",
        &format!("{path}/{id}"),
        &token,
        json!({"body": format!("{at_limit}x")}),
    )
    .await;
    assert_eq!(long_edit.status, 400);
    let person = double.add_user_note(PROJECT, 1, "alice", "looks good");
    let theirs = send(
        &double,
        "PUT",
        &format!("{path}/{person}"),
        &token,
        json!({"body": "mine now"}),
    )
    .await;
    assert_eq!(theirs.status, 403, "only the author edits a note");
    let notes = double.notes(PROJECT, 1);
    assert_eq!(notes.len(), 2);
    assert_eq!(
        (notes[0].body.as_str(), notes[0].history.len()),
        ("short", 1)
    );
    let listed = get(&double, &path, &token).await.json();
    assert_eq!(listed[0]["id"], person, "newest first by default");
    let ascending = get(&double, &format!("{path}?sort=asc"), &token)
        .await
        .json();
    assert_eq!(ascending[0]["id"], id);
}
