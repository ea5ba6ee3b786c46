//! `x-sortie-job`: the job a request to the local AWS is for ([`sortie_store::on_behalf`]),
//! added to the DynamoDB and SQS requests of `sortie dev` (only against a local AWS: never
//! on AWS), so moto's timing (`scripts/moto_server.py`, patch 5) counts the request as the
//! job's even when its body names no job (an environment's read, a queue's query).
//!
//! The same interceptor times each such call as Sortie sees it, from before its request is
//! built to its answer (retries included), and logs it at `debug` under this module's
//! target (`RUST_LOG=info,sortie_wiring::job_header=debug`): `job_id`, `op`, `began` (Unix
//! seconds) and `took_ms`. `scripts/bench-e2e.py` subtracts these waits from a job's
//! windows: what is left is Sortie's own time.

use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::{
    BeforeSerializationInterceptorContextRef, BeforeTransmitInterceptorContextMut,
    FinalizerInterceptorContextRef,
};
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::{ConfigBag, Storable, StoreReplace};

/// When a call for a job began (kept in the call's config bag).
#[derive(Debug, Clone)]
struct Began {
    job: String,
    at: std::time::SystemTime,
    clock: std::time::Instant,
}

impl Storable for Began {
    type Storer = StoreReplace<Self>;
}

/// The header naming the job a request is for.
pub const JOB_HEADER: &str = "x-sortie-job";

/// Adds [`JOB_HEADER`] to a request made inside [`sortie_store::on_behalf::for_job`]
/// (after signing: the header is not signed, and a local AWS checks no signature).
#[derive(Debug, Clone, Copy, Default)]
pub struct JobHeader;

impl Intercept for JobHeader {
    fn name(&self) -> &'static str {
        "SortieJobHeader"
    }

    fn read_before_execution(
        &self,
        _context: &BeforeSerializationInterceptorContextRef<'_>,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if let Some(job) = sortie_store::on_behalf::current_job() {
            cfg.interceptor_state().store_put(Began {
                job,
                at: std::time::SystemTime::now(),
                clock: std::time::Instant::now(),
            });
        }
        Ok(())
    }

    fn read_after_execution(
        &self,
        _context: &FinalizerInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if let Some(began) = cfg.load::<Began>() {
            let op = cfg
                .load::<Metadata>()
                .map(|m| format!("{}.{}", m.service(), m.name()))
                .unwrap_or_default();
            let at = began
                .at
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs_f64())
                .unwrap_or_default();
            let took_ms = began.clock.elapsed().as_secs_f64() * 1000.0;
            tracing::debug!(job_id = %began.job, %op, began = at, took_ms, "aws call");
        }
        Ok(())
    }

    fn modify_before_transmit(
        &self,
        context: &mut BeforeTransmitInterceptorContextMut<'_>,
        _components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if let Some(job) = sortie_store::on_behalf::current_job() {
            context.request_mut().headers_mut().insert(JOB_HEADER, job);
        }
        Ok(())
    }
}

/// Whether requests go to a local AWS (`AWS_ENDPOINT_URL` set): only then is the header added.
pub fn local_aws() -> bool {
    std::env::var_os("AWS_ENDPOINT_URL").is_some()
}
