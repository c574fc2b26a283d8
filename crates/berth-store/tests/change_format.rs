//! The replication log's encoding of changes (format 1) is pinned: one recorded entry per
//! `Change` variant, in `fixtures/changes_v1.txt`, must decode, be of its variant and encode back
//! to the same bytes. An entry written by an older build therefore still applies, and a change to
//! the encoding shows up here as a new format, not as a silent edit.
//!
//! The fixture was recorded from the changes the conformance suite commits;
//! `BERTH_WRITE_CHANGE_FIXTURE=1 cargo test -p berth-store --test change_format` records it
//! again (only for a new variant: the recorded bytes of the others must not change).

use berth_core::Change;
use berth_store::{CHANGE_LOG_PAGE, MemStore, Store, Tail};
use std::collections::BTreeMap;

/// Every variant's name, as [`variant`] gives it.
const VARIANTS: [&str; 31] = [
    "ProviderCreated",
    "ProviderUpdated",
    "ProviderDeleted",
    "InventoriesReplaced",
    "TraitsReplaced",
    "AggregatesReplaced",
    "AttributesReplaced",
    "HostSet",
    "AggregateDescribed",
    "ConsumerSet",
    "ResourceClassCreated",
    "ResourceClassDeleted",
    "TraitCreated",
    "TraitDeleted",
    "LeaseSet",
    "FloatingIpSet",
    "LeaseRecorded",
    "FlavorSet",
    "PolicySet",
    "BudgetSet",
    "ProviderCloudSet",
    "PoolSet",
    "SubscriptionSet",
    "DeliverySet",
    "OutboxCursor",
    "InstanceSet",
    "ProviderConditionSet",
    "NodeSet",
    "ClaimSet",
    "IdempotencySet",
    "PropertyPrivacy",
];

/// The variant's name (a new variant does not compile here until it is named).
fn variant(change: &Change) -> &'static str {
    match change {
        Change::ProviderCreated(_) => "ProviderCreated",
        Change::ProviderUpdated(_) => "ProviderUpdated",
        Change::ProviderDeleted(_) => "ProviderDeleted",
        Change::InventoriesReplaced { .. } => "InventoriesReplaced",
        Change::TraitsReplaced { .. } => "TraitsReplaced",
        Change::AggregatesReplaced { .. } => "AggregatesReplaced",
        Change::AttributesReplaced { .. } => "AttributesReplaced",
        Change::HostSet { .. } => "HostSet",
        Change::AggregateDescribed { .. } => "AggregateDescribed",
        Change::ConsumerSet { .. } => "ConsumerSet",
        Change::ResourceClassCreated(_) => "ResourceClassCreated",
        Change::ResourceClassDeleted(_) => "ResourceClassDeleted",
        Change::TraitCreated(_) => "TraitCreated",
        Change::TraitDeleted(_) => "TraitDeleted",
        Change::LeaseSet { .. } => "LeaseSet",
        Change::FloatingIpSet { .. } => "FloatingIpSet",
        Change::LeaseRecorded(_) => "LeaseRecorded",
        Change::FlavorSet { .. } => "FlavorSet",
        Change::PolicySet(_) => "PolicySet",
        Change::BudgetSet { .. } => "BudgetSet",
        Change::ProviderCloudSet { .. } => "ProviderCloudSet",
        Change::PoolSet { .. } => "PoolSet",
        Change::SubscriptionSet { .. } => "SubscriptionSet",
        Change::DeliverySet { .. } => "DeliverySet",
        Change::OutboxCursor(_) => "OutboxCursor",
        Change::InstanceSet { .. } => "InstanceSet",
        Change::ProviderConditionSet { .. } => "ProviderConditionSet",
        Change::NodeSet { .. } => "NodeSet",
        Change::ClaimSet { .. } => "ClaimSet",
        Change::IdempotencySet { .. } => "IdempotencySet",
        Change::PropertyPrivacy { .. } => "PropertyPrivacy",
    }
}

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/changes_v1.txt");

/// Every change the conformance suite commits, with its `None`/`Some` shape, first seen first.
async fn recorded() -> BTreeMap<&'static str, Vec<String>> {
    let stores = std::sync::Mutex::new(Vec::new());
    berth_store::testkit::run_all(|| {
        let store = MemStore::new();
        stores.lock().expect("lock").push(store.clone());
        async move { store }
    })
    .await;
    let mut seen: BTreeMap<&'static str, Vec<String>> = BTreeMap::new();
    for store in stores.into_inner().expect("lock") {
        let Tail::Entries(entries) = store.changes_after(0, CHANGE_LOG_PAGE).await.expect("log")
        else {
            panic!("a fresh store's log holds every commit");
        };
        for change in entries.iter().flat_map(|entry| &entry.changes) {
            let text = serde_json::to_string(change).expect("encodes");
            let kept = seen.entry(variant(change)).or_default();
            // One with a value and one without, where the variant has both.
            let shape = text.contains(":null");
            if kept.len() < 2 && kept.iter().all(|k| k.contains(":null") != shape) {
                kept.push(text);
            }
        }
    }
    seen
}

#[tokio::test]
async fn every_variants_recorded_encoding_decodes_and_encodes_to_the_same_bytes() {
    if std::env::var_os("BERTH_WRITE_CHANGE_FIXTURE").is_some() {
        let lines: Vec<String> = recorded().await.into_values().flatten().collect();
        std::fs::write(FIXTURE, lines.join("\n") + "\n").expect("write the fixture");
    }
    let fixture = std::fs::read_to_string(FIXTURE).expect("read the fixture");
    let mut covered = Vec::new();
    for line in fixture.lines() {
        let change: Change = serde_json::from_str(line)
            .unwrap_or_else(|error| panic!("a recorded change decodes: {error}: {line}"));
        assert_eq!(
            serde_json::to_string(&change).expect("encodes"),
            line,
            "encodes back to the recorded bytes"
        );
        covered.push(variant(&change));
    }
    let missing: Vec<&str> = VARIANTS
        .iter()
        .copied()
        .filter(|name| !covered.contains(name))
        .collect();
    assert!(
        missing.is_empty(),
        "variants without a recorded encoding: {missing:?}"
    );
}
