//! The domain's data: names, quantities, providers, consumers, the capacity ledger, leases and
//! the records of every surface, with their own arithmetic. Nothing here reads the catalog or
//! makes a decision.

pub mod baremetal;
pub mod budget;
pub mod capacity;
pub mod cloud;
pub mod consumer;
pub mod fence;
pub mod id;
pub mod idempotency;
pub mod inventory;
pub mod lease;
pub mod ledger;
pub mod name;
pub mod notify;
pub mod promise;
pub mod provider;
pub mod recurrence;
pub mod time;
pub mod usage;
