//! Finding the Terraform or OpenTofu binary a job runs: what is there (`SORTIE_TERRAFORM`,
//! `SORTIE_TOOLS_DIR`, `PATH`), the version each binary says it is, and the choice.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use sortie_core::tool::{parse_version, ToolName, Version};

use super::request::{newest, select, Available, ToolRequest};
use super::ToolEnv;
use crate::error::{one_line, PilotError};
use crate::version::ToolVersion;

/// A binary by name: `explicit` (`SORTIE_TERRAFORM`, the operator's pin, which [`choose`]
/// runs when the job asks for no tool or version) when given, else the first `tofu` on
/// `path`, else the first `terraform`.
pub fn find_binary(explicit: Option<&Path>, path: Option<&OsStr>) -> Result<PathBuf, PilotError> {
    if let Some(bin) = explicit {
        return resolve_explicit(bin, path);
    }
    search_path(OsStr::new("tofu"), path)
        .or_else(|| search_path(OsStr::new("terraform"), path))
        .ok_or_else(|| {
            PilotError::Tool(
                "neither tofu nor terraform is on PATH (set SORTIE_TERRAFORM to the binary to use)"
                    .into(),
            )
        })
}

/// `SORTIE_TERRAFORM`: a path (which must be a file), or a bare name looked up on `path`.
fn resolve_explicit(bin: &Path, path: Option<&OsStr>) -> Result<PathBuf, PilotError> {
    if bin.components().count() > 1 {
        return if bin.is_file() {
            Ok(bin.to_path_buf())
        } else {
            Err(PilotError::Tool(format!(
                "SORTIE_TERRAFORM is {}, which is not a file",
                bin.display()
            )))
        };
    }
    search_path(bin.as_os_str(), path).ok_or_else(|| {
        PilotError::Tool(format!(
            "SORTIE_TERRAFORM is {}, which is not on PATH",
            bin.display()
        ))
    })
}

/// A binary that may run a job, before it is identified: `SORTIE_TERRAFORM`, or a file in
/// `SORTIE_TOOLS_DIR` or on `PATH` named `terraform`, `tofu`, `terraform-X.Y.Z` or
/// `tofu-X.Y.Z`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// The file.
    pub path: PathBuf,
    /// What its name says ([`parse_binary_name`]); `None` for a `SORTIE_TERRAFORM` of another name.
    pub named: Option<(ToolName, Option<Version>)>,
}

/// What a binary's file name says: `terraform` and `tofu` name the tool only;
/// `terraform-1.0.3` and `tofu-1.8.5` the tool and its version. Anything else is not a candidate.
pub fn parse_binary_name(name: &str) -> Option<(ToolName, Option<Version>)> {
    for tool in [ToolName::Terraform, ToolName::Opentofu] {
        let Some(rest) = name.strip_prefix(tool.binary()) else {
            continue;
        };
        if rest.is_empty() {
            return Some((tool, None));
        }
        let version = rest
            .strip_prefix('-')
            .filter(|v| !v.starts_with('v'))
            .and_then(parse_version)?;
        return Some((tool, Some(version)));
    }
    None
}

/// Every candidate, in order of preference for equal versions: `explicit`
/// (`SORTIE_TERRAFORM`), then `tools_dir` (`SORTIE_TOOLS_DIR`, ignored when it is not a
/// directory), then each `path` directory; names sorted within a directory; each file once.
pub fn candidates(
    explicit: Option<&Path>,
    tools_dir: &Path,
    path: Option<&OsStr>,
) -> Result<Vec<Candidate>, PilotError> {
    let mut found: Vec<Candidate> = Vec::new();
    let mut seen: Vec<PathBuf> = Vec::new();
    let mut push = |candidate: Candidate| {
        let key = std::fs::canonicalize(&candidate.path).unwrap_or_else(|_| candidate.path.clone());
        if !seen.contains(&key) {
            seen.push(key);
            found.push(candidate);
        }
    };
    if let Some(bin) = explicit {
        let path = resolve_explicit(bin, path)?;
        let named = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(parse_binary_name);
        push(Candidate { path, named });
    }
    let dirs = std::iter::once(tools_dir.to_path_buf()).chain(
        path.map(|p| std::env::split_paths(p).collect::<Vec<_>>())
            .unwrap_or_default(),
    );
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut named: Vec<(String, (ToolName, Option<Version>))> = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let parsed = parse_binary_name(&name)?;
                Some((name, parsed))
            })
            .collect();
        named.sort();
        for (name, parsed) in named {
            let file = dir.join(&name);
            if is_executable(&file) {
                push(Candidate {
                    path: file,
                    named: Some(parsed),
                });
            }
        }
    }
    Ok(found)
}

