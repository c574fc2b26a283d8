//! End-to-end tests: the real server on port 0, spoken to over HTTP.

// Each test reads as one scenario, step after step; splitting them would hide the story.
#![allow(clippy::too_many_lines)]

mod authz;
mod baremetal;
mod binary;
mod blazar_hosts;
mod blazar_leases;
mod budgets;
mod callback_destinations;
mod cli;
mod crash;
mod error_codes;
mod failures;
mod fence;
mod forwarding;
mod holds;
mod https_callbacks;
mod idempotency;
mod idle;
mod ironic;
mod keystone;
mod keystone_server;
mod limits;
mod notifications;
mod placement_allocations;
mod placement_candidates;
mod placement_http;
mod placement_inventories;
mod placement_providers;
mod placement_traits;
mod postgres;
mod promise;
mod provider_capacity;
mod provider_clouds;
mod provider_instances;
mod provider_sync;
mod recurring;
mod seed_examples;
mod server;
mod shares;
mod staying_up;
mod support;
mod tls;
mod ui;
mod usage;
mod week;
