//! The provider clouds registered with berth.

use super::state::Catalog;
use crate::model::cloud::ProviderCloud;
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
}
