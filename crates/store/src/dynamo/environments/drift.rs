//! Drift and the last apply on an environment's item: the drift schedule's gsi3 `DRIFT`
//! entry (the checks due, the schedule moved on), the last drift check's status, and the
//! last apply recorded or forgotten.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, SecondsFormat, Utc};
use sortie_core::drift::{DriftSkipped, DriftStatus};
use sortie_core::EnvPath;

use super::{check_attribute, not_found};
use crate::dynamo::items::{from_item, EnvItem};
use crate::dynamo::keys::{env_key, DRIFT};
use crate::dynamo::{attribute, condition_failed, s, DynamoStore, Item};
use crate::error::aws;
use crate::sortkeys::{drift_due_bound, drift_sk};
use crate::{EnvironmentRecord, LastApply, StoreError};

impl DynamoStore {
    /// [`crate::EnvironmentStore::due_drift_checks`]: the gsi3 `DRIFT` entries due before
    /// `now`, oldest first; an unreadable item is skipped with a warning.
    pub(super) async fn query_due_drift(
        &self,
        now: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<EnvironmentRecord>, StoreError> {
        let out = self
            .client
            .query()
            .table_name(&self.table)
            .index_name("gsi3")
            .key_condition_expression("gsi3pk = :d AND gsi3sk < :due")
            .expression_attribute_values(":d", s(DRIFT))
            .expression_attribute_values(":due", s(drift_due_bound(now)))
            .limit(limit.clamp(1, 1000) as i32)
            .send()
            .await
            .map_err(|e| aws("dynamodb", e))?;
        Ok(out
            .items
            .unwrap_or_default()
            .into_iter()
            .filter_map(|item| match from_item::<EnvItem>(item) {
                Ok(e) => Some(e.record),
                Err(e) => {
                    tracing::warn!(error = %e, "an unreadable environment item is skipped by the drift schedule");
                    None
                }
            })
            .collect())
    }

    /// [`crate::EnvironmentStore::advance_drift`]: the drift schedule moved on from `fired`
    /// to `next` (or ended), only if it still fires at `fired`.
    pub(super) async fn write_drift_advance(
        &self,
        path: &EnvPath,
        fired: DateTime<Utc>,
        next: Option<DateTime<Utc>>,
        skipped: Option<&DriftSkipped>,
    ) -> Result<bool, StoreError> {
        let mut set = vec![];
        let mut remove = vec![];
        // `next_drift_at` is compared and written as the item holds it (serde's form).
        let mut values: Item = HashMap::from([(":fired".to_string(), attribute(&fired))]);
        match next {
            Some(t) => {
                set.push("next_drift_at = :next, gsi3pk = :d, gsi3sk = :dsk");
                values.insert(":next".into(), attribute(&t));
                values.insert(":d".into(), s(DRIFT));
                values.insert(":dsk".into(), s(drift_sk(t, path)));
            }
            None => remove.push("next_drift_at, gsi3pk, gsi3sk"),
        }
        if let Some(skipped) = skipped {
            let v = attribute(skipped);
            check_attribute("drift_skipped", &v)?;
            set.push("drift_skipped = :skipped");
            values.insert(":skipped".into(), v);
        }
        let mut expr = vec![];
        if !set.is_empty() {
            expr.push(format!("SET {}", set.join(", ")));
        }
        if !remove.is_empty() {
            expr.push(format!("REMOVE {}", remove.join(", ")));
        }
        let res = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(env_key(path)))
            .update_expression(expr.join(" "))
            .condition_expression("next_drift_at = :fired")
            .set_expression_attribute_values(Some(values))
            .send()
            .await;
        match res {
            Ok(_) => Ok(true),
            Err(e) if condition_failed(&e) => match self.read_env(path).await? {
                None => Err(not_found(path)),
                Some(_) => Ok(false),
            },
            Err(e) => Err(aws("dynamodb", e)),
        }
    }

    /// [`crate::EnvironmentStore::record_drift`]: the last drift check's status.
    pub(super) async fn write_drift(
        &self,
        path: &EnvPath,
        status: &DriftStatus,
    ) -> Result<(), StoreError> {
        let v = attribute(status);
        check_attribute("drift", &v)?;
        let res = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(env_key(path)))
            .update_expression("SET drift = :d")
            .condition_expression("attribute_exists(pk)")
            .expression_attribute_values(":d", v)
            .send()
            .await;
        match res {
            Ok(_) => Ok(()),
            Err(e) if condition_failed(&e) => Err(not_found(path)),
            Err(e) => Err(aws("dynamodb", e)),
        }
    }

    /// [`crate::EnvironmentStore::forget_last_apply`].
    ///
    /// Compares `last_apply.at` as `record_last_apply` writes it (nine fixed digits).
    pub(super) async fn remove_last_apply(
        &self,
        path: &EnvPath,
        at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let res = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(env_key(path)))
            .update_expression("REMOVE last_apply")
            .condition_expression("attribute_exists(pk) AND last_apply.#at < :at")
            .expression_attribute_names("#at", "at")
            .expression_attribute_values(":at", s(at.to_rfc3339_opts(SecondsFormat::Nanos, true)))
            .send()
            .await;
        // Nothing recorded, or a later apply: it stays.
        self.kept_unless_missing(path, res).await
    }

    /// [`crate::EnvironmentStore::record_last_apply`].
    ///
    /// Later means a later `at` (see the trait). `last_apply.at` is stored with nine
    /// fractional digits, fixed width, so the condition's string comparison is a time
    /// comparison (serde's RFC 3339 drops zero fractions: `…:01Z` would sort after
    /// `…:01.5Z`).
    pub(super) async fn write_last_apply(
        &self,
        path: &EnvPath,
        last: &LastApply,
    ) -> Result<(), StoreError> {
        let at = s(last.at.to_rfc3339_opts(SecondsFormat::Nanos, true));
        let mut v = attribute(last);
        if let AttributeValue::M(m) = &mut v {
            m.insert("at".into(), at.clone());
        }
        check_attribute("last_apply", &v)?;
        let res = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(env_key(path)))
            .update_expression("SET last_apply = :la")
            .condition_expression(
                "attribute_exists(pk) AND (attribute_not_exists(last_apply) OR last_apply.#at < :at)",
            )
            .expression_attribute_names("#at", "at")
            .expression_attribute_values(":la", v)
            .expression_attribute_values(":at", at)
            .send()
            .await;
        // A later apply is recorded: it stays.
        self.kept_unless_missing(path, res).await
    }

    /// The answer of a conditional `last_apply` write: a failed condition keeps what is
    /// recorded (`Ok`), unless the environment is gone (`NotFound`).
    async fn kept_unless_missing<T, E>(
        &self,
        path: &EnvPath,
        res: Result<T, aws_sdk_dynamodb::error::SdkError<E>>,
    ) -> Result<(), StoreError>
    where
        E: aws_sdk_dynamodb::error::ProvideErrorMetadata
            + std::error::Error
            + Send
            + Sync
            + 'static,
    {
        match res {
            Ok(_) => Ok(()),
            Err(e) if condition_failed(&e) => match self.read_env(path).await? {
                None => Err(not_found(path)),
                Some(_) => Ok(()),
            },
            Err(e) => Err(aws("dynamodb", e)),
        }
    }
}
