//! The download link's side: the tar.gz of a commit that a tarball redirect points to.

use std::collections::BTreeMap;
use std::io::Write;

use super::paging::query_pairs;
use super::Reply;
use crate::github::rules;
use crate::github::World;

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

fn tarball(top: &str, files: &BTreeMap<String, Vec<u8>>) -> std::io::Result<Vec<u8>> {
    let encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut builder = tar::Builder::new(encoder);
    let mut dirs: Vec<String> = vec![format!("{top}/")];
    for path in files.keys() {
        let mut parent = String::new();
        for part in path
            .split('/')
            .collect::<Vec<_>>()
            .iter()
            .rev()
            .skip(1)
            .rev()
        {
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
