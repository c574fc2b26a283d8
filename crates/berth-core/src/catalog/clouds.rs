//! The provider clouds registered with berth, and the providers imported from them.

use super::state::Catalog;
use crate::model::cloud::{PROVIDER_CLOUD_ATTRIBUTE, ProviderCloud, SyncState};
use crate::model::provider::{AttrValue, Provider};
use uuid::Uuid;

impl Catalog {
    /// Every registered provider cloud, by id.
    pub fn provider_clouds(&self) -> impl Iterator<Item = &ProviderCloud> {
        self.clouds.values()
    }

    /// One registered provider cloud.
    pub fn provider_cloud(&self, id: Uuid) -> Option<&ProviderCloud> {
        self.clouds.get(&id)
    }

    /// The providers imported from cloud `id`.
    pub fn cloud_providers(&self, id: Uuid) -> impl Iterator<Item = &Provider> {
        self.providers()
            .filter(move |p| provider_cloud_of(p) == Some(id))
    }

    /// The cloud whose capacity `provider` is, when it is imported and that cloud's capacity is
    /// unknown (the cloud could not be reached at its last synchronisation).
    pub fn unreachable_cloud_of(&self, provider: &Provider) -> Option<&ProviderCloud> {
        provider_cloud_of(provider)
            .and_then(|id| self.provider_cloud(id))
            .filter(|cloud| cloud.sync.state == SyncState::Unknown)
    }
}

/// The cloud `provider` was imported from, if it was.
pub fn provider_cloud_of(provider: &Provider) -> Option<Uuid> {
    match provider.attributes().get(PROVIDER_CLOUD_ATTRIBUTE) {
        Some(AttrValue::String(id)) => Uuid::parse_str(id).ok(),
        _ => None,
    }
}
