//! Encodings shared by the SQL adapters for values that have no native column type in both
//! dialects. No SQL here: only the mapping between domain values and column values.

use crate::port::{Committed, StoreError, Tail};
use berth_core::model::lease::Lease;
use berth_core::{AttrValue, CHANGE_FORMAT, Change, Instant, ResourceClass, TraitName};

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

/// An object kept whole (a flavor, a subscription, a node record...) as its JSON document.
pub fn encode_object<T: serde::Serialize>(object: &T) -> String {
    serde_json::to_string(object).expect("invariant: stored objects always encode as JSON")
}

/// An object from its stored JSON document.
pub fn decode_object<T: serde::de::DeserializeOwned>(document: &str) -> Result<T, StoreError> {
    serde_json::from_str(document).map_err(|_| corrupt("document"))
}

/// One commit's changes as a replication log entry's `changes` column: a JSON array of
/// [`Change`]s in format [`CHANGE_FORMAT`].
pub fn encode_changes(changes: &[Change]) -> String {
    serde_json::to_string(changes).expect("invariant: changes always encode as JSON")
}

/// Reads the replication log's rows `(seq, format, changes)` fetched after `after`, oldest first,
/// into the tail that brings a catalog at `after` forward: the entries up to the first that
/// breaks the run, or [`Tail::Unavailable`] when the very next entry is missing or unreadable.
pub fn decode_tail(after: u64, rows: impl IntoIterator<Item = (u64, i64, String)>) -> Tail {
    let mut entries = Vec::new();
    let mut broken = false;
    for (expected, (seq, format, text)) in (after + 1..).zip(rows) {
        let readable = format == i64::from(CHANGE_FORMAT) && seq == expected;
        let changes = readable
            .then(|| serde_json::from_str::<Vec<Change>>(&text))
            .and_then(Result::ok);
        let Some(changes) = changes else {
            broken = true;
            break;
        };
        entries.push(Committed { seq, changes });
    }
    match broken && entries.is_empty() {
        true => Tail::Unavailable,
        false => Tail::Entries(entries),
    }
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
