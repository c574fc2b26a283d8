//! Questions asked of the catalog, answered without changing it: the names it knows, provider
//! queries, the Blazar filter language and the host properties it names, what failures took
//! from a reservation, the rules of presenting a reservation, allocation candidates and the
//! requests that ask for them, what consumers hold, leases and the hosts they hold, bare-metal
//! nodes and claims, providers out of service, capacity over time, Promise's reads of
//! reservations and instances, and the subscriptions and deliveries a project sees.

pub mod baremetal;
pub mod candidate_request;
pub mod candidates;
pub mod capacity;
pub mod consumers;
pub mod filter;
pub mod health;
pub mod leases;
pub mod missing;
pub mod names;
pub mod notify;
pub mod presentation;
pub mod promise;
pub mod properties;
pub mod providers;
pub mod usage;
