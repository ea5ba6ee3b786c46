//! The snapshot on disk: `world.json` (a [`World`]) replaced atomically, and the
//! objects' bodies under `objects/`, content-addressed, removed once no world names them.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use super::item::ItemJson;

/// The snapshot format this binary writes and reads.
pub const FORMAT: u32 = 1;

/// One object of a bucket; its body is `objects/<sha256>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectEntry {
    /// The object's key.
    pub key: String,
    /// SHA-256 of the body, hex: the body's file name.
    pub sha256: String,
    /// The body's size in bytes.
    pub size: u64,
    /// The object's content type, when it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
}

/// One bucket and its objects.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BucketSnapshot {
    /// The bucket's name.
    pub name: String,
    /// Its objects, by key.
    pub objects: Vec<ObjectEntry>,
}

/// Everything one snapshot holds (`world.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct World {
    /// [`FORMAT`].
    pub format: u32,
    /// The table the items were read from.
    pub table: String,
    /// The local AWS endpoint the snapshot was taken from (`AWS_ENDPOINT_URL`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// Every item of the table.
    pub items: Vec<ItemJson>,
    /// The buckets, by name.
    pub buckets: Vec<BucketSnapshot>,
}

impl World {
    /// Every body the world names.
    pub fn bodies(&self) -> BTreeSet<&str> {
        self.buckets
            .iter()
            .flat_map(|b| b.objects.iter().map(|o| o.sha256.as_str()))
            .collect()
    }
}

/// SHA-256 of a body, lowercase hex: the one in `sortie_core::tokens`.
pub use sortie_core::tokens::sha256_hex;

/// Writes `bytes` to `path` atomically: a temporary file beside it, then a rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// The snapshot directory of the data dir `dir`.
pub fn snapshot_dir(dir: &Path) -> PathBuf {
    dir.join("snapshot")
}

/// The snapshot of the data dir `dir`, if there is one this binary can read.
pub fn read_world(dir: &Path) -> anyhow::Result<Option<World>> {
    let path = snapshot_dir(dir).join("world.json");
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let world: World = serde_json::from_slice(&bytes)
        .with_context(|| format!("{} is not a sortie dev snapshot", path.display()))?;
    if world.format != FORMAT {
        anyhow::bail!(
            "{} has format {}; this sortie reads format {FORMAT}",
            path.display(),
            world.format
        );
    }
    Ok(Some(world))
}

/// Writes `world` as the snapshot of `dir` (its bodies must be there already), then
/// removes the bodies it no longer names.
pub fn write_world(dir: &Path, world: &World) -> anyhow::Result<()> {
    let snap = snapshot_dir(dir);
    std::fs::create_dir_all(snap.join("objects"))?;
    let bytes = serde_json::to_vec(world)?;
    write_atomic(&snap.join("world.json"), &bytes)?;
    let named = world.bodies();
    for entry in std::fs::read_dir(snap.join("objects"))?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !named.contains(name.as_str()) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    Ok(())
}

/// Keeps one body under `dir`'s snapshot, once.
pub fn store_body(dir: &Path, body: &[u8]) -> anyhow::Result<String> {
    let sha = sha256_hex(body);
    let objects = snapshot_dir(dir).join("objects");
    std::fs::create_dir_all(&objects)?;
    let path = objects.join(&sha);
    if !path.exists() {
        write_atomic(&path, body)?;
    }
    Ok(sha)
}
