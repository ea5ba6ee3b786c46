//! Memberships, keyed as the table's membership items.

use async_trait::async_trait;
use std::collections::BTreeSet;

use sortie_core::{Grantee, GroupPath, Membership};

use super::{members_pk, MemoryStore};
use crate::{MembershipRecord, MembershipStore, StoreError, ORGANISATIONS_MAX};

#[async_trait]
impl MembershipStore for MemoryStore {
    async fn put_membership(&self, record: &MembershipRecord) -> Result<(), StoreError> {
        let key = (
            members_pk(record.membership.group.org()),
            format!("M#{}#{}", record.membership.group.as_str(), record.id),
        );
        let mut st = self.lock();
        if st.memberships.contains_key(&key) {
            return Err(StoreError::AlreadyExists {
                kind: "membership",
                id: record.id.clone(),
            });
        }
        st.memberships.insert(key, record.clone());
        st.audited();
        Ok(())
    }

    async fn delete_membership(&self, group: &GroupPath, id: &str) -> Result<(), StoreError> {
        let key = (
            members_pk(group.org()),
            format!("M#{}#{id}", group.as_str()),
        );
        let mut st = self.lock();
        st.memberships
            .remove(&key)
            .ok_or_else(|| StoreError::NotFound {
                kind: "membership",
                id: id.to_string(),
            })?;
        st.audited();
        Ok(())
    }

    async fn list_memberships(
        &self,
        group: &GroupPath,
    ) -> Result<Vec<MembershipRecord>, StoreError> {
        let pk = members_pk(group.org());
        let prefix = format!("M#{}#", group.as_str());
        let st = self.lock();
        Ok(st
            .memberships
            .iter()
            .filter(|((p, sk), _)| *p == pk && sk.starts_with(&prefix))
            .map(|(_, m)| m.clone())
            .collect())
    }

    async fn memberships_for(&self, org: Option<&str>) -> Result<Vec<Membership>, StoreError> {
        let mut pks = vec![members_pk(None)];
        if org.is_some() {
            pks.push(members_pk(org));
        }
        let st = self.lock();
        Ok(pks
            .iter()
            .flat_map(|pk| {
                st.memberships
                    .iter()
                    .filter(move |((p, _), _)| p == pk)
                    .map(|(_, m)| m.membership.clone())
            })
            .collect())
    }

    async fn organisations_of(
        &self,
        subject: &str,
        issuer: Option<&str>,
    ) -> Result<Vec<String>, StoreError> {
        let st = self.lock();
        let orgs: BTreeSet<String> = st
            .memberships
            .values()
            .filter(|m| match &m.membership.grantee {
                Grantee::Subject {
                    subject: s,
                    issuer: i,
                } => s == subject && (i.is_none() || i.as_deref() == issuer),
                Grantee::ClaimPattern { .. } => false,
            })
            .filter_map(|m| m.membership.group.org().map(str::to_string))
            .collect();
        Ok(orgs.into_iter().take(ORGANISATIONS_MAX).collect())
    }
}
