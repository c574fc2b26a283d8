//! Shared leases (berth): share a lease's reservations with another project within a cap,
//! revoke the share, and list the shares with what each project holds inside the lease.

use crate::error::AppError;
use crate::service::Berth;
use berth_core::decide::lease as decide;
use berth_core::model::id::LeaseId;
use berth_core::query::leases::{self as lease_query, ShareUse};
use std::collections::BTreeMap;

impl Berth {
    /// Shares lease `id` with `project` within `cap` (class names and amounts as sent), or
    /// changes the cap of its share; `owner` is the caller's project (`None`: an admin).
    /// Returns the share with what its project holds inside the lease.
    pub async fn share_lease(
        &self,
        id: LeaseId,
        owner: Option<String>,
        project: String,
        cap: BTreeMap<String, i64>,
    ) -> Result<ShareUse, AppError> {
        let share = self
            .write(move |catalog, now| {
                decide::share_lease(catalog, id, owner.as_deref(), &project, &cap, now)
            })
            .await?;
        // The write was committed by this process: its catalog holds the lease as shared.
        Ok(self.read_local(|catalog| match catalog.lease(id) {
            Some(lease) => lease_query::share_use(catalog, lease, &share),
            None => ShareUse {
                share,
                used: BTreeMap::new(),
            },
        }))
    }

    /// Revokes the share of `project` in lease `id`; `owner` as for [`Berth::share_lease`].
    pub async fn revoke_share(
        &self,
        id: LeaseId,
        owner: Option<String>,
        project: String,
    ) -> Result<(), AppError> {
        self.write(move |catalog, now| {
            decide::revoke_share(catalog, id, owner.as_deref(), &project, now).map(|c| (c, ()))
        })
        .await
    }

    /// The shares of lease `id` the caller (`viewer`: its project, `None`: an admin) sees, with
    /// what each project holds inside the lease; `None` when it sees neither the lease nor a
    /// share of it.
    pub async fn lease_shares(
        &self,
        id: LeaseId,
        viewer: Option<String>,
    ) -> Result<Option<Vec<ShareUse>>, AppError> {
        self.read(|catalog| lease_query::shares(catalog, id, viewer.as_deref()))
            .await
    }
}
