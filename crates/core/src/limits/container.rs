//! Container environment variables and the files the runner writes.

use super::*;

// ---------------------------------------------------------------------------------------
// Container environment variables
// ---------------------------------------------------------------------------------------

/// True for an environment variable name Sortie accepts: `[A-Za-z_][A-Za-z0-9_]*`.
///
/// Source: POSIX, <https://pubs.opengroup.org/onlinepubs/9799919799/basedefs/V1_chap08.html>
/// (portable names); Kubernetes and ECS accept more, but a name outside this set cannot be
/// read by every shell Terraform providers run under.
pub fn is_env_var_name(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') && s.chars().all(is_word)
}

// ---------------------------------------------------------------------------------------
// Files written by the runner
// ---------------------------------------------------------------------------------------

/// Longest path segment of a job file: 255 bytes (Linux `NAME_MAX`).
///
/// Source: <https://man7.org/linux/man-pages/man3/pathconf.3.html> (`_PC_NAME_MAX`, 255
/// on ext4 and overlayfs, which the runner container writes to).
pub const FILE_NAME_SEGMENT_MAX: usize = 255;
/// Longest job file path: 4096 bytes (Linux `PATH_MAX`, source as [`FILE_NAME_SEGMENT_MAX`]).
pub const FILE_PATH_MAX: usize = 4096;
