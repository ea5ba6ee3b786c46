//! Embeds every file under `assets/` (a table of path, bytes and content type) and
//! `ASSET_HASH`: the first 16 hex digits of a sha256 over every (path, bytes), sorted by
//! path, so that a change to any asset changes the URL every asset is served under.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// Deepest directory nesting walked under `assets/`.
const MAX_DEPTH: usize = 8;
/// Most files embedded (a bound on the walk).
const MAX_FILES: usize = 500;

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"))
        .join("assets");
    println!("cargo:rerun-if-changed={}", root.display());
    let mut files = vec![];
    if root.is_dir() {
        walk(&root, &root, 0, &mut files);
    }
    files.sort();
    files.dedup();
    let mut hasher = Sha256::new();
    let mut table = String::new();
    for (rel, abs) in &files {
        println!("cargo:rerun-if-changed={}", abs.display());
        // A file removed between the walk and the read is left out; the next build sees it.
        let Ok(bytes) = std::fs::read(abs) else {
            continue;
        };
        hasher.update(rel.as_bytes());
        hasher.update([0u8]);
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(&bytes);
        writeln!(
            table,
            "    Asset {{ path: {rel:?}, bytes: include_bytes!({:?}), content_type: {:?} }},",
            abs.display().to_string(),
            content_type(rel)
        )
        .expect("write to a String");
    }
    let digest = hasher.finalize();
    let hash: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    let out = format!(
        "/// Every asset file, sorted by path.\npub static ASSETS: &[Asset] = &[\n{table}];\n\n\
         /// The first 16 hex digits of a sha256 over every asset's path and bytes.\n\
         pub const ASSET_HASH: &str = {hash:?};\n"
    );
    let dest = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR")).join("assets.rs");
    std::fs::write(dest, out).expect("write assets.rs");
}

/// Collects `(path relative to root with '/', absolute path)` of every regular file,
/// skipping hidden files and editors' temporary files.
fn walk(root: &Path, dir: &Path, depth: usize, out: &mut Vec<(String, PathBuf)>) {
    if depth > MAX_DEPTH {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name().to_string_lossy().to_string();
        if name.starts_with('.')
            || name.ends_with('~')
            || name.ends_with(".swp")
            || name.ends_with(".tmp")
        {
            continue;
        }
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            println!("cargo:rerun-if-changed={}", path.display());
            walk(root, &path, depth + 1, out);
        } else if kind.is_file() && out.len() < MAX_FILES {
            let rel = path
                .strip_prefix(root)
                .expect("under the root")
                .components()
                .map(|c| c.as_os_str().to_string_lossy().to_string())
                .collect::<Vec<_>>()
                .join("/");
            out.push((rel, path));
        }
    }
}

/// The `Content-Type` a file is served with, by its extension.
fn content_type(path: &str) -> &'static str {
    let ext = path.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    match ext.as_deref() {
        Some("html") => "text/html; charset=utf-8",
        Some("js" | "mjs") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("txt" | "md") => "text/plain; charset=utf-8",
        Some("json" | "map") => "application/json",
        Some("png") => "image/png",
        Some("ico") => "image/x-icon",
        Some("woff2") => "font/woff2",
        _ => "application/octet-stream",
    }
}
