//! The integration tests of this crate, one binary (one link) with a module per file.

mod audit_origin;
mod batch;
mod concurrency;
mod console;
mod jwt_claims;
mod notify;
