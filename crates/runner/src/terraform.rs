//! Finding, identifying and running Terraform or OpenTofu (and other tools,
//! such as git) with their combined output in the job log.

use std::ffi::OsStr;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};

use sortie_core::Operation;

use crate::error::{one_line, RunnerError};
use crate::log::LogSink;
use crate::version::ToolVersion;

/// The plan file `plan` writes, relative to the configuration directory.
pub const PLAN_FILE: &str = "plan.tfplan";

/// The environment every tool runs with: the runner's own, minus `remove`, plus `set`.
#[derive(Debug, Clone, Default)]
pub struct ToolEnv {
    /// Variables added or replaced.
    pub set: Vec<(String, String)>,
    /// Variables taken away (the job token, git credentials).
    pub remove: Vec<String>,
}

impl ToolEnv {
    /// The environment for terraform: non-interactive, no update check, no job token.
    pub fn for_terraform() -> Self {
        Self {
            set: vec![
                ("TF_IN_AUTOMATION".into(), "1".into()),
                ("TF_INPUT".into(), "0".into()),
                ("CHECKPOINT_DISABLE".into(), "1".into()),
            ],
            remove: crate::env::PRIVATE_VARS
                .iter()
                .map(|v| v.to_string())
                .collect(),
        }
    }

    fn apply(&self, command: &mut Command) {
        for name in &self.remove {
            command.env_remove(name);
        }
        for (name, value) in &self.set {
            command.env(name, value);
        }
    }
}

/// The binary to run: `explicit` (`SORTIE_TERRAFORM`) when given, else `tofu`
/// on `path`, else `terraform` on `path`.
pub fn find_binary(explicit: Option<&Path>, path: Option<&OsStr>) -> Result<PathBuf, RunnerError> {
    if let Some(bin) = explicit {
        if bin.components().count() > 1 {
            return if bin.is_file() {
                Ok(bin.to_path_buf())
            } else {
                Err(RunnerError::Tool(format!(
                    "SORTIE_TERRAFORM is {}, which is not a file",
                    bin.display()
                )))
            };
        }
        return search_path(bin.as_os_str(), path).ok_or_else(|| {
            RunnerError::Tool(format!(
                "SORTIE_TERRAFORM is {}, which is not on PATH",
                bin.display()
            ))
        });
    }
    search_path(OsStr::new("tofu"), path)
        .or_else(|| search_path(OsStr::new("terraform"), path))
        .ok_or_else(|| {
            RunnerError::Tool(
                "neither tofu nor terraform is on PATH (set SORTIE_TERRAFORM to the binary to use)"
                    .into(),
            )
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
pub fn detect_version(bin: &Path, env: &ToolEnv) -> Result<ToolVersion, RunnerError> {
    let mut command = Command::new(bin);
    command.arg("version").stdin(Stdio::null());
    env.apply(&mut command);
    let output = command
        .output()
        .map_err(|e| RunnerError::Tool(format!("could not run {} version: {e}", bin.display())))?;
    let text = String::from_utf8_lossy(&output.stdout);
    ToolVersion::parse(&text).ok_or_else(|| {
        RunnerError::Tool(format!(
            "could not tell the version of {}: `version` printed {:?}",
            bin.display(),
            one_line(&text).chars().take(120).collect::<String>()
        ))
    })
}

/// `init`'s arguments.
pub fn init_args(backend_args: &[String]) -> Vec<String> {
    let mut args = vec!["init".into(), "-input=false".into(), "-no-color".into()];
    args.extend(backend_args.iter().cloned());
    args
}

/// The operation's arguments for `version`. A plan with changes is a success
/// (no `-detailed-exitcode`); Terraform 0.11's destroy takes `-force`.
pub fn operation_args(version: &ToolVersion, operation: Operation) -> Vec<String> {
    let mut args: Vec<String> = match operation {
        Operation::Plan => vec!["plan".into()],
        Operation::Apply => vec!["apply".into()],
        Operation::Destroy => vec!["destroy".into()],
    };
    args.push("-input=false".into());
    args.push("-no-color".into());
    args.push(match operation {
        Operation::Plan => format!("-out={PLAN_FILE}"),
        Operation::Destroy if version.is_legacy() => "-force".into(),
        Operation::Apply | Operation::Destroy => "-auto-approve".into(),
    });
    args
}

/// A finished command.
#[derive(Debug, Clone)]
pub struct Finished {
    /// Whether it exited 0.
    pub success: bool,
    /// The exit code, or `signal N`.
    pub code: String,
    /// Its combined output.
    pub output: String,
}

/// Runs `program args` in `dir` with its stdout and stderr merged into one
/// pipe (so their order is kept exactly), every byte going to `sink` as it
/// comes. Blocking: call it from a blocking thread.
pub fn run_logged(
    program: &Path,
    args: &[String],
    dir: &Path,
    env: &ToolEnv,
    sink: &LogSink,
) -> Result<Finished, RunnerError> {
    // `sh` merges stderr into stdout at the file-descriptor level, then execs
    // the program, so the exit status is the program's own.
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg("exec \"$0\" \"$@\" 2>&1")
        .arg(program)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    env.apply(&mut command);
    let mut child = command
        .spawn()
        .map_err(|e| RunnerError::Tool(format!("could not start {}: {e}", program.display())))?;
    let mut output = Vec::new();
    if let Some(mut stdout) = child.stdout.take() {
        let mut buf = [0u8; 8192];
        loop {
            match stdout.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    sink.write(&buf[..n]);
                    output.extend_from_slice(&buf[..n]);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    tracing::warn!(error = %e, "reading the tool's output failed");
                    break;
                }
            }
        }
    }
    let status = child
        .wait()
        .map_err(|e| RunnerError::Tool(format!("could not wait for {}: {e}", program.display())))?;
    Ok(Finished {
        success: status.success(),
        code: exit_code(&status),
        output: String::from_utf8_lossy(&output).into_owned(),
    })
}

/// Runs `program args` in `dir` and captures its stdout without logging it
/// (`show -json` output can be large and holds values).
pub fn run_captured(
    program: &Path,
    args: &[String],
    dir: &Path,
    env: &ToolEnv,
) -> Result<(bool, String), RunnerError> {
    let mut command = Command::new(program);
    command
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stderr(Stdio::null());
    env.apply(&mut command);
    let out = command
        .output()
        .map_err(|e| RunnerError::Tool(format!("could not run {}: {e}", program.display())))?;
    Ok((
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    ))
}

fn exit_code(status: &ExitStatus) -> String {
    if let Some(code) = status.code() {
        return code.to_string();
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return format!("signal {signal}");
        }
    }
    "unknown".into()
}