/// The candidates as tools and versions: a name with a version is taken at its word (the
/// chosen binary's own `version` is checked later); any other is run with `version`. A
/// binary that cannot be identified is left out and described in the second list.
pub fn identify(candidates: &[Candidate], env: &ToolEnv) -> (Vec<Available>, Vec<String>) {
    let mut available = Vec::new();
    let mut problems = Vec::new();
    for candidate in candidates {
        if let Some((tool, Some(version))) = candidate.named {
            available.push(Available {
                path: candidate.path.clone(),
                tool,
                version,
            });
            continue;
        }
        match detect_version(&candidate.path, env) {
            Ok(v) => available.push(Available {
                path: candidate.path.clone(),
                tool: v.tool_name(),
                version: v.number(),
            }),
            Err(e) => problems.push(e.reason()),
        }
    }
    (available, problems)
}

/// The binary a job runs and its checked version, with lines for the log.
#[derive(Debug, Clone)]
pub struct Choice {
    /// The binary.
    pub bin: PathBuf,
    /// Its version, from its own `version` output.
    pub version: ToolVersion,
    /// Notes for the log (binaries that could not be identified).
    pub notes: Vec<String>,
}

/// Chooses the binary for `request` (blocking: it may run `version` of several binaries).
///
/// With neither a tool nor a version, `SORTIE_TERRAFORM` when it is set (the operator's
/// pin), else the [`newest`] of every [`candidates`] entry, and a note says which it chose
/// among which (a runner with Terraform 0.11.11 first on `PATH` and 1.11.4 further on
/// runs 1.11.4). Otherwise every [`candidates`] entry is [`identify`]-ed and
/// [`select`]-ed from. Either way the chosen binary's `version` output is read, and must
/// agree with its name and the request.
pub fn choose(
    request: &ToolRequest,
    explicit: Option<&Path>,
    tools_dir: &Path,
    path: Option<&OsStr>,
    env: &ToolEnv,
) -> Result<Choice, PilotError> {
    if request.is_any() && explicit.is_some() {
        let bin = find_binary(explicit, path)?;
        let version = detect_version(&bin, env)?;
        return Ok(Choice {
            bin,
            version,
            notes: Vec::new(),
        });
    }
    let found = candidates(explicit, tools_dir, path)?;
    let (available, problems) = identify(&found, env);
    let searched = match explicit {
        Some(bin) => format!(
            "SORTIE_TERRAFORM={}, SORTIE_TOOLS_DIR={} and PATH",
            bin.display(),
            tools_dir.display()
        ),
        None => format!("SORTIE_TOOLS_DIR={} and PATH", tools_dir.display()),
    };
    let skipped = || {
        if problems.is_empty() {
            String::new()
        } else {
            format!("; skipped: {}", problems.join("; "))
        }
    };
    let mut notes = Vec::new();
    let chosen = if request.is_any() {
        let chosen = newest(&available).ok_or_else(|| {
            PilotError::Tool(format!(
                "neither tofu nor terraform is there ({searched} searched; set \
                 SORTIE_TERRAFORM to the binary to use){}",
                skipped()
            ))
        })?;
        let mut there: Vec<String> = available.iter().map(|a| a.to_string()).collect();
        there.sort();
        there.dedup();
        notes.push(format!(
            "the job names no tool or version: {chosen} ({}), the newest of {} \
             (pin one with `--tool-version`)",
            chosen.path.display(),
            there.join(", ")
        ));
        chosen
    } else {
        select(request, &available, &searched)
            .map_err(|reason| PilotError::Tool(format!("{reason}{}", skipped())))?
    };
    let version = detect_version(&chosen.path, env)?;
    if version.tool_name() != chosen.tool || version.number() != chosen.version {
        return Err(PilotError::Tool(format!(
            "{} is named for {chosen} but its version output says {version}",
            chosen.path.display()
        )));
    }
    notes.extend(
        problems
            .iter()
            .map(|p| format!("skipped a binary that could not be identified: {p}")),
    );
    Ok(Choice {
        bin: chosen.path.clone(),
        version,
        notes,
    })
}

