//! The tar.gz both code-host doubles serve for a commit: its files under one top-level
//! directory, each double naming that directory as its host does (GitHub's codeload
//! `<owner>-<repo>-<short sha>/`, GitLab's `<project path>-<ref>-<sha>/`).

use std::collections::BTreeMap;
use std::io::Write;

/// The tar.gz of `files` (path → contents) under `top/`: one directory entry for `top/` and
/// for each parent directory (sorted, before the files), then the files in path order, every
/// entry with mtime 0 (directories 0775, files 0664).
pub(crate) fn tarball(top: &str, files: &BTreeMap<String, Vec<u8>>) -> std::io::Result<Vec<u8>> {
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

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    #[test]
    fn files_sit_under_the_top_directory_with_their_parents_listed_first() {
        let files: BTreeMap<String, Vec<u8>> = [
            ("main.tf".to_string(), b"a".to_vec()),
            ("modules/net/vpc.tf".to_string(), b"bc".to_vec()),
        ]
        .into_iter()
        .collect();
        let bytes = tarball("top-1", &files).unwrap();
        let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(bytes.as_slice()));
        let entries: Vec<(String, bool, String)> = archive
            .entries()
            .unwrap()
            .map(|e| {
                let mut e = e.unwrap();
                let path = e.path().unwrap().to_string_lossy().into_owned();
                let dir = e.header().entry_type().is_dir();
                let mut contents = String::new();
                e.read_to_string(&mut contents).unwrap();
                (path, dir, contents)
            })
            .collect();
        let names: Vec<(&str, bool)> = entries.iter().map(|(p, d, _)| (p.as_str(), *d)).collect();
        assert_eq!(
            names,
            vec![
                ("top-1/", true),
                ("top-1/modules/", true),
                ("top-1/modules/net/", true),
                ("top-1/main.tf", false),
                ("top-1/modules/net/vpc.tf", false),
            ]
        );
        assert_eq!(entries[4].2, "bc");
    }
}
