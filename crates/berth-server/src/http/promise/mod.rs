//! The OPNFV Promise interface under `/promise`: the ETSI-style capacity and reservation
//! endpoints (`/promise/capacity/...`, `/promise/reservation/...`) and Promise's RPC endpoints
//! (`/promise/create-reservation`, `/promise/query-capacity`, ...), over the same ledger as the
//! Blazar surface. Flavors, the reservation policy and the provider clouds (`add-provider`)
//! live here too.
//!
//! Queries take their input as a JSON body on `GET` (as the specification's examples do) or
//! `POST`, or as query parameters (`?zoneId=az1&timePeriod.startTime=...`); numbers may be JSON
//! numbers or numeric strings.

mod admin;
mod capacity;
mod instances;
mod pools;
mod providers;
mod reservations;
mod rpc;
mod subscriptions;
mod wire;

use crate::http::routes::Routes;

/// Registers every Promise route.
pub fn register(routes: &mut Routes) {
    admin::register(routes);
    capacity::register(routes);
    reservations::register(routes);
    rpc::register(routes);
    instances::register(routes);
    pools::register(routes);
    providers::register(routes);
    subscriptions::register(routes);
}
