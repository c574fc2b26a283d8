//! The pure domain of berth.
//!
//! Everything here is a deterministic function of its inputs: the core never reads the clock,
//! never generates ids, never uses randomness and never does I/O. Time and ids arrive as
//! arguments. Decisions return the [`change::Change`]s to persist; the application layer writes
//! them through the store and then applies them to the in-memory [`catalog::Catalog`].
//!
//! The modules form layers, each using only those before it: [`limits`]; [`model`], the data
//! and their arithmetic; [`change`] and [`rejection`], what a decision yields; [`catalog`], the
//! state; [`query`], questions asked of it; [`decide`], the decisions. The re-exports below are
//! for other crates: the core's own modules import the real paths.
#![forbid(unsafe_code)]

pub mod catalog;
pub mod change;
pub mod decide;
pub mod limits;
pub mod model;
#[cfg(feature = "planted-defects")]
pub mod planted;
pub mod query;
pub mod rejection;
#[cfg(feature = "synthetic")]
pub mod synthetic;

pub use catalog::Catalog;
pub use change::{CHANGE_FORMAT, Change};
pub use model::consumer::Consumer;
pub use model::id::{LeaseId, ProviderId, ReservationId};
pub use model::inventory::Inventory;
pub use model::name::{ResourceClass, TraitName};
pub use model::provider::{
    AggregateRecord, AttrValue, HostRecord, Provider, ProviderCondition, ProviderStatus,
};
pub use model::time::{Instant, Span};
pub use rejection::{Rejection, Room};
