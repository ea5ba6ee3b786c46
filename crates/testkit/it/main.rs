//! The test kit's own tests and the cross-crate ones, one binary with a module per file.

mod demo_pr;
mod events;
mod harness;
mod iam;
mod infra_template;
mod kube_double;
mod lambda_api;
mod lambda_pulls;
mod moto_speed;
mod moto_writes;
mod proxy;
mod sts_web_identity;
