//! The configuration `run` sends inline from a folder: the folder's own `*.tf`, `*.tfvars`
//! and `*.json` files, never its subfolders, except the local modules it calls.
//!
//! A root whose `module` blocks have a local `source` (`./modules/net`, `../shared`) gets
//! those module folders too, whole, and the local modules they call in turn: that is a
//! module layout, detected and named on standard error. Any other subfolder stays behind,
//! so a folder whose `.tf` files sit only in subfolders is refused before submit rather than
//! sent as an empty configuration (which would plan to destroy everything). The same rule
//! holds for `--source DIR` and for the current folder when `--source` is absent.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;
use sortie_core::job::MAX_FILES_BYTES;

use crate::exit::CliError;

/// What a folder sends: its files by `/`-separated path, and the local module folders it
/// calls (sorted, relative to the folder).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inline {
    /// Every file sent, by its path relative to the folder.
    pub files: BTreeMap<String, String>,
    /// The local module folders sent with it.
    pub modules: Vec<String>,
}

impl Inline {
    /// The line that names what is sent, for standard error: `None` for an explicit
    /// `--source` without local modules (nothing to say).
    pub fn note(&self, dir: &Path, implicit: bool) -> Option<String> {
        let own = self.files.keys().filter(|f| !f.contains('/')).count();
        let modules = if self.modules.is_empty() {
            String::new()
        } else {
            format!(
                " and the local module(s) it calls: {}",
                self.modules.join(", ")
            )
        };
        if implicit {
            let folder = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
            let rest = if modules.is_empty() {
                " (not its subfolders)".to_string()
            } else {
                modules
            };
            Some(format!(
                "note: no --source: sending the {own} file(s) of the current folder {}{rest}",
                folder.display()
            ))
        } else if !modules.is_empty() {
            Some(format!("note: sending {own} file(s){modules}"))
        } else {
            None
        }
    }
}

/// True for a file Terraform reads as configuration (`*.tf`, `*.tf.json`).
pub fn is_config(name: &str) -> bool {
    name.ends_with(".tf") || name.ends_with(".tf.json")
}

/// The inline configuration of `dir`. `given` is the `--source` as typed, `None` when the
/// folder is the current one because `--source` is absent. Refuses a folder with no `.tf`
/// file of its own, a local module outside it or missing, and a total over
/// [`MAX_FILES_BYTES`] (which the API would refuse).
pub fn collect(dir: &Path, given: Option<&str>) -> Result<Inline, CliError> {
    let shown = match given {
        Some(s) => format!("--source {s}"),
        None => "the current folder".to_string(),
    };
    if !dir.is_dir() {
        return Err(CliError::Usage(format!(
            "{shown}: not a directory (give a directory of .tf files, or a git URL such as git::https://host/repo.git//path?ref=main)"
        )));
    }
    let mut files = read_files(dir, "", false)?;
    if !files.keys().any(|f| is_config(f)) {
        return Err(CliError::Other(no_config_message(dir, given)));
    }
    // The local modules, transitively: (folder relative to `dir`, called from).
    let mut modules: BTreeSet<String> = BTreeSet::new();
    let mut todo: Vec<String> = vec![String::new()];
    while let Some(at) = todo.pop() {
        let own: Vec<(String, String)> = read_files(&dir.join(&at), &at, false)?
            .into_iter()
            .filter(|(name, _)| is_config(name))
            .collect();
        for (file, text) in own {
            for source in local_module_sources(&file, &text) {
                let Some(folder) = resolve(&at, &source) else {
                    return Err(CliError::Other(format!(
                        "{shown}: {file} calls the module at `{source}`, outside the folder sent; give --source the folder that holds the root and its modules"
                    )));
                };
                if folder.is_empty() || !modules.insert(folder.clone()) {
                    continue;
                }
                if !dir.join(&folder).is_dir() {
                    return Err(CliError::Other(format!(
                        "{shown}: {file} calls the module at `{source}`, and {folder}/ is not a folder"
                    )));
                }
                files.extend(read_files(&dir.join(&folder), &folder, true)?);
                todo.push(folder);
            }
        }
    }
    let total: usize = files.values().map(String::len).sum();
    if total > MAX_FILES_BYTES {
        let mut biggest: Vec<(&String, usize)> = files.iter().map(|(k, v)| (k, v.len())).collect();
        biggest.sort_by_key(|b| std::cmp::Reverse(b.1));
        let list = biggest
            .iter()
            .take(3)
            .map(|(k, n)| format!("{k} ({n} bytes)"))
            .collect::<Vec<_>>()
            .join(", ");
        return Err(CliError::Usage(format!(
            "{shown}: its {} files total {total} bytes, over the {MAX_FILES_BYTES}-byte ({} KiB) limit of inline files (largest: {list}); push it to git and give --source git::https://host/repo.git//path?ref=main",
            files.len(),
            MAX_FILES_BYTES / 1024
        )));
    }
    Ok(Inline {
        files,
        modules: modules.into_iter().collect(),
    })
}

