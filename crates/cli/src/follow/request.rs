//! The job request `run` sends, built from its flags: the source (a folder, or a git
//! URL in Terraform's style), variables, sensitive variables and variable files.

use std::io::{IsTerminal, Write};
use std::path::Path;

use serde_json::{json, Map, Value};

use crate::args::{Operation, Run};
use crate::exit::CliError;

/// The JSON body of `POST .../jobs` from `run`'s arguments.
pub(super) fn job_request(args: &Run) -> Result<Value, CliError> {
    let mut variables = Map::new();
    for file in &args.var_files {
        variables.extend(var_file(file)?);
    }
    for var in &args.vars {
        let (name, value) = var
            .split_once('=')
            .ok_or_else(|| CliError::Usage(format!("--var `{var}`: expected NAME=VALUE")))?;
        if name.is_empty() {
            return Err(CliError::Usage(format!(
                "--var `{var}`: the variable name is empty"
            )));
        }
        let value = serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.into()));
        variables.insert(name.to_string(), value);
    }
    let operation = match args.operation {
        Operation::Plan => "plan",
        Operation::Apply => "apply",
        Operation::Destroy => "destroy",
    };
    let mut body = json!({"operation": operation, "variables": variables});
    let sensitive = sensitive_variables(
        &args.sensitive_vars,
        |name| std::env::var(sortie_core::sensitive::env_name(name)).ok(),
        prompt_hidden,
    )?;
    if !sensitive.is_empty() {
        body["sensitive_variables"] = Value::Object(sensitive);
    }
    // No --source: the current folder's own files (and the local modules they call), marked
    // implicit so that the runner refuses a plan that destroys everything; never a destroy.
    let implicit = args.source.is_none();
    if implicit && args.operation == Operation::Destroy {
        return Err(CliError::Other(format!(
            "destroy needs an explicit --source: name the configuration whose resources to destroy (`sortie run destroy {} --source DIR`); without --source, sortie would send whatever the current folder holds",
            args.env
        )));
    }
    let source = args.source.as_deref().unwrap_or(".");
    if is_git(source) {
        body["source"] = git_source(source)?;
    } else {
        let dir = Path::new(source);
        let inline = crate::source::collect(dir, args.source.as_deref())?;
        if let Some(note) = inline.note(dir, implicit) {
            eprintln!("{note}");
        }
        body["source"] = if implicit {
            json!({"type": "inline", "implicit": true})
        } else {
            json!({"type": "inline"})
        };
        body["files"] = Value::Object(
            inline
                .files
                .into_iter()
                .map(|(k, v)| (k, Value::String(v)))
                .collect(),
        );
    }
    Ok(body)
}

/// The values of `--sensitive-var`: `name=value` as given, else `name` from `from_env`
/// (`TF_VAR_<name>`), else from `prompt` (a terminal only). A value never appears in an
/// error.
pub(super) fn sensitive_variables(
    given: &[String],
    from_env: impl Fn(&str) -> Option<String>,
    prompt: impl Fn(&str) -> Option<String>,
) -> Result<Map<String, Value>, CliError> {
    let mut out = Map::new();
    for arg in given {
        let (name, value) = match arg.split_once('=') {
            Some((name, value)) => (name, Some(value.to_string())),
            None => (arg.as_str(), None),
        };
        if let Some(problem) = sortie_core::sensitive::name_problem(name) {
            return Err(CliError::Usage(format!(
                "--sensitive-var `{name}` {problem}"
            )));
        }
        let value = value
            .or_else(|| from_env(name))
            .or_else(|| prompt(name))
            .ok_or_else(|| {
                CliError::Usage(format!(
                    "--sensitive-var {name}: no value; set {} or give {name}=VALUE",
                    sortie_core::sensitive::env_name(name)
                ))
            })?;
        out.insert(name.to_string(), Value::String(value));
    }
    Ok(out)
}

