//! Where and as whom to call the API: flags, then the environment, then the config
//! file's context.
//!
//! The file (`--config`, else `SORTIE_CONFIG`, else `$HOME/.config/sortie/config.yaml`):
//!
//! ```yaml
//! current_context: prod
//! contexts:
//!   prod:
//!     api_url: https://sortie.example.com
//!     token_command: my-oidc-helper --audience sortie
//! ```
//!
//! `token_command` runs with `sh -c`; its standard output, trimmed, is the token (an
//! OIDC helper). The token itself is never printed: not in errors, not by `context list`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::{Deserialize, Serialize};

use crate::args::{ContextCommand, Global, Output};
use crate::exit::CliError;
use crate::output;

/// The API URL and token a command uses, and where each came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The API's base URL.
    pub api_url: String,
    /// The bearer token, if any.
    pub token: Option<String>,
    /// Where the API URL came from.
    pub url_origin: Origin,
    /// Where the token came from; `None` when there is none.
    pub token_origin: Option<Origin>,
    /// The context in effect (`--context`, else the file's current one), if any, and
    /// what it holds: whether it has an API URL, and its token source.
    pub context: Option<ContextSummary>,
}

/// Where a setting came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A flag: `--api-url`, `--token`.
    Flag,
    /// A variable: `SORTIE_API_URL`, `SORTIE_TOKEN`.
    Variable,
    /// The context's `api_url` or `token`.
    Context(String),
    /// The context's `token_command`.
    TokenCommand(String),
}

/// What the context in effect holds, for saying what a flag or variable overrides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextSummary {
    /// Its name.
    pub name: String,
    /// True when it has an API URL.
    pub has_url: bool,
    /// Its token source, as `context list` shows it (`(set)`, `token_command: ...`, `-`).
    pub token: String,
}

impl Resolved {
    /// The credential, by name, as messages show it (never the token itself): `the flag
    /// --token`, `the variable SORTIE_TOKEN`, `context `prod`'s token_command`, or `no
    /// token`.
    pub fn credential(&self) -> String {
        match &self.token_origin {
            None => "no token".into(),
            Some(Origin::Flag) => "the flag --token".into(),
            Some(Origin::Variable) => "the variable SORTIE_TOKEN".into(),
            Some(Origin::Context(name)) => format!("context `{name}`'s token"),
            Some(Origin::TokenCommand(name)) => format!("context `{name}`'s token_command"),
        }
    }

    /// Where the API URL came from, as messages show it.
    pub fn url_source(&self) -> String {
        match &self.url_origin {
            Origin::Flag => "the flag --api-url".into(),
            Origin::Variable => "the variable SORTIE_API_URL".into(),
            Origin::Context(name) | Origin::TokenCommand(name) => format!("context `{name}`"),
        }
    }

    /// How to get a working credential, after the API refused this one (401).
    pub fn how_to_get_a_token(&self) -> String {
        match &self.token_origin {
            None => "pass --token TOKEN, set SORTIE_TOKEN, or give a context a token source with `sortie context set NAME --token-command CMD` (`sortie dev` prints its token when it starts)".into(),
            Some(Origin::Flag | Origin::Variable) => "get a fresh token from your identity provider (for `sortie dev`, the token it printed when it started) and pass it again".into(),
            Some(Origin::Context(name)) => format!("store a fresh one with `sortie context set {name} --token TOKEN`, or let a command fetch it: `sortie context set {name} --token-command CMD`"),
            Some(Origin::TokenCommand(name)) => format!("check that the token_command of context `{name}` prints a valid, unexpired token for this API"),
        }
    }

    /// One line per flag or variable that overrides the context in effect, such as
    /// `SORTIE_TOKEN overrides the token of context `prod``. Empty when nothing does.
    pub fn overrides(&self) -> Vec<String> {
        let Some(context) = &self.context else {
            return vec![];
        };
        let name = &context.name;
        let mut notes = Vec::new();
        let by = |origin: &Origin| match origin {
            Origin::Flag => Some(("--api-url", "--token")),
            Origin::Variable => Some(("SORTIE_API_URL", "SORTIE_TOKEN")),
            _ => None,
        };
        if let Some((url, _)) = by(&self.url_origin) {
            if context.has_url {
                notes.push(format!("{url} overrides the API URL of context `{name}`"));
            }
        }
        if let Some((_, token)) = self.token_origin.as_ref().and_then(by) {
            if context.token != "-" {
                notes.push(format!(
                    "{token} overrides the token of context `{name}` ({})",
                    context.token
                ));
            }
        }
        notes
    }
}

