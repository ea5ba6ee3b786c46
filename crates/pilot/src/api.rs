//! The pilot's calls to the API, all with the job token: `GET /v1/jobs/{id}/spec`,
//! `PUT /v1/jobs/{id}/summary`, `POST /v1/jobs/{id}/uploads` (a presigned URL, then
//! the bytes go straight to S3: [`ApiClient::send_upload`]) and
//! `PUT /v1/jobs/{id}/upload-problems`, `PUT /v1/jobs/{id}/tool` (the tool and version
//! it runs, [`ApiClient::report_tool`]), `PUT /v1/jobs/{id}/state` (the state it wrote,
//! [`ApiClient::report_state`]) and, last, when the spec asks for it,
//! `POST /v1/jobs/{id}/events` ([`ApiClient::report_exit`]). The second phase of a
//! reviewed job also downloads its saved plan from a presigned URL
//! ([`ApiClient::download_presigned`]), without the job token.
//!
//! Transient failures (no connection, a timeout, 429 or 5xx) are retried with
//! exponential backoff; any other answer (401, 403, 404, ...) is final.

use http::header::USER_AGENT;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use sortie_client::{endpoints, Call, Outgoing, Transport};
use sortie_core::protocol::pilot::{JobSpec, PilotExit, UploadKind};
use sortie_core::{ChangeSummary, ToolUsed};

use crate::env::{PilotEnv, Secret};
use crate::error::{one_line, PilotError};
use sortie_http::{error_chain, error_detail};

pub use sortie_client::retry::RetryPolicy;
pub(crate) use sortie_client::retry::{retrying, Failure};
pub(crate) use sortie_client::{http_client, HttpClient};

/// The pilot's `User-Agent`.
const AGENT: &str = concat!("sortie-pilot/", env!("CARGO_PKG_VERSION"));

/// How the API took the pilot's exit report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExitReported {
    /// Recorded (204 or another 2xx).
    Recorded,
    /// 409 Conflict: the API keeps its own view of the job (it had already ended, or
    /// its launch is not recorded yet); the detail the API gave, on one line.
    Conflict(String),
}

/// The API client for one job.
pub struct ApiClient {
    transport: Transport,
    job_id: String,
    token: Secret,
    retry: RetryPolicy,
}

impl std::fmt::Debug for ApiClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiClient")
            .field("base", &self.transport.base_url())
            .field("job_id", &self.job_id)
            .finish_non_exhaustive()
    }
}

impl ApiClient {
    /// A client for `env`'s API and job, with the default retry policy.
    pub fn new(env: &PilotEnv) -> Result<Self, PilotError> {
        Self::with_retry(env, RetryPolicy::default())
    }

    /// A client with an explicit retry policy.
    pub fn with_retry(env: &PilotEnv, retry: RetryPolicy) -> Result<Self, PilotError> {
        let transport = Transport::new(&env.api_url, AGENT)
            .map_err(|e| PilotError::Config(e.to_string()))?
            .with_timeout(retry.timeout);
        Ok(Self {
            transport,
            job_id: env.job_id.clone(),
            token: env.token.clone(),
            retry,
        })
    }

    /// `GET /v1/jobs/{id}/spec`.
    pub async fn job_spec(&self) -> Result<JobSpec, PilotError> {
        let call = endpoints::get_job_spec(&self.job_id);
        let path = &call.path;
        let body = self.call(&call, None).await?;
        serde_json::from_slice(&body).map_err(|e| {
            PilotError::Api(format!(
                "GET {path} answered a job spec this runner cannot read: {e}"
            ))
        })
    }

    /// `GET /v1/jobs/{id}/sensitive-variables`: the values of the job's sensitive
    /// variables, by name. Never logged; an error names no value.
    pub async fn sensitive_variables(
        &self,
    ) -> Result<sortie_core::sensitive::SensitiveValues, PilotError> {
        #[derive(serde::Deserialize)]
        struct Answer {
            variables: std::collections::BTreeMap<String, String>,
        }
        let call = endpoints::get_job_sensitive_variables(&self.job_id);
        let path = &call.path;
        let body = self.call(&call, None).await?;
        let answer: Answer = serde_json::from_slice(&body).map_err(|_| {
            PilotError::Api(format!(
                "GET {path} answered a body this runner cannot read"
            ))
        })?;
        Ok(sortie_core::sensitive::SensitiveValues::new(
            answer.variables,
        ))
    }

