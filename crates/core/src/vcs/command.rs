//! The `/sortie` commands in a pull request comment.
//!
//! A command is a line whose first word is exactly `/sortie` (spaces before it are fine).
//! What a reader sees as quoted or as code is never a command: lines inside fenced code
//! blocks (```` ``` ```` or `~~~`), quoted lines (`>`), and the lines that continue a quote
//! without a blank line between (Markdown shows them inside the quote). So quoting
//! someone's `/sortie apply` in a reply never applies anything.
//!
//! Everything is bounded: at most [`MAX_COMMANDS`] commands per comment, at most
//! [`MAX_ENVIRONMENTS`] environments per command, each at most [`MAX_ENVIRONMENT_BYTES`]
//! bytes. Past a bound the comment gets a [`Command::Unknown`] saying so.

/// The word that starts a command.
pub const COMMAND_WORD: &str = "/sortie";
/// The most commands read from one comment; one more is a [`Command::Unknown`] saying the
/// rest were ignored.
pub const MAX_COMMANDS: usize = 5;
/// The most environments one command names.
pub const MAX_ENVIRONMENTS: usize = 20;
/// The longest environment argument, in bytes.
pub const MAX_ENVIRONMENT_BYTES: usize = 256;
/// The most characters of a user's word quoted back in an [`Command::Unknown`] text.
const QUOTED_MAX_CHARS: usize = 64;

/// One command of a comment.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "command", rename_all = "snake_case")]
pub enum Command {
    /// `/sortie plan [environment...]`: plan the environments named, or every environment
    /// the pull request touches when none is named.
    Plan {
        /// The environments named, in order, without repeats; empty for all touched.
        environments: Vec<String>,
    },
    /// `/sortie apply [environment...]`: apply the plans of the environments named, or of
    /// every planned environment when none is named.
    Apply {
        /// The environments named, in order, without repeats; empty for all planned.
        environments: Vec<String>,
    },
    /// `/sortie` or `/sortie help`: show [`help_text`].
    Help,
    /// A `/sortie` line Sortie could not read, or a bound passed.
    Unknown {
        /// A sentence for the commenter saying what was wrong. It may quote their words:
        /// escape it before rendering (`crate::vcs::report::escape`).
        text: String,
    },
}

/// The commands of a comment's body, in order: at most [`MAX_COMMANDS`], then one
/// [`Command::Unknown`] if the comment had more.
pub fn parse_commands(body: &str) -> Vec<Command> {
    let body = body.replace("\r\n", "\n");
    let mut out = Vec::new();
    let mut found = 0usize;
    // The open fence's character and length, while inside a fenced code block.
    let mut fence: Option<(char, usize)> = None;
    // True while the previous line belongs to a block quote (a lazy continuation follows).
    let mut quoted = false;
    for line in body.split(['\n', '\r']) {
        let line = line.trim_start_matches([' ', '\t']);
        if let Some((ch, len)) = fence {
            if closes_fence(line, ch, len) {
                fence = None;
            }
            continue;
        }
        if line.trim().is_empty() {
            quoted = false;
            continue;
        }
        if line.starts_with('>') {
            quoted = true;
            continue;
        }
        if quoted {
            continue;
        }
        if let Some(open) = opens_fence(line) {
            fence = Some(open);
            continue;
        }
        let mut words = line.split_whitespace();
        if words.next() != Some(COMMAND_WORD) {
            continue;
        }
        found += 1;
        if found > MAX_COMMANDS {
            out.push(Command::Unknown {
                text: format!(
                    "A comment holds at most {MAX_COMMANDS} commands: the ones after the first {MAX_COMMANDS} were ignored."
                ),
            });
            break;
        }
        out.push(command(words));
    }
    out
}

/// The command after the `/sortie` word.
fn command<'a>(mut words: impl Iterator<Item = &'a str>) -> Command {
    match words.next() {
        None | Some("help") => Command::Help,
        Some("plan") => match environments(words) {
            Ok(environments) => Command::Plan { environments },
            Err(text) => Command::Unknown { text },
        },
        Some("apply") => match environments(words) {
            Ok(environments) => Command::Apply { environments },
            Err(text) => Command::Unknown { text },
        },
        Some(other) => Command::Unknown {
            text: format!(
                "“{}” is not a Sortie command: the commands are plan, apply and help (comment `/sortie help`).",
                quoted(other)
            ),
        },
    }
}

/// The environment arguments, in order without repeats, or why they were refused.
fn environments<'a>(words: impl Iterator<Item = &'a str>) -> Result<Vec<String>, String> {
    let words: Vec<&str> = words.take(MAX_ENVIRONMENTS + 1).collect();
    if words.len() > MAX_ENVIRONMENTS {
        return Err(format!(
            "A command names at most {MAX_ENVIRONMENTS} environments: comment again for the others."
        ));
    }
    let mut out: Vec<String> = Vec::with_capacity(words.len());
    for word in words {
        if word.starts_with('-') {
            return Err(format!(
                "Sortie's commands take environment names, not options such as “{}”.",
                quoted(word)
            ));
        }
        if word.len() > MAX_ENVIRONMENT_BYTES {
            return Err(format!(
                "An environment name is at most {MAX_ENVIRONMENT_BYTES} bytes; “{}…” is longer.",
                quoted(word)
            ));
        }
        if !out.iter().any(|e| e == word) {
            out.push(word.to_string());
        }
    }
    Ok(out)
}

/// The first [`QUOTED_MAX_CHARS`] characters of a user's word.
fn quoted(word: &str) -> String {
    word.chars().take(QUOTED_MAX_CHARS).collect()
}

/// The fence a line opens (its character and length), if it opens one: three or more
/// backticks or tildes; a backtick fence's info string has no backtick.
fn opens_fence(line: &str) -> Option<(char, usize)> {
    let ch = line.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let len = line.chars().take_while(|c| *c == ch).count();
    if len < 3 {
        return None;
    }
    let info = &line[len..];
    if ch == '`' && info.contains('`') {
        return None;
    }
    Some((ch, len))
}

/// True when a line closes a fence of `ch` of length `len`: at least as many of the same
/// character, and nothing but spaces after.
fn closes_fence(line: &str, ch: char, len: usize) -> bool {
    let run = line.chars().take_while(|c| *c == ch).count();
    run >= len && line[run * ch.len_utf8()..].trim().is_empty()
}

/// The reply to `/sortie help`, in Markdown.
pub fn help_text() -> String {
    format!(
        "**Sortie's commands**, each on a line of its own in a pull request comment:\n\
         \n\
         | command | what it does |\n\
         | --- | --- |\n\
         | `/sortie plan` | plans every environment this pull request changes |\n\
         | `/sortie plan <environment> …` | plans the environments named |\n\
         | `/sortie apply` | applies every planned environment whose requirements are met |\n\
         | `/sortie apply <environment> …` | applies the plans of the environments named |\n\
         | `/sortie help` | shows this help |\n\
         \n\
         A comment holds at most {MAX_COMMANDS} commands, and a command names at most \
         {MAX_ENVIRONMENTS} environments. Quoted lines (`>`) and lines in code blocks are \
         never commands, so quoting a command in a reply does not run it. An apply needs a \
         plan of the pull request's head commit: push a commit and Sortie plans again.\n"
    )
}

#[cfg(test)]
#[path = "command_tests.rs"]
mod tests;
