//! Printing: errors on stderr, results on stdout as a table, JSON or YAML.

use std::io::{IsTerminal, Write};

use chrono::{DateTime, Utc};
use sortie_core::ChangeSummary;

use crate::args::Output;
use crate::exit::CliError;

/// `error: <message>` on stderr; red only when stderr is a TTY.
pub fn print_error(e: &CliError) {
    let stderr = std::io::stderr();
    let prefix = if stderr.is_terminal() {
        "\x1b[1;31merror:\x1b[0m"
    } else {
        "error:"
    };
    let _ = writeln!(stderr.lock(), "{prefix} {e}");
}

/// JSON (pretty) or YAML of `value`, or the table `table()` builds, on stdout.
pub fn emit<T: serde::Serialize>(
    value: &T,
    format: Output,
    table: impl FnOnce() -> String,
) -> Result<(), CliError> {
    let text = match format {
        Output::Table => table(),
        Output::Json => serde_json::to_string_pretty(value)
            .map_err(|e| CliError::Other(format!("could not print JSON: {e}")))?,
        Output::Yaml => serde_norway::to_string(value)
            .map_err(|e| CliError::Other(format!("could not print YAML: {e}")))?,
    };
    print_text(&text);
    Ok(())
}

/// Prints `text` on stdout, ending with one newline (none when it is empty). A closed
/// pipe (`| head`) is not an error worth a message.
pub fn print_text(text: &str) {
    if text.is_empty() {
        return;
    }
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    if !text.ends_with('\n') {
        let _ = out.write_all(b"\n");
    }
    let _ = out.flush();
}

/// Aligned columns with a header row; no colour (so snapshots are stable).
pub fn table(headers: &[&str], rows: Vec<Vec<String>>) -> String {
    let columns = headers.len();
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    // A cell never spans lines: a newline would break the columns.
    let rows: Vec<Vec<String>> = rows
        .into_iter()
        .map(|row| {
            row.into_iter()
                .map(|cell| cell.replace(['\n', '\r'], " "))
                .collect()
        })
        .collect();
    for row in &rows {
        for (i, cell) in row.iter().enumerate().take(columns) {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let mut text = String::new();
    let mut line = |cells: Vec<&str>| {
        let mut l = String::new();
        for (i, cell) in cells.iter().enumerate().take(columns) {
            if i > 0 {
                l.push_str("  ");
            }
            l.push_str(cell);
            if i + 1 < columns {
                let pad = widths[i].saturating_sub(cell.chars().count());
                l.extend(std::iter::repeat_n(' ', pad));
            }
        }
        text.push_str(l.trim_end());
        text.push('\n');
    };
    line(headers.to_vec());
    for row in &rows {
        line(row.iter().map(String::as_str).collect());
    }
    text
}

/// `key: value` lines with the values aligned, for one resource's details.
pub fn details(pairs: &[(&str, String)]) -> String {
    let width = pairs.iter().map(|(k, _)| k.len() + 1).max().unwrap_or(0);
    let mut text = String::new();
    for (k, v) in pairs {
        let key = format!("{k}:");
        text.push_str(format!("{key:<width$} {v}").trim_end());
        text.push('\n');
    }
    text
}

/// A time as tables show it, to the second, with its zone: `2026-01-02 10:00:00 UTC`.
pub fn when(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// `+add ~change -destroy`, as Terraform's plan line counts them.
pub fn change_summary(s: &ChangeSummary) -> String {
    format!("+{} ~{} -{}", s.add, s.change, s.destroy)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_aligned_and_lines_have_no_trailing_spaces() {
        let t = table(
            &["ID", "TYPE", "DESCRIPTION"],
            vec![
                vec!["acme/local".into(), "local".into(), String::new()],
                vec!["x".into(), "ecs-fargate".into(), "two\nlines".into()],
            ],
        );
        assert_eq!(
            t,
            "ID          TYPE         DESCRIPTION\nacme/local  local\nx           ecs-fargate  two lines\n"
        );
    }

    #[test]
    fn a_time_carries_its_zone() {
        let t: DateTime<Utc> = "2026-11-25T12:03:00Z".parse().unwrap();
        assert_eq!(when(t), "2026-11-25 12:03:00 UTC");
    }

    #[test]
    fn details_align_their_values() {
        assert_eq!(
            details(&[("runner", "a".into()), ("changed", "no".into())]),
            "runner:  a\nchanged: no\n"
        );
    }
}
