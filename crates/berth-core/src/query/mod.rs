//! Questions asked of the catalog, answered without changing it: provider queries, the Blazar
//! filter language and the host properties it names, what failures took from a reservation,
//! the rules of presenting a reservation, allocation candidates, capacity over time, Promise's
//! reads of reservations and instances, and subscriptions and deliveries a project sees.

pub mod candidates;
pub mod capacity;
pub mod filter;
pub mod missing;
pub mod notify;
pub mod presentation;
pub mod promise;
pub mod properties;
pub mod providers;
