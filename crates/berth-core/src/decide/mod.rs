//! Decisions: each function checks a command against the current catalog and returns the
//! changes to persist, or a [`Rejection`](crate::rejection::Rejection). Nothing here mutates the
//! catalog.

pub mod admission;
pub mod allocation;
pub mod baremetal;
pub mod budget;
pub mod cloud;
pub mod fence;
pub mod health;
pub mod idempotency;
pub mod inventory;
pub mod lease;
pub mod lifecycle;
pub mod node_allocation;
pub mod notify;
pub mod pools;
pub mod promise;

/// A map of resource classes to amounts from the wire, named `field` (a share's `cap`, a
/// budget's `limits`), checked: at least one class, at most `classes_max`, each a class the
/// catalog knows, each amount in `amounts`. The error is the message naming the field.
pub(crate) fn class_amounts(
    catalog: &crate::catalog::Catalog,
    field: &str,
    map: &std::collections::BTreeMap<String, i64>,
    amounts: std::ops::RangeInclusive<u64>,
    classes_max: usize,
) -> Result<std::collections::BTreeMap<crate::model::name::ResourceClass, u64>, String> {
    if map.is_empty() {
        return Err(format!("{field}: name at least one resource class"));
    }
    if map.len() > classes_max {
        return Err(format!("{field}: at most {classes_max} resource classes"));
    }
    let mut parsed = std::collections::BTreeMap::new();
    for (name, amount) in map {
        let class = crate::model::name::ResourceClass::parse(name)
            .filter(|c| catalog.has_resource_class(c))
            .ok_or_else(|| {
                format!("{field}: {field}.{name} is not a resource class berth knows")
            })?;
        let amount = u64::try_from(*amount)
            .ok()
            .filter(|a| amounts.contains(a))
            .ok_or_else(|| {
                format!(
                    "{field}.{name}: {amount} is not a whole number between {} and {}",
                    amounts.start(),
                    amounts.end()
                )
            })?;
        parsed.insert(catalog.interned_class(&class), amount);
    }
    Ok(parsed)
}
