//! The integration tests of this crate, one binary (one link) with a module per file.

mod github;
/// The fake GitHub the unit tests use too (one file, two crates); not every reply it knows
/// is used here.
#[path = "../../src/github_fake.rs"]
#[allow(dead_code)]
mod github_fake;
mod pilot;
