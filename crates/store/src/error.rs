//! The store's one error type.

use sortie_core::JobState;

/// What can go wrong in the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// No such item.
    #[error("{kind} `{id}` was not found")]
    NotFound {
        /// What was looked for: `runner`, `rule`, `environment`, `job`, `membership`.
        kind: &'static str,
        /// Its id.
        id: String,
    },
    /// The id is taken.
    #[error("{kind} `{id}` already exists")]
    AlreadyExists {
        /// What was created.
        kind: &'static str,
        /// Its id.
        id: String,
    },
    /// The item changed since the caller read it (optimistic concurrency).
    #[error("{kind} `{id}` is at version {actual}, not {expected}")]
    VersionMismatch {
        /// What was changed.
        kind: &'static str,
        /// Its id.
        id: String,
        /// The version the caller expected.
        expected: u64,
        /// The version found.
        actual: u64,
    },
    /// The item is still used by others and cannot be deleted.
    #[error("{kind} `{id}` is in use by {}", .by.join(", "))]
    InUse {
        /// What was to be deleted.
        kind: &'static str,
        /// Its id.
        id: String,
        /// Who uses it (environment paths, job ids).
        by: Vec<String>,
    },
    /// A job was not in the state a conditional transition expected.
    #[error("job `{job_id}` is {actual}, not {expected}")]
    StateConflict {
        /// The job.
        job_id: String,
        /// The state the write expected.
        expected: JobState,
        /// The state found.
        actual: JobState,
    },
    /// A submit's write found the environment locked, or a group above it frozen (taken
    /// after the submit read it): nothing was written.
    #[error("environment `{environment}` is locked, or a group above it is frozen")]
    Locked {
        /// The environment.
        environment: String,
    },
    /// A submit's write found the environment marked destroyed by its expiry: nothing was
    /// written, whoever submitted (a person, a trigger, a drift check, a restore, a pull
    /// request), until it is extended.
    #[error("{}", .destroyed.refusal(.environment))]
    Destroyed {
        /// The environment.
        environment: String,
        /// When and how it was destroyed.
        destroyed: sortie_core::expiry::Destroyed,
    },
    /// The same idempotency key was used with a different request.
    #[error("idempotency key `{key}` was already used for a different request (job {job_id})")]
    IdempotencyMismatch {
        /// The key.
        key: String,
        /// The job the key belongs to.
        job_id: String,
    },
    /// A stored item could not be read back.
    #[error("stored item {key} is unreadable: {message}")]
    Corrupt {
        /// The item's key.
        key: String,
        /// What failed.
        message: String,
    },
    /// The item to be written would exceed a DynamoDB limit (400 KB): refused before any
    /// write, as an input error (the API answers 400).
    #[error(
        "the {kind} is too large to store: about {size} bytes, over the limit of {limit} bytes"
    )]
    TooLarge {
        /// What was to be written: `job`, `rule`, ...
        kind: &'static str,
        /// Its estimated DynamoDB item size, in bytes.
        size: usize,
        /// The limit, in bytes.
        limit: usize,
    },
    /// A value cannot be stored as given (nested too deep, an empty map key, or it would not
    /// read back): refused before any write, as an input error (the API answers 400).
    #[error("`{path}` cannot be stored: {problem}")]
    Invalid {
        /// Where in the item, such as `variables.deep.a.a`.
        path: String,
        /// What is wrong.
        problem: String,
    },
    /// DynamoDB or SQS failed.
    #[error("{service} error: {message}")]
    Aws {
        /// `dynamodb` or `sqs`.
        service: &'static str,
        /// The AWS error code and message.
        message: String,
        /// True for throttling, 5xx and transport failures.
        retryable: bool,
    },
}

impl StoreError {
    /// True for an error in the caller's input (`TooLarge`, `Invalid`): nothing was written,
    /// and the same request will always be refused (the API answers 400).
    pub fn is_input_error(&self) -> bool {
        matches!(self, Self::TooLarge { .. } | Self::Invalid { .. })
    }

    /// True when retrying the same call may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Self::Aws {
                retryable: true,
                ..
            }
        )
    }
}

/// Builds [`StoreError::Aws`] from any SDK error, with its code and message.
pub(crate) fn aws<E>(service: &'static str, err: aws_sdk_dynamodb::error::SdkError<E>) -> StoreError
where
    E: aws_sdk_dynamodb::error::ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    use aws_sdk_dynamodb::error::SdkError;
    let retryable = match &err {
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) => true,
        SdkError::ResponseError(_) => true,
        SdkError::ServiceError(se) => {
            let status = se.raw().status().as_u16();
            let code = se.err().code().unwrap_or_default();
            status >= 500
                || code.contains("Throttl")
                || code == "ProvisionedThroughputExceededException"
                || code == "RequestLimitExceeded"
        }
        _ => false,
    };
    let message = match err.as_service_error() {
        Some(se) => format!(
            "{}: {}",
            se.code().unwrap_or("Unknown"),
            se.message().unwrap_or_default()
        ),
        None => aws_sdk_dynamodb::error::DisplayErrorContext(&err).to_string(),
    };
    StoreError::Aws {
        service,
        message,
        retryable,
    }
}
