//! The membership service: the roles granted on a group, granted and revoked. The API
//! checks who may act (an administrator of the group) and forgets its cached
//! memberships of the organisation; this service reads the grant and writes it.

use std::sync::Arc;

use chrono::Utc;
use sortie_core::problems::Fields;
use sortie_core::{Grantee, GroupPath, Membership, Problems, Role, ValidationError};
use sortie_store::{MembershipRecord, Store, StoreError};

/// Memberships, over the store.
#[derive(Clone)]
pub struct Memberships {
    /// The repository.
    pub store: Arc<dyn Store>,
}

/// Why a membership was not granted.
#[derive(Debug, thiserror::Error)]
pub enum MembershipRefusal {
    /// The grant is not valid: a missing or unknown field, a role or grantee that is not
    /// one.
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl Memberships {
    /// The service over `store`.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self { store }
    }

    /// The memberships granted on exactly `group`.
    pub async fn list(&self, group: &GroupPath) -> Result<Vec<MembershipRecord>, StoreError> {
        self.store.list_memberships(group).await
    }

    /// Grants on `group` what `grant` says (`role` and `grantee`), recorded as granted by
    /// `by` now; every problem of the grant is named at once.
    pub async fn grant(
        &self,
        group: &GroupPath,
        grant: &serde_json::Value,
        by: &str,
    ) -> Result<MembershipRecord, MembershipRefusal> {
        let mut p = Problems::default();
        let Some(mut f) = Fields::new(grant, "", &mut p) else {
            return Err(ValidationError { problems: p.0 }.into());
        };
        let role: Option<Role> = f.required("role", &mut p);
        let grantee: Option<Grantee> = f.required("grantee", &mut p);
        f.finish(&mut p);
        if let Some(grantee) = &grantee {
            grantee.check("grantee", &mut p);
        }
        let (Some(role), Some(grantee)) = p.finish((role, grantee))? else {
            // `required` records a problem whenever it reads nothing, so this is not reached.
            let mut p = Problems::default();
            p.push("grantee", "role and grantee are required");
            return Err(ValidationError { problems: p.0 }.into());
        };
        let record = MembershipRecord {
            id: sortie_core::tokens::new_id(),
            membership: Membership {
                group: group.clone(),
                role,
                grantee,
            },
            granted_by: by.to_string(),
            granted_at: Utc::now(),
        };
        self.store.put_membership(&record).await?;
        Ok(record)
    }

    /// Revokes membership `id` of `group`.
    pub async fn revoke(&self, group: &GroupPath, id: &str) -> Result<(), StoreError> {
        self.store.delete_membership(group, id).await
    }
}
