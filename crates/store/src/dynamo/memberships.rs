//! Memberships: one item per grant, partitioned by organisation (the root has its own),
//! and, for a grant to a subject inside an organisation, one index item under the subject
//! (`MEMBER#<issuer>#<subject>` / `ORG#<org>#M#<group>#<id>`) written and deleted in the
//! same transaction as the grant: how `organisations_of` finds a caller's organisations.

use super::Written;
use std::collections::BTreeSet;

use async_trait::async_trait;
use aws_sdk_dynamodb::types::{Delete, TransactWriteItem};
use serde::{Deserialize, Serialize};
use sortie_core::{Grantee, GroupPath, Membership};

use super::items::{from_item, to_item, MemberItem};
use super::keys::{key, members_pk};
use super::{s, DynamoStore, Item, TxOutcome};
use crate::error::aws;
use crate::{MembershipRecord, MembershipStore, StoreError, ORGANISATIONS_MAX};

/// The index partition of a subject's grants: for one issuer, or (`None`) for any issuer.
fn member_pk(issuer: Option<&str>, subject: &str) -> String {
    sortie_core::auth::member_index_key(issuer, subject)
}

/// The index item of a grant to a subject inside an organisation; `None` for a root-group
/// grant or a claim-pattern grant.
fn index_item(record: &MembershipRecord) -> Option<MemberIndexItem> {
    let org = record.membership.group.org()?;
    let Grantee::Subject { subject, issuer } = &record.membership.grantee else {
        return None;
    };
    Some(MemberIndexItem {
        pk: member_pk(issuer.as_deref(), subject),
        sk: format!(
            "ORG#{org}#M#{}#{}",
            record.membership.group.as_str(),
            record.id
        ),
        kind: "member-index".into(),
        org: org.to_string(),
    })
}

/// A subject's index entry for one grant: which organisation it is in.
#[derive(Serialize, Deserialize)]
struct MemberIndexItem {
    pk: String,
    sk: String,
    kind: String,
    org: String,
}

/// `None` when the transaction failed on a condition (the caller says which); otherwise the
/// reason, as a retryable error: never reported as a conflict.
fn cancelled(codes: &[Option<String>]) -> Option<StoreError> {
    if codes
        .iter()
        .flatten()
        .any(|c| c == "ConditionalCheckFailed")
    {
        return None;
    }
    let reasons: Vec<&str> = codes.iter().flatten().map(String::as_str).collect();
    Some(StoreError::Aws {
        service: "dynamodb",
        message: format!("membership transaction cancelled: {}", reasons.join(", ")),
        retryable: true,
    })
}

fn membership_sk(group: &GroupPath, id: &str) -> String {
    format!("M#{}#{id}", group.as_str())
}

impl DynamoStore {
    /// The distinct organisations in one index partition, added to `out` until it holds
    /// [`ORGANISATIONS_MAX`]; reads only the `org` attribute, paged to the end.
    async fn index_orgs(&self, pk: &str, out: &mut BTreeSet<String>) -> Result<(), StoreError> {
        let mut start: Option<Item> = None;
        while out.len() < ORGANISATIONS_MAX {
            let page = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("pk = :pk AND begins_with(sk, :prefix)")
                .expression_attribute_values(":pk", s(pk))
                .expression_attribute_values(":prefix", s("ORG#"))
                .projection_expression("org")
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|e| aws("dynamodb", e))?;
            for item in page.items.unwrap_or_default() {
                if let Some(org) = item.get("org").and_then(|v| v.as_s().ok()) {
                    if out.len() < ORGANISATIONS_MAX || out.contains(org) {
                        out.insert(org.clone());
                    }
                }
            }
            match page.last_evaluated_key {
                Some(k) if !k.is_empty() => start = Some(k),
                _ => break,
            }
        }
        Ok(())
    }
}

