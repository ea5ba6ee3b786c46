//! Laying out a job's configuration: the source (git, an S3 tar.gz or nothing),
//! then the job's `files` and `terraform.tfvars.json`.
//!
//! Git credentials: a git source's `credentials_secret` is an ARN, which this
//! pilot does not resolve itself. Its value reaches the pilot as
//! `SORTIE_GIT_CREDENTIALS` (`token` or `username:token`), injected by the
//! launcher from the secret (an ECS container secret, a Kubernetes secret).
//! git then gets it through `GIT_ASKPASS`, a tiny script that echoes
//! environment variables, so it never appears in a command line, a URL or the log.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use serde_json::Value;

use crate::error::PilotError;

/// The variables file the pilot writes from the job's `variables`.
pub const TFVARS_FILE: &str = "terraform.tfvars.json";

/// The `GIT_ASKPASS` helper: the username for a username prompt, the token otherwise.
pub const ASKPASS_SCRIPT: &str = "#!/bin/sh\n\
case \"$1\" in\n\
  Username*|username*) printf '%s\\n' \"$SORTIE_GIT_USERNAME\" ;;\n\
  *) printf '%s\\n' \"$SORTIE_GIT_PASSWORD\" ;;\n\
esac\n";

/// `path` as a relative path that stays inside its base: no root, no `..`.
/// `what` names it in the error. An empty path is the base itself.
pub fn relative_path(path: &str, what: &str) -> Result<PathBuf, PilotError> {
    let bad = |why: &str| PilotError::Workspace(format!("{what} `{path}` {why}"));
    if path.contains('\0') {
        return Err(bad("contains a NUL byte"));
    }
    let mut out = PathBuf::new();
    for component in Path::new(path).components() {
        match component {
            Component::Normal(part) => out.push(part),
            Component::CurDir => {}
            Component::ParentDir => return Err(bad("must not contain `..`")),
            Component::RootDir | Component::Prefix(_) => return Err(bad("must be relative")),
        }
    }
    Ok(out)
}

/// The configuration directory: `root/<path>`, which must exist.
pub fn config_dir(root: &Path, path: &str) -> Result<PathBuf, PilotError> {
    let relative = relative_path(path, "source.path")?;
    let dir = if relative.as_os_str().is_empty() {
        root.to_path_buf()
    } else {
        root.join(relative)
    };
    if dir.is_dir() {
        Ok(dir)
    } else {
        Err(PilotError::Source(format!(
            "source.path `{path}` is not a directory of the source"
        )))
    }
}

/// Writes the job's files under `dir`, creating directories as needed.
pub fn write_files(dir: &Path, files: &BTreeMap<String, String>) -> Result<(), PilotError> {
    for (name, contents) in files {
        let relative = relative_path(name, "file")?;
        if relative.as_os_str().is_empty() {
            return Err(PilotError::Workspace(format!("file `{name}` has no name")));
        }
        let path = dir.join(&relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| {
                PilotError::Workspace(format!("could not create {}: {e}", parent.display()))
            })?;
        }
        std::fs::write(&path, contents)
            .map_err(|e| PilotError::Workspace(format!("could not write file `{name}`: {e}")))?;
    }
    Ok(())
}

/// The configuration files directly in `dir` ([`crate::guard::is_config_file`]: `*.tf` and
/// `*.tf.json`, never the pilot's backend file), by name, with their text (lossy UTF-8),
/// sorted by name. Files in subdirectories are not the configuration's own: they are
/// modules, read only when the configuration calls them.
pub fn own_config_files(dir: &Path) -> Result<Vec<(String, String)>, PilotError> {
    let read_err =
        |e: std::io::Error| PilotError::Workspace(format!("could not read {}: {e}", dir.display()));
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(read_err)? {
        let entry = entry.map_err(read_err)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !crate::guard::is_config_file(&name) || !entry.path().is_file() {
            continue;
        }
        let bytes = std::fs::read(entry.path()).map_err(|e| {
            PilotError::Workspace(format!("could not read {}: {e}", entry.path().display()))
        })?;
        files.push((name, String::from_utf8_lossy(&bytes).into_owned()));
    }
    files.sort();
    Ok(files)
}

/// Writes `terraform.tfvars.json` when there are variables; returns whether it did.
pub fn write_variables(
    dir: &Path,
    variables: &BTreeMap<String, Value>,
) -> Result<bool, PilotError> {
    if variables.is_empty() {
        return Ok(false);
    }
    let text = serde_json::to_string_pretty(variables)
        .map_err(|e| PilotError::Workspace(format!("could not encode the variables: {e}")))?;
    std::fs::write(dir.join(TFVARS_FILE), text)
        .map_err(|e| PilotError::Workspace(format!("could not write {TFVARS_FILE}: {e}")))?;
    Ok(true)
}

