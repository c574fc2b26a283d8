//! berth's use cases: one service type, [`Berth`], with one `async fn` per use case.
//!
//! Every write follows one path, written once in [`Berth::write`]: take the writer lock, begin a
//! store transaction (which excludes writers in every replica), make sure the in-memory catalog
//! is current, ask the core to decide, persist the changes, commit, and apply the same changes to
//! the catalog. Every read is a use case too: a `Berth` method asks a core query
//! (`berth_core::query`) over the in-memory catalog after a cheap freshness check, and hands an
//! answer that borrows the catalog to the caller's `render` closure while it is borrowed.
//! This crate holds no HTTP types and no SQL, and reads time and ids only through [`Clock`] and
//! [`IdGen`].
#![forbid(unsafe_code)]

mod baremetal;
mod budgets;
mod clouds;
mod deadline;
mod demo;
mod error;
mod health;
mod idempotency;
mod inventory;
mod leases;
mod node_allocation;
mod notify;
mod parked;
mod placement;
mod promise;
mod replica;
mod search;
mod series;
mod service;
mod shares;
#[cfg(feature = "synthetic")]
pub mod synthetic;
mod usage;

pub use baremetal::{ClaimNode, EnrollNode};
pub use clouds::AddProviderCloud;
pub use deadline::Deadline;
pub use error::AppError;
pub use health::{Reallocation, Requester};
pub use inventory::{CreateProvider, EnrollHost};
pub use leases::{
    AskHold, Availability, CreateLease, EVENT_ATTEMPTS_MAX, EVENT_RETRY_FIRST, HoldOutcome,
    LIFECYCLE_POLL, RegisterFloatingIp, SEARCH_HORIZON_DEFAULT, ZoneCapacity,
};
pub use node_allocation::{AllocateNode, Allocated, FailedAllocation};
pub use notify::{DELIVERIES_IN_FLIGHT, FeedPage, NOTIFY_POLL, Notifier, Subscribe};
pub use promise::{
    Asked, ByOrigin, Capacity, CapacityQuery, CreateFlavor, CreateInstance, CreateReservation,
    Measured, PriorityGrant,
};
pub use replica::{FED_CHECK, FOLLOW_GATHER, FOLLOW_RETRY, ReplicaStatus, STANDBY_GRACE};
pub use search::searches_in_flight;
pub use series::CreateSeries;
pub use service::{
    BATCH_LEN_MAX, Berth, CLAIM_TTL_DEFAULT, Clock, IdGen, PUBLISHED_BACKLOG, Published,
    RECENT_COMMITS,
};
pub use usage::{LeaseUtilization, UsageReport};