/// Asks for `name`'s value on the terminal without echoing it; `None` when stdin is not a
/// terminal.
pub(super) fn prompt_hidden(name: &str) -> Option<String> {
    if !std::io::stdin().is_terminal() {
        return None;
    }
    let stty = |arg: &str| {
        std::process::Command::new("stty")
            .arg(arg)
            .stdin(std::process::Stdio::inherit())
            .status()
            .is_ok_and(|s| s.success())
    };
    eprint!("{name} (sensitive, not echoed): ");
    let _ = std::io::stderr().flush();
    let hidden = stty("-echo");
    let mut line = String::new();
    let read = std::io::stdin().read_line(&mut line);
    if hidden {
        stty("echo");
    }
    eprintln!();
    read.ok()?;
    Some(line.trim_end_matches(['\r', '\n']).to_string())
}

/// Reads a variables file: JSON (`.json`, `.tfvars.json`) or YAML, a mapping of names to
/// values.
pub(super) fn var_file(path: &Path) -> Result<Map<String, Value>, CliError> {
    let shown = path.display();
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::Usage(format!("--var-file {shown}: {e}")))?;
    let value: Value = if path.extension().is_some_and(|e| e == "json") {
        serde_json::from_str(&text)
            .map_err(|e| CliError::Usage(format!("--var-file {shown}: not JSON: {e}")))?
    } else {
        serde_norway::from_str(&text)
            .map_err(|e| CliError::Usage(format!("--var-file {shown}: not YAML or JSON: {e}")))?
    };
    match value {
        Value::Object(map) => Ok(map),
        Value::Null => Ok(Map::new()),
        _ => Err(CliError::Usage(format!(
            "--var-file {shown}: expected a mapping of variable names to values"
        ))),
    }
}

/// A git source: `git::` anything, or a URL (`https://`, `http://`, `ssh://`, `file://`,
/// `git@host:`).
pub(super) fn is_git(source: &str) -> bool {
    source.starts_with("git::")
        || ["https://", "http://", "ssh://", "file://", "git@"]
            .iter()
            .any(|p| source.starts_with(p))
}

