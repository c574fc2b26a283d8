//! The host properties Blazar filters name: the host fields every filter may use
//! ([`HOST_PROPERTIES`]), a host's value for one, whether any host could answer one, and the
//! values hosts give each.

use crate::catalog::Catalog;
use crate::model::name::ResourceClass;
use crate::model::provider::{AttrValue, Provider};
use std::collections::BTreeMap;

/// Host fields every filter may name, besides extra capabilities.
pub const HOST_PROPERTIES: [&str; 10] = [
    "availability_zone",
    "hypervisor_hostname",
    "hypervisor_type",
    "service_name",
    "vcpus",
    "memory_mb",
    "local_gb",
    "reservable",
    "id",
    "resource_class",
];

/// The value of a host property, for filters.
pub fn host_property(provider: &Provider, name: &str) -> Option<AttrValue> {
    let total = |class: &str| {
        ResourceClass::parse(class)
            .and_then(|c| provider.inventories().get(&c).map(|i| i.total() as f64))
            .map(AttrValue::Number)
    };
    let host = provider.host();
    match name {
        "availability_zone" => provider
            .availability_zone()
            .map(|az| AttrValue::String(az.to_owned())),
        "hypervisor_hostname" => Some(AttrValue::String(provider.name().to_owned())),
        "hypervisor_type" => host
            .and_then(|h| h.hypervisor_type.clone())
            .map(AttrValue::String),
        "service_name" => host
            .and_then(|h| h.service_name.clone())
            .map(AttrValue::String),
        // A bare-metal node has no compute inventory: its properties say what it has.
        "vcpus" => total("VCPU").or_else(|| provider.attributes().get("cpus").cloned()),
        "memory_mb" => total("MEMORY_MB").or_else(|| provider.attributes().get(name).cloned()),
        "local_gb" => total("DISK_GB").or_else(|| provider.attributes().get(name).cloned()),
        "resource_class" => provider
            .node()
            .map(|n| AttrValue::String(n.resource_class.clone())),
        "reservable" => host.map(|h| AttrValue::Bool(h.reservable)),
        "id" => Some(AttrValue::Number(provider.id() as f64)),
        other => provider.attributes().get(other).cloned(),
    }
}

/// Whether some host could answer a filter on `name`.
pub fn is_known_property(catalog: &Catalog, name: &str) -> bool {
    HOST_PROPERTIES.contains(&name)
        || catalog
            .providers()
            .any(|p| p.host().is_some() && p.attributes().contains_key(name))
}

/// Which properties a listing shows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Shown {
    /// Those not marked private.
    #[default]
    Public,
    /// Every one.
    All,
}

/// One property and the values hosts give it.
#[derive(Debug, Clone, PartialEq)]
pub struct PropertyValues {
    /// The property.
    pub name: String,
    /// Whether it is marked private.
    pub private: bool,
    /// What each host gives it, host by host (with repeats).
    pub values: Vec<AttrValue>,
}

/// Every property a filter may name (the host fields and every host's extra capabilities),
/// sorted by name, with the values hosts give it; private ones only when `shown` is
/// [`Shown::All`].
pub fn property_values(catalog: &Catalog, shown: Shown) -> Vec<PropertyValues> {
    let mut values: BTreeMap<String, Vec<AttrValue>> = HOST_PROPERTIES
        .iter()
        .map(|name| ((*name).to_owned(), Vec::new()))
        .collect();
    for provider in catalog.providers().filter(|p| p.host().is_some()) {
        for name in HOST_PROPERTIES {
            if let Some(value) = host_property(provider, name) {
                values.entry(name.to_owned()).or_default().push(value);
            }
        }
        for (key, value) in provider.attributes() {
            values.entry(key.clone()).or_default().push(value.clone());
        }
    }
    values
        .into_iter()
        .map(|(name, values)| PropertyValues {
            private: catalog.is_private_property(&name),
            name,
            values,
        })
        .filter(|property| shown == Shown::All || !property.private)
        .collect()
}
