//! Running a tool with its combined output in the job log, and reading the first error
//! out of that output.

use std::io::Read;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};

use super::ToolEnv;
use crate::error::PilotError;
use crate::log::LogSink;

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
) -> Result<Finished, PilotError> {
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
        .map_err(|e| PilotError::Tool(format!("could not start {}: {e}", program.display())))?;
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
        .map_err(|e| PilotError::Tool(format!("could not wait for {}: {e}", program.display())))?;
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
) -> Result<(bool, String), PilotError> {
    let mut command = Command::new(program);
    command
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stderr(Stdio::null());
    env.apply(&mut command);
    let out = command
        .output()
        .map_err(|e| PilotError::Tool(format!("could not run {}: {e}", program.display())))?;
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
}