#[async_trait]
impl MembershipStore for DynamoStore {
    async fn put_membership(&self, record: &MembershipRecord) -> Result<(), StoreError> {
        let item = MemberItem {
            pk: members_pk(record.membership.group.org()),
            sk: membership_sk(&record.membership.group, &record.id),
            kind: "membership".into(),
            record: record.clone(),
        };
        let exists = || StoreError::AlreadyExists {
            kind: "membership",
            id: record.id.clone(),
        };
        if let Some(index) = index_item(record) {
            // The grant and its index entry together, or neither.
            let items = vec![
                self.put(to_item(&item), "attribute_not_exists(pk)"),
                self.put(to_item(&index), "attribute_not_exists(pk)"),
            ];
            return match self.transact(items).await? {
                TxOutcome::Done => Ok(()),
                TxOutcome::Cancelled(codes) => Err(cancelled(&codes).unwrap_or_else(exists)),
            };
        }
        let res = self
            .write_one(self.put_with(to_item(&item), "attribute_not_exists(pk)", Item::new()))
            .await?;
        match res {
            Written::Done => Ok(()),
            Written::ConditionFailed => Err(exists()),
        }
    }

    async fn delete_membership(&self, group: &GroupPath, id: &str) -> Result<(), StoreError> {
        let not_found = || StoreError::NotFound {
            kind: "membership",
            id: id.to_string(),
        };
        let membership_key = key(members_pk(group.org()), &membership_sk(group, id));
        // A grant is never changed, so the index entry read here is the one to delete.
        let index = match self.get_item(membership_key.clone()).await? {
            None => return Err(not_found()),
            Some(item) => index_item(&from_item::<MemberItem>(item)?.record),
        };
        if let Some(index) = index {
            let items = vec![
                self.delete(membership_key, "attribute_exists(pk)", Item::new()),
                // Unconditional: an index entry already gone never blocks a revoke.
                TransactWriteItem::builder()
                    .delete(
                        Delete::builder()
                            .table_name(&self.table)
                            .set_key(Some(key(index.pk, &index.sk)))
                            .build()
                            .expect("table and key are set"),
                    )
                    .build(),
            ];
            return match self.transact(items).await? {
                TxOutcome::Done => Ok(()),
                TxOutcome::Cancelled(codes) => Err(cancelled(&codes).unwrap_or_else(not_found)),
            };
        }
        let res = self
            .write_one(self.delete(membership_key, "attribute_exists(pk)", Item::new()))
            .await?;
        match res {
            Written::Done => Ok(()),
            Written::ConditionFailed => Err(not_found()),
        }
    }

    async fn list_memberships(
        &self,
        group: &GroupPath,
    ) -> Result<Vec<MembershipRecord>, StoreError> {
        let items = self
            .query_pk(
                None,
                "pk",
                &members_pk(group.org()),
                Some(("sk", &format!("M#{}#", group.as_str()))),
            )
            .await?;
        items
            .into_iter()
            .map(|i| from_item::<MemberItem>(i).map(|m| m.record))
            .collect()
    }

    async fn memberships_for(&self, org: Option<&str>) -> Result<Vec<Membership>, StoreError> {
        let mut pks = vec![members_pk(None)];
        if org.is_some() {
            pks.push(members_pk(org));
        }
        let mut out = Vec::new();
        for pk in pks {
            for item in self.query_pk(None, "pk", &pk, None).await? {
                out.push(from_item::<MemberItem>(item)?.record.membership);
            }
        }
        Ok(out)
    }

    async fn organisations_of(
        &self,
        subject: &str,
        issuer: Option<&str>,
    ) -> Result<Vec<String>, StoreError> {
        let mut orgs = BTreeSet::new();
        let mut pks = vec![member_pk(None, subject)];
        if let Some(issuer) = issuer.filter(|i| !i.is_empty()) {
            pks.push(member_pk(Some(issuer), subject));
        }
        // A key over DynamoDB's limit has no grant (none is accepted), and querying it is
        // a ValidationException: a token's long `sub` must not make every call a 5xx.
        for pk in pks
            .iter()
            .filter(|pk| pk.len() <= sortie_core::limits::DYNAMODB_PARTITION_KEY_MAX)
        {
            self.index_orgs(pk, &mut orgs).await?;
        }
        Ok(orgs.into_iter().collect())
    }
}
