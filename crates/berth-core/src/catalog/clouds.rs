//! The provider clouds registered with berth, and the providers imported from them.

use super::state::Catalog;
use crate::model::cloud::{
    PROVIDER_CLOUD_ATTRIBUTE, ProviderCloud, REMOTE_GENERATION_ATTRIBUTE, REMOTE_UUID_ATTRIBUTE,
    RemoteClaim, SyncState,
};
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

    /// What consumer `consumer` (a Promise instance) holds on a provider imported from a
    /// provider cloud: the cloud, the provider's uuid there and the amounts (`None` when it
    /// holds nothing imported). berth places an instance on one host.
    pub fn remote_claim(&self, consumer: Uuid) -> Option<RemoteClaim> {
        self.consumer(consumer)?
            .allocations
            .iter()
            .find_map(|(host, amounts)| {
                let (cloud, remote) = remote_of(self.provider(*host)?)?;
                Some(RemoteClaim {
                    cloud: self.provider_cloud(cloud)?.clone(),
                    remote,
                    amounts: amounts
                        .iter()
                        .map(|(class, n)| (class.as_str().to_owned(), *n))
                        .collect(),
                })
            })
    }

    /// The cloud whose capacity `provider` is, when it is imported and that cloud's capacity is
    /// unknown (the cloud could not be reached at its last synchronisation).
    pub fn unreachable_cloud_of(&self, provider: &Provider) -> Option<&ProviderCloud> {
        provider_cloud_of(provider)
            .and_then(|id| self.provider_cloud(id))
            .filter(|cloud| cloud.sync.state == SyncState::Unknown)
    }
}

/// The cloud `provider` was imported from and the provider's uuid in that cloud's Placement, if
/// it was imported.
pub fn remote_of(provider: &Provider) -> Option<(Uuid, Uuid)> {
    let remote = match provider.attributes().get(REMOTE_UUID_ATTRIBUTE) {
        Some(AttrValue::String(id)) => Uuid::parse_str(id).ok()?,
        _ => return None,
    };
    Some((provider_cloud_of(provider)?, remote))
}

/// The generation `provider` had in its cloud's Placement when berth last read its details, if
/// it is imported.
pub fn remote_generation(provider: &Provider) -> Option<u64> {
    match provider.attributes().get(REMOTE_GENERATION_ATTRIBUTE) {
        Some(AttrValue::Number(n)) if *n >= 0.0 => Some(*n as u64),
        _ => None,
    }
}

/// The cloud `provider` was imported from, if it was.
pub fn provider_cloud_of(provider: &Provider) -> Option<Uuid> {
    match provider.attributes().get(PROVIDER_CLOUD_ATTRIBUTE) {
        Some(AttrValue::String(id)) => Uuid::parse_str(id).ok(),
        _ => None,
    }
}