/// Why a folder with no `.tf` file of its own is refused, naming the subfolders that have
/// some.
fn no_config_message(dir: &Path, given: Option<&str>) -> String {
    let mut nested: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir() && !e.file_name().to_string_lossy().starts_with('.'))
        .filter(|e| {
            read_files(&e.path(), "", true)
                .map(|f| f.keys().any(|k| is_config(k)))
                .unwrap_or(false)
        })
        .map(|e| format!("{}/", e.file_name().to_string_lossy()))
        .collect();
    nested.sort();
    let hint = if nested.is_empty() {
        String::new()
    } else {
        format!("; .tf files are in its subfolders {}", nested.join(", "))
    };
    match given {
        None => {
            let folder = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
            format!(
                "no .tf file in the current folder {} (without --source, only its own files are sent, never its subfolders){hint}: cd to the folder of your root module, or give it with --source DIR",
                folder.display()
            )
        }
        Some(s) => format!(
            "--source {s}: no .tf file in it (only the folder's own files are sent, with the local modules they call){hint}: give the folder of your root module"
        ),
    }
}

/// Every `*.tf`, `*.tfvars` and `*.json` file in `dir` (and below it when `recursive`), by
/// `prefix/` and its `/`-separated path relative to `dir`, skipping dotfiles and
/// dot-directories (`.terraform/`) and symbolic links to folders.
fn read_files(
    dir: &Path,
    prefix: &str,
    recursive: bool,
) -> Result<BTreeMap<String, String>, CliError> {
    let mut files = BTreeMap::new();
    let mut stack: Vec<PathBuf> = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries =
            std::fs::read_dir(&d).map_err(|e| CliError::Usage(format!("{}: {e}", d.display())))?;
        for entry in entries {
            let entry = entry.map_err(|e| CliError::Usage(format!("{}: {e}", d.display())))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            let path = entry.path();
            let kind = entry
                .file_type()
                .map_err(|e| CliError::Usage(format!("{}: {e}", path.display())))?;
            if path.is_dir() {
                if recursive && !kind.is_symlink() {
                    stack.push(path);
                }
                continue;
            }
            if !path.is_file()
                || ![".tf", ".tfvars", ".json"]
                    .iter()
                    .any(|ext| name.ends_with(ext))
            {
                continue;
            }
            let relative = path
                .strip_prefix(dir)
                .unwrap_or(&path)
                .components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect::<Vec<_>>()
                .join("/");
            let key = if prefix.is_empty() {
                relative
            } else {
                format!("{prefix}/{relative}")
            };
            let content = std::fs::read_to_string(&path).map_err(|e| {
                CliError::Usage(format!(
                    "{}: {e} (inline files must be UTF-8 text)",
                    path.display()
                ))
            })?;
            files.insert(key, content);
        }
    }
    Ok(files)
}

/// The local `source`s (`./…`, `../…`) of the `module` blocks of one configuration file
/// (`file` names it: `.tf.json` is read as JSON, anything else as HCL).
pub fn local_module_sources(file: &str, text: &str) -> Vec<String> {
    let sources = if file.ends_with(".tf.json") {
        json_module_sources(text)
    } else {
        hcl_module_sources(text)
    };
    sources.into_iter().filter(|s| is_local(s)).collect()
}

/// A module source Terraform reads as a local path.
fn is_local(source: &str) -> bool {
    source.starts_with("./") || source.starts_with("../")
}

