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