/// The config file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// The context used when `--context` is not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_context: Option<String>,
    /// The contexts by name.
    #[serde(default)]
    pub contexts: BTreeMap<String, Context>,
}

/// One named context: an API and how to get a token for it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Context {
    /// The API's base URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_url: Option<String>,
    /// A command (run with `sh -c`) whose standard output is the token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_command: Option<String>,
    /// A token stored in the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
}

const HOW_TO_SET_URL: &str = "no API URL: pass --api-url URL, set SORTIE_API_URL, or make a context with `sortie context set NAME --api-url URL` and `sortie context use NAME`";

/// The API URL and token: each from its flag, else its environment variable, else the
/// context (`--context`, else the file's current one).
pub fn resolve(global: &Global) -> Result<Resolved, CliError> {
    let flag_or_env = |flag: &Option<String>, var: &str| {
        flag.clone()
            .or_else(|| std::env::var(var).ok())
            .filter(|v| !v.is_empty())
    };
    let origin = |flag: &Option<String>| {
        if flag.as_deref().is_some_and(|v| !v.is_empty()) {
            Origin::Flag
        } else {
            Origin::Variable
        }
    };
    let url = flag_or_env(&global.api_url, "SORTIE_API_URL");
    let token = flag_or_env(&global.token, "SORTIE_TOKEN");
    if global.context.is_none() {
        if let (Some(api_url), Some(token)) = (&url, &token) {
            // The file is read only to say what the flags or variables override: an
            // unreadable one is no reason to fail.
            let file = config_path(global)
                .ok()
                .and_then(|p| load(&p).ok())
                .unwrap_or_default();
            let context = file
                .current_context
                .as_ref()
                .and_then(|name| file.contexts.get(name).map(|c| summary(name, c)));
            return Ok(Resolved {
                api_url: api_url.clone(),
                token: Some(token.clone()),
                url_origin: origin(&global.api_url),
                token_origin: Some(origin(&global.token)),
                context,
            });
        }
    }
    let path = config_path(global)?;
    let file = load(&path)?;
    let context = match &global.context {
        Some(name) => Some((name.clone(), context_named(&file, name, &path)?.clone())),
        None => file.current_context.as_ref().and_then(|name| {
            file.contexts
                .get(name)
                .map(|context| (name.clone(), context.clone()))
        }),
    };
    let summary_of = context.as_ref().map(|(name, c)| summary(name, c));
    let mut url_origin = origin(&global.api_url);
    let api_url = match url {
        Some(url) => url,
        None => match context.as_ref().and_then(|(_, c)| c.api_url.clone()) {
            Some(url) => {
                url_origin = Origin::Context(context.as_ref().map(|(n, _)| n.clone()).unwrap_or_default());
                url
            }
            None => {
                return Err(match &context {
                    Some((name, _)) => CliError::Usage(format!(
                        "context `{name}` has no API URL: `sortie context set {name} --api-url URL`, or pass --api-url"
                    )),
                    None => CliError::Usage(HOW_TO_SET_URL.into()),
                })
            }
        },
    };
    let (token, token_origin) = match token {
        Some(token) => (Some(token), Some(origin(&global.token))),
        None => match context {
            Some((
                name,
                Context {
                    token: Some(token), ..
                },
            )) => (Some(token), Some(Origin::Context(name))),
            Some((
                name,
                Context {
                    token_command: Some(command),
                    ..
                },
            )) => (
                Some(run_token_command(&name, &command)?),
                Some(Origin::TokenCommand(name)),
            ),
            _ => (None, None),
        },
    };
    Ok(Resolved {
        api_url,
        token,
        url_origin,
        token_origin,
        context: summary_of,
    })
}

fn summary(name: &str, c: &Context) -> ContextSummary {
    ContextSummary {
        name: name.to_string(),
        has_url: c.api_url.is_some(),
        token: token_source(c),
    }
}