    /// `POST /v1/jobs/{id}/identity-token`: a job identity token for `phase`. The answer is
    /// never logged; an error never quotes it.
    pub async fn identity_token(
        &self,
        phase: sortie_core::identity::Phase,
    ) -> Result<sortie_core::protocol::pilot::IdentityToken, PilotError> {
        let call = endpoints::mint_identity_token(&self.job_id);
        let path = &call.path;
        let body =
            serde_json::to_vec(&sortie_core::protocol::pilot::IdentityTokenRequest { phase })
                .map_err(|e| PilotError::Api(format!("could not encode the token request: {e}")))?;
        let answer = self.call(&call, Some(body)).await?;
        serde_json::from_slice(&answer).map_err(|_| {
            PilotError::Api(format!(
                "POST {path} answered a body this runner cannot read"
            ))
        })
    }

    /// `PUT /v1/jobs/{id}/summary`.
    pub async fn report_summary(&self, summary: &ChangeSummary) -> Result<(), PilotError> {
        let call = endpoints::put_job_summary(&self.job_id);
        let body = serde_json::to_vec(summary)
            .map_err(|e| PilotError::Api(format!("could not encode the summary: {e}")))?;
        self.call(&call, Some(body)).await.map(|_| ())
    }

    /// `PUT /v1/jobs/{id}/state`: the serial and lineage of the state the job ended with
    /// (after an apply, a destroy or a restore's push).
    pub async fn report_state(
        &self,
        stamp: &sortie_core::state_version::StateStamp,
    ) -> Result<(), PilotError> {
        let call = endpoints::put_job_state(&self.job_id);
        let body = serde_json::to_vec(stamp)
            .map_err(|e| PilotError::Api(format!("could not encode the state report: {e}")))?;
        self.call(&call, Some(body)).await.map(|_| ())
    }

    /// `PUT /v1/jobs/{id}/tool`: the tool and exact version this pilot runs the job with.
    pub async fn report_tool(&self, used: &ToolUsed) -> Result<(), PilotError> {
        let call = endpoints::put_job_tool(&self.job_id);
        let body = serde_json::to_vec(used)
            .map_err(|e| PilotError::Api(format!("could not encode the tool report: {e}")))?;
        self.call(&call, Some(body)).await.map(|_| ())
    }

    /// `GET url`, a presigned URL (the saved plan of a reviewed job), with no job token;
    /// transient failures are retried like the API's. Errors name the object without the
    /// URL's query (its signature is a credential until it expires).
    pub async fn download_presigned(&self, url: &str) -> Result<Vec<u8>, String> {
        let shown = without_query(url);
        self.retrying(&shown, || self.download_once(url, &shown))
            .await
    }

    async fn download_once(&self, url: &str, shown: &str) -> Result<Vec<u8>, Failure> {
        let request = Request::builder()
            .method(Method::GET)
            .uri(url)
            .header(USER_AGENT, AGENT)
            .body(Full::new(Bytes::new()))
            .map_err(|e| Failure::Fatal(format!("GET {shown} is not a valid request: {e}")))?;
        let (status, bytes) = self.exchange(request, &format!("GET {shown}")).await?;
        if status.is_success() {
            return Ok(bytes.to_vec());
        }
        let message = format!("GET {shown} answered {status}{}", s3_error_code(&bytes));
        if status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS {
            Err(Failure::Transient(message))
        } else {
            Err(Failure::Fatal(message))
        }
    }

    /// `POST /v1/jobs/{id}/uploads`: a presigned request for one of the job's objects.
    pub async fn upload_grant(
        &self,
        kind: UploadKind,
        name: Option<&str>,
    ) -> Result<UploadGrant, PilotError> {
        let call = endpoints::create_upload(&self.job_id);
        let path = &call.path;
        let body = serde_json::json!({"kind": kind, "name": name});
        let answer = self
            .call(&call, Some(body.to_string().into_bytes()))
            .await?;
        serde_json::from_slice(&answer).map_err(|e| {
            PilotError::Api(format!(
                "POST {path} answered an upload this runner cannot read: {e}"
            ))
        })
    }

    /// `POST /v1/jobs/{id}/log-uploads`: presigned PUTs for the log chunks starting at
    /// `offsets` and the follow marker's URL. `Ok(None)` when the API has no such route
    /// (an older API): the caller then asks `POST .../uploads` chunk by chunk.
    pub async fn log_upload_grants(
        &self,
        offsets: &[u64],
    ) -> Result<Option<LogUploadGrants>, PilotError> {
        let call = endpoints::create_log_uploads(&self.job_id);
        let path = &call.path;
        let body = serde_json::json!({ "offsets": offsets });
        let (status, answer) = self
            .call_accepting(
                &call,
                Some(body.to_string().into_bytes()),
                &[StatusCode::NOT_FOUND, StatusCode::METHOD_NOT_ALLOWED],
            )
            .await?;
        if !status.is_success() {
            return Ok(None);
        }
        serde_json::from_slice(&answer).map(Some).map_err(|e| {
            PilotError::Api(format!(
                "POST {path} answered log uploads this pilot cannot read: {e}"
            ))
        })
    }

