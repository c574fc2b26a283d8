//! End-to-end tests: the real server on port 0, spoken to over HTTP.

mod binary;
mod blazar_hosts;
mod placement_inventories;
mod placement_providers;
mod placement_traits;
mod postgres;
mod server;
mod support;
mod tidy;
