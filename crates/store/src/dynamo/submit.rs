//! The submit transactions' shared tail: the idempotency key, and replaying an earlier
//! submission when the key was seen before.

use aws_sdk_dynamodb::types::TransactWriteItem;
use sortie_core::{EnvPath, Job, JobId};

use super::keys::key;
use super::{DynamoStore, Item, TxOutcome};
use crate::{IdempotencyKey, JobStore, StoreError, Submitted};

/// How long an idempotency key is remembered.
pub(super) const IDEMPOTENCY_TTL_SECONDS: i64 = 24 * 60 * 60;

impl DynamoStore {
    /// One submit transaction: `items`, then the idempotency key if there is one.
    /// `Ok(Ok(_))` when it committed, or when the key replays an earlier submit;
    /// `Ok(Err(codes))` with the cancellation codes, in item order, otherwise.
    pub(super) async fn try_submit(
        &self,
        mut items: Vec<TransactWriteItem>,
        job: &Job,
        idem_item: Option<&Item>,
        idempotency: Option<&IdempotencyKey>,
        took_lock: bool,
    ) -> Result<Result<Submitted, Vec<Option<String>>>, StoreError> {
        let idem_index = items.len();
        if let Some(i) = idem_item {
            items.push(self.put(i.clone(), "attribute_not_exists(pk)"));
        }
        match self.transact(items).await? {
            TxOutcome::Done => Ok(Ok(Submitted {
                job: job.clone(),
                took_lock,
                replayed: false,
            })),
            TxOutcome::Cancelled(codes) => match self
                .check_replay(&codes, idem_index, idempotency, &job.environment)
                .await?
            {
                Some(replay) => Ok(Ok(replay)),
                None => Ok(Err(codes)),
            },
        }
    }

    /// If the idempotency item's condition failed, returns the earlier job (or a mismatch error).
    async fn check_replay(
        &self,
        codes: &[Option<String>],
        idem_index: usize,
        idempotency: Option<&IdempotencyKey>,
        env: &EnvPath,
    ) -> Result<Option<Submitted>, StoreError> {
        let Some(k) = idempotency else {
            return Ok(None);
        };
        if codes.get(idem_index).and_then(|c| c.as_deref()) != Some("ConditionalCheckFailed") {
            return Ok(None);
        }
        let item = self
            .get_item(key(format!("IDEM#{env}#{}", k.key), "IDEM"))
            .await?
            .ok_or_else(|| StoreError::Aws {
                service: "dynamodb",
                message: "idempotency item vanished".into(),
                retryable: true,
            })?;
        let job_id = item
            .get("job_id")
            .and_then(|v| v.as_s().ok())
            .cloned()
            .unwrap_or_default();
        let hash = item
            .get("request_hash")
            .and_then(|v| v.as_s().ok())
            .cloned()
            .unwrap_or_default();
        if hash != k.request_hash {
            return Err(StoreError::IdempotencyMismatch {
                key: k.key.clone(),
                job_id,
            });
        }
        let job = self.get_job(&JobId::new(job_id)).await?.job;
        Ok(Some(Submitted {
            job,
            took_lock: false,
            replayed: true,
        }))
    }
}
