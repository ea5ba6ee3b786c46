//! The wire protocols: what Sortie's programs send each other over HTTP, apart from the
//! domain they carry. A protocol module may use the domain; no domain module uses a
//! protocol module (`tests/module_graph.rs` checks it).
//!
//! - [`pilot`]: the API and the pilot (`sortie-pilot`, the program in a job's container).
//! - [`logs`]: the job log's chunking, flushing, following and paging rules.
//! - [`agent`]: the pull protocol between the API and an agent (`sortie-agent`).

pub mod agent;
pub mod logs;
pub mod pilot;
