//! What the root module declares about its variables: whether each is declared
//! `sensitive = true` (Terraform 0.14 and later then hides its value in plans, outputs and
//! errors). Pure: it reads the configuration's own files, as [`crate::guard`] does.
//!
//! There is no HCL parser in the pilot, so this is a careful minimal scan of the native
//! syntax (`.tf`): it skips comments (`#`, `//`, `/* */`), quoted strings with their
//! escapes and `${ }` / `%{ }` templates, and heredocs, and reads each top-level
//! `variable "<name>" { ... }` block for a `sensitive = true` attribute at the block's own
//! level (not in a nested `validation` block or a `default` object). A `.tf.json` file is
//! read as JSON (`{"variable": {"<name>": {"sensitive": true}}}`, or a list of such
//! objects). Any form it does not recognise (`sensitive = (true)`) counts as not
//! sensitive: the warning it leads to says the scan was minimal.

use std::collections::BTreeMap;

/// One declaration of a variable: the file, and whether it says `sensitive = true`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Declaration {
    /// The file's name.
    pub file: String,
    /// Whether the block has `sensitive = true`.
    pub sensitive: bool,
}

/// Every variable declaration in the configuration `files` (name, text), by variable name.
pub fn variables<'a>(
    files: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> BTreeMap<String, Vec<Declaration>> {
    let mut found: BTreeMap<String, Vec<Declaration>> = BTreeMap::new();
    for (file, text) in files {
        let declared = if file.ends_with(".tf.json") {
            json_variables(text)
        } else {
            native_variables(text)
        };
        for (name, sensitive) in declared {
            found.entry(name).or_default().push(Declaration {
                file: file.to_string(),
                sensitive,
            });
        }
    }
    found
}

/// A warning for each of `names` (variables given a secret value) that the configuration
/// declares with no `sensitive = true` in any of its declarations (an override file may
/// add it). A name the configuration does not declare gets none (Terraform does not read
/// an undeclared `TF_VAR_` variable).
pub fn undeclared_sensitive_warnings<'a>(
    files: impl IntoIterator<Item = (&'a str, &'a str)>,
    names: &[String],
) -> Vec<String> {
    let declared = variables(files);
    names
        .iter()
        .filter_map(|name| {
            let declarations = declared.get(name)?;
            if declarations.iter().any(|d| d.sensitive) {
                return None;
            }
            let files: Vec<&str> = declarations.iter().map(|d| d.file.as_str()).collect();
            Some(format!(
                "variable `{name}` holds a secret value but is not declared `sensitive = true` (variable \"{name}\" in {}; read by the pilot's minimal scan of the root module's .tf and .tf.json files, not a full HCL parser): Terraform shows its value in plans, outputs and error messages; the pilot replaces it with {} in this log and in outputs.json, but declare it `sensitive = true` (Terraform 0.14 or later) so Terraform hides it too",
                files.join(", "),
                crate::scrub::MARKER
            ))
        })
        .collect()
}

/// `(name, sensitive)` of each variable of a `.tf.json` file; none when it is not JSON.
fn json_variables(text: &str) -> Vec<(String, bool)> {
    let Ok(serde_json::Value::Object(doc)) = serde_json::from_str::<serde_json::Value>(text) else {
        return Vec::new();
    };
    let blocks = match doc.get("variable") {
        Some(serde_json::Value::Object(o)) => vec![o.clone()],
        Some(serde_json::Value::Array(items)) => items
            .iter()
            .filter_map(|i| i.as_object().cloned())
            .collect(),
        _ => return Vec::new(),
    };
    blocks
        .iter()
        .flat_map(|block| {
            block.iter().map(|(name, body)| {
                let sensitive = match body {
                    serde_json::Value::Array(bodies) => bodies
                        .iter()
                        .any(|b| b.get("sensitive") == Some(&serde_json::Value::Bool(true))),
                    body => body.get("sensitive") == Some(&serde_json::Value::Bool(true)),
                };
                (name.clone(), sensitive)
            })
        })
        .collect()
}

