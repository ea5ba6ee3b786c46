//! Archives, project access tokens, faults and throttling.

use std::collections::BTreeMap;
use std::io::Read;

use serde_json::{json, Value};

use super::super::*;
use super::{api, call, get, one_mr, send, PROJECT};

#[tokio::test]
async fn the_archive_is_a_tar_gz_of_the_commit() {
    let (double, token) = one_mr(MergeRequestSpec::new("alice", "h1")).await;
    let sha = "0123456789abcdef0123456789abcdef01234567";
    double.add_commit(
        PROJECT,
        sha,
        &[("main.tf", b"# root"), ("modules/net/vpc.tf", b"# vpc")],
    );
    let archive = get(
        &double,
        &api(&format!("/repository/archive.tar.gz?sha={sha}")),
        &token,
    )
    .await;
    assert_eq!(archive.status, 200);
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(archive.body.as_slice()));
    let mut files = BTreeMap::new();
    for entry in tar.entries().unwrap() {
        let mut entry = entry.unwrap();
        let path = entry.path().unwrap().to_string_lossy().into_owned();
        let mut contents = String::new();
        entry.read_to_string(&mut contents).unwrap();
        files.insert(path, contents);
    }
    let top = format!("infra-{sha}-{sha}");
    assert_eq!(files[&format!("{top}/main.tf")], "# root");
    assert_eq!(files[&format!("{top}/modules/net/vpc.tf")], "# vpc");
    assert!(
        files.keys().all(|p| p.starts_with(&format!("{top}/"))),
        "{files:?}"
    );
    let missing = get(
        &double,
        &api("/repository/archive.tar.gz?sha=feedface"),
        &token,
    )
    .await;
    assert_eq!(
        (missing.status, missing.json()),
        (404, json!({"message": "404 File Not Found"}))
    );
    let guest = double.issue_token(PROJECT, "gus", AccessLevel::Guest, &["read_api"]);
    assert_eq!(
        get(
            &double,
            &api(&format!("/repository/archive?sha={sha}")),
            &guest
        )
        .await
        .status,
        403
    );
    let downloads = double.downloads();
    assert_eq!(downloads.len(), 1);
    assert_eq!(
        (downloads[0].sha.as_str(), &downloads[0].caller),
        (sha, &Caller::User("sortie".into()))
    );
}

#[tokio::test]
async fn a_project_access_token_is_confined_to_its_project_and_scopes() {
    let (double, token) = one_mr(MergeRequestSpec::new("alice", "h1")).await;
    double.issue_token("acme/other", "sortie", AccessLevel::Maintainer, &["api"]);
    let path = api("/access_tokens");
    let expires = (chrono::Utc::now() + chrono::Duration::days(30))
        .format("%Y-%m-%d")
        .to_string();
    let too_far = (chrono::Utc::now() + chrono::Duration::days(400))
        .format("%Y-%m-%d")
        .to_string();
    let create = |body: Value| send(&double, "POST", &path, &token, body);
    assert_eq!(
        create(json!({"name": "job", "scopes": ["read_api"], "expires_at": too_far}))
            .await
            .status,
        400
    );
    assert_eq!(create(json!({"name": "job", "scopes": ["read_api"], "access_level": 50, "expires_at": expires})).await.status, 400);
    assert_eq!(
        create(json!({"name": "job", "scopes": ["root"], "expires_at": expires}))
            .await
            .json(),
        json!({"error": "scopes does not have a valid value"})
    );
    let created = create(
        json!({"name": "job", "scopes": ["read_api"], "access_level": 30, "expires_at": expires}),
    )
    .await;
    assert_eq!(created.status, 201);
    let minted = created.json()["token"].as_str().unwrap().to_string();
    let token_id = created.json()["id"].as_u64().unwrap();
    assert_eq!(
        get(&double, &api("/merge_requests/1"), &minted)
            .await
            .status,
        200
    );
    assert_eq!(
        get(&double, "/api/v4/projects/acme%2Fother", &minted)
            .await
            .status,
        404,
        "its one project only"
    );
    let me = get(&double, "/api/v4/user", &minted).await.json();
    assert_eq!(me["bot"], true);
    assert!(
        me["username"]
            .as_str()
            .unwrap()
            .starts_with(&format!("project_{}_bot_", double.project_id(PROJECT))),
        "{me}"
    );
    let write = send(
        &double,
        "POST",
        &api("/merge_requests/1/notes"),
        &minted,
        json!({"body": "x"}),
    )
    .await;
    assert_eq!(write.json()["error"], "insufficient_scope");
    let bot_writer = create(json!({"name": "w", "scopes": ["api"], "expires_at": expires}))
        .await
        .json()["token"]
        .as_str()
        .unwrap()
        .to_string();
    let by_bot = send(
        &double,
        "POST",
        &path,
        &bot_writer,
        json!({"name": "x", "scopes": ["api"], "expires_at": expires}),
    )
    .await;
    assert_eq!(
        by_bot.status, 400,
        "a project access token cannot create one"
    );
    let dev = double.issue_token(PROJECT, "dana", AccessLevel::Developer, &["api"]);
    assert_eq!(
        send(
            &double,
            "POST",
            &path,
            &dev,
            json!({"name": "x", "scopes": ["api"]})
        )
        .await
        .status,
        400
    );
    let revoke = call(
        &double,
        "DELETE",
        &api(&format!("/access_tokens/{token_id}")),
        &[("private-token", &token)],
        None,
    )
    .await;
    assert_eq!(revoke.status, 204);
    assert_eq!(
        get(&double, &api("/merge_requests/1"), &minted)
            .await
            .status,
        401,
        "dead after revocation"
    );
    let again = call(
        &double,
        "DELETE",
        &api(&format!("/access_tokens/{token_id}")),
        &[("private-token", &token)],
        None,
    )
    .await;
    assert_eq!(again.status, 404);
    let records = double.access_tokens(PROJECT);
    assert_eq!(records.len(), 2);
    assert!(
        records[0].revoked && records[0].scopes == ["read_api"] && records[0].access_level == 30
    );
}