fn search_path(name: &OsStr, path: Option<&OsStr>) -> Option<PathBuf> {
    std::env::split_paths(path?)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

#[cfg(unix)]
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

#[cfg(not(unix))]
fn is_executable(path: &Path) -> bool {
    path.is_file()
}

/// Runs `<bin> version` and parses it.
pub fn detect_version(bin: &Path, env: &ToolEnv) -> Result<ToolVersion, PilotError> {
    let mut command = Command::new(bin);
    command.arg("version").stdin(Stdio::null());
    env.apply(&mut command);
    let output = command
        .output()
        .map_err(|e| PilotError::Tool(format!("could not run {} version: {e}", bin.display())))?;
    let text = String::from_utf8_lossy(&output.stdout);
    ToolVersion::parse(&text).ok_or_else(|| {
        PilotError::Tool(format!(
            "could not tell the version of {}: `version` printed {:?}",
            bin.display(),
            one_line(&text).chars().take(120).collect::<String>()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_names_carry_the_tool_and_maybe_the_version() {
        use ToolName::{Opentofu, Terraform};
        assert_eq!(parse_binary_name("terraform"), Some((Terraform, None)));
        assert_eq!(parse_binary_name("tofu"), Some((Opentofu, None)));
        assert_eq!(
            parse_binary_name("terraform-1.0.3"),
            Some((Terraform, Some((1, 0, 3))))
        );
        assert_eq!(
            parse_binary_name("tofu-1.8.5"),
            Some((Opentofu, Some((1, 8, 5))))
        );
        for other in [
            "terraform-docs",
            "terraform-1.0",
            "terraform-v1.0.3",
            "terraform-1.0.3-rc1",
            "terraform.bak",
            "terraform-ls",
            "tofu-",
            "opentofu",
            "sortie-pilot",
        ] {
            assert_eq!(parse_binary_name(other), None, "{other}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn finds_binaries_on_path_preferring_tofu() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("sortie-pilot-path-{}", std::process::id()));
        let (a, b) = (dir.join("a"), dir.join("b"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        let make = |p: &Path| {
            std::fs::write(p, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
        };
        make(&a.join("terraform"));
        let path = std::env::join_paths([&a, &b]).unwrap();
        assert_eq!(find_binary(None, Some(&path)).unwrap(), a.join("terraform"));
        make(&b.join("tofu"));
        assert_eq!(find_binary(None, Some(&path)).unwrap(), b.join("tofu"));
        assert_eq!(
            find_binary(Some(Path::new("terraform")), Some(&path)).unwrap(),
            a.join("terraform")
        );
        assert!(find_binary(Some(&dir.join("nope/terraform")), Some(&path)).is_err());
        let empty = std::env::join_paths([dir.join("none")]).unwrap();
        let err = find_binary(None, Some(&empty)).unwrap_err();
        assert!(err.to_string().contains("SORTIE_TERRAFORM"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// An executable shell script at `path` whose `version` prints `says`.
    #[cfg(unix)]
    fn fake_tool(path: &Path, says: &str) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(path, format!("#!/bin/sh\necho '{says}'\n")).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn candidates_come_from_the_explicit_binary_the_tools_dir_and_path_each_once() {
        let dir = std::env::temp_dir().join(format!("sortie-pilot-cand-{}", std::process::id()));
        let (tools, bin) = (dir.join("tools"), dir.join("bin"));
        std::fs::create_dir_all(&tools).unwrap();
        std::fs::create_dir_all(&bin).unwrap();
        fake_tool(&tools.join("terraform-1.0.3"), "Terraform v1.0.3");
        fake_tool(&tools.join("terraform-0.11.11"), "Terraform v0.11.11");
        std::fs::write(tools.join("terraform-9.9.9"), "not executable").unwrap();
        fake_tool(&tools.join("terraform-docs"), "not a candidate");
        fake_tool(&bin.join("tofu"), "OpenTofu v1.8.5");
        fake_tool(&bin.join("terraform"), "bash: no version here");
        let path = std::env::join_paths([&bin, &dir.join("missing")]).unwrap();
        let explicit = tools.join("terraform-1.0.3");
        let found = candidates(Some(&explicit), &tools, Some(&path)).unwrap();
        let names: Vec<String> = found.iter().map(|c| c.path.display().to_string()).collect();
        assert_eq!(
            names,
            [
                explicit.display().to_string(),
                tools.join("terraform-0.11.11").display().to_string(),
                bin.join("terraform").display().to_string(),
                bin.join("tofu").display().to_string(),
            ]
        );
        // A tools dir that does not exist is no error.
        let only_path = candidates(None, &dir.join("no-tools"), Some(&path)).unwrap();
        assert_eq!(only_path.len(), 2);

        let (available, problems) = identify(&found, &ToolEnv::default());
        let shown: Vec<String> = available.iter().map(|a| a.to_string()).collect();
        assert_eq!(
            shown,
            ["terraform 1.0.3", "terraform 0.11.11", "opentofu 1.8.5"]
        );
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].contains(&bin.join("terraform").display().to_string()),
            "{problems:?}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[cfg(unix)]
    #[test]
    fn with_nothing_asked_the_newest_binary_runs_and_a_note_says_which() {
        let dir = std::env::temp_dir().join(format!("sortie-pilot-newest-{}", std::process::id()));
        let (first, later, tools) = (dir.join("first"), dir.join("later"), dir.join("tools"));
        for d in [&first, &later, &tools] {
            std::fs::create_dir_all(d).unwrap();
        }
        // Local mode as a newcomer has it: 0.11.11 first on PATH, 1.11.4 further on.
        fake_tool(&first.join("terraform"), "Terraform v0.11.11");
        fake_tool(&first.join("terraform-1.0.3"), "Terraform v1.0.3");
        fake_tool(&later.join("terraform"), "Terraform v1.11.4");
        let path = std::env::join_paths([&first, &later]).unwrap();
        let env = ToolEnv::default();
        let any = ToolRequest::new(None, None).unwrap();
        let choice = choose(&any, None, &tools, Some(&path), &env).unwrap();
        assert_eq!(choice.bin, later.join("terraform"));
        assert_eq!(choice.version, ToolVersion::terraform(1, 11, 4));
        assert_eq!(
            choice.notes,
            [format!(
                "the job names no tool or version: terraform 1.11.4 ({}), the newest of \
                 terraform 0.11.11, terraform 1.0.3, terraform 1.11.4 (pin one with \
                 `--tool-version`)",
                later.join("terraform").display()
            )]
        );
        // The operator's pin (SORTIE_TERRAFORM) still wins when nothing is asked.
        let pinned = first.join("terraform");
        let choice = choose(&any, Some(&pinned), &tools, Some(&path), &env).unwrap();
        assert_eq!(choice.bin, pinned);
        assert!(choice.notes.is_empty(), "{:?}", choice.notes);
        // Nothing there: the error says where it looked and how to name one.
        let empty = std::env::join_paths([dir.join("none")]).unwrap();
        let err = choose(&any, None, &tools, Some(&empty), &env).unwrap_err();
        assert_eq!(
            err.reason(),
            format!(
                "neither tofu nor terraform is there (SORTIE_TOOLS_DIR={} and PATH searched; \
                 set SORTIE_TERRAFORM to the binary to use)",
                tools.display()
            )
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[cfg(unix)]
    #[test]
    fn the_chosen_binary_must_say_the_version_its_name_claims() {
        let dir = std::env::temp_dir().join(format!("sortie-pilot-choose-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        fake_tool(&dir.join("terraform-1.0.3"), "Terraform v1.0.3");
        fake_tool(&dir.join("terraform-1.2.0"), "Terraform v1.1.0");
        let path = std::env::join_paths([dir.join("none")]).unwrap();
        let env = ToolEnv::default();
        let request = ToolRequest::new(Some(ToolName::Terraform), Some("~> 1.0.0")).unwrap();
        let choice = choose(&request, None, &dir, Some(&path), &env).unwrap();
        assert_eq!(choice.bin, dir.join("terraform-1.0.3"));
        assert_eq!(choice.version, ToolVersion::terraform(1, 0, 3));
        let request = ToolRequest::new(None, Some("1.2.0")).unwrap();
        let err = choose(&request, None, &dir, Some(&path), &env).unwrap_err();
        assert_eq!(
            err.reason(),
            format!(
                "{} is named for terraform 1.2.0 but its version output says Terraform v1.1.0",
                dir.join("terraform-1.2.0").display()
            )
        );
        let request = ToolRequest::new(Some(ToolName::Opentofu), None).unwrap();
        let err = choose(&request, None, &dir, Some(&path), &env).unwrap_err();
        assert_eq!(
            err.reason(),
            format!(
                "no opentofu binary is available; this runner has terraform 1.0.3, terraform 1.2.0 (SORTIE_TOOLS_DIR={} and PATH searched)",
                dir.display()
            )
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
