//! The integration tests of this crate, one binary (one link) with a module per file.

mod api;
mod audit;
mod blank_text;
mod common;
mod console;
mod encoded_paths;
mod env_life;
mod expiry;
mod explain;
mod hostile_input;
mod http_conventions;
mod identity;
mod leaky_input;
mod locks;
mod logs;
mod oidc;
mod openapi_doc;
mod openapi_links;
mod plans;
mod policy_sets;
mod reviews;
mod runner_secrets;
mod secrets_quota;
mod sensitive;
mod waiting;
mod whoami;