/// SHA-256 of `bytes`, lowercase hex: the one in `sortie_core::tokens`.
pub use sortie_core::tokens::sha256_hex;

/// Checks an archive against the spec's SHA-256 (hex, either case).
pub fn verify_checksum(
    bytes: &[u8],
    expected: &str,
    bucket: &str,
    key: &str,
) -> Result<(), PilotError> {
    let actual = sha256_hex(bytes);
    if actual.eq_ignore_ascii_case(expected.trim()) {
        Ok(())
    } else {
        Err(PilotError::Checksum {
            bucket: bucket.into(),
            key: key.into(),
            expected: expected.trim().to_ascii_lowercase(),
            actual,
        })
    }
}

/// Extracts a tar.gz into `dest`. Entries that would land outside `dest`
/// (absolute paths, `..`) are refused by the tar reader.
pub fn extract_tar_gz(bytes: &[u8], dest: &Path) -> Result<(), PilotError> {
    std::fs::create_dir_all(dest)
        .map_err(|e| PilotError::Source(format!("could not create {}: {e}", dest.display())))?;
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(bytes));
    archive.set_overwrite(true);
    archive.set_preserve_permissions(false);
    archive
        .unpack(dest)
        .map_err(|e| PilotError::Source(format!("could not extract the source archive: {e}")))
}

/// The most top-level entries an error about a GitHub tarball names.
const LISTED_ENTRIES_MAX: usize = 5;

/// Extracts GitHub's tarball of a commit into `root`, without its one top-level directory
/// (`<owner>-<repo>-<short sha>/`): unpacked into `scratch` with [`extract_tar_gz`] (its
/// safety rules, and its skipping of the `pax_global_header` git writes), which must then
/// hold exactly one entry, a directory, which becomes `root`. Anything else is refused.
pub fn extract_github_tarball(bytes: &[u8], scratch: &Path, root: &Path) -> Result<(), PilotError> {
    extract_tar_gz(bytes, scratch)?;
    let read_err = |e: std::io::Error| {
        PilotError::Source(format!("could not read the extracted GitHub tarball: {e}"))
    };
    let mut names = Vec::new();
    let mut count = 0usize;
    for entry in std::fs::read_dir(scratch).map_err(read_err)? {
        let entry = entry.map_err(read_err)?;
        count += 1;
        if names.len() < LISTED_ENTRIES_MAX {
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    names.sort();
    let top = match (count, names.first()) {
        (1, Some(name)) if scratch.join(name).is_dir() => scratch.join(name),
        (0, _) => {
            return Err(PilotError::Source(
                "the GitHub tarball is empty: it has no top-level directory".into(),
            ))
        }
        _ => {
            let more = if count > names.len() { ", ..." } else { "" };
            return Err(PilotError::Source(format!(
                "the GitHub tarball has {count} top-level entries ({}{more}); GitHub's tarball of a commit has exactly one directory, <owner>-<repo>-<short sha>/",
                names.join(", ")
            )));
        }
    };
    if let Some(parent) = root.parent() {
        std::fs::create_dir_all(parent).map_err(|e| {
            PilotError::Source(format!("could not create {}: {e}", parent.display()))
        })?;
    }
    std::fs::rename(&top, root).map_err(|e| {
        PilotError::Source(format!(
            "could not move the GitHub tarball's directory to {}: {e}",
            root.display()
        ))
    })
}

/// Whether a git ref looks like a commit id (7 to 40 hex digits) rather than
/// a branch or tag.
pub fn looks_like_commit(git_ref: &str) -> bool {
    (7..=40).contains(&git_ref.len()) && git_ref.chars().all(|c| c.is_ascii_hexdigit())
}

/// The git commands that fetch `url` at `git_ref` into `dest`: a shallow
/// clone of a branch or tag (or the default branch), else a full clone and a
/// checkout of the commit.
pub fn git_steps(url: &str, git_ref: Option<&str>, dest: &str) -> Vec<Vec<String>> {
    let s = |v: &[&str]| v.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    match git_ref.map(str::trim).filter(|r| !r.is_empty()) {
        None => vec![s(&["clone", "--depth", "1", "--", url, dest])],
        Some(r) if looks_like_commit(r) => vec![
            s(&["clone", "--no-checkout", "--", url, dest]),
            s(&[
                "-C",
                dest,
                "-c",
                "advice.detachedHead=false",
                "checkout",
                "--detach",
                r,
            ]),
        ],
        Some(r) => vec![s(&[
            "clone", "--depth", "1", "--branch", r, "--", url, dest,
        ])],
    }
}

/// `url` with any user name or password removed, for the log.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://***@{}", &rest[at + 1..]),
        None => url.to_string(),
    }
}

