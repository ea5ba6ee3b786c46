//! The sweeper's side of the jobs: the sparse gsi3 index read by partition and time, and
//! an unreadable job failed in place.

use chrono::{DateTime, Utc};
use sortie_core::{JobState, Transition};

use crate::dynamo::items::{from_item, JobItem};
use crate::dynamo::keys::job_key;
use crate::dynamo::{s, DynamoStore, Item};
use crate::error::aws;
use crate::sortkeys::sort_time;
use crate::{JobRecord, StoreError, Unreadable};

impl DynamoStore {
    /// The items of gsi3 partition `partition` whose sort key (`<time>#<id>`) is before
    /// `before`, oldest first, at most `limit`: the sweeper's work lists.
    pub(super) async fn gsi3_before(
        &self,
        partition: &str,
        before: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<Item>, StoreError> {
        let out = self
            .client
            .query()
            .table_name(&self.table)
            .index_name("gsi3")
            .key_condition_expression("gsi3pk = :p AND gsi3sk < :before")
            .expression_attribute_values(":p", s(partition))
            .expression_attribute_values(":before", s(sort_time(before)))
            .limit(limit.clamp(1, 1000) as i32)
            .send()
            .await
            .map_err(|e| aws("dynamodb", e))?;
        Ok(out.items.unwrap_or_default())
    }

    /// [`crate::JobStore::fail_unreadable_job`]: a job item that no longer decodes set to
    /// `failed`, keeping what still decodes of its history.
    pub(super) async fn fail_unreadable(
        &self,
        job: &Unreadable,
        at: DateTime<Utc>,
        reason: &str,
    ) -> Result<Option<JobRecord>, StoreError> {
        let Some(raw) = self.get_item(job_key(&job.job_id)).await? else {
            return Err(StoreError::NotFound {
                kind: "job",
                id: job.job_id.to_string(),
            });
        };
        if let Ok(readable) = from_item::<JobItem>(raw.clone()) {
            // Readable again (repaired meanwhile): nothing to rewrite.
            return Ok(Some(readable.record));
        }
        // Keep what still decodes of its history, and record the failure as its last transition.
        let mut transitions: Vec<Transition> = raw
            .get("transitions")
            .and_then(|v| serde_dynamo::from_attribute_value(v.clone()).ok())
            .unwrap_or_default();
        let from = raw
            .get("state")
            .and_then(|v| serde_dynamo::from_attribute_value::<_, JobState>(v.clone()).ok());
        transitions.push(Transition::new(from, JobState::Failed, at, reason));
        self.client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(job_key(&job.job_id)))
            .update_expression(
                "SET #state = :failed, transitions = :ts, updated_at = :now \
                 REMOVE gsi3pk, gsi3sk, queue_sk",
            )
            .condition_expression("attribute_exists(pk)")
            .expression_attribute_names("#state", "state")
            .expression_attribute_values(":failed", s(JobState::Failed.as_str()))
            .expression_attribute_values(
                ":ts",
                serde_dynamo::to_attribute_value(&transitions).expect("transitions serialise"),
            )
            .expression_attribute_values(":now", s(at.to_rfc3339()))
            .send()
            .await
            .map_err(|e| aws("dynamodb", e))?;
        Ok(self
            .read_job(&job.job_id)
            .await
            .ok()
            .flatten()
            .map(|j| j.record))
    }
}
