//! Provider clouds: registering one (Promise's `add-provider`) and removing it.
//!
//! The server has already authenticated against the cloud's Keystone and found its services
//! before it asks: the decision only keeps the catalog's provider ids and registrations unique.

use crate::catalog::Catalog;
use crate::change::Change;
use crate::model::cloud::ProviderCloud;
use crate::rejection::Rejection;
use uuid::Uuid;

/// Registers `cloud`. Its id must be new, and no registered cloud may have the same Keystone
/// endpoint, user, project and region (the same cloud twice would count its capacity twice).
pub fn add_provider_cloud(
    catalog: &Catalog,
    cloud: ProviderCloud,
) -> Result<Vec<Change>, Rejection> {
    if catalog.provider_cloud(cloud.id).is_some() {
        return Err(Rejection::ProviderCloudExists(cloud.id));
    }
    let same = catalog.provider_clouds().find(|c| {
        c.auth_url == cloud.auth_url
            && c.username == cloud.username
            && c.project == cloud.project
            && c.region == cloud.region
    });
    if let Some(same) = same {
        return Err(Rejection::ProviderCloudExists(same.id));
    }
    Ok(vec![Change::ProviderCloudSet {
        id: cloud.id,
        cloud: Some(cloud),
    }])
}

/// Removes the cloud `id`.
pub fn remove_provider_cloud(catalog: &Catalog, id: Uuid) -> Result<Vec<Change>, Rejection> {
    if catalog.provider_cloud(id).is_none() {
        return Err(Rejection::ProviderCloudNotFound(id));
    }
    Ok(vec![Change::ProviderCloudSet { id, cloud: None }])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::cloud::{CloudKind, CloudProject};
    use crate::model::time::Instant;

    fn cloud(id: u128, user: &str) -> ProviderCloud {
        ProviderCloud {
            id: Uuid::from_u128(id),
            kind: CloudKind::Openstack,
            auth_url: "http://keystone:5000/v3".to_owned(),
            username: user.to_owned(),
            project: CloudProject {
                id: None,
                name: Some("promise".to_owned()),
            },
            region: Some("RegionOne".to_owned()),
            placement_url: "http://placement:8778".to_owned(),
            compute_url: None,
            sealed_credentials: "sealed".to_owned(),
            created_at: Instant::from_micros(1),
        }
    }

    #[test]
    fn a_cloud_is_registered_once_and_removed() {
        let mut catalog = Catalog::default();
        let changes = add_provider_cloud(&catalog, cloud(1, "promise_user")).expect("added");
        catalog.apply(&changes);
        assert_eq!(catalog.provider_clouds().count(), 1);
        assert_eq!(
            add_provider_cloud(&catalog, cloud(1, "other")),
            Err(Rejection::ProviderCloudExists(Uuid::from_u128(1)))
        );
        assert_eq!(
            add_provider_cloud(&catalog, cloud(2, "promise_user")),
            Err(Rejection::ProviderCloudExists(Uuid::from_u128(1))),
            "the same cloud, user and project under another id"
        );
        let other = add_provider_cloud(&catalog, cloud(2, "other")).expect("another user");
        catalog.apply(&other);
        let removed = remove_provider_cloud(&catalog, Uuid::from_u128(1)).expect("removed");
        catalog.apply(&removed);
        assert!(catalog.provider_cloud(Uuid::from_u128(1)).is_none());
        assert_eq!(
            remove_provider_cloud(&catalog, Uuid::from_u128(1)),
            Err(Rejection::ProviderCloudNotFound(Uuid::from_u128(1)))
        );
        catalog.check_invariants().expect("invariants");
    }
}