    /// `GET url` of a presigned URL, once: `Ok(None)` when the object does not exist.
    /// Errors name the object without the URL's query.
    pub async fn peek_presigned(&self, url: &str) -> Result<Option<Vec<u8>>, String> {
        let shown = without_query(url);
        match self.download_once(url, &shown).await {
            Ok(bytes) => Ok(Some(bytes)),
            Err(Failure::Fatal(m)) if m.contains("404") => Ok(None),
            Err(Failure::Fatal(m) | Failure::Transient(m)) => Err(m),
        }
    }

    /// Sends `body` as the presigned request `grant` says (one attempt). Errors are one line.
    pub async fn send_upload(&self, grant: &UploadGrant, body: Vec<u8>) -> Result<(), String> {
        let method = Method::from_bytes(grant.method.as_bytes())
            .map_err(|_| format!("the API gave an unknown method `{}`", grant.method))?;
        let mut request = Request::builder().method(method).uri(&grant.url);
        for (name, value) in &grant.headers {
            if !name.eq_ignore_ascii_case("host") {
                request = request.header(name, value);
            }
        }
        let request = request
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| format!("the presigned request is not valid: {e}"))?;
        // Only the key, never the signed URL (it is a credential until it expires).
        let key = &grant.key;
        let exchange = async {
            let response = self
                .transport
                .http()
                .request(request)
                .await
                .map_err(|e| format!("PUT {key}: {}", error_chain(&e)))?;
            let status = response.status();
            let bytes = response
                .into_body()
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            Ok::<_, String>((status, bytes))
        };
        let (status, bytes) = tokio::time::timeout(self.retry.timeout, exchange)
            .await
            .map_err(|_| {
                format!(
                    "PUT {key}: no answer within {} s",
                    self.retry.timeout.as_secs()
                )
            })??;
        if status.is_success() {
            return Ok(());
        }
        let detail = s3_error_code(&bytes);
        Err(format!("PUT {key} answered {status}{detail}"))
    }

    /// `PUT /v1/jobs/{id}/upload-problems`.
    pub async fn report_upload_problems(&self, problems: &[String]) -> Result<(), PilotError> {
        let call = endpoints::put_upload_problems(&self.job_id);
        let body = serde_json::json!({"problems": problems});
        self.call(&call, Some(body.to_string().into_bytes()))
            .await
            .map(|_| ())
    }

    /// `POST /v1/jobs/{id}/events` with `exit`: the pilot's last call, when the spec's
    /// `report_exit` asks for it. A 409 (the job is not running yet) is not an error:
    /// [`ExitReported::Conflict`].
    pub async fn report_exit(&self, exit: &PilotExit) -> Result<ExitReported, PilotError> {
        let call = endpoints::report_job_exit(&self.job_id);
        let body = serde_json::to_vec(exit)
            .map_err(|e| PilotError::Api(format!("could not encode the exit report: {e}")))?;
        let (status, answer) = self
            .call_accepting(&call, Some(body), &[StatusCode::CONFLICT])
            .await?;
        Ok(if status == StatusCode::CONFLICT {
            ExitReported::Conflict(error_detail(&answer))
        } else {
            ExitReported::Recorded
        })
    }

    async fn call(&self, call: &Call, body: Option<Vec<u8>>) -> Result<Bytes, PilotError> {
        self.call_accepting(call, body, &[])
            .await
            .map(|(_, bytes)| bytes)
    }

    /// [`Self::call`], with the statuses in `accept` taken as final answers (not errors)
    /// beside every 2xx.
    async fn call_accepting(
        &self,
        call: &Call,
        body: Option<Vec<u8>>,
        accept: &[StatusCode],
    ) -> Result<(StatusCode, Bytes), PilotError> {
        self.retrying(&call.describe(), || {
            self.attempt(call, body.clone(), accept)
        })
        .await
        .map_err(PilotError::Api)
    }

    /// [`retrying`] with this client's policy.
    async fn retrying<T, F, Fut>(&self, what: &str, once: F) -> Result<T, String>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, Failure>>,
    {
        retrying(&self.retry, what, once).await
    }

    /// Sends one request of a presigned URL (not the API's: no token) and reads its whole
    /// answer within the policy's timeout; `what` names the call in errors.
    async fn exchange(
        &self,
        request: Request<Full<Bytes>>,
        what: &str,
    ) -> Result<(StatusCode, Bytes), Failure> {
        let exchange = async {
            let response = self
                .transport
                .http()
                .request(request)
                .await
                .map_err(|e| Failure::Transient(format!("{what}: {}", error_chain(&e))))?;
            let status = response.status();
            let bytes = response
                .into_body()
                .collect()
                .await
                .map_err(|e| Failure::Transient(format!("{what}: the answer was cut short: {e}")))?
                .to_bytes();
            Ok::<_, Failure>((status, bytes))
        };
        tokio::time::timeout(self.retry.timeout, exchange)
            .await
            .map_err(|_| {
                Failure::Transient(format!(
                    "{what}: no answer within {} s",
                    self.retry.timeout.as_secs()
                ))
            })?
    }

    /// One attempt of an API call with the job token.
    async fn attempt(
        &self,
        call: &Call,
        body: Option<Vec<u8>>,
        accept: &[StatusCode],
    ) -> Result<(StatusCode, Bytes), Failure> {
        let mut outgoing = Outgoing::new().bearer(Some(self.token.expose()));
        if let Some(body) = body {
            outgoing = outgoing.raw("application/json", Bytes::from(body));
        }
        let reply = self.transport.send(call, outgoing).await.map_err(|e| {
            let message = format!("{}: {e}", call.describe());
            if e.is_transient() {
                Failure::Transient(message)
            } else {
                Failure::Fatal(message)
            }
        })?;
        if reply.is_success() || accept.contains(&reply.status) {
            return Ok((reply.status, reply.body));
        }
        let message = status_message(&call.method, &call.path, reply.status, &reply.body);
        if reply.is_transient() {
            Err(Failure::Transient(message))
        } else {
            Err(Failure::Fatal(message))
        }
    }
}

