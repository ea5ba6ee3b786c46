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
            log_call(&began.job, &op, began.at, began.clock.elapsed());
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

/// Logs one AWS call made for `job` (the `aws call` debug line): by the interceptor, and by
/// `sortie dev`'s queue poller for the jobs a receive handed out.
pub fn log_call(job: &str, op: &str, began: std::time::SystemTime, took: std::time::Duration) {
    let at = began
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or_default();
    let took_ms = took.as_secs_f64() * 1000.0;
    tracing::debug!(job_id = %job, %op, began = at, took_ms, "aws call");
}

/// Whether requests go to a local AWS (`AWS_ENDPOINT_URL` set): only then is the header added.
pub fn local_aws() -> bool {
    std::env::var_os("AWS_ENDPOINT_URL").is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::types::AttributeValue;
    use sortie_store::on_behalf::for_job;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// The head of the one request a GetItem sends (inside `for_job` when `job` is given)
    /// to a listener on loopback, which answers 400.
    async fn head_of_a_get_item(job: Option<&str>) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            let (mut sock, _) = listener.accept().await.unwrap();
            let mut head = Vec::new();
            let mut buf = [0u8; 4096];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 65536 {
                let n = sock.read(&mut buf).await.unwrap();
                if n == 0 {
                    break;
                }
                head.extend_from_slice(&buf[..n]);
            }
            let _ = sock
                .write_all(
                    b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                )
                .await;
            String::from_utf8_lossy(&head).to_lowercase()
        });
        let config = aws_sdk_dynamodb::Config::builder()
            .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
            .region(aws_sdk_dynamodb::config::Region::new("us-east-1"))
            .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
                "testing", "testing", None, None, "test",
            ))
            .endpoint_url(url)
            .retry_config(aws_sdk_dynamodb::config::retry::RetryConfig::disabled())
            .interceptor(JobHeader)
            .build();
        let client = aws_sdk_dynamodb::Client::from_conf(config);
        let call = client
            .get_item()
            .table_name("t")
            .key("pk", AttributeValue::S("ENV#acme/e1".into()))
            .send();
        let answer = match job {
            Some(job) => for_job(job, call).await,
            None => call.await,
        };
        assert!(answer.is_err(), "the listener answers 400");
        server.await.unwrap()
    }

    #[tokio::test]
    async fn a_request_made_for_a_job_names_it_in_a_header_and_no_other_does() {
        let id = "01jabcdefghjkmnpqrstvwxyz0";
        let head = head_of_a_get_item(Some(id)).await;
        assert!(
            head.contains(&format!("\r\n{JOB_HEADER}: {id}\r\n")),
            "the job's header is sent: {head}"
        );
        assert!(head.contains("x-amz-target: dynamodb_20120810.getitem"));
        let head = head_of_a_get_item(None).await;
        assert!(!head.contains(JOB_HEADER), "no job, no header: {head}");
    }
}