/// The environment for git: never prompt on a terminal and, with credentials
/// (`token` or `username:token`), answer git's prompts through `askpass`.
pub fn git_env(credentials: Option<&str>, askpass: &Path) -> Vec<(String, String)> {
    let mut env = vec![("GIT_TERMINAL_PROMPT".to_string(), "0".to_string())];
    if let Some(value) = credentials {
        let (user, password) = match value.split_once(':') {
            Some((user, password)) if !user.is_empty() => (user, password),
            _ => ("x-access-token", value),
        };
        env.push(("GIT_ASKPASS".into(), askpass.to_string_lossy().into_owned()));
        env.push(("SORTIE_GIT_USERNAME".into(), user.into()));
        env.push(("SORTIE_GIT_PASSWORD".into(), password.into()));
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("sortie-pilot-source-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn relative_paths_stay_inside() {
        assert_eq!(
            relative_path("a/./b.tf", "file").unwrap(),
            PathBuf::from("a/b.tf")
        );
        assert_eq!(relative_path("", "source.path").unwrap(), PathBuf::new());
        assert!(relative_path("../x", "file").is_err());
        assert!(relative_path("a/../../x", "file").is_err());
        assert!(relative_path("/etc/passwd", "file").is_err());
    }

    #[test]
    fn writes_files_and_variables() {
        let dir = scratch("files");
        let files = BTreeMap::from([
            ("main.tf".to_string(), "output \"x\" {}\n".to_string()),
            ("modules/m/main.tf".to_string(), "# m\n".to_string()),
        ]);
        write_files(&dir, &files).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join("modules/m/main.tf")).unwrap(),
            "# m\n"
        );
        let bad = BTreeMap::from([("../escape.tf".to_string(), String::new())]);
        let err = write_files(&dir, &bad).unwrap_err();
        assert!(err.to_string().contains(".."), "{err}");
        assert!(!write_variables(&dir, &BTreeMap::new()).unwrap());
        assert!(!dir.join(TFVARS_FILE).exists());
        let vars = BTreeMap::from([("greeting".to_string(), Value::from("hi"))]);
        assert!(write_variables(&dir, &vars).unwrap());
        let written: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join(TFVARS_FILE)).unwrap()).unwrap();
        assert_eq!(written["greeting"], "hi");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn only_the_directorys_own_tf_files_are_its_configuration() {
        let dir = scratch("own");
        std::fs::create_dir_all(dir.join("modules/m")).unwrap();
        std::fs::write(dir.join("modules/m/main.tf"), "resource \"a\" \"b\" {}").unwrap();
        std::fs::write(dir.join(crate::backend::BACKEND_FILE), "terraform {}").unwrap();
        std::fs::write(dir.join("terraform.tfvars.json"), "{}").unwrap();
        assert!(own_config_files(&dir).unwrap().is_empty());
        std::fs::write(dir.join("variables.tf"), "variable \"x\" {}").unwrap();
        std::fs::write(dir.join("extra.tf.json"), "{}").unwrap();
        let names: Vec<String> = own_config_files(&dir)
            .unwrap()
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        assert_eq!(names, ["extra.tf.json", "variables.tf"]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn checksums_are_verified_and_archives_extracted() {
        let body = b"output \"x\" { value = 1 }\n";
        let archive =
            crate::github_fake::tar_gz(&[("infra/main.tf", std::str::from_utf8(body).unwrap())]);

        let sum = sha256_hex(&archive);
        verify_checksum(&archive, &sum.to_uppercase(), "b", "k").unwrap();
        let err = verify_checksum(&archive, &"0".repeat(64), "b", "k.tar.gz").unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("checksum") && text.contains("s3://b/k.tar.gz") && text.contains(&sum),
            "{text}"
        );

        let dir = scratch("extract");
        extract_tar_gz(&archive, &dir).unwrap();
        assert_eq!(std::fs::read(dir.join("infra/main.tf")).unwrap(), body);
        assert_eq!(config_dir(&dir, "infra").unwrap(), dir.join("infra"));
        assert_eq!(config_dir(&dir, "").unwrap(), dir);
        assert!(config_dir(&dir, "nope").is_err());
        assert!(config_dir(&dir, "../x").is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn sha256_matches_a_known_digest() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn git_steps_for_branches_tags_commits_and_the_default_branch() {
        assert_eq!(
            git_steps("https://h/r.git", None, "src"),
            [["clone", "--depth", "1", "--", "https://h/r.git", "src"]]
        );
        assert_eq!(
            git_steps("https://h/r.git", Some("v1.2.0"), "src"),
            [[
                "clone",
                "--depth",
                "1",
                "--branch",
                "v1.2.0",
                "--",
                "https://h/r.git",
                "src"
            ]]
        );
        let steps = git_steps("https://h/r.git", Some("0a1b2c3d"), "src");
        assert_eq!(
            steps[0],
            ["clone", "--no-checkout", "--", "https://h/r.git", "src"]
        );
        assert_eq!(steps[1].last().map(String::as_str), Some("0a1b2c3d"));
        assert!(looks_like_commit(
            "0123456789abcdef0123456789abcdef01234567"
        ));
        assert!(!looks_like_commit("main"));
        assert!(!looks_like_commit("abc"));
    }

    #[test]
    fn credentials_never_show_in_urls_and_go_through_askpass() {
        assert_eq!(
            redact_url("https://u:p@github.com/o/r.git"),
            "https://***@github.com/o/r.git"
        );
        assert_eq!(
            redact_url("https://github.com/o/r.git"),
            "https://github.com/o/r.git"
        );
        assert_eq!(
            redact_url("git@github.com:o/r.git"),
            "git@github.com:o/r.git"
        );
        let env = git_env(Some("ghp_abc"), Path::new("/w/askpass"));
        assert!(env.contains(&("SORTIE_GIT_USERNAME".into(), "x-access-token".into())));
        assert!(env.contains(&("SORTIE_GIT_PASSWORD".into(), "ghp_abc".into())));
        assert!(env.contains(&("GIT_ASKPASS".into(), "/w/askpass".into())));
        let env = git_env(Some("oauth2:glpat"), Path::new("/w/askpass"));
        assert!(env.contains(&("SORTIE_GIT_USERNAME".into(), "oauth2".into())));
        assert_eq!(
            git_env(None, Path::new("/x")),
            [("GIT_TERMINAL_PROMPT".to_string(), "0".to_string())]
        );
    }

    #[test]
    fn a_github_tarball_loses_its_one_top_level_directory_and_its_path_selects_a_folder() {
        use crate::github_fake::github_tarball;
        let archive = github_tarball(&[
            ("acme-infra-0123456/README.md", "# infra\n"),
            (
                "acme-infra-0123456/stacks/app/main.tf",
                "output \"x\" { value = 1 }\n",
            ),
            ("acme-infra-0123456/stacks/db/main.tf", "# db\n"),
        ]);
        let dir = scratch("github");
        let root = dir.join("src");
        extract_github_tarball(&archive, &dir.join("tarball"), &root).unwrap();
        assert_eq!(
            std::fs::read_to_string(root.join("README.md")).unwrap(),
            "# infra\n"
        );
        assert!(!root.join("pax_global_header").exists());
        assert!(!root.join("acme-infra-0123456").exists());
        let app = config_dir(&root, "stacks/app").unwrap();
        assert_eq!(app, root.join("stacks/app"));
        assert_eq!(
            own_config_files(&app).unwrap(),
            [(
                "main.tf".to_string(),
                "output \"x\" { value = 1 }\n".to_string()
            )]
        );
        assert!(config_dir(&root, "stacks/none").is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_github_tarball_without_exactly_one_top_level_directory_is_refused() {
        use crate::github_fake::github_tarball;
        let dir = scratch("github-bad");
        let cases: [(&[(&str, &str)], &str); 3] = [
            (
                &[
                    ("acme-infra-0123456/main.tf", "#\n"),
                    ("evil/main.tf", "#\n"),
                ],
                "2 top-level entries (acme-infra-0123456, evil)",
            ),
            (&[("main.tf", "#\n")], "1 top-level entries (main.tf)"),
            (&[], "empty"),
        ];
        for (i, (entries, expected)) in cases.into_iter().enumerate() {
            let root = dir.join(format!("src{i}"));
            let err = extract_github_tarball(
                &github_tarball(entries),
                &dir.join(format!("tarball{i}")),
                &root,
            )
            .unwrap_err()
            .to_string();
            assert!(err.contains(expected), "{err}");
            assert!(!root.exists(), "nothing becomes the source: {err}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
