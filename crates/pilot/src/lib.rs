//! `sortie-pilot`, the pilot: the program in every job's container, the entrypoint of
//! every runner's task (a Fargate task, an EKS Job or, for an agent and for development, a
//! local child process). A runner is where jobs run; the pilot is what runs there.
//!
//! One run of the binary runs one job, or one phase of a reviewed job:
//!
//! 1. reads its environment ([`env::PilotEnv`]): `SORTIE_API_URL`,
//!    `SORTIE_JOB_ID`, `SORTIE_JOB_TOKEN` and the optional
//!    `SORTIE_WORK_DIR`, `SORTIE_TERRAFORM`, `SORTIE_TOOLS_DIR`, `SORTIE_GIT_CREDENTIALS`;
//! 2. fetches the job spec with the job token ([`api::ApiClient`]);
//! 3. chooses the binary ([`terraform::choose`]): with neither `tool` nor `version` in the
//!    spec, `SORTIE_TERRAFORM`, else the newest OpenTofu, else the newest Terraform, among
//!    the same candidates as below (a note in the log says which); otherwise the
//!    highest version that matches among `SORTIE_TERRAFORM` and every `terraform`, `tofu`,
//!    `terraform-X.Y.Z` and `tofu-X.Y.Z` in `SORTIE_TOOLS_DIR` (default
//!    `/opt/sortie/tools`) and on `PATH`, failing at once, naming every version it has,
//!    when none does. It reads the binary's version ([`version`]) and reports it to the
//!    API (`PUT /v1/jobs/{id}/tool`, best effort);
//! 4. fetches the source (git, an S3 tar.gz with its checksum verified, GitHub's tarball
//!    of one commit with the spec's short-lived token ([`github`]), or nothing for
//!    `inline`) and writes the job's files and variables
//!    ([`source`]), and writes the backend configuration that version understands
//!    ([`backend`]); a configuration with no `.tf` file of its own, and a destroy from an
//!    implicit source, are refused ([`guard`]);
//!    When the runner has an `identity` block, each step gets the phase's job identity
//!    token in a private file, kept fresh while the job runs ([`identity`]);
//! 5. runs `init`, then the job's steps ([`terraform::job_steps`]), streaming the combined
//!    output to stdout and to S3 in ordered chunks ([`log`]), numbered from the spec's
//!    `log_offset` (a second phase continues the first phase's log). Every apply and
//!    destroy applies exactly the plan file it made or was given: `plan -out=plan.tfplan`
//!    (`-destroy` for a destroy), then `apply plan.tfplan`; a reviewed job's plan phase
//!    stops after the plan, and its apply phase downloads the saved plan from the spec's
//!    presigned `saved_plan_url` and applies it. A drift check plans with
//!    `-detailed-exitcode` (exit code 2, changes present, is a success). A speculative job
//!    (a pull request's plan) plans with `-lock=false` and may do nothing else: any other
//!    speculative spec is refused before anything runs ([`guard::spec_refusal`]). An apply whose plan
//!    would empty the state from an empty configuration, or from an implicit source, is
//!    refused before anything is applied ([`guard::apply_refusal`]);
//! 6. uploads the plan (when nothing was applied), a change summary ([`summary`]; with
//!    `has_changes` for a drift check) and, after an apply, the outputs (sensitive values
//!    redacted), and reports the summary to the API; after an apply or a destroy (also a
//!    failed one) and after a restore's push, it reports the state's serial and lineage
//!    (`PUT /v1/jobs/{id}/state`, from `terraform state pull`): what matches a state version
//!    to the job that wrote it;
//!    every upload goes through a URL the API presigns for this job ([`upload`]):
//!    the pilot holds no credentials for the control plane's bucket, and a failed
//!    upload is reported to the API (`upload_problems`), never a failed job;
//! 7. exits 0 on success, 1 with a one-line reason as the log's last line on
//!    failure ([`run()`]).
//!
//! Every step's logic is a plain function or sits behind a small trait
//! ([`objects::ObjectStore`] for an `s3` source, [`upload::Uploader`]) so that it can be
//! tested without AWS.

pub mod api;
pub mod backend;
pub mod declarations;
pub mod env;
pub mod error;
pub mod github;
#[cfg(test)]
mod github_fake;
pub mod guard;
pub mod identity;
pub mod log;
pub mod objects;
pub mod run;
pub mod scrub;
pub mod source;
pub mod summary;
pub mod terraform;
pub mod upload;
pub mod version;

pub use env::PilotEnv;
pub use error::PilotError;
pub use run::run;
