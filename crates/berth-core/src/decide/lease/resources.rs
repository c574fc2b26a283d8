//! What leases reserve besides hosts: floating IPs registered for reservation, and the privacy
//! of the host properties filters name.

use crate::catalog::Catalog;
use crate::change::Change;
use crate::model::lease::FloatingIp;
use crate::model::ledger::address_slot;
use crate::query::properties::is_known_property;
use crate::rejection::Rejection;
use uuid::Uuid;

/// Registers a floating IP for reservation.
pub fn register_floating_ip(catalog: &Catalog, fip: FloatingIp) -> Result<Vec<Change>, Rejection> {
    let taken = catalog
        .floating_ips()
        .any(|f| f.network_id == fip.network_id && f.address == fip.address);
    if taken {
        return Err(Rejection::FloatingIpExists(fip.address));
    }
    Ok(vec![Change::FloatingIpSet {
        id: fip.id,
        fip: Some(fip),
    }])
}

/// Removes a floating IP no lease holds.
pub fn delete_floating_ip(catalog: &Catalog, id: Uuid) -> Result<Vec<Change>, Rejection> {
    if catalog.floating_ip(id).is_none() {
        return Err(Rejection::FloatingIpNotFound(id));
    }
    if catalog.ledger().holds_any(address_slot(id)) {
        return Err(Rejection::FloatingIpInUse(id));
    }
    Ok(vec![Change::FloatingIpSet { id, fip: None }])
}

/// Marks a host property private (hidden from property listings unless asked for) or public.
pub fn set_property_privacy(
    catalog: &Catalog,
    name: &str,
    private: bool,
) -> Result<Vec<Change>, Rejection> {
    if !is_known_property(catalog, name) {
        return Err(Rejection::PropertyNotFound(name.to_owned()));
    }
    Ok(vec![Change::PropertyPrivacy {
        name: name.to_owned(),
        private,
    }])
}