/// `sortie context use|set|list|current`.
pub fn context_command(global: &Global, cmd: ContextCommand) -> Result<(), CliError> {
    let path = config_path(global)?;
    let mut file = load(&path)?;
    match cmd {
        ContextCommand::Use { name } => {
            context_named(&file, &name, &path)?;
            file.current_context = Some(name.clone());
            save(&path, &file)?;
            output::print_text(&format!("switched to context `{name}`"));
        }
        ContextCommand::Set {
            name,
            api_url,
            token_command,
            token,
        } => {
            if name.trim().is_empty() {
                return Err(CliError::Usage("a context needs a name".into()));
            }
            if token.is_some() && token_command.is_some() {
                return Err(CliError::Usage(
                    "give --token or --token-command, not both".into(),
                ));
            }
            let existed = file.contexts.contains_key(&name);
            let context = file.contexts.entry(name.clone()).or_default();
            if let Some(url) = api_url {
                context.api_url = Some(url);
            }
            // One token source at a time: setting one replaces the other.
            if let Some(command) = token_command {
                context.token_command = Some(command);
                context.token = None;
            }
            if let Some(token) = token {
                context.token = Some(token);
                context.token_command = None;
            }
            let first = file.current_context.is_none();
            if first {
                file.current_context = Some(name.clone());
            }
            save(&path, &file)?;
            let verb = if existed { "changed" } else { "created" };
            let current = if first {
                " (now the current context)"
            } else {
                ""
            };
            output::print_text(&format!("context `{name}` {verb}{current}"));
        }
        ContextCommand::List => {
            let view: Vec<ContextView> = file
                .contexts
                .iter()
                .map(|(name, c)| ContextView {
                    name: name.clone(),
                    current: file.current_context.as_deref() == Some(name.as_str()),
                    api_url: c.api_url.clone(),
                    token: token_source(c),
                })
                .collect();
            output::emit(&view, global.output, || {
                output::table(
                    &["CURRENT", "NAME", "API URL", "TOKEN"],
                    view.iter()
                        .map(|c| {
                            vec![
                                if c.current { "*" } else { "" }.to_string(),
                                c.name.clone(),
                                c.api_url.clone().unwrap_or_else(|| "-".into()),
                                c.token.clone(),
                            ]
                        })
                        .collect(),
                )
            })?;
        }
        ContextCommand::Current => match &file.current_context {
            Some(name) => {
                let notes = file
                    .contexts
                    .get(name)
                    .map(|context| overrides_of(global, name, context))
                    .unwrap_or_default();
                for note in notes {
                    eprintln!("note: {note}");
                }
                match global.output {
                    Output::Table => output::print_text(name),
                    format => output::emit(
                        &serde_json::json!({"current_context": name}),
                        format,
                        String::new,
                    )?,
                }
            }
            None => {
                return Err(CliError::NotFound(format!(
                    "no current context in {}: `sortie context use NAME`",
                    path.display()
                )))
            }
        },
    }
    Ok(())
}

/// What `--api-url`, `--token`, `SORTIE_API_URL` or `SORTIE_TOKEN` override in context
/// `name` (the current one), one note each.
fn overrides_of(global: &Global, name: &str, context: &Context) -> Vec<String> {
    let set = |flag: &Option<String>, var: &str| {
        if flag.as_deref().is_some_and(|v| !v.is_empty()) {
            Some(Origin::Flag)
        } else if std::env::var(var).is_ok_and(|v| !v.is_empty()) {
            Some(Origin::Variable)
        } else {
            None
        }
    };
    let resolved = Resolved {
        api_url: String::new(),
        token: None,
        url_origin: set(&global.api_url, "SORTIE_API_URL")
            .unwrap_or_else(|| Origin::Context(name.to_string())),
        token_origin: set(&global.token, "SORTIE_TOKEN"),
        context: Some(summary(name, context)),
    };
    resolved.overrides()
}

/// A context as `context list` shows it: the token only as `(set)` or its command.
#[derive(Debug, Serialize)]
struct ContextView {
    name: String,
    current: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    api_url: Option<String>,
    token: String,
}

fn token_source(c: &Context) -> String {
    match (&c.token, &c.token_command) {
        (Some(_), _) => "(set)".into(),
        (None, Some(command)) => format!("token_command: {command}"),
        (None, None) => "-".into(),
    }
}

/// The config file's path: `--config`, else `SORTIE_CONFIG`, else
/// `$HOME/.config/sortie/config.yaml`.
pub fn config_path(global: &Global) -> Result<PathBuf, CliError> {
    if let Some(p) = &global.config {
        return Ok(p.clone());
    }
    if let Some(p) = std::env::var_os("SORTIE_CONFIG").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        Some(home) => Ok(PathBuf::from(home).join(".config/sortie/config.yaml")),
        None => Err(CliError::Usage(
            "no config file: HOME is not set; pass --config FILE or set SORTIE_CONFIG".into(),
        )),
    }
}

