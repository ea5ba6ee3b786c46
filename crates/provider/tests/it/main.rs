//! terraform-provider-sortie's one integration-test binary: real Terraform (1.0.3 and
//! 1.11.4) driving the built provider against `sortie dev` on moto.

mod common;
mod docs_examples;
mod env_life;
mod github_connection;
mod gitlab_connection;
mod lifecycle;
mod membership;
mod notification_destination;
mod policy_set;
mod protocol;
mod speed;
mod two_environments;
mod vcs;
