//! Encodings shared by the SQL adapters for values that have no native column type in both
//! dialects. No SQL here: only the mapping between domain values and column values.

use crate::StoreError;
use berth_core::model::lease::Lease;
use berth_core::{AttrValue, Instant, ResourceClass, TraitName};

/// The `(kind, value)` columns of a typed attribute.
pub fn encode_attribute(value: &AttrValue) -> (&'static str, String) {
    match value {
        AttrValue::String(text) => ("string", text.clone()),
        // Rust's float formatting round-trips exactly.
        AttrValue::Number(number) => ("number", number.to_string()),
        AttrValue::Bool(flag) => ("bool", flag.to_string()),
    }
}

/// A typed attribute from its `(kind, value)` columns.
pub fn decode_attribute(kind: &str, value: String) -> Result<AttrValue, StoreError> {
    match kind {
        "string" => Ok(AttrValue::String(value)),
        "number" => value
            .parse()
            .map(AttrValue::Number)
            .map_err(|_| corrupt("attribute number")),
        "bool" => value
            .parse()
            .map(AttrValue::Bool)
            .map_err(|_| corrupt("attribute bool")),
        _ => Err(corrupt("attribute kind")),
    }
}

/// A stored resource class name.
pub fn decode_class(name: &str) -> Result<ResourceClass, StoreError> {
    ResourceClass::parse(name).ok_or_else(|| corrupt("resource class name"))
}

/// A stored trait name.
pub fn decode_trait(name: &str) -> Result<TraitName, StoreError> {
    TraitName::parse(name).ok_or_else(|| corrupt("trait name"))
}

/// A stored non-negative integer.
pub fn decode_u64(value: i64) -> Result<u64, StoreError> {
    u64::try_from(value).map_err(|_| corrupt("negative amount"))
}

/// A non-negative integer as a column value.
pub fn encode_u64(value: u64) -> i64 {
    i64::try_from(value).expect("invariant: stored amounts fit in i64")
}

/// An instant as a column value.
pub fn encode_instant(at: Instant) -> i64 {
    at.as_micros()
}

/// Reports a row that the schema should have made impossible.
pub fn corrupt(what: &'static str) -> StoreError {
    StoreError::Backend(format!("stored data is corrupt: {what}").into())
}

/// A lease as the JSON document column holds it.
pub fn encode_lease(lease: &Lease) -> String {
    serde_json::to_string(lease).expect("invariant: a lease always encodes as JSON")
}

/// A lease from its stored JSON document.
pub fn decode_lease(document: &str) -> Result<Lease, StoreError> {
    serde_json::from_str(document).map_err(|_| corrupt("lease document"))
}

/// A caller's bound (a sequence number, a row limit) as a column value; bounds beyond what a
/// column holds saturate, which selects the same rows.
pub fn encode_bound(value: impl TryInto<i64>) -> i64 {
    value.try_into().unwrap_or(i64::MAX)
}

/// A Promise object (flavor, policy, instance) as its JSON document.
pub fn encode_object<T: serde::Serialize>(object: &T) -> String {
    serde_json::to_string(object).expect("invariant: Promise objects always encode as JSON")
}

/// A Promise object from its stored JSON document.
pub fn decode_object<T: serde::de::DeserializeOwned>(document: &str) -> Result<T, StoreError> {
    serde_json::from_str(document).map_err(|_| corrupt("Promise object document"))
}

/// A provider's condition as stored: the provider's uuid beside the condition.
#[derive(serde::Serialize, serde::Deserialize)]
struct ConditionDocument {
    provider: uuid::Uuid,
    #[serde(flatten)]
    condition: berth_core::ProviderCondition,
}

/// A node record as stored: the provider's uuid beside the record.
#[derive(serde::Serialize, serde::Deserialize)]
struct NodeDocument {
    provider: uuid::Uuid,
    #[serde(flatten)]
    node: berth_core::model::baremetal::NodeRecord,
}

/// The `(kind, id, document)` row a document change (Promise objects, subscriptions,
/// deliveries, the outbox cursor, provider conditions, node records and node claims) writes (`None` document: delete), or
/// `None` for other changes.
pub fn promise_row(change: &berth_core::Change) -> Option<(&'static str, String, Option<String>)> {
    use berth_core::Change;
    match change {
        Change::FlavorSet { id, flavor } => {
            Some(("flavor", id.clone(), flavor.as_ref().map(encode_object)))
        }
        Change::PolicySet(policy) => Some((
            "policy",
            "reservation".to_owned(),
            Some(encode_object(policy)),
        )),
        Change::PoolSet { id, pool } => {
            Some(("pool", id.to_string(), pool.as_ref().map(encode_object)))
        }
        Change::InstanceSet { id, instance } => Some((
            "instance",
            id.to_string(),
            instance.as_ref().map(encode_object),
        )),
        Change::SubscriptionSet { id, subscription } => Some((
            "subscription",
            id.to_string(),
            subscription.as_ref().map(encode_object),
        )),
        Change::DeliverySet { id, delivery } => {
            Some(("delivery", id.clone(), delivery.as_ref().map(encode_object)))
        }
        Change::OutboxCursor(seq) => Some(("cursor", "outbox".to_owned(), Some(seq.to_string()))),
        Change::NodeSet { uuid, node } => Some((
            "node",
            uuid.to_string(),
            node.as_ref().map(|node| {
                encode_object(&NodeDocument {
                    provider: *uuid,
                    node: node.clone(),
                })
            }),
        )),
        Change::ClaimSet { uuid, claim } => {
            Some(("claim", uuid.to_string(), claim.as_ref().map(encode_object)))
        }
        Change::ProviderConditionSet { uuid, condition } => Some((
            "condition",
            uuid.to_string(),
            condition.as_ref().map(|condition| {
                encode_object(&ConditionDocument {
                    provider: *uuid,
                    condition: condition.clone(),
                })
            }),
        )),
        _ => None,
    }
}

/// Puts a stored Promise object into `rows`.
pub fn load_promise_row(
    rows: &mut berth_core::catalog::CatalogRows,
    kind: &str,
    document: &str,
) -> Result<(), StoreError> {
    match kind {
        "flavor" => rows.flavors.push(decode_object(document)?),
        "policy" => rows.policy = Some(decode_object(document)?),
        "instance" => rows.instances.push(decode_object(document)?),
        "pool" => rows.pools.push(decode_object(document)?),
        "subscription" => rows.subscriptions.push(decode_object(document)?),
        "delivery" => rows.deliveries.push(decode_object(document)?),
        "cursor" => rows.outbox_cursor = decode_object(document)?,
        "node" => {
            let stored: NodeDocument = decode_object(document)?;
            rows.nodes.push((stored.provider, stored.node));
        }
        "claim" => rows.claims.push(decode_object(document)?),
        "condition" => {
            let stored: ConditionDocument = decode_object(document)?;
            rows.conditions.push((stored.provider, stored.condition));
        }
        _ => return Err(corrupt("Promise object kind")),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_that_does_not_decode_is_corrupt() {
        for document in ["", "{}", "not json", r#"{"id": 7}"#] {
            let error = decode_lease(document).expect_err("refused");
            assert!(
                matches!(&error, StoreError::Backend(inner) if inner.to_string().contains("corrupt")),
                "{document:?}: {error:?}"
            );
        }
    }

    #[test]
    fn bounds_saturate() {
        assert_eq!(encode_bound(5_u64), 5);
        assert_eq!(encode_bound(u64::MAX), i64::MAX);
        assert_eq!(encode_bound(usize::MAX), i64::MAX);
    }
}