/// The file, or an empty one when it does not exist.
fn load(path: &Path) -> Result<ConfigFile, CliError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(ConfigFile::default()),
        Err(e) => {
            return Err(CliError::Other(format!(
                "could not read the config file {}: {e}",
                path.display()
            )))
        }
    };
    if text.trim().is_empty() {
        return Ok(ConfigFile::default());
    }
    // serde_norway's message may quote the file; the error names only the location.
    serde_norway::from_str(&text).map_err(|e| {
        let at = e
            .location()
            .map(|l| format!(" at line {}, column {}", l.line(), l.column()))
            .unwrap_or_default();
        CliError::Usage(format!(
            "the config file {} is not valid{at}: expected `current_context` and `contexts: {{NAME: {{api_url, token_command | token}}}}`",
            path.display()
        ))
    })
}

/// Writes the file with mode 0600 (it may hold a token), through a temporary file.
fn save(path: &Path, file: &ConfigFile) -> Result<(), CliError> {
    let fail = |what: &str, e: std::io::Error| {
        CliError::Other(format!(
            "could not {what} the config file {}: {e}",
            path.display()
        ))
    };
    let text = serde_norway::to_string(file)
        .map_err(|e| CliError::Other(format!("could not write the config: {e}")))?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| fail("create the directory of", e))?;
    }
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".tmp{}", std::process::id()));
    let tmp = path.with_file_name(name);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let written = (|| {
        use std::io::Write;
        let mut f = options.open(&tmp)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        }
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(fail("write", e));
    }
    Ok(())
}

fn context_named<'a>(
    file: &'a ConfigFile,
    name: &str,
    path: &Path,
) -> Result<&'a Context, CliError> {
    file.contexts.get(name).ok_or_else(|| {
        let known = if file.contexts.is_empty() {
            "there are none; make one with `sortie context set NAME --api-url URL`".to_string()
        } else {
            format!(
                "known: {}",
                file.contexts
                    .keys()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        CliError::NotFound(format!(
            "no context `{name}` in {} ({known})",
            path.display()
        ))
    })
}

/// Runs a context's `token_command` with `sh -c`; its trimmed stdout is the token. A
/// failure names the command and quotes its stderr, never its stdout.
fn run_token_command(context: &str, command: &str) -> Result<String, CliError> {
    let out = Command::new("sh")
        .arg("-c")
        .arg(command)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| {
            CliError::Other(format!(
                "context `{context}`: could not run token_command `{command}`: {e}"
            ))
        })?;
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
    let stderr = if stderr.is_empty() {
        String::new()
    } else {
        format!(": {stderr}")
    };
    if !out.status.success() {
        return Err(CliError::Other(format!(
            "context `{context}`: token_command `{command}` failed ({}){stderr}",
            out.status
        )));
    }
    let token = String::from_utf8(out.stdout)
        .map_err(|_| {
            CliError::Other(format!(
                "context `{context}`: token_command `{command}` printed something that is not UTF-8"
            ))
        })?
        .trim()
        .to_string();
    if token.is_empty() {
        return Err(CliError::Other(format!(
            "context `{context}`: token_command `{command}` printed no token{stderr}"
        )));
    }
    Ok(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_command_s_output_is_trimmed_and_its_failure_quotes_stderr_only() {
        assert_eq!(run_token_command("c", "printf '  tok\\n'").unwrap(), "tok");
        let e = run_token_command("c", "echo tok-$((40+2)); echo broken >&2; exit 3").unwrap_err();
        let text = e.to_string();
        assert!(text.contains("broken"), "{text}");
        assert!(
            text.contains("token_command `echo tok-$((40+2));"),
            "{text}"
        );
        assert!(!text.contains("tok-42"), "{text}");
    }

    #[test]
    fn the_file_round_trips() {
        let text = "current_context: prod\ncontexts:\n  prod:\n    api_url: https://x\n    token_command: echo t\n";
        let file: ConfigFile = serde_norway::from_str(text).unwrap();
        assert_eq!(file.current_context.as_deref(), Some("prod"));
        assert_eq!(
            file.contexts["prod"].token_command.as_deref(),
            Some("echo t")
        );
        let again: ConfigFile =
            serde_norway::from_str(&serde_norway::to_string(&file).unwrap()).unwrap();
        assert_eq!(again, file);
    }
}
