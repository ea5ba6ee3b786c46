//! `sortie-runner`: the entrypoint of every runner container (a Fargate task,
//! an EKS Job or, for development, a local child process).
//!
//! One run of the binary runs one job:
//!
//! 1. reads its environment ([`env::RunnerEnv`]): `SORTIE_API_URL`,
//!    `SORTIE_JOB_ID`, `SORTIE_JOB_TOKEN` and the optional
//!    `SORTIE_WORK_DIR`, `SORTIE_TERRAFORM`, `SORTIE_GIT_CREDENTIALS`;
//! 2. fetches the job spec with the job token ([`api::ApiClient`]);
//! 3. fetches the source (git, an S3 tar.gz with its checksum verified, or
//!    nothing for `inline`) and writes the job's files and variables
//!    ([`source`]);
//! 4. detects the Terraform or OpenTofu version ([`version`]) and writes the
//!    backend configuration that version understands ([`backend`]);
//! 5. runs `init`, then `plan`, `apply` or `destroy` ([`terraform`]), streaming
//!    the combined output to stdout and to S3 in ordered chunks ([`log`]);
//! 6. uploads the plan, a change summary ([`summary`]) and, after an apply, the
//!    outputs (sensitive values redacted), and reports the summary to the API;
//!    every upload goes through a URL the API presigns for this job ([`upload`]):
//!    the runner holds no credentials for the control plane's bucket, and a failed
//!    upload is reported to the API (`upload_problems`), never a failed job;
//! 7. exits 0 on success, 1 with a one-line reason as the log's last line on
//!    failure ([`run`]).
//!
//! Every step's logic is a plain function or sits behind a small trait
//! ([`objects::ObjectStore`] for an `s3` source, [`upload::Uploader`]) so that it can be
//! tested without AWS.

pub mod api;
pub mod backend;
pub mod env;
pub mod error;
pub mod log;
pub mod objects;
pub mod run;
pub mod source;
pub mod summary;
pub mod terraform;
pub mod upload;
pub mod version;

pub use env::RunnerEnv;
pub use error::RunnerError;
pub use run::run;
