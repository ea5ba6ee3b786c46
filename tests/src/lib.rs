//! The programs the end-to-end tests run, found where cargo puts them.
//!
//! A test target sees `CARGO_BIN_EXE_<name>` only for its own package's binaries, and
//! these tests run another package's (`sortie` from `sortie-cli`, `sortie-pilot`). Cargo
//! writes every binary of a build into one directory, `target/<profile>/`, the parent of
//! the test binary's `deps/`. `cargo test --workspace` builds them before any test runs
//! (each of those packages has a test target of its own); on its own, `cargo test -p
//! sortie-tests` needs `cargo build --workspace --bins --tests` first (the tests' feature
//! set, so nothing is built twice).

use std::path::PathBuf;

/// The path of the workspace binary `name`, built beside this test binary.
///
/// # Panics
///
/// When it is not built, naming the command that builds it.
pub fn workspace_bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("the test binary sits in target/<profile>/deps");
    let bin = dir.join(name);
    assert!(
        bin.is_file(),
        "{} is not built: run `cargo build --workspace --bins --tests` (or `cargo test --workspace`, which builds it)",
        bin.display()
    );
    bin
}

/// The `sortie` command.
pub fn sortie() -> PathBuf {
    workspace_bin("sortie")
}

/// The pilot, `sortie-pilot`.
pub fn pilot() -> PathBuf {
    workspace_bin("sortie-pilot")
}
