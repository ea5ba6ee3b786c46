//! sortie-gitlab against the GitLab double of sortie-testkit, which enforces what GitLab
//! documents (crates/testkit/src/gitlab/rules.rs).

use std::time::Duration;

use chrono::Utc;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use sortie_core::vcs::command::Command;
use sortie_core::vcs::work::{PullAction, PullWork};
use sortie_core::vcs::VcsProvider;
use sortie_gitlab::webhook::{self, MERGE_REQUEST_HOOK, NOTE_HOOK, PUSH_HOOK};
use sortie_gitlab::{
    CommitState, DiffSource, Gitlab, GitlabError, MergeRequestState, ProjectPath, Secret,
    StatusBody, StatusOutcome, SOURCE_TOKEN_SCOPES,
};
use sortie_testkit::gitlab::{AccessLevel, DiffChange, MergeRequestSpec};

mod common;

use common::{calls_of, project, setup, sha, BOT, PROJECT};

const LIST_MRS: &str = "GET /projects/:id/merge_requests";
const LIST_DIFFS: &str = "GET /projects/:id/merge_requests/:merge_request_iid/diffs";
const LIST_NOTES: &str = "GET /projects/:id/merge_requests/:merge_request_iid/notes";
const SET_STATUS: &str = "POST /projects/:id/statuses/:sha";
const CREATE_NOTE: &str = "POST /projects/:id/merge_requests/:merge_request_iid/notes";
const GET_MR: &str = "GET /projects/:id/merge_requests/:merge_request_iid";
const MARKER: &str = "<!-- sortie:pull-request -->";

/// A raw GET with a bearer token (what the pilot holding a source token does).
async fn raw_get(url: &str, token: &str) -> (u16, Vec<u8>) {
    raw("GET", url, token).await
}

async fn raw(method: &str, url: &str, token: &str) -> (u16, Vec<u8>) {
    let request = hyper::Request::builder()
        .method(method)
        .uri(url)
        .header("authorization", format!("Bearer {token}"))
        .body(Full::new(Bytes::new()))
        .unwrap();
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let response = client.request(request).await.unwrap();
    let status = response.status().as_u16();
    let body = response
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes()
        .to_vec();
    (status, body)
}

fn status(name: &str, state: CommitState, description: &str) -> StatusBody {
    StatusBody {
        name: name.into(),
        state,
        target_url: Some("https://sortie.example.com/jobs/01J".into()),
        description: Some(description.into()),
        ref_name: None,
    }
}