/// Turns Terraform's module-source form `git::URL//SUBDIR?ref=REF` into a git source.
pub(super) fn git_source(source: &str) -> Result<Value, CliError> {
    let rest = source.strip_prefix("git::").unwrap_or(source);
    let (rest, query) = match rest.split_once('?') {
        Some((r, q)) => (r, Some(q)),
        None => (rest, None),
    };
    let mut git_ref = None;
    for pair in query.into_iter().flat_map(|q| q.split('&')) {
        match pair.split_once('=') {
            Some(("ref", r)) if !r.is_empty() => git_ref = Some(r.to_string()),
            _ => {
                return Err(CliError::Usage(format!(
                    "--source {source}: `{pair}`: only `?ref=BRANCH|TAG|COMMIT` is understood"
                )))
            }
        }
    }
    // The subdirectory follows the first `//` after the scheme's `://`.
    let after_scheme = rest.find("://").map_or(0, |i| i + 3);
    let (url, path) = match rest[after_scheme..].find("//") {
        Some(i) => (
            &rest[..after_scheme + i],
            rest[after_scheme + i + 2..].trim_matches('/'),
        ),
        None => (rest, ""),
    };
    let mut git = json!({"type": "git", "url": url, "path": path});
    if let Some(r) = git_ref {
        git["ref"] = Value::String(r);
    }
    Ok(git)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_terraform_style_git_source_splits_into_url_path_and_ref() {
        assert_eq!(
            git_source("git::https://example.com/acme/infra.git//stacks/app?ref=v1.2").unwrap(),
            json!({"type": "git", "url": "https://example.com/acme/infra.git", "path": "stacks/app", "ref": "v1.2"})
        );
        assert_eq!(
            git_source("https://example.com/acme/infra.git").unwrap(),
            json!({"type": "git", "url": "https://example.com/acme/infra.git", "path": ""})
        );
        assert_eq!(
            git_source("git@example.com:acme/infra.git//app").unwrap(),
            json!({"type": "git", "url": "git@example.com:acme/infra.git", "path": "app"})
        );
        assert!(git_source("git::https://h/r.git?depth=1").is_err());
        assert!(is_git("git::file:///tmp/r") && !is_git("./infra"));
    }

    #[test]
    fn vars_are_json_when_they_parse_and_strings_otherwise() {
        let args = Run {
            operation: Operation::Plan,
            env: "acme/x".into(),
            source: Some("git::https://h/r.git".into()),
            vars: vec![
                "n=3".into(),
                "s=hi there".into(),
                "l=[1,2]".into(),
                "b=true".into(),
                "e=".into(),
            ],
            var_files: vec![],
            sensitive_vars: vec![],
            wait: false,
            idempotency_key: None,
        };
        let body = job_request(&args).unwrap();
        assert_eq!(
            body["variables"],
            json!({"n": 3, "s": "hi there", "l": [1, 2], "b": true, "e": ""})
        );
        assert_eq!(body["operation"], "plan");
    }

    #[test]
    fn without_source_a_destroy_is_refused_and_so_is_a_folder_without_tf_files() {
        let dir = std::env::temp_dir().join(format!("sortie-implicit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("main.tf"), "output \"x\" { value = 1 }\n").unwrap();
        let run = |operation, source: Option<String>| Run {
            operation,
            env: "acme/x".into(),
            source,
            vars: vec![],
            var_files: vec![],
            sensitive_vars: vec![],
            wait: false,
            idempotency_key: None,
        };
        let e = job_request(&run(Operation::Destroy, None)).unwrap_err();
        assert_eq!(e.exit_code(), 1);
        assert!(
            e.to_string()
                .starts_with("destroy needs an explicit --source: "),
            "{e}"
        );
        let shown = dir.display().to_string();
        let explicit = job_request(&run(Operation::Destroy, Some(shown.clone()))).unwrap();
        assert_eq!(explicit["source"], json!({"type": "inline"}));
        assert_eq!(explicit["files"]["main.tf"], "output \"x\" { value = 1 }\n");
        let git = job_request(&run(
            Operation::Destroy,
            Some("git::https://h/r.git".into()),
        ));
        assert_eq!(git.unwrap()["source"]["type"], "git");
        // The implicit source is the current directory: the crate's, which has no .tf file.
        let e = job_request(&run(Operation::Apply, None)).unwrap_err();
        assert_eq!(e.exit_code(), 1);
        assert!(
            e.to_string()
                .starts_with("no .tf file in the current folder"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn sensitive_vars_come_from_the_argument_the_environment_or_a_prompt() {
        let env = |name: &str| (name == "from_env").then(|| "env-value".to_string());
        let asked = |name: &str| (name == "asked").then(|| "typed".to_string());
        let got = sensitive_variables(
            &["a=b=c".into(), "from_env".into(), "asked".into()],
            env,
            asked,
        )
        .unwrap();
        assert_eq!(
            Value::Object(got),
            json!({"a": "b=c", "from_env": "env-value", "asked": "typed"})
        );
        let e = sensitive_variables(&["missing".into()], env, asked).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--sensitive-var missing: no value; set TF_VAR_missing or give missing=VALUE"
        );
        let e = sensitive_variables(&["9x=hunter2".into()], env, asked).unwrap_err();
        assert!(e.to_string().starts_with("--sensitive-var `9x` "), "{e}");
        assert!(!e.to_string().contains("hunter2"), "{e}");
    }

    #[test]
    fn var_files_read_json_and_yaml() {
        let dir = std::env::temp_dir().join(format!("sortie-varfile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("a.tfvars.json"), r#"{"x": 1}"#).unwrap();
        std::fs::write(dir.join("b.yaml"), "y: [a, b]\n").unwrap();
        assert_eq!(var_file(&dir.join("a.tfvars.json")).unwrap()["x"], 1);
        assert_eq!(
            var_file(&dir.join("b.yaml")).unwrap()["y"],
            json!(["a", "b"])
        );
        std::fs::write(dir.join("c.yaml"), "- 1\n").unwrap();
        assert!(var_file(&dir.join("c.yaml")).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