#[tokio::test]
async fn a_maintainer_lists_the_tokens_without_their_values_and_a_token_revokes_itself() {
    let (double, token) = one_mr(MergeRequestSpec::new("alice", "h1")).await;
    let bot = double.add_access_token(PROJECT, "sortie-source-01a", &["read_api"]);
    let other = double.add_access_token(PROJECT, "sortie-source-01b", &["read_api"]);
    let listed = get(&double, &api("/access_tokens?state=active"), &token).await;
    assert_eq!(listed.status, 200);
    let items = listed.json();
    let names: Vec<&str> = items
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["sortie-source-01a", "sortie-source-01b"]);
    assert!(items[0].get("token").is_none(), "values are never listed");
    assert_eq!(items[0]["active"], true);
    // A token of the Reporter role cannot list them; a bad state is a 400.
    assert_eq!(get(&double, &api("/access_tokens"), &bot).await.status, 403);
    assert_eq!(
        get(&double, &api("/access_tokens?state=gone"), &token)
            .await
            .status,
        400
    );

    // `read_api` alone may revoke itself, and only itself.
    let url = "/api/v4/personal_access_tokens/self";
    let own = call(
        &double,
        "DELETE",
        url,
        &[("authorization", &format!("Bearer {bot}"))],
        None,
    )
    .await;
    assert_eq!(own.status, 204);
    assert_eq!(
        get(&double, &api("/merge_requests/1"), &bot).await.status,
        401
    );
    assert_eq!(
        get(&double, &api("/merge_requests/1"), &other).await.status,
        200
    );
    let again = call(&double, "DELETE", url, &[("private-token", &bot)], None).await;
    assert_eq!(again.status, 401, "a revoked token is refused");
    assert_eq!(call(&double, "DELETE", url, &[], None).await.status, 401);
    let active = get(&double, &api("/access_tokens?state=active"), &token)
        .await
        .json();
    assert_eq!(active.as_array().unwrap().len(), 1);
    let inactive = get(&double, &api("/access_tokens?state=inactive"), &token)
        .await
        .json();
    assert_eq!(inactive[0]["name"], "sortie-source-01a");
    assert_eq!(inactive[0]["revoked"], true);
}

#[tokio::test]
async fn faults_and_throttling_answer_as_gitlab_does() {
    let (double, token) = one_mr(MergeRequestSpec::new("alice", "h1")).await;
    double.fail_next(2, 502);
    for _ in 0..2 {
        assert_eq!(get(&double, &api(""), &token).await.status, 502);
    }
    assert_eq!(get(&double, &api(""), &token).await.status, 200);
    double.throttle_next(1, 30);
    let limited = get(&double, &api(""), &token).await;
    assert_eq!(limited.status, 429);
    assert_eq!(limited.header("retry-after"), "30");
    assert_eq!(limited.header("ratelimit-remaining"), "0");
    assert_eq!(limited.header("ratelimit-name"), rules::RATE_LIMIT_NAME);
    for name in [
        "ratelimit-limit",
        "ratelimit-observed",
        "ratelimit-reset",
        "ratelimit-resettime",
    ] {
        assert!(!limited.header(name).is_empty(), "{name}");
    }
    assert_eq!(limited.body, b"Retry later\n");
    double.fail_until_cleared(500);
    assert_eq!(get(&double, &api(""), &token).await.status, 500);
    double.clear_faults();
    assert_eq!(get(&double, &api(""), &token).await.status, 200);
    let requests = double.requests();
    assert_eq!(requests.len(), 6);
    assert_eq!(requests[2].caller, Caller::User("sortie".into()));
}
