//! The integration tests of this crate, one binary (one link) with a module per file.

mod agent_loop;
mod http;
mod kubernetes;
mod local;
mod support;
