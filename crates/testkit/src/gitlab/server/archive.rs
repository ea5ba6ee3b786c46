//! `GET /projects/:id/repository/archive[.tar.gz]`: a real tar.gz of a commit's files under
//! GitLab's `<project path>-<ref>-<sha>/` directory (rules::ARCHIVE_PAGE).

use std::collections::BTreeMap;
use std::io::Write;

use super::auth::{self, Need, Who};
use super::{Params, Reply};
use crate::gitlab::records::AccessLevel;
use crate::gitlab::World;

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

/// The tar.gz of `files` under one top-level directory `top/` (the GitHub double's codeload
/// builds the same; it is private there).
fn tarball(top: &str, files: &BTreeMap<String, Vec<u8>>) -> std::io::Result<Vec<u8>> {
    let encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut builder = tar::Builder::new(encoder);
    let mut dirs: Vec<String> = vec![format!("{top}/")];
    for path in files.keys() {
        let parts: Vec<&str> = path.split('/').collect();
        let mut parent = String::new();
        for part in &parts[..parts.len().saturating_sub(1)] {
            parent.push_str(part);
            parent.push('/');
            let dir = format!("{top}/{parent}");
            if !dirs.contains(&dir) {
                dirs.push(dir);
            }
        }
    }
    dirs.sort();
    for dir in dirs {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Directory);
        header.set_mode(0o775);
        header.set_size(0);
        header.set_mtime(0);
        builder.append_data(&mut header, &dir, std::io::empty())?;
    }
    for (path, contents) in files {
        let mut header = tar::Header::new_gnu();
        header.set_mode(0o664);
        header.set_size(contents.len() as u64);
        header.set_mtime(0);
        builder.append_data(&mut header, format!("{top}/{path}"), contents.as_slice())?;
    }
    let mut encoder = builder.into_inner()?;
    encoder.flush()?;
    encoder.finish()
}
