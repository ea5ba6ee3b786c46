//! The download link's side: the tar.gz of a commit that a tarball redirect points to.

use super::paging::query_pairs;
use super::Reply;
use crate::github::rules;
use crate::github::World;
use crate::tarball::tarball;

/// The tar.gz a download link serves: one top-level directory
/// `<owner>-<repo>-<short sha>/` holding the commit's files.
pub(super) fn codeload(world: &World, rest: &str, query: Option<&str>) -> Reply {
    let token = query_pairs(query)
        .into_iter()
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v)
        .unwrap_or_default();
    let Some(download) = world
        .downloads
        .get(&token)
        .filter(|d| d.expires_at > world.now())
    else {
        return Reply::error(404, "Not Found");
    };
    let Some(repo) = world.repos.get(&download.repo) else {
        return Reply::error(404, "Not Found");
    };
    if !rest.ends_with(&download.sha) {
        return Reply::error(404, "Not Found");
    }
    let files = repo.commits.get(&download.sha).cloned().unwrap_or_default();
    let short: String = download
        .sha
        .chars()
        .take(rules::ARCHIVE_SHORT_SHA)
        .collect();
    let top = format!("{}-{}-{short}", repo.owner, repo.name);
    match tarball(&top, &files) {
        Ok(bytes) => Reply {
            status: 200,
            body: bytes,
            content_type: "application/x-gzip",
            headers: vec![(
                "content-disposition".into(),
                format!("attachment; filename={top}.tar.gz"),
            )],
        },
        Err(e) => Reply::error(500, &format!("could not build the archive: {e}")),
    }
}
