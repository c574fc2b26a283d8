//! What every lease decision checks first: names, windows, the named limits, each
//! reservation's fields and filters, and the reservations to hand to admission.

use crate::catalog::Catalog;
use crate::decide::admission::Wanted;
use crate::limits::{self, LEASE_NAME_LEN_MAX, REQUEST_QUANTITY_MAX};
use crate::model::lease::{Reservation, ReservationSpec};
use crate::model::ledger::Window;
use crate::model::time::{Instant, Span};
use crate::query::filter::Filter;
use crate::query::properties::is_known_property;
use crate::rejection::Rejection;

/// `before_end_lease` fires this long before the end unless the lease says when (Blazar's
/// `minutes_before_end_lease` default, 60 minutes).
pub const BEFORE_END_DEFAULT: Span = Span::from_minutes(60);

pub(super) fn bad(text: impl Into<String>) -> Rejection {
    Rejection::BadLease(text.into())
}

pub(super) fn check_name(name: &str) -> Result<(), Rejection> {
    match name.trim().chars().count() {
        1..=LEASE_NAME_LEN_MAX => Ok(()),
        _ => Err(bad(format!(
            "name must be between 1 and {LEASE_NAME_LEN_MAX} characters"
        ))),
    }
}

fn check_amount(field: &str, value: u64, min: u64) -> Result<(), Rejection> {
    match (min..=u64::from(REQUEST_QUANTITY_MAX)).contains(&value) {
        true => Ok(()),
        false => Err(bad(format!(
            "{field} must be an integer from {min} to {REQUEST_QUANTITY_MAX}, not {value}"
        ))),
    }
}

/// Checks a reservation's own fields and returns its parsed filter.
pub fn check_spec(catalog: &Catalog, spec: &ReservationSpec) -> Result<Filter, Rejection> {
    match spec {
        ReservationSpec::Host { min, max, .. } => {
            check_amount("min", u64::from(*min), 1)?;
            check_amount("max", u64::from(*max), 1)?;
            if min > max {
                return Err(bad(format!(
                    "Invalid values for min/max of hosts: min ({min}) must not be greater than max ({max})"
                )));
            }
        }
        ReservationSpec::Instance {
            vcpus,
            memory_mb,
            disk_gb,
            amount,
            ..
        } => {
            check_amount("amount", u64::from(*amount), 1)?;
            check_amount("vcpus", *vcpus, 0)?;
            check_amount("memory_mb", *memory_mb, 0)?;
            check_amount("disk_gb", *disk_gb, 0)?;
            if *vcpus == 0 && *memory_mb == 0 && *disk_gb == 0 {
                return Err(bad("an instance must have vcpus, memory_mb or disk_gb"));
            }
        }
        ReservationSpec::FloatingIp {
            network_id,
            amount,
            required_floatingips,
        } => {
            check_amount("amount", u64::from(*amount), 1)?;
            if required_floatingips.len() > *amount as usize {
                return Err(bad("required_floatingips lists more addresses than amount"));
            }
            for (idx, address) in required_floatingips.iter().enumerate() {
                if required_floatingips[..idx].contains(address) {
                    return Err(bad(format!(
                        "Floating IP {address} is listed twice in required_floatingips"
                    )));
                }
                let known = catalog
                    .floating_ips()
                    .any(|f| *f.network_id == **network_id && f.address == *address);
                if !known {
                    return Err(bad(format!(
                        "Floating IP {address} is not in the pool of network {network_id}"
                    )));
                }
            }
        }
    }
    filter_of(catalog, spec)
}

fn parse_filter(catalog: &Catalog, field: &str, text: &str) -> Result<Filter, Rejection> {
    let filter = Filter::parse(text).map_err(|e| bad(format!("Invalid {field}: {e}")))?;
    filter
        .check_known(|name| is_known_property(catalog, name))
        .map_err(|e| bad(format!("Invalid {field}: {e}")))?;
    Ok(filter)
}

