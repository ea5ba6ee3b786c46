//! `GET /projects/:id/repository/archive[.tar.gz]`: a real tar.gz of a commit's files under
//! GitLab's `<project path>-<ref>-<sha>/` directory (rules::ARCHIVE_PAGE).

use super::auth::{self, Need, Who};
use super::{Params, Reply};
use crate::gitlab::records::AccessLevel;
use crate::gitlab::World;
use crate::tarball::tarball;

pub(crate) fn archive(
    world: &mut World,
    who: &Who,
    id: &str,
    params: &Params,
) -> Result<Reply, Reply> {
    // Downloading code needs the Reporter role on a private project.
    let need = Need::read().role(AccessLevel::Reporter);
    let project_id = auth::project(world, who, id, need)?;
    let project = &world.projects[&project_id];
    let reference = params
        .text("sha")
        .unwrap_or_else(|| project.default_branch.clone());
    let not_found = || Reply::message(404, "404 File Not Found");
    let sha = project.resolve(&reference).ok_or_else(not_found)?;
    // The API always appends the sha: `<path>-<ref>-<sha>`.
    let top = format!("{}-{}-{sha}", project.path(), reference.replace('/', "-"));
    let files = project.commits.get(&sha).cloned().unwrap_or_default();
    let path = project.path_with_namespace.clone();
    let bytes = tarball(&top, &files)
        .map_err(|e| Reply::message(500, &format!("could not build the archive: {e}")))?;
    world.record_download(path, sha, who.caller());
    Ok(Reply {
        status: 200,
        body: bytes,
        content_type: "application/octet-stream",
        headers: vec![(
            "content-disposition".into(),
            format!("attachment; filename=\"{top}.tar.gz\""),
        )],
    })
}
