//! The pure domain of berth.
//!
//! Everything here is a deterministic function of its inputs: the core never reads the clock,
//! never generates ids, never uses randomness and never does I/O. Time and ids arrive as
//! arguments. Decisions return the [`change::Change`]s to persist; the application layer writes
//! them through the store and then applies them to the in-memory [`catalog::Catalog`].
#![forbid(unsafe_code)]

pub mod allocation;
pub mod baremetal;
pub mod candidates;
pub mod capacity;
pub mod catalog;
pub mod change;
pub mod consumer;
pub mod decide;
pub mod fence;
pub mod filter;
pub mod idempotency;
pub mod inventory;
pub mod lease;
pub mod ledger;
pub mod limits;
pub mod name;
pub mod notify;
pub mod promise;
pub mod provider;
pub mod query;
pub mod rejection;
pub mod reserve;
pub mod time;

pub use catalog::Catalog;
pub use change::Change;
pub use consumer::Consumer;
pub use inventory::Inventory;
pub use name::{ResourceClass, TraitName};
pub use provider::{
    AggregateRecord, AttrValue, HostRecord, Provider, ProviderCondition, ProviderStatus,
};
pub use rejection::Rejection;
pub use time::Instant;