/// The filter of a reservation: its host and resource filters together.
pub fn filter_of(catalog: &Catalog, spec: &ReservationSpec) -> Result<Filter, Rejection> {
    match spec {
        ReservationSpec::Host {
            hypervisor_properties,
            resource_properties,
            ..
        } => Ok(
            parse_filter(catalog, "hypervisor_properties", hypervisor_properties)?.and(
                parse_filter(catalog, "resource_properties", resource_properties)?,
            ),
        ),
        ReservationSpec::Instance {
            resource_properties,
            ..
        } => parse_filter(catalog, "resource_properties", resource_properties),
        ReservationSpec::FloatingIp { .. } => Ok(Filter::All),
    }
}

pub(super) fn check_window(start: Instant, end: Instant) -> Result<Window, Rejection> {
    Window::new(start, end).ok_or_else(|| bad("End date must be later than start date."))
}

/// When `before_end_lease` fires: the given time, which must lie strictly inside the window,
/// or the default offset before the end, clamped to the start.
pub(super) fn before_end_at(window: Window, given: Option<Instant>) -> Result<Instant, Rejection> {
    match given {
        Some(at) if at > window.start() && at < window.end() => Ok(at),
        Some(_) => Err(bad(
            "before_end_date must lie strictly inside the lease window",
        )),
        None => Ok((window.end() - BEFORE_END_DEFAULT).max(window.start())),
    }
}

fn over(limit: &'static str, max: u64, got: u64) -> Result<(), Rejection> {
    match got <= max {
        true => Ok(()),
        false => Err(Rejection::LimitExceeded { limit, max, got }),
    }
}

/// Checks reservations against the named limits (reservations per lease, instances and hosts
/// per reservation) before any work is done on them.
pub fn check_limits<'a>(
    specs: impl ExactSizeIterator<Item = &'a ReservationSpec>,
) -> Result<(), Rejection> {
    over(
        "reservations_per_lease",
        limits::RESERVATIONS_PER_LEASE_MAX as u64,
        specs.len() as u64,
    )?;
    for spec in specs {
        match spec {
            ReservationSpec::Host { max, .. } => over(
                "hosts_per_reservation",
                u64::from(limits::HOSTS_PER_RESERVATION_MAX),
                u64::from(*max),
            )?,
            ReservationSpec::Instance { amount, .. } => over(
                "instances_per_reservation",
                u64::from(limits::INSTANCES_PER_RESERVATION_MAX),
                u64::from(*amount),
            )?,
            ReservationSpec::FloatingIp { .. } => {}
        }
    }
    Ok(())
}

/// How much admitting `specs` as asked weighs: the hosts, instance slots and addresses they
/// ask for (compared with [`limits::ADMISSION_IN_PLACE_MAX`]).
pub fn admission_weight<'a>(specs: impl Iterator<Item = &'a ReservationSpec>) -> u64 {
    specs
        .map(|spec| match spec {
            ReservationSpec::Host { max, .. } => u64::from(*max),
            ReservationSpec::Instance { amount, .. }
            | ReservationSpec::FloatingIp { amount, .. } => u64::from(*amount),
        })
        .sum()
}

/// Checks a counter-offer search horizon (how long after the start it searches) against
/// [`limits::SEARCH_HORIZON_DAYS_MAX`].
pub fn check_horizon(horizon: Span) -> Result<(), Rejection> {
    const DAY: i64 = 86_400_000_000;
    let micros = u64::try_from(horizon.as_micros()).unwrap_or(0);
    let days = micros.div_ceil(DAY as u64);
    over("search_horizon_days", limits::SEARCH_HORIZON_DAYS_MAX, days)
}

/// The reservations to admit, each checked (see [`check_spec`]), with what it holds now when
/// it is being re-admitted.
pub fn wanted<'a>(
    catalog: &Catalog,
    specs: impl Iterator<Item = (&'a ReservationSpec, Option<&'a Reservation>)>,
) -> Result<Vec<Wanted<'a>>, Rejection> {
    specs
        .map(|(spec, current)| {
            Ok(Wanted {
                spec,
                filter: check_spec(catalog, spec)?,
                current: current.map(|r| r.hosts.to_vec()).unwrap_or_default(),
                current_fips: current.map(|r| r.floating_ips.to_vec()).unwrap_or_default(),
                avoid: Vec::new(),
            })
        })
        .collect()
}
