//! Memberships: one item per grant, partitioned by organisation (the root has its own).

use async_trait::async_trait;
use sortie_core::{GroupPath, Membership};

use super::items::{from_item, to_item, MemberItem};
use super::keys::{key, members_pk};
use super::{condition_failed, DynamoStore};
use crate::error::aws;
use crate::{MembershipRecord, MembershipStore, StoreError};

#[async_trait]
impl MembershipStore for DynamoStore {
    async fn put_membership(&self, record: &MembershipRecord) -> Result<(), StoreError> {
        let item = MemberItem {
            pk: members_pk(record.membership.group.org()),
            sk: format!("M#{}#{}", record.membership.group.as_str(), record.id),
            kind: "membership".into(),
            record: record.clone(),
        };
        let res = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(to_item(&item)))
            .condition_expression("attribute_not_exists(pk)")
            .send()
            .await;
        match res {
            Ok(_) => Ok(()),
            Err(e) if condition_failed(&e) => Err(StoreError::AlreadyExists {
                kind: "membership",
                id: record.id.clone(),
            }),
            Err(e) => Err(aws("dynamodb", e)),
        }
    }

    async fn delete_membership(&self, group: &GroupPath, id: &str) -> Result<(), StoreError> {
        let res = self
            .client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(key(
                members_pk(group.org()),
                &format!("M#{}#{id}", group.as_str()),
            )))
            .condition_expression("attribute_exists(pk)")
            .send()
            .await;
        match res {
            Ok(_) => Ok(()),
            Err(e) if condition_failed(&e) => Err(StoreError::NotFound {
                kind: "membership",
                id: id.to_string(),
            }),
            Err(e) => Err(aws("dynamodb", e)),
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
}
