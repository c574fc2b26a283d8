//! Provider clouds: registering another OpenStack cloud (Promise's `add-provider`), listing,
//! showing and removing them. The server authenticates against the cloud and seals the
//! credentials before it asks; berth keeps the registration through the normal write path, so
//! every replica sees it.

use crate::error::AppError;
use crate::service::Berth;
use berth_core::decide::cloud as decide;
use berth_core::model::cloud::{CloudKind, CloudProject, ProviderCloud, RemoteSnapshot};
use uuid::Uuid;

/// A cloud to register, as the server found it (authenticated, services found).
#[derive(Debug, Clone)]
pub struct AddProviderCloud {
    /// Its kind.
    pub kind: CloudKind,
    /// Keystone's v3 endpoint.
    pub auth_url: String,
    /// The user berth authenticates as.
    pub username: String,
    /// The project berth works in.
    pub project: CloudProject,
    /// The region whose endpoints berth uses.
    pub region: Option<String>,
    /// Placement's endpoint there.
    pub placement_url: String,
    /// Compute's endpoint there, if any.
    pub compute_url: Option<String>,
}

impl Berth {
    /// Registers a cloud under a new provider id; `seal` seals its credentials for that id
    /// (the id is bound into the sealed text, so sealed credentials cannot be moved to another
    /// cloud).
    pub async fn add_provider_cloud(
        &self,
        cmd: AddProviderCloud,
        seal: impl FnOnce(Uuid) -> String,
    ) -> Result<ProviderCloud, AppError> {
        let id = self.new_uuid();
        let sealed_credentials = seal(id);
        self.write(move |catalog, now| {
            let cloud = ProviderCloud {
                id,
                kind: cmd.kind,
                auth_url: cmd.auth_url,
                username: cmd.username,
                project: cmd.project,
                region: cmd.region,
                placement_url: cmd.placement_url,
                compute_url: cmd.compute_url,
                sealed_credentials,
                created_at: now,
                sync: Default::default(),
            };
            decide::add_provider_cloud(catalog, cloud.clone()).map(|c| (c, cloud))
        })
        .await
    }

    /// Removes the cloud `id` and what was imported from it; refused while its capacity is held,
    /// unless `force`d (see [`decide::remove_provider_cloud`]).
    pub async fn remove_provider_cloud(&self, id: Uuid, force: bool) -> Result<(), AppError> {
        self.write(move |catalog, now| {
            decide::remove_provider_cloud(catalog, id, force, now).map(|c| (c, ()))
        })
        .await
    }
}

impl Berth {
    /// Brings the providers imported from cloud `id` in line with what its Placement listed
    /// (read by the caller, off the writer lock); writes only what differs.
    pub async fn sync_provider_cloud(
        &self,
        id: Uuid,
        snapshot: RemoteSnapshot,
    ) -> Result<usize, AppError> {
        self.write(move |catalog, now| {
            decide::sync(catalog, id, &snapshot, now).map(|changes| {
                let written = changes.len();
                (changes, written)
            })
        })
        .await
    }

    /// Records that cloud `id` could not be reached (`error`): its capacity is unknown and its
    /// providers take no new reservation until a synchronisation succeeds.
    pub async fn provider_cloud_unreachable(
        &self,
        id: Uuid,
        error: String,
    ) -> Result<(), AppError> {
        self.write(move |catalog, now| {
            decide::unreachable(catalog, id, &error, now).map(|changes| (changes, ()))
        })
        .await
    }
}
