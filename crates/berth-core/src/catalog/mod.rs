//! The inventory catalog: every provider with its inventories, usages, traits, aggregates and
//! attributes, the custom resource classes and traits, the consumers, the leases with the ledger
//! of what they hold, and the records of every surface, held in memory and indexed.
//!
//! The catalog is rebuilt from storage at start-up and changed only by [`Catalog::apply`], with
//! the same [`Change`](crate::change::Change)s the store has just committed. It owns no I/O.
//! [`Catalog`] is one type; its `impl` blocks are spread over one module per sub-domain, all
//! over the state in `state`.

mod apply;
mod baremetal;
mod clouds;
pub use clouds::{provider_cloud_of, remote_generation, remote_of};
mod consumers;
mod invariants;
#[cfg(test)]
pub(crate) use invariants::ParkedIndex;
mod leases;
mod names;
mod notify;
mod pools;
mod promise;
mod providers;
mod rows;
mod state;

pub use rows::CatalogRows;
pub use state::Catalog;
