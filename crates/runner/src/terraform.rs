//! Finding, identifying and running Terraform or OpenTofu (and other tools,
//! such as git) with their combined output in the job log.

use std::ffi::OsStr;
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};

use sortie_core::tool::{parse_constraint, parse_version, ToolName, Version, VersionConstraint};
use sortie_core::{JobPhase, Operation};

use crate::error::{one_line, RunnerError};
use crate::log::LogSink;
use crate::version::ToolVersion;

/// The plan file `plan` writes, relative to the configuration directory.
pub const PLAN_FILE: &str = "plan.tfplan";

/// The environment every tool runs with: the runner's own, minus `remove`, plus `set`.
/// Its `Debug` names the variables set, never their values (sensitive variables are here).
#[derive(Clone, Default)]
pub struct ToolEnv {
    /// Variables added or replaced.
    pub set: Vec<(String, String)>,
    /// Variables taken away (the job token, git credentials).
    pub remove: Vec<String>,
}

impl fmt::Debug for ToolEnv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolEnv")
            .field("set", &self.set.iter().map(|(k, _)| k).collect::<Vec<_>>())
            .field("remove", &self.remove)
            .finish()
    }
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

/// The binary to run when the job asks for no tool or version: `explicit`
/// (`SORTIE_TERRAFORM`) when given, else `tofu` on `path`, else `terraform` on `path`.
pub fn find_binary(explicit: Option<&Path>, path: Option<&OsStr>) -> Result<PathBuf, RunnerError> {
    if let Some(bin) = explicit {
        return resolve_explicit(bin, path);
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

/// `SORTIE_TERRAFORM`: a path (which must be a file), or a bare name looked up on `path`.
fn resolve_explicit(bin: &Path, path: Option<&OsStr>) -> Result<PathBuf, RunnerError> {
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
    search_path(bin.as_os_str(), path).ok_or_else(|| {
        RunnerError::Tool(format!(
            "SORTIE_TERRAFORM is {}, which is not on PATH",
            bin.display()
        ))
    })
}

/// What a job asks for: a tool, a version constraint, both or neither.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolRequest {
    /// The tool; any when `None`.
    pub tool: Option<ToolName>,
    /// The version constraint; any when `None`.
    pub version: Option<VersionConstraint>,
}

impl ToolRequest {
    /// The spec's `tool` and `version`; an unreadable version is the job's error.
    pub fn new(tool: Option<ToolName>, version: Option<&str>) -> Result<Self, RunnerError> {
        let version = version
            .map(|text| {
                parse_constraint(text).map_err(|e| {
                    RunnerError::Spec(format!(
                        "the job asks for version {:?}, which this runner cannot read: {e}",
                        text
                    ))
                })
            })
            .transpose()?;
        Ok(Self { tool, version })
    }

    /// Neither a tool nor a version: the runner's default binary.
    pub fn is_any(&self) -> bool {
        self.tool.is_none() && self.version.is_none()
    }

    /// True when `tool` at `version` satisfies the request.
    pub fn accepts(&self, tool: ToolName, version: Version) -> bool {
        self.tool.is_none_or(|t| t == tool)
            && self.version.as_ref().is_none_or(|c| c.matches(version))
    }

    /// What was asked, for a reason: `terraform binary satisfies version "~> 1.5"`.
    fn describe(&self) -> String {
        let tool = match self.tool {
            Some(tool) => tool.as_str(),
            None => "terraform or opentofu",
        };
        match &self.version {
            Some(c) => format!("{tool} binary satisfies version {:?}", c.as_str()),
            None => format!("{tool} binary is available"),
        }
    }
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

/// An identified binary: the tool and the version it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Available {
    /// The file.
    pub path: PathBuf,
    /// Terraform or OpenTofu.
    pub tool: ToolName,
    /// Its version.
    pub version: Version,
}

impl fmt::Display for Available {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (major, minor, patch) = self.version;
        write!(f, "{} {major}.{minor}.{patch}", self.tool)
    }
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
) -> Result<Vec<Candidate>, RunnerError> {
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

/// The binary for `request` among `available`: the highest version of a matching tool (the
/// first listed among equals). The error lists what was asked and every version there is,
/// and ends with `(<searched> searched)`.
pub fn select<'a>(
    request: &ToolRequest,
    available: &'a [Available],
    searched: &str,
) -> Result<&'a Available, String> {
    let mut best: Option<&Available> = None;
    for a in available
        .iter()
        .filter(|a| request.accepts(a.tool, a.version))
    {
        if best.is_none_or(|b| a.version > b.version) {
            best = Some(a);
        }
    }
    best.ok_or_else(|| {
        let mut have: Vec<(ToolName, Version)> =
            available.iter().map(|a| (a.tool, a.version)).collect();
        have.sort();
        have.dedup();
        let have = if have.is_empty() {
            "none".to_string()
        } else {
            have.iter()
                .map(|(tool, (major, minor, patch))| format!("{tool} {major}.{minor}.{patch}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        format!(
            "no {}; this runner has {have} ({searched} searched)",
            request.describe()
        )
    })
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
/// With neither a tool nor a version, [`find_binary`] as always. Otherwise every
/// [`candidates`] entry is [`identify`]-ed and [`select`]-ed from. Either way the chosen
/// binary's `version` output is read, and must agree with its name and the request.
pub fn choose(
    request: &ToolRequest,
    explicit: Option<&Path>,
    tools_dir: &Path,
    path: Option<&OsStr>,
    env: &ToolEnv,
) -> Result<Choice, RunnerError> {
    if request.is_any() {
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
    let chosen = select(request, &available, &searched).map_err(|reason| {
        let skipped = if problems.is_empty() {
            String::new()
        } else {
            format!("; skipped: {}", problems.join("; "))
        };
        RunnerError::Tool(format!("{reason}{skipped}"))
    })?;
    let version = detect_version(&chosen.path, env)?;
    if version.tool_name() != chosen.tool || version.number() != chosen.version {
        return Err(RunnerError::Tool(format!(
            "{} is named for {chosen} but its version output says {version}",
            chosen.path.display()
        )));
    }
    Ok(Choice {
        bin: chosen.path.clone(),
        version,
        notes: problems
            .into_iter()
            .map(|p| format!("skipped a binary that could not be identified: {p}"))
            .collect(),
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

/// One terraform command of a job, after `init`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// `plan` to [`PLAN_FILE`]; `-destroy` for a destroy, `-detailed-exitcode` for a drift check.
    Plan {
        /// Plan the destruction of everything.
        destroy: bool,
        /// Exit code 2 means "changes present" (a success).
        detailed_exitcode: bool,
    },
    /// `apply` [`PLAN_FILE`]: exactly the saved plan, never a new one.
    ApplyPlan,
}

impl Step {
    /// The command line's arguments. Works the same on Terraform 0.11 and later.
    pub fn args(&self) -> Vec<String> {
        let mut args: Vec<String> = match self {
            Self::Plan { .. } => vec!["plan".into()],
            Self::ApplyPlan => vec!["apply".into()],
        };
        args.push("-input=false".into());
        args.push("-no-color".into());
        match *self {
            Self::Plan {
                destroy,
                detailed_exitcode,
            } => {
                if destroy {
                    args.push("-destroy".into());
                }
                if detailed_exitcode {
                    args.push("-detailed-exitcode".into());
                }
                args.push(format!("-out={PLAN_FILE}"));
            }
            Self::ApplyPlan => args.push(PLAN_FILE.into()),
        }
        args
    }

    /// Exit codes other than 0 that mean success: 2 ("changes present") for a
    /// `-detailed-exitcode` plan.
    pub fn also_succeeds_with(&self) -> &'static [i32] {
        match self {
            Self::Plan {
                detailed_exitcode: true,
                ..
            } => &[2],
            _ => &[],
        }
    }
}

/// The commands a job runs after `init`:
///
/// | operation | phase | steps |
/// |---|---|---|
/// | plan | none or plan | `plan -out` |
/// | apply | none | `plan -out`, `apply plan.tfplan` |
/// | destroy | none | `plan -destroy -out`, `apply plan.tfplan` |
/// | apply, destroy | plan | `plan -out` (`-destroy` for a destroy) |
/// | apply, destroy | apply | `apply plan.tfplan` (the saved plan, downloaded) |
///
/// `detailed_exitcode` adds `-detailed-exitcode` to the plan. A plan job has no apply phase.
pub fn job_steps(
    operation: Operation,
    phase: Option<JobPhase>,
    detailed_exitcode: bool,
) -> Result<Vec<Step>, RunnerError> {
    let plan = Step::Plan {
        destroy: operation == Operation::Destroy,
        detailed_exitcode,
    };
    match (operation, phase) {
        (Operation::Plan, None | Some(JobPhase::Plan)) => Ok(vec![plan]),
        (Operation::Plan, Some(JobPhase::Apply)) => Err(RunnerError::Spec(
            "a plan job has no apply phase: the spec asks to apply a plan job".into(),
        )),
        (_, None) => Ok(vec![plan, Step::ApplyPlan]),
        (_, Some(JobPhase::Plan)) => Ok(vec![plan]),
        (_, Some(JobPhase::Apply)) => Ok(vec![Step::ApplyPlan]),
    }
}

/// A finished command.
#[derive(Debug, Clone)]
pub struct Finished {
    /// Whether it exited 0.
    pub success: bool,
    /// The exit code, or `signal N`.
    pub code: String,
    /// The exit code as a number (`None` when it was killed by a signal).
    pub exit_code: Option<i32>,
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
        exit_code: status.code(),
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

/// The longest first error kept in a failure's reason, in bytes; a longer one is cut,
/// ending with `…`.
pub const FIRST_ERROR_MAX: usize = 2048;

/// The first error of a tool's output, whole:
///
/// - Terraform's first `Error:` block: in a box (`│`, Terraform 1.x with colour) up to the
///   box's end; in plain text (`-no-color`, and Terraform 0.11), with every paragraph after
///   it (where it happened, the detail, 0.11's `* resource: ...` list) up to the next
///   `Error:` or `Warning:`, leaving out 0.11's advice that Terraform does not roll back;
/// - else the first line that starts with `Error` or `fatal:` (git);
/// - else the first paragraph that starts with `Failed to ` (Terraform 0.11's wrapped
///   messages, such as a stale plan's `Failed to load backend: ...`).
///
/// Lines are joined with `\n`, blank lines dropped, and the whole cut to
/// [`FIRST_ERROR_MAX`] bytes.
pub fn first_error(output: &str) -> Option<String> {
    let lines: Vec<(bool, &str)> = output
        .lines()
        .map(|l| {
            let boxed = l.trim_start().starts_with(['│', '╷', '╵']);
            let text = l
                .trim_start_matches(|c: char| c == '│' || c.is_whitespace())
                .trim_end();
            (boxed, text)
        })
        .collect();
    let starts_another = |l: &str| l.starts_with("Error:") || l.starts_with("Warning:");
    if let Some(start) = lines.iter().position(|(_, l)| l.starts_with("Error:")) {
        let boxed = lines[start].0;
        let mut block = vec![lines[start].1];
        for &(in_box, line) in &lines[start + 1..] {
            if starts_another(line)
                || (boxed && (!in_box || line.starts_with('╵')))
                || line.starts_with("Terraform does not automatically rollback")
            {
                break;
            }
            block.push(line);
        }
        block.retain(|l| !l.is_empty());
        return Some(bounded(&block.join("\n")));
    }
    if let Some((_, line)) = lines
        .iter()
        .find(|(_, l)| l.starts_with("Error") || l.starts_with("fatal:"))
    {
        return Some(bounded(line));
    }
    let paragraph: Vec<&str> = lines
        .iter()
        .map(|(_, l)| *l)
        .skip_while(|l| !l.starts_with("Failed to "))
        .take_while(|l| !l.is_empty())
        .collect();
    (!paragraph.is_empty()).then(|| bounded(&paragraph.join(" ")))
}

/// `text` cut to at most [`FIRST_ERROR_MAX`] bytes on a character boundary, ending with `…`
/// when cut.
fn bounded(text: &str) -> String {
    if text.len() <= FIRST_ERROR_MAX {
        return text.to_string();
    }
    let mut end = FIRST_ERROR_MAX - '…'.len_utf8();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(steps: &[Step]) -> Vec<String> {
        steps.iter().map(|s| s.args().join(" ")).collect()
    }

    #[test]
    fn every_apply_and_destroy_applies_exactly_the_plan_it_made() {
        let steps = |op, phase, detailed| job_steps(op, phase, detailed).unwrap();
        assert_eq!(
            args(&steps(Operation::Plan, None, false)),
            ["plan -input=false -no-color -out=plan.tfplan"]
        );
        assert_eq!(
            args(&steps(Operation::Apply, None, false)),
            [
                "plan -input=false -no-color -out=plan.tfplan",
                "apply -input=false -no-color plan.tfplan"
            ]
        );
        assert_eq!(
            args(&steps(Operation::Destroy, None, false)),
            [
                "plan -input=false -no-color -destroy -out=plan.tfplan",
                "apply -input=false -no-color plan.tfplan"
            ]
        );
        for op in [Operation::Plan, Operation::Apply, Operation::Destroy] {
            for phase in [None, Some(JobPhase::Plan), Some(JobPhase::Apply)] {
                let Ok(steps) = job_steps(op, phase, false) else {
                    continue;
                };
                let all = args(&steps).join("\n");
                assert!(!all.contains("-auto-approve"), "{op:?} {phase:?}: {all}");
                assert!(!all.contains("-force"), "{op:?} {phase:?}: {all}");
                assert!(
                    steps
                        .iter()
                        .all(|s| matches!(s.args()[0].as_str(), "plan" | "apply")),
                    "never the destroy command: {all}"
                );
                let plans = steps
                    .iter()
                    .filter(|s| matches!(s, Step::Plan { .. }))
                    .count();
                assert!(plans <= 1, "never a second plan: {all}");
            }
        }
    }

    #[test]
    fn a_reviewed_job_plans_in_its_first_phase_and_applies_in_its_second() {
        let steps = |op, phase| args(&job_steps(op, Some(phase), false).unwrap());
        assert_eq!(
            steps(Operation::Apply, JobPhase::Plan),
            ["plan -input=false -no-color -out=plan.tfplan"]
        );
        assert_eq!(
            steps(Operation::Destroy, JobPhase::Plan),
            ["plan -input=false -no-color -destroy -out=plan.tfplan"]
        );
        for op in [Operation::Apply, Operation::Destroy] {
            assert_eq!(
                steps(op, JobPhase::Apply),
                ["apply -input=false -no-color plan.tfplan"]
            );
        }
        assert_eq!(
            steps(Operation::Plan, JobPhase::Plan),
            ["plan -input=false -no-color -out=plan.tfplan"]
        );
        let err = job_steps(Operation::Plan, Some(JobPhase::Apply), false).unwrap_err();
        assert!(err.reason().contains("no apply phase"), "{err}");
    }

    #[test]
    fn a_drift_check_plans_with_detailed_exit_codes_and_takes_2_as_success() {
        let steps = job_steps(Operation::Plan, None, true).unwrap();
        assert_eq!(
            args(&steps),
            ["plan -input=false -no-color -detailed-exitcode -out=plan.tfplan"]
        );
        assert_eq!(steps[0].also_succeeds_with(), [2]);
        let plain = job_steps(Operation::Plan, None, false).unwrap();
        assert!(plain[0].also_succeeds_with().is_empty());
        assert!(Step::ApplyPlan.also_succeeds_with().is_empty());
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
            "sortie-runner",
        ] {
            assert_eq!(parse_binary_name(other), None, "{other}");
        }
    }

    fn av(tool: ToolName, version: Version, path: &str) -> Available {
        Available {
            path: PathBuf::from(path),
            tool,
            version,
        }
    }

    const SEARCHED: &str = "SORTIE_TOOLS_DIR=/opt/sortie/tools and PATH";

    #[test]
    fn selection_takes_the_highest_matching_version_of_the_tool() {
        use ToolName::{Opentofu, Terraform};
        let have = [
            av(Terraform, (0, 11, 11), "/t/terraform-0.11.11"),
            av(Terraform, (1, 0, 3), "/t/terraform-1.0.3"),
            av(Terraform, (1, 5, 7), "/usr/bin/terraform"),
            av(Opentofu, (1, 8, 5), "/usr/bin/tofu"),
        ];
        let pick = |tool, version: Option<&str>| {
            let request = ToolRequest::new(tool, version).unwrap();
            select(&request, &have, SEARCHED).map(|a| a.path.display().to_string())
        };
        assert_eq!(pick(None, Some("~> 1.0")).unwrap(), "/usr/bin/tofu");
        assert_eq!(
            pick(Some(Terraform), Some("~> 1.0")).unwrap(),
            "/usr/bin/terraform"
        );
        assert_eq!(
            pick(Some(Terraform), Some("~> 1.0.0")).unwrap(),
            "/t/terraform-1.0.3"
        );
        assert_eq!(pick(None, Some("0.11.11")).unwrap(), "/t/terraform-0.11.11");
        assert_eq!(
            pick(Some(Terraform), Some(">= 0.12, < 1.5")).unwrap(),
            "/t/terraform-1.0.3"
        );
        assert_eq!(pick(Some(Terraform), None).unwrap(), "/usr/bin/terraform");
        assert_eq!(pick(Some(Opentofu), None).unwrap(), "/usr/bin/tofu");
    }

    #[test]
    fn among_equal_versions_the_first_candidate_wins() {
        use ToolName::Terraform;
        let have = [
            av(Terraform, (1, 0, 3), "/explicit/terraform"),
            av(Terraform, (1, 0, 3), "/t/terraform-1.0.3"),
        ];
        let request = ToolRequest::new(None, Some("1.0.3")).unwrap();
        assert_eq!(
            select(&request, &have, SEARCHED).unwrap().path,
            PathBuf::from("/explicit/terraform")
        );
    }

    #[test]
    fn no_match_names_what_was_asked_and_every_version_there_is() {
        use ToolName::{Opentofu, Terraform};
        let have = [
            av(Terraform, (1, 0, 3), "/usr/bin/terraform"),
            av(Terraform, (0, 11, 11), "/t/terraform-0.11.11"),
            av(Terraform, (1, 0, 3), "/t/terraform-1.0.3"),
        ];
        let fail = |tool, version: Option<&str>| {
            let request = ToolRequest::new(tool, version).unwrap();
            select(&request, &have, SEARCHED).unwrap_err()
        };
        assert_eq!(
            fail(Some(Terraform), Some("~> 1.5")),
            "no terraform binary satisfies version \"~> 1.5\"; this runner has terraform 0.11.11, terraform 1.0.3 (SORTIE_TOOLS_DIR=/opt/sortie/tools and PATH searched)"
        );
        assert_eq!(
            fail(None, Some(">= 2.0")),
            "no terraform or opentofu binary satisfies version \">= 2.0\"; this runner has terraform 0.11.11, terraform 1.0.3 (SORTIE_TOOLS_DIR=/opt/sortie/tools and PATH searched)"
        );
        assert_eq!(
            fail(Some(Opentofu), None),
            "no opentofu binary is available; this runner has terraform 0.11.11, terraform 1.0.3 (SORTIE_TOOLS_DIR=/opt/sortie/tools and PATH searched)"
        );
        let request = ToolRequest::new(Some(Terraform), None).unwrap();
        assert_eq!(
            select(&request, &[], "PATH").unwrap_err(),
            "no terraform binary is available; this runner has none (PATH searched)"
        );
    }

    #[test]
    fn an_unreadable_version_is_the_jobs_error() {
        let err = ToolRequest::new(None, Some("latest")).unwrap_err();
        assert!(matches!(err, RunnerError::Spec(_)), "{err:?}");
        assert!(err.reason().contains("\"latest\""), "{err}");
        assert!(ToolRequest::new(None, None).unwrap().is_any());
        assert!(!ToolRequest::new(Some(ToolName::Terraform), None)
            .unwrap()
            .is_any());
    }

    #[test]
    fn finds_the_first_error_line_in_old_and_new_formats() {
        let v011 = "There are some problems with the configuration, described below.\n\nError: Error loading /w/main.tf: Error parsing /w/main.tf: At 3:1: expected: IDENT | STRING got: RBRACE\n\n";
        assert_eq!(
            first_error(v011).as_deref(),
            Some("Error: Error loading /w/main.tf: Error parsing /w/main.tf: At 3:1: expected: IDENT | STRING got: RBRACE")
        );
        let v1 = "╷\n│ Error: Unsupported argument\n│ \n│   on main.tf line 2:\n╵\n";
        assert_eq!(
            first_error(v1).as_deref(),
            Some("Error: Unsupported argument\non main.tf line 2:")
        );
        let git = "Cloning into 'src'...\nfatal: repository 'x' not found\n";
        assert_eq!(
            first_error(git).as_deref(),
            Some("fatal: repository 'x' not found")
        );
        assert_eq!(first_error("all good\n"), None);
        let stale_011 = "Failed to load backend: This plan was created against an older state than is current. Please create\na new plan file against the latest state and try again.\n\nTerraform doesn't allow you to run plans\n";
        assert_eq!(
            first_error(stale_011).as_deref(),
            Some("Failed to load backend: This plan was created against an older state than is current. Please create a new plan file against the latest state and try again.")
        );
    }

    #[test]
    fn the_first_error_is_kept_whole_up_to_the_next_one() {
        // Terraform 1.x with -no-color: summary, location and detail, then a second error.
        let plain = "\nError: Reference to undeclared input variable\n\n  on main.tf line 2, in output \"o\":\n   2: output \"o\" { value = var.y }\n\nAn input variable with the name \"y\" has not been declared.\n\nError: Reference to undeclared input variable\n\n  on main.tf line 3\n";
        assert_eq!(
            first_error(plain).as_deref(),
            Some("Error: Reference to undeclared input variable\non main.tf line 2, in output \"o\":\n2: output \"o\" { value = var.y }\nAn input variable with the name \"y\" has not been declared.")
        );
        // Terraform 1.x boxes: the box's lines, not what follows it.
        let boxed = "╷\n│ Error: Invalid value\n│ \n│   on main.tf line 1:\n│ \n│ The detail.\n╵\n╷\n│ Warning: later\n╵\nmore text\n";
        assert_eq!(
            first_error(boxed).as_deref(),
            Some("Error: Invalid value\non main.tf line 1:\nThe detail.")
        );
        // Terraform 0.11: the error and its list of causes, without the rollback advice.
        let v011 = "null_resource.a: Creating...\n\nError: Error applying plan:\n\n1 error(s) occurred:\n\n* null_resource.a: boom: the real cause\n\nTerraform does not automatically rollback in the face of errors.\nInstead, your Terraform state file has been partially updated\n";
        assert_eq!(
            first_error(v011).as_deref(),
            Some("Error: Error applying plan:\n1 error(s) occurred:\n* null_resource.a: boom: the real cause")
        );
        // Bounded, cut on a character boundary with an ellipsis.
        let long = format!("Error: {}\n", "é".repeat(FIRST_ERROR_MAX));
        let cut = first_error(&long).unwrap();
        assert!(cut.len() <= FIRST_ERROR_MAX, "{}", cut.len());
        assert!(cut.starts_with("Error: éé") && cut.ends_with('…'), "{cut}");
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
        let dir = std::env::temp_dir().join(format!("sortie-runner-cand-{}", std::process::id()));
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
    fn the_chosen_binary_must_say_the_version_its_name_claims() {
        let dir = std::env::temp_dir().join(format!("sortie-runner-choose-{}", std::process::id()));
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