/// The first error line of a tool's output: the first line that starts with
/// `Error:` (after Terraform 1.x's `│` box drawing), else the first line that
/// starts with `Error` or `fatal:` (git).
pub fn first_error_line(output: &str) -> Option<String> {
    let lines = || {
        output.lines().map(|l| {
            l.trim_start_matches(|c: char| c == '│' || c.is_whitespace())
                .trim_end()
        })
    };
    lines()
        .find(|l| l.starts_with("Error:"))
        .or_else(|| lines().find(|l| l.starts_with("Error") || l.starts_with("fatal:")))
        .map(|l| one_line(l).chars().take(400).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operation_arguments_by_version() {
        let v011 = ToolVersion::terraform(0, 11, 11);
        let v19 = ToolVersion::terraform(1, 9, 8);
        assert_eq!(
            operation_args(&v011, Operation::Plan),
            ["plan", "-input=false", "-no-color", "-out=plan.tfplan"]
        );
        assert_eq!(
            operation_args(&v19, Operation::Apply),
            ["apply", "-input=false", "-no-color", "-auto-approve"]
        );
        assert_eq!(
            operation_args(&v011, Operation::Destroy),
            ["destroy", "-input=false", "-no-color", "-force"]
        );
        assert_eq!(
            operation_args(&v19, Operation::Destroy),
            ["destroy", "-input=false", "-no-color", "-auto-approve"]
        );
        assert_eq!(
            init_args(&["-backend-config=bucket=b".into()]),
            [
                "init",
                "-input=false",
                "-no-color",
                "-backend-config=bucket=b"
            ]
        );
    }

    #[test]
    fn finds_the_first_error_line_in_old_and_new_formats() {
        let v011 = "There are some problems with the configuration, described below.\n\nError: Error loading /w/main.tf: Error parsing /w/main.tf: At 3:1: expected: IDENT | STRING got: RBRACE\n\n";
        assert_eq!(
            first_error_line(v011).as_deref(),
            Some("Error: Error loading /w/main.tf: Error parsing /w/main.tf: At 3:1: expected: IDENT | STRING got: RBRACE")
        );
        let v1 = "╷\n│ Error: Unsupported argument\n│ \n│   on main.tf line 2:\n╵\n";
        assert_eq!(
            first_error_line(v1).as_deref(),
            Some("Error: Unsupported argument")
        );
        let git = "Cloning into 'src'...\nfatal: repository 'x' not found\n";
        assert_eq!(
            first_error_line(git).as_deref(),
            Some("fatal: repository 'x' not found")
        );
        assert_eq!(first_error_line("all good\n"), None);
    }

    #[cfg(unix)]
    #[test]
    fn finds_binaries_on_path_preferring_tofu() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("sortie-runner-path-{}", std::process::id()));
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
}