/// A token of the native syntax, as far as the scan needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    /// An identifier or keyword (`variable`, `sensitive`, `true`).
    Ident(String),
    /// A quoted string's text (templates left as they are).
    Str(String),
    /// `{`, `[` or `(`.
    Open,
    /// `}`, `]` or `)`.
    Close,
    /// `=`.
    Equals,
    /// A line's end (attributes end there).
    Newline,
    /// Anything else (numbers, operators, heredocs).
    Other,
}

/// `(name, sensitive)` of each top-level `variable` block of a `.tf` file.
fn native_variables(text: &str) -> Vec<(String, bool)> {
    let tokens = tokens(text);
    let mut found = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i] {
            Token::Ident(word) if depth == 0 && word == "variable" => {
                let name = match tokens.get(i + 1) {
                    Some(Token::Str(n) | Token::Ident(n)) => n.clone(),
                    _ => {
                        i += 1;
                        continue;
                    }
                };
                if tokens.get(i + 2) != Some(&Token::Open) {
                    i += 1;
                    continue;
                }
                let (sensitive, end) = block_sensitive(&tokens, i + 3);
                found.push((name, sensitive));
                i = end;
            }
            Token::Open => {
                depth += 1;
                i += 1;
            }
            Token::Close => {
                depth = depth.saturating_sub(1);
                i += 1;
            }
            _ => i += 1,
        }
    }
    found
}

/// Reads a block's body from `start` (just after its `{`): whether it has
/// `sensitive = true` at its own level, and the index after its closing `}`.
fn block_sensitive(tokens: &[Token], start: usize) -> (bool, usize) {
    let mut depth = 1usize;
    let mut sensitive = false;
    let mut at_line_start = true;
    let mut i = start;
    while i < tokens.len() {
        match &tokens[i] {
            Token::Open => depth += 1,
            Token::Close => {
                depth -= 1;
                if depth == 0 {
                    return (sensitive, i + 1);
                }
            }
            Token::Ident(word)
                if depth == 1
                    && at_line_start
                    && word == "sensitive"
                    && tokens.get(i + 1) == Some(&Token::Equals)
                    && tokens.get(i + 2) == Some(&Token::Ident("true".into()))
                    && matches!(
                        tokens.get(i + 3),
                        None | Some(Token::Newline) | Some(Token::Close)
                    ) =>
            {
                sensitive = true;
            }
            _ => {}
        }
        at_line_start = matches!(tokens[i], Token::Newline | Token::Open);
        i += 1;
    }
    (sensitive, i)
}

/// The tokens of `text`: comments dropped, strings and heredocs read whole.
fn tokens(text: &str) -> Vec<Token> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        match c {
            b'\n' => {
                out.push(Token::Newline);
                i += 1;
            }
            b' ' | b'\t' | b'\r' => i += 1,
            b'#' => i = line_end(b, i),
            b'/' if b.get(i + 1) == Some(&b'/') => i = line_end(b, i),
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i = find(b, i + 2, b"*/").map_or(b.len(), |at| at + 2);
            }
            b'"' => {
                let end = string_end(b, i + 1);
                let inner = &b[i + 1..end.saturating_sub(1).max(i + 1)];
                out.push(Token::Str(String::from_utf8_lossy(inner).into_owned()));
                i = end;
            }
            b'<' if b.get(i + 1) == Some(&b'<') => {
                out.push(Token::Other);
                i = heredoc_end(b, i + 2);
            }
            b'{' | b'[' | b'(' => {
                out.push(Token::Open);
                i += 1;
            }
            b'}' | b']' | b')' => {
                out.push(Token::Close);
                i += 1;
            }
            b'=' if b.get(i + 1) == Some(&b'=') => {
                out.push(Token::Other);
                i += 2;
            }
            b'=' => {
                out.push(Token::Equals);
                i += 1;
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'-')
                {
                    i += 1;
                }
                out.push(Token::Ident(text[start..i].to_string()));
            }
            _ => {
                out.push(Token::Other);
                i += 1;
            }
        }
    }
    out
}

fn line_end(b: &[u8], from: usize) -> usize {
    find(b, from, b"\n").unwrap_or(b.len())
}

fn find(b: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    b.get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|at| from + at)
}

