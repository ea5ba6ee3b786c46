//! The Lambda event adapters of Sortie's six functions. Each takes the real
//! `aws_lambda_events` / `lambda_http` shape, calls the logic in `sortie-lifecycle`
//! or `sortie-api`, and maps the result back: batch item failures, an HTTP
//! response, or a [`FunctionError`] whose class is the Lambda `errorType`. The
//! functions in `functions/` are wiring around these, and `sortie dev` feeds them
//! the same events locally.

use std::collections::BTreeMap;

use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent, SqsMessage};
use futures_util::stream::{self, StreamExt};
use lambda_http::request::RequestContext;
use lambda_http::RequestExt;
use lambda_runtime::Diagnostic;
use sortie_api::VerifiedClaims;
use sortie_lifecycle::{
    EcsTaskStateChange, Engine, EventEffect, LifecycleError, MessageDisposition, SweepReport,
};
use sortie_store::SqsJobQueue;
use tower::ServiceExt;

mod notify;
mod pulls;
pub use notify::{notify_batch, plane_retry_delay, NotifyParts};
pub use pulls::{pull_batch, pulls_event, retry_delay, PullsError, PullsParts};

/// Where the sweeper's interrupted pass stopped, kept by the function between ticks.
pub use sortie_lifecycle::SweepResume;

/// How many records of one SQS batch are handled at once.
pub const RECORDS_IN_FLIGHT: usize = 10;

/// An error a function returns to Lambda: the invocation fails and its event is retried
/// by its source. Its [`FunctionError::class`] becomes the `errorType` Lambda reports.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct FunctionError(#[from] pub LifecycleError);

impl FunctionError {
    /// The error's class, as Lambda's `errorType` (see `LifecycleError::class`).
    pub fn class(&self) -> &'static str {
        self.0.class()
    }
}

impl From<FunctionError> for Diagnostic {
    fn from(e: FunctionError) -> Self {
        Diagnostic {
            error_type: e.class().to_string(),
            error_message: e.to_string(),
        }
    }
}

/// `dispatch`: handles an SQS batch, up to [`RECORDS_IN_FLIGHT`] records at once. Only the
/// records worth retrying (with their redelivery delayed by the backoff) and poison records
/// (on their way to the dead-letter queue) are batch item failures; one bad record never
/// fails the rest.
pub async fn dispatch_batch(
    engine: &Engine,
    queue: &SqsJobQueue,
    event: SqsEvent,
) -> SqsBatchResponse {
    let failed: Vec<Option<String>> = stream::iter(event.records)
        .map(|record| dispatch_record(engine, queue, record))
        .buffer_unordered(RECORDS_IN_FLIGHT)
        .collect()
        .await;
    let mut response = SqsBatchResponse::default();
    for message_id in failed.into_iter().flatten() {
        let mut failure = BatchItemFailure::default();
        failure.item_identifier = message_id;
        response.batch_item_failures.push(failure);
    }
    response
}

/// Handles one record; the message id when it is a batch item failure.
async fn dispatch_record(
    engine: &Engine,
    queue: &SqsJobQueue,
    record: SqsMessage,
) -> Option<String> {
    let message_id = record.message_id.clone().unwrap_or_default();
    let receive_count = record
        .attributes
        .get("ApproximateReceiveCount")
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let failed = match engine
        .dispatch(record.body.as_deref().unwrap_or_default(), receive_count)
        .await
    {
        MessageDisposition::Done => false,
        MessageDisposition::Retry {
            delay_seconds,
            reason,
        } => {
            tracing::warn!(%message_id, delay_seconds, %reason, "retrying the record later");
            if let Some(handle) = record.receipt_handle.as_deref() {
                if let Err(e) = queue.delay_redelivery(handle, delay_seconds).await {
                    tracing::warn!(%message_id, error = %e, "could not set the retry delay");
                }
            }
            true
        }
        MessageDisposition::Poison(reason) => {
            tracing::error!(%message_id, %reason, "poison message; it goes to the dead-letter queue after 5 receives");
            true
        }
    };
    failed.then_some(message_id)
}

/// `task-events`: one "ECS Task State Change" event. EventBridge invokes the function
/// asynchronously, so an error makes Lambda's asynchronous queue (not EventBridge) run it
/// again, at most twice more; every event is safe to handle twice. The envelope's account
/// goes with the detail: the engine refuses an event about another account's cluster.
pub async fn task_state_change(
    engine: &Engine,
    event: EventBridgeEvent<EcsTaskStateChange>,
) -> Result<EventEffect, FunctionError> {
    let detail = &event.detail;
    let outcome = engine
        .task_event_from(event.account.as_deref(), detail)
        .await?;
    tracing::info!(task = %detail.task_arn, status = %detail.last_status, outcome = ?outcome, "task state change handled");
    Ok(outcome)
}

/// `sweeper`: one bounded, idempotent pass per schedule tick.
pub async fn sweep_tick(
    engine: &Engine,
    tick: EventBridgeEvent<serde_json::Value>,
) -> Result<SweepReport, FunctionError> {
    sweep_tick_resuming(engine, &SweepResume::default(), tick).await
}

/// [`sweep_tick`], starting the active jobs where the process's previous pass stopped when
/// it spent its budget (`resume`, kept by the function between ticks).
pub async fn sweep_tick_resuming(
    engine: &Engine,
    resume: &SweepResume,
    tick: EventBridgeEvent<serde_json::Value>,
) -> Result<SweepReport, FunctionError> {
    let now = tick
        .time
        .unwrap_or_else(chrono::Utc::now)
        .max(chrono::Utc::now());
    let report = engine.sweep_resuming(now, resume).await?;
    // An idle pass (every 5 s in `sortie dev`, every minute on AWS) is not news.
    if report.did().is_empty() {
        tracing::debug!("sweep pass done: nothing to do");
    } else {
        tracing::info!(did = %report, "sweep pass done");
    }
    Ok(report)
}

/// The claims API Gateway's JWT authorizer verified, from a payload v2 request. Every value
/// is a string there, an array claim one bracketed string (`"[admins devs]"`); core reads
/// both forms as one list (`sortie_core::auth::claim_values`), so they are passed as given.
pub fn verified_claims(request: &lambda_http::Request) -> VerifiedClaims {
    let claims: BTreeMap<String, serde_json::Value> = match request.request_context_ref() {
        Some(RequestContext::ApiGatewayV2(ctx)) => ctx
            .authorizer
            .as_ref()
            .and_then(|a| a.jwt.as_ref())
            .map(|jwt| {
                jwt.claims
                    .iter()
                    .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
                    .collect()
            })
            .unwrap_or_default(),
        _ => BTreeMap::new(),
    };
    VerifiedClaims(claims)
}

/// `api`: one API Gateway request, answered by the router as the caller the authorizer verified.
pub async fn api_request(
    app: axum::Router,
    request: lambda_http::Request,
) -> Result<axum::response::Response, std::convert::Infallible> {
    let claims = verified_claims(&request);
    let origin = match request.request_context_ref() {
        Some(RequestContext::ApiGatewayV2(ctx)) => sortie_api::RequestOrigin {
            request_id: ctx.request_id.clone().unwrap_or_default(),
            source_ip: ctx.http.source_ip.clone(),
        },
        _ => sortie_api::RequestOrigin::default(),
    };
    let (mut parts, body) = request.into_parts();
    parts.extensions.insert(claims);
    if !origin.request_id.is_empty() {
        parts.extensions.insert(origin);
    }
    app.oneshot(axum::http::Request::from_parts(
        parts,
        axum::body::Body::new(body),
    ))
    .await
}