fn json_module_sources(text: &str) -> Vec<String> {
    let Ok(doc) = serde_json::from_str::<Value>(text) else {
        return Vec::new();
    };
    let blocks: Vec<&Value> = match &doc["module"] {
        Value::Array(items) => items.iter().collect(),
        other => vec![other],
    };
    blocks
        .into_iter()
        .filter_map(Value::as_object)
        .flat_map(|m| m.values())
        .filter_map(|m| m["source"].as_str().map(str::to_string))
        .collect()
}

/// The `source = "…"` of each top-level `module` block, read line by line: comments and
/// strings are skipped when braces are counted.
fn hcl_module_sources(text: &str) -> Vec<String> {
    let mut sources = Vec::new();
    let mut depth = 0usize;
    let mut in_module = false;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('#') || trimmed.starts_with("//") {
            continue;
        }
        let mut search = None;
        if depth == 0 {
            in_module = trimmed
                .strip_prefix("module")
                .is_some_and(|rest| rest.starts_with(|c: char| c == '"' || c.is_whitespace()));
            if in_module {
                // `module "m" { source = "./m" }` on one line.
                search = trimmed.find('{').map(|i| &trimmed[i + 1..]);
            }
        } else if in_module && depth == 1 {
            search = Some(trimmed);
        }
        if let Some(value) = search.and_then(source_value) {
            sources.push(value);
        }
        for c in code_chars(trimmed) {
            match c {
                '{' => depth += 1,
                '}' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        if depth == 0 && !trimmed.is_empty() && trimmed.contains('}') {
            in_module = false;
        }
    }
    sources
}

/// The quoted value of `source = "…"` at the start of `text`.
fn source_value(text: &str) -> Option<String> {
    let rest = text.trim_start().strip_prefix("source")?.trim_start();
    let rest = rest.strip_prefix('=')?.trim_start().strip_prefix('"')?;
    rest.split_once('"').map(|(value, _)| value.to_string())
}

/// The characters of `line` outside strings and before a `#` or `//` comment.
fn code_chars(line: &str) -> Vec<char> {
    let mut out = Vec::new();
    let (mut in_string, mut escaped) = (false, false);
    let chars: Vec<char> = line.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '#' => break,
            '/' if chars.get(i + 1) == Some(&'/') => break,
            _ => out.push(c),
        }
    }
    out
}

