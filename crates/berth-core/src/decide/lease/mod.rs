//! Decisions about leases and floating IPs: create, update, delete, fire a lifecycle event,
//! hold and waitlist (`parked`), recurring leases (`series`), share with other projects (`share`),
//! record a failed action, register and remove addresses. Each returns the whole new state of
//! what it touches plus a [`LeaseRecord`](crate::model::lease::LeaseRecord) for the durable
//! lifecycle record.

mod checks;
mod create;
mod events;
mod parked;
mod resources;
mod series;
mod share;
mod update;

#[cfg(test)]
mod tests;

pub use checks::{
    BEFORE_END_DEFAULT, admission_weight, check_horizon, check_limits, check_spec, filter_of,
    wanted,
};
pub use create::{NewLease, create_lease, create_lease_with, delete_lease};
pub use events::{fail_event, fire_lease_event, stamp_idle_release};
pub use parked::{admit_waiting, create_hold, create_lease_from_hold, create_or_wait, lapse};
pub use resources::{delete_floating_ip, register_floating_ip, set_property_privacy};
pub use series::{
    NewSeries, Shift, create_series, delete_series, rename_series, series_windows, shift_series,
};
pub use share::{revoke_share, share_lease};
pub use update::{LeaseUpdate, ReservationUpdate, update_lease};
