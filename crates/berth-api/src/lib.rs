//! Wire types of berth's HTTP surfaces, shared by the server and its clients, and the surfaces'
//! time formats (`time`).
//!
//! Request types deny unknown fields. Field names follow each compatible API exactly (Placement
//! and Blazar use snake_case). Nothing here knows about the domain: the server converts by hand at
//! the boundary.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod baremetal;
pub mod blazar;
pub mod common;
pub mod dashboard;
pub mod errors;
pub mod placement;
pub mod promise;
pub mod service;
pub mod status;
pub mod time;
