//! Resource class and trait names: the standard sets and the `CUSTOM_*` pattern.
//!
//! The standard resource classes are those of `os-resource-classes`; the standard traits are the
//! names of `os-traits`, kept in `standard_traits.txt`. Custom names must match
//! `CUSTOM_[A-Z0-9_]+`.

use crate::limits::NAME_LEN_MAX;
use std::sync::{Arc, OnceLock};

/// The standard resource classes, in their canonical order.
pub const STANDARD_RESOURCE_CLASSES: [&str; 21] = [
    "VCPU",
    "MEMORY_MB",
    "DISK_GB",
    "PCI_DEVICE",
    "SRIOV_NET_VF",
    "NUMA_SOCKET",
    "NUMA_CORE",
    "NUMA_THREAD",
    "NUMA_MEMORY_MB",
    "IPV4_ADDRESS",
    "VGPU",
    "VGPU_DISPLAY_HEAD",
    "NET_BW_EGR_KILOBIT_PER_SEC",
    "NET_BW_IGR_KILOBIT_PER_SEC",
    "PCPU",
    "MEM_ENCRYPTION_CONTEXT",
    "FPGA",
    "PGPU",
    "NET_PACKET_RATE_KILOPACKET_PER_SEC",
    "NET_PACKET_RATE_EGR_KILOPACKET_PER_SEC",
    "NET_PACKET_RATE_IGR_KILOPACKET_PER_SEC",
];

const STANDARD_TRAITS_TEXT: &str = include_str!("standard_traits.txt");

/// The standard traits, sorted.
pub fn standard_traits() -> &'static [&'static str] {
    static TRAITS: OnceLock<Vec<&'static str>> = OnceLock::new();
    TRAITS.get_or_init(|| {
        let mut names: Vec<&'static str> = STANDARD_TRAITS_TEXT
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty())
            .collect();
        names.sort_unstable();
        names
    })
}

/// Whether `name` is one of the standard traits.
pub fn is_standard_trait(name: &str) -> bool {
    standard_traits().binary_search(&name).is_ok()
}

/// Whether `name` is one of the standard resource classes.
pub fn is_standard_resource_class(name: &str) -> bool {
    STANDARD_RESOURCE_CLASSES.contains(&name)
}

/// Whether `name` matches `CUSTOM_[A-Z0-9_]+` within the length limit.
pub fn is_custom_name(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("CUSTOM_") else {
        return false;
    };
    !rest.is_empty()
        && name.len() <= NAME_LEN_MAX
        && rest
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
}

/// Whether `name` has the shape of any resource class or trait name (`[A-Z0-9_]+`).
pub fn is_name_shaped(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= NAME_LEN_MAX
        && name
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
}

/// A resource class name. Construction checks the shape only; whether the class exists is a
/// question for the [`crate::catalog::Catalog`]. Cloning is cheap (a shared string).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ResourceClass(Arc<str>);

impl ResourceClass {
    /// Checks the shape of `name`.
    pub fn parse(name: &str) -> Option<ResourceClass> {
        is_name_shaped(name).then(|| ResourceClass(Arc::from(name)))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether this is a standard class.
    pub fn is_standard(&self) -> bool {
        is_standard_resource_class(&self.0)
    }

    /// Whether both are the same interned name (a pointer comparison, no string read).
    pub fn is_same(&self, other: &ResourceClass) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// A trait name. Construction checks the shape only. Cloning is cheap (a shared string).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TraitName(Arc<str>);

impl TraitName {
    /// Checks the shape of `name`.
    pub fn parse(name: &str) -> Option<TraitName> {
        is_name_shaped(name).then(|| TraitName(Arc::from(name)))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether this is a standard trait.
    pub fn is_standard(&self) -> bool {
        is_standard_trait(&self.0)
    }
}

/// Names encode as their text and decode through their shape check, so a decoded name is as
/// valid as a parsed one (the replication log carries them).
macro_rules! name_serde {
    ($name:ident, $what:literal) => {
        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(&self.0)
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(
                deserializer: D,
            ) -> Result<$name, D::Error> {
                let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
                $name::parse(&text)
                    .ok_or_else(|| serde::de::Error::custom(concat!("not a ", $what, " name")))
            }
        }
    };
}

name_serde!(ResourceClass, "resource class");
name_serde!(TraitName, "trait");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_sets_are_loaded() {
        assert_eq!(standard_traits().len(), 377);
        assert!(is_standard_trait("HW_CPU_X86_AVX2"));
        assert!(is_standard_trait("MISC_SHARES_VIA_AGGREGATE"));
        assert!(!is_standard_trait("CUSTOM_GOLD"));
        assert!(is_standard_resource_class("VCPU"));
        assert!(!is_standard_resource_class("CUSTOM_BAREMETAL_GOLD"));
    }

    #[test]
    fn custom_names_follow_the_pattern() {
        assert!(is_custom_name("CUSTOM_GOLD_1"));
        assert!(!is_custom_name("CUSTOM_"));
        assert!(!is_custom_name("CUSTOM_gold"));
        assert!(!is_custom_name("GOLD"));
        assert!(!is_custom_name("CUSTOM_GO-LD"));
        assert!(!is_custom_name(&format!("CUSTOM_{}", "A".repeat(300))));
    }
}