/// A presigned request for one object, as the API answers it.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct UploadGrant {
    /// The URL, signature included (never logged).
    pub url: String,
    /// The method, `PUT`.
    pub method: String,
    /// Headers the signature covers.
    #[serde(default)]
    pub headers: std::collections::BTreeMap<String, String>,
    /// The object's key.
    pub key: String,
}

/// The answer of `POST /v1/jobs/{id}/log-uploads`.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct LogUploadGrants {
    /// One grant per offset asked, in order.
    pub grants: Vec<UploadGrant>,
    /// A presigned GET of the job's follow marker (it works until `expires_at`, at most
    /// ten minutes).
    pub follow_url: String,
    /// When the first URL of the answer stops working (an older API says nothing: ten
    /// minutes).
    #[serde(default)]
    pub expires_at: Option<chrono::DateTime<chrono::Utc>>,
    /// A presigned PUT of the job's live object, when the log has a live bucket.
    #[serde(default)]
    pub live: Option<UploadGrant>,
}

/// `url` without its query and fragment: what may be printed of a presigned URL.
pub fn without_query(url: &str) -> String {
    let end = url.find(['?', '#']).unwrap_or(url.len());
    url[..end].to_string()
}

/// `: <Code>` from an S3 XML error body, if it has one.
fn s3_error_code(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    text.split_once("<Code>")
        .and_then(|(_, rest)| rest.split_once("</Code>"))
        .map(|(code, _)| format!(": {}", one_line(code)))
        .unwrap_or_default()
}

/// The one-line message for an unsuccessful answer.
pub fn status_message(method: &Method, path: &str, status: StatusCode, body: &[u8]) -> String {
    let detail = error_detail(body);
    let lead = match status {
        StatusCode::UNAUTHORIZED => "the API refused the job token: ".to_string(),
        StatusCode::FORBIDDEN => "the API did not allow the job token: ".to_string(),
        StatusCode::NOT_FOUND => "the API does not know this job: ".to_string(),
        _ => String::new(),
    };
    let mut message = format!("{lead}{method} {path} answered {status}");
    if !detail.is_empty() {
        message.push_str(": ");
        message.push_str(&detail);
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_say_what_happened_on_one_line() {
        let m = status_message(
            &Method::GET,
            "/v1/jobs/j/spec",
            StatusCode::UNAUTHORIZED,
            br#"{"error":"unauthorized","message":"invalid job\ntoken"}"#,
        );
        assert_eq!(
            m,
            "the API refused the job token: GET /v1/jobs/j/spec answered 401 Unauthorized: invalid job token"
        );
        let m = status_message(&Method::PUT, "/p", StatusCode::BAD_GATEWAY, b"");
        assert_eq!(m, "PUT /p answered 502 Bad Gateway");
    }

    #[test]
    fn a_presigned_url_is_shown_without_its_signature() {
        assert_eq!(
            without_query("https://b.s3.amazonaws.com/artifacts/j/plan.tfplan?X-Amz-Signature=abc&X-Amz-Credential=k"),
            "https://b.s3.amazonaws.com/artifacts/j/plan.tfplan"
        );
        assert_eq!(without_query("http://h/p#frag"), "http://h/p");
        assert_eq!(without_query("http://h/p"), "http://h/p");
    }
}