#[tokio::test]
async fn open_merge_requests_are_read_to_the_last_page() {
    let (double, gitlab, _) = setup().await;
    for i in 0..230u32 {
        let head = format!("{i:040x}");
        double.add_merge_request(
            PROJECT,
            MergeRequestSpec::new("alice", &head).source(&format!("topic-{i}")),
        );
    }
    // Into another branch, and closed ones: not listed.
    double.add_merge_request(
        PROJECT,
        MergeRequestSpec::new("bob", &sha('e'))
            .source("other")
            .target("release"),
    );
    double.close(PROJECT, 5);
    double.merge(PROJECT, 6, &sha('f'));
    let open = gitlab
        .open_merge_requests(&project(), "main")
        .await
        .unwrap();
    assert_eq!(open.len(), 228);
    assert!(open
        .iter()
        .all(|mr| mr.is_open() && mr.target_branch == "main"));
    let iids: Vec<u64> = open.iter().map(|mr| mr.iid).collect();
    let mut sorted = iids.clone();
    sorted.sort_unstable();
    assert_eq!(iids, sorted, "oldest first");
    assert!(!iids.contains(&5) && !iids.contains(&6));
    assert_eq!(open[0].sha.as_deref(), Some(format!("{:040x}", 0).as_str()));
    // 228 at 100 a page: three pages, and not one more.
    assert_eq!(calls_of(&gitlab, LIST_MRS), 3);
    assert!(gitlab
        .open_merge_requests(&project(), "nowhere")
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn a_merge_request_is_read_with_its_divergence_and_its_fork() {
    let (double, gitlab, _) = setup().await;
    let iid = double.add_merge_request(PROJECT, MergeRequestSpec::new("alice", &sha('a')).draft());
    let mr = gitlab.merge_request(&project(), iid).await.unwrap();
    assert_eq!(mr.iid, iid);
    assert_eq!(mr.state, MergeRequestState::Opened);
    assert_eq!(mr.sha, Some(sha('a')));
    assert_eq!(mr.author_username, "alice");
    assert_eq!(mr.target_branch, "main");
    assert!(mr.draft && !mr.is_from_fork() && !mr.has_conflicts);
    assert_eq!(mr.diverged_commits_count, Some(0));

    double.set_branch(PROJECT, "main", &sha('b'));
    double.set_draft(PROJECT, iid, false);
    double.set_conflicts(PROJECT, iid, true);
    let mr = gitlab.merge_request(&project(), iid).await.unwrap();
    assert_eq!(mr.diverged_commits_count, Some(1));
    assert!(!mr.draft && mr.has_conflicts);
    assert_eq!(mr.mergeable(), Some(false));

    let forked = double.add_merge_request(
        PROJECT,
        MergeRequestSpec::new("mallory", &sha('c')).from_fork("mallory/infra"),
    );
    let mr = gitlab.merge_request(&project(), forked).await.unwrap();
    assert!(mr.is_from_fork());
    assert_eq!(mr.target_project_id, double.project_id(PROJECT));

    double.merge(PROJECT, forked, &sha('d'));
    let mr = gitlab.merge_request(&project(), forked).await.unwrap();
    assert!(mr.is_merged() && !mr.is_open());
    assert_eq!(mr.landed_sha(), Some(sha('d').as_str()));

    let err = gitlab.merge_request(&project(), 999).await.unwrap_err();
    assert_eq!(err.refused_status(), Some(404), "{err}");
}

#[tokio::test]
async fn changed_files_are_paged_to_the_end_with_both_names_of_a_rename() {
    let (double, gitlab, _) = setup().await;
    let mut changes: Vec<DiffChange> = (0..247)
        .map(|i| DiffChange::modified(&format!("envs/e{i}/main.tf")))
        .collect();
    changes.push(DiffChange::renamed(
        "modules/old/main.tf",
        "modules/new/main.tf",
    ));
    changes.push(DiffChange::added("envs/new/main.tf"));
    changes.push(DiffChange::deleted("envs/gone/main.tf"));
    let iid = double.add_merge_request(
        PROJECT,
        MergeRequestSpec::new("alice", &sha('a')).changes(changes),
    );
    let files = gitlab.changed_files(&project(), iid).await.unwrap();
    assert_eq!(files.source, DiffSource::Diffs);
    assert_eq!(files.files.len(), 250);
    assert!(!files.possibly_cut);
    let paths = files.paths();
    assert_eq!(paths.len(), 251);
    for path in [
        "envs/e0/main.tf",
        "envs/e246/main.tf",
        "modules/old/main.tf",
        "modules/new/main.tf",
        "envs/new/main.tf",
        "envs/gone/main.tf",
    ] {
        assert!(paths.iter().any(|p| p == path), "{path}");
    }
    assert_eq!(calls_of(&gitlab, LIST_DIFFS), 3);
}

#[tokio::test]
async fn a_status_moves_through_gitlabs_state_machine_and_a_refused_move_is_kept() {
    let (double, gitlab, _) = setup().await;
    let head = sha('a');
    double.add_merge_request(PROJECT, MergeRequestSpec::new("alice", &head));
    let name = "sortie: prod";
    let set = |state, text| {
        let gitlab = gitlab.clone();
        let head = head.clone();
        async move {
            gitlab
                .set_status(&project(), &head, &status(name, state, text))
                .await
                .unwrap()
        }
    };
    assert!(matches!(
        set(CommitState::Pending, "queued").await,
        StatusOutcome::Set {
            state: CommitState::Pending,
            ..
        }
    ));
    // The same pending state again: GitLab refuses the transition; nothing failed.
    assert!(matches!(
        set(CommitState::Pending, "queued behind another plan").await,
        StatusOutcome::Kept { .. }
    ));
    assert!(matches!(
        set(CommitState::Running, "planning").await,
        StatusOutcome::Set {
            state: CommitState::Running,
            ..
        }
    ));
    assert!(matches!(
        set(CommitState::Running, "planning").await,
        StatusOutcome::Kept { .. }
    ));
    assert!(matches!(
        set(CommitState::Pending, "awaiting approval").await,
        StatusOutcome::Kept { .. }
    ));
    assert!(matches!(
        set(CommitState::Success, "planned: 1 to add").await,
        StatusOutcome::Set {
            state: CommitState::Success,
            ..
        }
    ));
    // A finished status is followed by a new one.
    assert!(matches!(
        set(CommitState::Running, "applying").await,
        StatusOutcome::Set { .. }
    ));
    let statuses = double.statuses(PROJECT, &head);
    assert_eq!(statuses.len(), 2, "{statuses:?}");
    assert_eq!(statuses[0].name, name);
    assert_eq!(statuses[0].author, BOT);
    assert_eq!(statuses[0].history, vec!["pending", "running", "success"]);
    assert_eq!(
        statuses[0].description.as_deref(),
        Some("planned: 1 to add")
    );
    assert_eq!(statuses[1].status, "running");

    // Another environment's status is its own.
    gitlab
        .set_status(
            &project(),
            &head,
            &status("sortie: staging", CommitState::Failed, &"x".repeat(400)),
        )
        .await
        .unwrap();
    let staging = double
        .statuses(PROJECT, &head)
        .into_iter()
        .find(|s| s.name == "sortie: staging")
        .unwrap();
    assert_eq!(staging.status, "failed");
    assert_eq!(staging.description.unwrap().chars().count(), 255);

    // A commit GitLab does not have is refused, and said so.
    let err = gitlab
        .set_status(
            &project(),
            &sha('9'),
            &status(name, CommitState::Pending, "q"),
        )
        .await
        .unwrap_err();
    assert_eq!(err.refused_status(), Some(404), "{err}");
}

#[tokio::test]
async fn the_sticky_note_is_found_by_its_marker_and_edited_in_place() {
    let (double, gitlab, _) = setup().await;
    let iid = double.add_merge_request(PROJECT, MergeRequestSpec::new("alice", &sha('a')));
    double.add_user_note(PROJECT, iid, "alice", "Please plan this.");
    // Someone else's note quoting the marker is not Sortie's.
    double.add_user_note(PROJECT, iid, "mallory", &format!("{MARKER}\nfake report"));
    for i in 0..150 {
        double.add_user_note(PROJECT, iid, "bob", &format!("chatter {i}"));
    }
    assert_eq!(
        gitlab.find_note(&project(), iid, MARKER).await.unwrap(),
        None
    );

    let first = format!("{MARKER}\n### Sortie: plans of {PROJECT}\n\nqueued");
    let id = gitlab
        .upsert_note(&project(), iid, None, MARKER, &first)
        .await
        .unwrap();
    // The record of its id was lost: the note is found by its marker and edited.
    let second = format!("{MARKER}\n### Sortie: plans of {PROJECT}\n\nplanned");
    let again = gitlab
        .upsert_note(&project(), iid, None, MARKER, &second)
        .await
        .unwrap();
    assert_eq!(again, id);
    // With the id, straight to the edit.
    let third = format!("{MARKER}\n### Sortie: plans of {PROJECT}\n\napplied");
    let notes_before = calls_of(&gitlab, LIST_NOTES);
    assert_eq!(
        gitlab
            .upsert_note(&project(), iid, Some(id), MARKER, &third)
            .await
            .unwrap(),
        id
    );
    assert_eq!(calls_of(&gitlab, LIST_NOTES), notes_before);
    let sortie: Vec<_> = double
        .notes(PROJECT, iid)
        .into_iter()
        .filter(|n| n.author == BOT)
        .collect();
    assert_eq!(sortie.len(), 1);
    assert_eq!(sortie[0].body, third);
    assert_eq!(sortie[0].history, vec![first, second]);
    assert_eq!(calls_of(&gitlab, CREATE_NOTE), 1);

    // A reply is a new note; the sticky one stays.
    let reply = gitlab
        .reply(&project(), iid, "Unknown command: `/sortie destroy`.")
        .await
        .unwrap();
    assert_ne!(reply, id);
    assert_eq!(
        gitlab.find_note(&project(), iid, MARKER).await.unwrap(),
        Some(id)
    );
}

#[tokio::test]
async fn a_note_over_gitlabs_limit_is_cut_not_refused() {
    let (double, gitlab, _) = setup().await;
    let iid = double.add_merge_request(PROJECT, MergeRequestSpec::new("alice", &sha('a')));
    let body = format!("{MARKER}\n{}", "x".repeat(1_200_000));
    let id = gitlab.create_note(&project(), iid, &body).await.unwrap();
    let note = double
        .notes(PROJECT, iid)
        .into_iter()
        .find(|n| n.id == id)
        .unwrap();
    assert_eq!(note.body.chars().count(), 1_000_000);
    assert!(note.body.starts_with(MARKER));
}

#[tokio::test]
async fn approvals_name_who_approved() {
    let (double, gitlab, _) = setup().await;
    double.set_approvals_required(PROJECT, 2);
    let head = sha('a');
    let iid = double.add_merge_request(PROJECT, MergeRequestSpec::new("alice", &head));
    let none = gitlab.approvals(&project(), iid).await.unwrap();
    assert!(none.approved_by.is_empty());
    assert!(gitlab
        .approvals_on_head(&project(), iid)
        .await
        .unwrap()
        .is_empty());
    double.add_member(PROJECT, "bob", AccessLevel::Developer);
    double.approve(PROJECT, iid, "bob", &head);
    let one = gitlab.approvals(&project(), iid).await.unwrap();
    assert_eq!(one.usernames(), vec!["bob"]);
    if let Some(left) = one.approvals_left {
        assert_eq!(left, 1);
    }
    assert_eq!(
        gitlab.approvals_on_head(&project(), iid).await.unwrap(),
        vec!["bob"]
    );
    // A push resets approvals (GitLab's default).
    double.push(PROJECT, iid, &sha('b'), None);
    let reset = gitlab.approvals(&project(), iid).await.unwrap();
    assert!(reset.approved_by.is_empty());
    assert!(gitlab
        .approvals_on_head(&project(), iid)
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn an_approval_counts_on_the_head_it_was_given_at_only() {
    let (double, gitlab, _) = setup().await;
    // As on GitLab Free: approvals are kept across pushes.
    double.set_reset_approvals_on_push(PROJECT, false);
    double.add_member(PROJECT, "bob", AccessLevel::Developer);
    double.add_member(PROJECT, "carol", AccessLevel::Developer);
    let first = sha('a');
    let iid = double.add_merge_request(PROJECT, MergeRequestSpec::new("alice", &first));
    double.advance_clock(Duration::from_secs(60));
    double.approve(PROJECT, iid, "bob", &first);
    assert_eq!(
        gitlab.approvals_on_head(&project(), iid).await.unwrap(),
        vec!["bob"]
    );

    // A push a minute later: GitLab still lists bob's approval, given on the older head.
    double.advance_clock(Duration::from_secs(60));
    let second = sha('b');
    double.push(PROJECT, iid, &second, None);
    let listed = gitlab.approvals(&project(), iid).await.unwrap();
    assert_eq!(listed.usernames(), vec!["bob"]);
    let versions = gitlab.diff_versions(&project(), iid).await.unwrap();
    let heads: Vec<&str> = versions
        .iter()
        .map(|v| v.head_commit_sha.as_str())
        .collect();
    assert_eq!(heads, vec![second.as_str(), first.as_str()]);
    assert!(listed.approved_by[0].approved_at < Some(versions[0].created_at));
    assert!(
        gitlab
            .approvals_on_head(&project(), iid)
            .await
            .unwrap()
            .is_empty(),
        "an approval given before the push does not count"
    );

    // One given after the push does.
    double.advance_clock(Duration::from_secs(60));
    double.approve(PROJECT, iid, "carol", &second);
    assert_eq!(
        gitlab.approvals_on_head(&project(), iid).await.unwrap(),
        vec!["carol"]
    );
}

#[tokio::test]
async fn the_heads_statuses_are_listed_with_whether_they_passed() {
    let (double, gitlab, _) = setup().await;
    let head = sha('a');
    double.add_merge_request(PROJECT, MergeRequestSpec::new("alice", &head));
    double.add_status(PROJECT, &head, "lint", "success", "ci-bot");
    double.add_status(PROJECT, &head, "test", "failed", "ci-bot");
    gitlab
        .set_status(
            &project(),
            &head,
            &status("sortie: prod", CommitState::Running, "planning"),
        )
        .await
        .unwrap();
    let statuses = gitlab.head_statuses(&project(), &head).await.unwrap();
    let of = |name: &str| statuses.iter().find(|s| s.name == name).unwrap();
    assert!(of("lint").passed());
    assert!(!of("test").passed() && of("test").finished());
    assert!(!of("sortie: prod").passed() && !of("sortie: prod").finished());
    assert_eq!(statuses.len(), 3);
}

#[tokio::test]
async fn a_source_token_reads_its_project_only_until_revoked() {
    let (double, gitlab, _) = setup().await;
    let head = sha('a');
    double.add_merge_request(PROJECT, MergeRequestSpec::new("alice", &head));
    double.add_commit(PROJECT, &head, &[("main.tf", b"# hi\n")]);
    // Another project the connection's user can read.
    double.add_project("acme/other");
    double.add_member("acme/other", BOT, AccessLevel::Maintainer);
    double.add_commit("acme/other", &head, &[("secret.tf", b"# no\n")]);

    let grant = gitlab
        .source_access(&project(), &head, "01jobone", Utc::now())
        .await
        .unwrap();
    assert!(grant.access.expires_at > Utc::now() + chrono::Duration::hours(4));
    assert!(grant.access.expires_at <= Utc::now() + chrono::Duration::hours(28));
    assert!(!format!("{grant:?}").contains(&grant.access.token));
    let tokens = double.access_tokens(PROJECT);
    assert_eq!(tokens.len(), 1);
    assert_eq!(tokens[0].id, grant.token_id);
    assert_eq!(tokens[0].scopes, SOURCE_TOKEN_SCOPES);
    assert_eq!(tokens[0].access_level, 20);
    assert!(tokens[0].expires_at.len() == 10);
    assert_eq!(
        tokens[0].name, "sortie-source-01jobone",
        "named for its job"
    );

    let (status, body) = raw_get(&grant.access.url, &grant.access.token).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert!(!body.is_empty());
    let other = gitlab.archive_url(&ProjectPath::parse("acme/other").unwrap(), &head);
    let (status, _) = raw_get(&other, &grant.access.token).await;
    assert_eq!(status, 404, "the token reads its own project only");

    gitlab
        .revoke_source_token(&project(), grant.token_id)
        .await
        .unwrap();
    assert!(double.access_tokens(PROJECT)[0].revoked);
    let (status, _) = raw_get(&grant.access.url, &grant.access.token).await;
    assert_eq!(status, 401, "a revoked token reads nothing");
    // Revoking again is done already.
    gitlab
        .revoke_source_token(&project(), grant.token_id)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_source_token_revokes_itself_and_the_active_ones_are_listed_by_job() {
    let (double, gitlab, _) = setup().await;
    let head = sha('a');
    double.add_merge_request(PROJECT, MergeRequestSpec::new("alice", &head));
    double.add_commit(PROJECT, &head, &[("main.tf", b"# hi\n")]);
    let now = Utc::now();
    let one = gitlab
        .source_access(&project(), &head, "01jobone", now)
        .await
        .unwrap();
    let two = gitlab
        .source_access(&project(), &head, "01jobtwo", now)
        .await
        .unwrap();
    // A token someone made by hand is no source token.
    double.add_access_token(PROJECT, "deploy-key", &["read_repository"]);
    let held = gitlab.source_tokens(&project()).await.unwrap();
    let jobs: Vec<(u64, &str)> = held.iter().map(|t| (t.id, t.job.as_str())).collect();
    assert_eq!(
        jobs,
        [(one.token_id, "01jobone"), (two.token_id, "01jobtwo")]
    );

    // The pilot's revocation: the token itself, `read_api` only, on itself.
    let revoke = one
        .access
        .revoke_url
        .clone()
        .expect("a GitLab token is the job's alone");
    assert_eq!(revoke, gitlab.self_revoke_url());
    let (status, body) = raw("DELETE", &revoke, &one.access.token).await;
    assert_eq!(status, 204, "{}", String::from_utf8_lossy(&body));
    let (status, _) = raw_get(&one.access.url, &one.access.token).await;
    assert_eq!(status, 401, "revoked by itself, it reads nothing");
    let (status, _) = raw("DELETE", &revoke, &one.access.token).await;
    assert_eq!(status, 401, "a revoked token cannot call again");
    let (status, _) = raw_get(&two.access.url, &two.access.token).await;
    assert_eq!(status, 200, "the other job's token is untouched");
    let held = gitlab.source_tokens(&project()).await.unwrap();
    assert_eq!(held.len(), 1);
    assert_eq!(held[0].job, "01jobtwo");

    // A job id that cannot name a token is refused before any call.
    for bad in ["", "a b", "x/y", &"j".repeat(65)] {
        let err = gitlab
            .source_access(&project(), &head, bad, now)
            .await
            .unwrap_err();
        assert!(
            matches!(err, GitlabError::InvalidArgument { field: "job", .. }),
            "{bad:?}: {err}"
        );
    }
    assert_eq!(double.access_tokens(PROJECT).len(), 3);
}

#[tokio::test]
async fn the_list_of_source_tokens_is_read_to_its_last_page() {
    let (double, gitlab, _) = setup().await;
    for n in 0..230 {
        double.add_access_token(PROJECT, &format!("sortie-source-job{n:03}"), &["read_api"]);
    }
    let held = gitlab.source_tokens(&project()).await.unwrap();
    assert_eq!(held.len(), 230);
    assert_eq!(held[229].job, "job229");
    assert_eq!(calls_of(&gitlab, "GET /projects/:id/access_tokens"), 3);
}

#[tokio::test]
async fn a_throttled_call_waits_within_the_bound_then_requeues() {
    let (double, gitlab, _) = setup().await;
    let iid = double.add_merge_request(PROJECT, MergeRequestSpec::new("alice", &sha('a')));
    double.throttle_next(2, 1);
    let started = std::time::Instant::now();
    let mr = gitlab.merge_request(&project(), iid).await.unwrap();
    assert_eq!(mr.iid, iid);
    assert!(started.elapsed() >= Duration::from_secs(2));
    assert_eq!(calls_of(&gitlab, GET_MR), 3);

    // Throttled on every attempt: the bound is kept and the caller told when to retry.
    double.throttle_next(10, 1);
    let err = gitlab.merge_request(&project(), iid).await.unwrap_err();
    assert!(err.is_transient(), "{err}");
    assert_eq!(err.retry_after(), Some(Duration::from_secs(1)));
    assert_eq!(calls_of(&gitlab, GET_MR), 3 + 4);
    double.clear_faults();

    // A wait longer than the client sits out is returned at once.
    double.throttle_next(1, 120);
    let err = gitlab.merge_request(&project(), iid).await.unwrap_err();
    assert!(matches!(err, GitlabError::RateLimited { .. }), "{err}");
    assert_eq!(err.retry_after(), Some(Duration::from_secs(120)));
    assert_eq!(calls_of(&gitlab, GET_MR), 3 + 4 + 1);
    // Even a create is sent again after a 429: GitLab refused it unhandled.
    double.throttle_next(1, 1);
    gitlab.create_note(&project(), iid, "hello").await.unwrap();
    assert_eq!(calls_of(&gitlab, CREATE_NOTE), 2);
}

#[tokio::test]
async fn server_errors_are_retried_when_safe_and_reported_after_the_bound() {
    let (double, gitlab, _) = setup().await;
    let iid = double.add_merge_request(PROJECT, MergeRequestSpec::new("alice", &sha('a')));
    double.fail_next(2, 502);
    gitlab.merge_request(&project(), iid).await.unwrap();
    assert_eq!(calls_of(&gitlab, GET_MR), 3);

    double.fail_until_cleared(503);
    let err = gitlab.merge_request(&project(), iid).await.unwrap_err();
    assert!(
        matches!(
            err,
            GitlabError::ServerError {
                status: 503,
                attempts: 4,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.is_transient());
    // A new note is not sent twice: the first may have been written.
    let err = gitlab
        .create_note(&project(), iid, "hello")
        .await
        .unwrap_err();
    assert!(
        matches!(err, GitlabError::ServerError { attempts: 1, .. }),
        "{err}"
    );
    // A status is: a repeat is answered the same way.
    let before = calls_of(&gitlab, SET_STATUS);
    gitlab
        .set_status(
            &project(),
            &sha('a'),
            &status("sortie: prod", CommitState::Pending, "q"),
        )
        .await
        .unwrap_err();
    assert_eq!(calls_of(&gitlab, SET_STATUS), before + 4);
    double.clear_faults();
}

#[tokio::test]
async fn refusals_are_final_and_never_quote_the_token() {
    let (double, _, _) = setup().await;
    let iid = double.add_merge_request(PROJECT, MergeRequestSpec::new("alice", &sha('a')));
    let wrong = Gitlab::new(double.url(), Secret::new("glpat-not-a-real-token")).unwrap();
    let err = wrong.merge_request(&project(), iid).await.unwrap_err();
    assert_eq!(err.refused_status(), Some(401), "{err}");
    assert!(!err.is_transient());
    assert!(!err.to_string().contains("glpat-not-a-real-token"), "{err}");
    assert!(!format!("{wrong:?}").contains("glpat"));
    // A reader's token cannot write.
    let reader = double.issue_token(PROJECT, "reader", AccessLevel::Reporter, &["read_api"]);
    let reader = Gitlab::new(double.url(), Secret::new(reader)).unwrap();
    let err = reader
        .set_status(
            &project(),
            &sha('a'),
            &status("sortie: prod", CommitState::Pending, "q"),
        )
        .await
        .unwrap_err();
    assert_eq!(err.refused_status(), Some(403), "{err}");
    // A project the token cannot see.
    let hidden = ProjectPath::parse("acme/hidden").unwrap();
    let err = reader
        .open_merge_requests(&hidden, "main")
        .await
        .unwrap_err();
    assert_eq!(err.refused_status(), Some(404), "{err}");
}

#[tokio::test]
async fn the_doubles_deliveries_become_pull_work() {
    let (double, _, _) = setup().await;
    let iid = double.add_merge_request(PROJECT, MergeRequestSpec::new("alice", &sha('a')));
    let payloads = double.payloads();
    let read = |event: &str, payload: &serde_json::Value| {
        webhook::parse(event, payload.to_string().as_bytes(), "acme").unwrap()
    };
    assert_eq!(
        read(
            MERGE_REQUEST_HOOK,
            &payloads.merge_request(PROJECT, iid, "open")
        ),
        Some(PullWork::PullRequest {
            org: "acme".into(),
            provider: VcsProvider::Gitlab,
            repository: PROJECT.into(),
            number: iid,
            action: PullAction::Opened,
            head_sha: sha('a'),
            merged: false,
        })
    );
    assert_eq!(
        read(
            MERGE_REQUEST_HOOK,
            &payloads.merge_request(PROJECT, iid, "update")
        ),
        None
    );
    // Retitled: nothing. Retargeted (GitLab's `changes.target_branch`): planned again.
    let mut retitled = payloads.merge_request(PROJECT, iid, "update");
    retitled["changes"] = serde_json::json!({"title": {"previous": "a", "current": "b"}});
    assert_eq!(read(MERGE_REQUEST_HOOK, &retitled), None);
    let mut retargeted = payloads.merge_request(PROJECT, iid, "update");
    retargeted["changes"] =
        serde_json::json!({"target_branch": {"previous": "main", "current": "release"}});
    assert!(matches!(
        read(MERGE_REQUEST_HOOK, &retargeted),
        Some(PullWork::PullRequest { action: PullAction::Synchronize, head_sha, .. }) if head_sha == sha('a')
    ));
    double.push(PROJECT, iid, &sha('b'), None);
    assert!(matches!(
        read(MERGE_REQUEST_HOOK, &payloads.merge_request_push(PROJECT, iid)),
        Some(PullWork::PullRequest { action: PullAction::Synchronize, head_sha, .. }) if head_sha == sha('b')
    ));
    assert!(matches!(
        read(MERGE_REQUEST_HOOK, &payloads.merge_request_by(PROJECT, iid, "approval", "bob")),
        Some(PullWork::Review { number, .. }) if number == iid
    ));
    let note = double.add_user_note(PROJECT, iid, "bob", "/sortie apply prod");
    assert!(matches!(
        read(NOTE_HOOK, &payloads.note(PROJECT, iid, note)),
        Some(PullWork::Comment { author, commands, .. })
            if author == "bob" && commands == vec![Command::Apply { environments: vec!["prod".into()] }]
    ));
    double.merge(PROJECT, iid, &sha('c'));
    assert!(matches!(
        read(
            MERGE_REQUEST_HOOK,
            &payloads.merge_request(PROJECT, iid, "merge")
        ),
        Some(PullWork::PullRequest {
            action: PullAction::Closed,
            merged: true,
            ..
        })
    ));
    assert_eq!(
        read(
            PUSH_HOOK,
            &payloads.push(PROJECT, "refs/heads/main", &sha('0'), &sha('c'), "alice")
        ),
        Some(PullWork::Push {
            org: "acme".into(),
            provider: VcsProvider::Gitlab,
            repository: PROJECT.into(),
            branch: "main".into(),
            after: sha('c'),
        })
    );
}

/// Receives one plain-HTTP request on `listener` and answers 200: its headers (names in
/// lower case) and body.
async fn receive_one(
    listener: tokio::net::TcpListener,
) -> (std::collections::BTreeMap<String, String>, Vec<u8>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (mut stream, _) = listener.accept().await.unwrap();
    let mut data = Vec::new();
    let mut buf = [0u8; 8192];
    let (head_end, length) = loop {
        let n = stream.read(&mut buf).await.unwrap();
        assert!(n > 0, "the sender closed early");
        data.extend_from_slice(&buf[..n]);
        if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&data[..end]).to_string();
            let length = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse::<usize>().ok())?
                })
                .unwrap_or(0);
            break (end + 4, length);
        }
    };
    while data.len() < head_end + length {
        let n = stream.read(&mut buf).await.unwrap();
        assert!(n > 0, "the sender closed early");
        data.extend_from_slice(&buf[..n]);
    }
    stream
        .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let head = String::from_utf8_lossy(&data[..head_end]).to_string();
    let headers = head
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    (headers, data[head_end..head_end + length].to_vec())
}

#[tokio::test]
async fn a_delivery_as_gitlab_sends_it_is_verified_keyed_and_read() {
    use sortie_testkit::gitlab::Hook;
    let (double, _, _) = setup().await;
    let iid = double.add_merge_request(PROJECT, MergeRequestSpec::new("alice", &sha('a')));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hooks/gitlab", listener.local_addr().unwrap());
    let hook = Hook::new(&url, "s3cret-token");
    let delivery = hook.delivery(
        MERGE_REQUEST_HOOK,
        double.payloads().merge_request(PROJECT, iid, "open"),
    );
    let receiving = tokio::spawn(receive_one(listener));
    let (status, _) = delivery.send().await;
    assert_eq!(status, 200);
    let (headers, body) = receiving.await.unwrap();
    let header = |name: &str| headers.get(name).map(String::as_str);
    assert!(webhook::verify_token(
        b"s3cret-token",
        header(webhook::TOKEN_HEADER)
    ));
    assert!(!webhook::verify_token(
        b"another",
        header(webhook::TOKEN_HEADER)
    ));
    assert_eq!(
        webhook::delivery_key(
            header(webhook::IDEMPOTENCY_KEY_HEADER),
            header(webhook::EVENT_UUID_HEADER)
        ),
        Some(delivery.idempotency_key.clone())
    );
    let event = header(webhook::EVENT_HEADER).unwrap();
    assert!(matches!(
        webhook::parse(event, &body, "acme").unwrap(),
        Some(PullWork::PullRequest { number, action: PullAction::Opened, .. }) if number == iid
    ));
}