/// The index just after the `"` that ends a string whose text starts at `i`, skipping
/// escapes and `${ }` / `%{ }` templates (which may hold strings of their own).
fn string_end(b: &[u8], mut i: usize) -> usize {
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            b'$' | b'%' if b.get(i + 1) == Some(&b[i]) && b.get(i + 2) == Some(&b'{') => i += 3,
            b'$' | b'%' if b.get(i + 1) == Some(&b'{') => i = template_end(b, i + 2),
            b'\n' => return i, // an unterminated string ends with its line
            _ => i += 1,
        }
    }
    b.len()
}

/// The index just after the `}` that closes a template opened just before `i`.
fn template_end(b: &[u8], mut i: usize) -> usize {
    let mut depth = 1usize;
    while i < b.len() {
        match b[i] {
            b'"' => i = string_end(b, i + 1),
            b'{' => {
                depth += 1;
                i += 1;
            }
            b'}' => {
                depth -= 1;
                i += 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => i += 1,
        }
    }
    b.len()
}

/// The index after a heredoc whose `<<` ends just before `i`: its marker line, then every
/// line up to the one holding only the marker.
fn heredoc_end(b: &[u8], mut i: usize) -> usize {
    if b.get(i) == Some(&b'-') {
        i += 1;
    }
    let start = i;
    while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
        i += 1;
    }
    let marker = &b[start..i];
    if marker.is_empty() {
        return i;
    }
    let mut line = line_end(b, i) + 1;
    while line < b.len() {
        let end = line_end(b, line);
        if b[line..end].trim_ascii() == marker {
            return end;
        }
        line = end + 1;
    }
    b.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sensitive_of(text: &str) -> Vec<(String, bool)> {
        native_variables(text)
    }

    #[test]
    fn a_variable_block_is_sensitive_only_with_sensitive_true_at_its_own_level() {
        let text = r#"
# variable "commented" { sensitive = true }
/* variable "blocked" {
  sensitive = true
} */
variable "db_password" {}

variable "token" {
  type      = string
  sensitive = true // yes
}

variable nested {
  default = { sensitive = true }
  validation {
    condition     = length(var.nested) > 0 && "}" != "{"
    error_message = "The value ${var.nested} is not \"ok\" { here."
  }
  description = <<-EOT
    sensitive = true
    }
  EOT
}

variable "one_line" { sensitive = true }
variable "falsy" {
  sensitive = false
}
resource "x" "y" {
  variable "inner" { sensitive = true }
}
"#;
        assert_eq!(
            sensitive_of(text),
            [
                ("db_password".to_string(), false),
                ("token".to_string(), true),
                ("nested".to_string(), false),
                ("one_line".to_string(), true),
                ("falsy".to_string(), false),
            ]
        );
    }

    #[test]
    fn json_files_and_override_files_count() {
        let files = [
            (
                "main.tf",
                "variable \"a\" {}\nvariable \"b\" {}\nvariable \"c\" {}\n",
            ),
            (
                "vars.tf.json",
                r#"{"variable": {"d": {"sensitive": true}, "e": {"type": "string"}}}"#,
            ),
            (
                "main_override.tf",
                "variable \"b\" {\n  sensitive = true\n}\n",
            ),
        ];
        let names: Vec<String> = ["a", "b", "d", "e", "undeclared"]
            .map(String::from)
            .to_vec();
        let warnings = undeclared_sensitive_warnings(files, &names);
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[0].starts_with("variable `a` holds a secret value but is not declared `sensitive = true` (variable \"a\" in main.tf;"), "{}", warnings[0]);
        assert!(warnings[0].contains("minimal scan"), "{}", warnings[0]);
        assert!(
            warnings[1].contains("(variable \"e\" in vars.tf.json;"),
            "{}",
            warnings[1]
        );
    }

    #[test]
    fn broken_text_never_panics() {
        for text in [
            "variable \"x\" {",
            "variable",
            "variable \"x\"",
            "\"unterminated",
            "<<EOT\nno end",
            "<<",
            "x = \"${",
            "/* open",
            "}}}}",
            "variable \"é\" { sensitive = true }",
        ] {
            let _ = native_variables(text);
        }
        assert!(json_variables("not json").is_empty());
    }
}