/// `source` (a local module path) joined to the folder `base`, both relative to the folder
/// sent, `/`-separated and without `.` or `..`; `None` when it climbs out of it.
pub fn resolve(base: &str, source: &str) -> Option<String> {
    let mut parts: Vec<&str> = base.split('/').filter(|p| !p.is_empty()).collect();
    for part in source.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    Some(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("sortie-source-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn write(dir: &Path, path: &str, text: &str) {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn only_the_folders_own_files_are_sent_skipping_dotfiles_and_other_extensions() {
        let dir = scratch("own");
        write(&dir, "main.tf", "output \"x\" { value = 1 }\n");
        write(&dir, "prod.tfvars", "x");
        write(&dir, "vars.tfvars.json", "{}");
        write(&dir, "stray/a.tf", "resource \"a\" \"b\" {}");
        write(&dir, "README.md", "x");
        write(&dir, ".hidden.tf", "x");
        write(&dir, ".terraform/modules/m.tf", "x");
        let sent = collect(&dir, Some("infra")).unwrap();
        assert_eq!(
            sent.files.keys().collect::<Vec<_>>(),
            ["main.tf", "prod.tfvars", "vars.tfvars.json"]
        );
        assert!(sent.modules.is_empty());
        assert_eq!(sent.note(&dir, false), None);
        let note = sent.note(&dir, true).unwrap();
        assert!(
            note.starts_with("note: no --source: sending the 3 file(s) of the current folder ")
                && note.ends_with(" (not its subfolders)"),
            "{note}"
        );
        write(&dir, "big.tf", &"#".repeat(MAX_FILES_BYTES));
        let e = collect(&dir, Some("infra")).unwrap_err().to_string();
        assert!(
            e.contains("over the 131072-byte") && e.contains("big.tf"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_folder_with_tf_files_only_in_subfolders_is_refused_with_exit_1() {
        let dir = scratch("nested");
        write(&dir, "app/main.tf", "resource \"a\" \"b\" {}");
        write(&dir, "net/vpc.tf", "resource \"a\" \"b\" {}");
        write(&dir, "docs/x.json", "{}");
        write(&dir, "terraform.tfvars", "x = 1");
        let e = collect(&dir, None).unwrap_err();
        assert_eq!(e.exit_code(), 1);
        let text = e.to_string();
        assert!(
            text.starts_with("no .tf file in the current folder "),
            "{text}"
        );
        assert!(text.contains("subfolders app/, net/:"), "{text}");
        assert!(text.contains("--source DIR"), "{text}");
        let e = collect(&dir, Some("./x")).unwrap_err();
        assert_eq!(e.exit_code(), 1);
        assert!(
            e.to_string().starts_with("--source ./x: no .tf file in it"),
            "{e}"
        );
        let missing = collect(&dir.join("nope"), Some("nope")).unwrap_err();
        assert_eq!(missing.exit_code(), 2, "{missing}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn local_modules_the_root_calls_are_sent_whole_and_named() {
        let dir = scratch("modules");
        write(
            &dir,
            "main.tf",
            "# module \"old\" { source = \"./old\" }\nmodule \"net\" {\n  source = \"./modules/net\"\n  cidr   = \"10.0.0.0/16\" # {\n}\n\nmodule \"reg\" {\n  source = \"hashicorp/consul/aws\"\n}\n",
        );
        write(
            &dir,
            "modules/net/main.tf",
            "module \"tags\" { source = \"../tags\" }\n",
        );
        write(&dir, "modules/net/templates/policy.json", "{}");
        write(&dir, "modules/tags/main.tf", "variable \"t\" {}\n");
        write(&dir, "modules/unused/main.tf", "resource \"a\" \"b\" {}\n");
        write(&dir, "old/main.tf", "resource \"a\" \"b\" {}\n");
        let sent = collect(&dir, None).unwrap();
        assert_eq!(
            sent.files.keys().collect::<Vec<_>>(),
            [
                "main.tf",
                "modules/net/main.tf",
                "modules/net/templates/policy.json",
                "modules/tags/main.tf"
            ]
        );
        assert_eq!(sent.modules, ["modules/net", "modules/tags"]);
        let note = sent.note(&dir, true).unwrap();
        assert!(
            note.ends_with("and the local module(s) it calls: modules/net, modules/tags"),
            "{note}"
        );
        assert_eq!(
            sent.note(&dir, false).unwrap(),
            "note: sending 1 file(s) and the local module(s) it calls: modules/net, modules/tags"
        );

        write(
            &dir,
            "outside.tf",
            "module \"x\" {\n  source = \"../elsewhere\"\n}\n",
        );
        let e = collect(&dir, Some("infra")).unwrap_err();
        assert_eq!(e.exit_code(), 1);
        assert!(e.to_string().contains("outside the folder sent"), "{e}");
        write(
            &dir,
            "outside.tf",
            "module \"x\" {\n  source = \"./missing\"\n}\n",
        );
        let e = collect(&dir, Some("infra")).unwrap_err();
        assert!(e.to_string().contains("missing/ is not a folder"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn module_sources_are_read_from_hcl_and_json() {
        assert_eq!(
            local_module_sources("a.tf", "module \"a\" { source = \"./a\" }\nmodule b {\n source=\"../b\"\n  inner = { source = \"./no\" }\n}\nresource \"x\" \"y\" {\n  source = \"./not-a-module\"\n}\n"),
            ["./a", "../b"]
        );
        assert_eq!(
            local_module_sources(
                "a.tf.json",
                r#"{"module": {"a": {"source": "./a"}, "r": {"source": "git::https://h/r"}}}"#
            ),
            ["./a"]
        );
        assert_eq!(
            local_module_sources("a.tf.json", r#"{"module": [{"a": {"source": "../a"}}]}"#),
            ["../a"]
        );
        assert!(local_module_sources("a.tf.json", "not json").is_empty());
        assert_eq!(
            resolve("", "./modules/net/").as_deref(),
            Some("modules/net")
        );
        assert_eq!(
            resolve("modules/net", "../tags").as_deref(),
            Some("modules/tags")
        );
        assert_eq!(
            resolve("modules/net", "./sub").as_deref(),
            Some("modules/net/sub")
        );
        assert_eq!(resolve("", "../x"), None);
        assert_eq!(resolve("modules", "../../x"), None);
    }
}
