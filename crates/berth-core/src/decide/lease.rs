//! Decisions about leases and floating IPs: create, update, delete, fire a lifecycle event,
//! record a failed action, register and remove addresses. Each returns the whole new state of
//! what it touches plus a [`LeaseRecord`] for the durable lifecycle record.

use crate::catalog::Catalog;
use crate::change::Change;
use crate::change::record;
use crate::limits::{self, LEASE_NAME_LEN_MAX, REQUEST_QUANTITY_MAX};
use crate::model::lease::{
    Affinity, EventKind, EventStatus, FloatingIp, Lease, LeaseEvent, LeaseStatus, Reservation,
    ReservationSpec, ReservationStatus,
};
use crate::model::ledger::Window;
use crate::model::time::Instant;
use crate::query::filter::Filter;
use crate::query::properties::is_known_property;
use crate::rejection::Rejection;
use crate::reserve::{self, Search, Wanted};
use uuid::Uuid;

/// `before_end_lease` fires this long before the end unless the lease says when (Blazar's
/// `minutes_before_end_lease` default, 60 minutes).
pub const BEFORE_END_DEFAULT_MICROS: i64 = 60 * 60 * 1_000_000;

/// A new lease, with the ids the application generated for it.
#[derive(Debug, Clone)]
pub struct NewLease {
    /// Its id.
    pub id: Uuid,
    /// Its name.
    pub name: String,
    /// Owning project.
    pub project_id: String,
    /// Owning user.
    pub user_id: String,
    /// Window start.
    pub start: Instant,
    /// Window end.
    pub end: Instant,
    /// When `before_end_lease` fires, if not the default.
    pub before_end: Option<Instant>,
    /// Reservations with their ids.
    pub reservations: Vec<(Uuid, ReservationSpec)>,
    /// Ids of the start, before-end and end events.
    pub event_ids: [Uuid; 3],
    /// How long before the start preemptible consumers in the way are told.
    pub notice_lead_micros: i64,
}

/// Changes to a lease (`None` keeps the current value).
#[derive(Debug, Clone, Default)]
pub struct LeaseUpdate {
    /// New name.
    pub name: Option<String>,
    /// New start.
    pub start: Option<Instant>,
    /// New end.
    pub end: Option<Instant>,
    /// New before-end time.
    pub before_end: Option<Instant>,
    /// Per-reservation changes.
    pub reservations: Vec<ReservationUpdate>,
}

/// Changes to one reservation of a lease.
#[derive(Debug, Clone, Default)]
pub struct ReservationUpdate {
    /// The reservation.
    pub id: Uuid,
    /// The resource type the client named, if any (it may not change).
    pub resource_type: Option<String>,
    /// Hosts: new minimum.
    pub min: Option<u32>,
    /// Hosts: new maximum.
    pub max: Option<u32>,
    /// Instances and addresses: new amount.
    pub amount: Option<u32>,
    /// Instances: new size.
    pub vcpus: Option<u64>,
    /// Instances: new size.
    pub memory_mb: Option<u64>,
    /// Instances: new size.
    pub disk_gb: Option<u64>,
    /// Instances: new affinity.
    pub affinity: Option<Affinity>,
    /// New host filter.
    pub hypervisor_properties: Option<String>,
    /// New resource filter.
    pub resource_properties: Option<String>,
}

fn bad(text: impl Into<String>) -> Rejection {
    Rejection::BadLease(text.into())
}

fn check_name(name: &str) -> Result<(), Rejection> {
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
                    .any(|f| f.network_id == *network_id && f.address == *address);
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

fn check_window(start: Instant, end: Instant) -> Result<Window, Rejection> {
    Window::new(start, end).ok_or_else(|| bad("End date must be later than start date."))
}

/// When `before_end_lease` fires: the given time, which must lie strictly inside the window,
/// or the default offset before the end, clamped to the start.
fn before_end_at(window: Window, given: Option<Instant>) -> Result<Instant, Rejection> {
    match given {
        Some(at) if at > window.start && at < window.end => Ok(at),
        Some(_) => Err(bad(
            "before_end_date must lie strictly inside the lease window",
        )),
        None => Ok(Instant::from_micros(
            (window.end.as_micros() - BEFORE_END_DEFAULT_MICROS).max(window.start.as_micros()),
        )),
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

/// Checks a counter-offer search horizon (microseconds after the start) against
/// [`limits::SEARCH_HORIZON_DAYS_MAX`].
pub fn check_horizon(horizon_micros: i64) -> Result<(), Rejection> {
    const DAY: i64 = 86_400_000_000;
    let micros = u64::try_from(horizon_micros.max(0)).unwrap_or(0);
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
                current: current.map(|r| r.hosts.clone()).unwrap_or_default(),
                current_fips: current.map(|r| r.floating_ips.clone()).unwrap_or_default(),
                avoid: Vec::new(),
            })
        })
        .collect()
}

/// Admits a new lease all-or-nothing, or refuses it with a counter-offer searched within
/// `search` ([`Search::NONE`] under the writer lock: the most that fits, no earliest start).
pub fn create_lease(
    catalog: &Catalog,
    new: &NewLease,
    now: Instant,
    search: &Search<'_>,
) -> Result<(Vec<Change>, Lease), Rejection> {
    create_lease_with(catalog, new, now, search, &[])
}

/// [`create_lease`], not counting the holds of the reservations in `excluding` (they are being
/// displaced in the same decision).
pub fn create_lease_with(
    catalog: &Catalog,
    new: &NewLease,
    now: Instant,
    search: &Search<'_>,
    excluding: &[Uuid],
) -> Result<(Vec<Change>, Lease), Rejection> {
    check_limits(new.reservations.iter().map(|(_, s)| s))?;
    check_name(&new.name)?;
    let window = check_window(new.start, new.end)?;
    if window.end <= now {
        return Err(bad("End date must be later than current date."));
    }
    catalog.policy().check(window, now)?;
    let before_end = before_end_at(window, new.before_end)?;
    let want = wanted(catalog, new.reservations.iter().map(|(_, s)| (s, None)))?;
    let granted = reserve::admit_or_offer(catalog, window, &want, excluding, search)
        .map_err(|refusal| Rejection::DoesNotFit(Box::new(refusal)))?;
    let reservations = new
        .reservations
        .iter()
        .enumerate()
        .map(|(idx, (id, spec))| Reservation {
            id: *id,
            spec: spec.clone(),
            status: ReservationStatus::Pending,
            hosts: granted.hosts[idx].clone(),
            floating_ips: granted.floating_ips[idx].clone(),
            missing: Vec::new(),
            resources_changed: false,
            created_at: now,
            updated_at: now,
        })
        .collect();
    let event = |id: Uuid, kind: EventKind, at: Instant| LeaseEvent {
        id,
        kind,
        at,
        status: EventStatus::Undone,
        created_at: now,
        updated_at: now,
    };
    let [start_id, before_id, end_id] = new.event_ids;
    let lease = Lease {
        id: new.id,
        name: new.name.trim().to_owned(),
        project_id: new.project_id.clone(),
        user_id: new.user_id.clone(),
        start: window.start,
        end: window.end,
        status: LeaseStatus::Pending,
        status_reason: None,
        degraded: false,
        reservations,
        events: vec![
            event(start_id, EventKind::StartLease, window.start),
            event(before_id, EventKind::BeforeEndLease, before_end),
            event(end_id, EventKind::EndLease, window.end),
        ],
        notice_lead_micros: new.notice_lead_micros.max(0),
        preemption_noticed: false,
        terms: None,
        outcome: None,
        created_at: now,
        updated_at: now,
    };
    let changes = vec![
        record(
            &lease,
            "lease.create",
            now,
            serde_json::json!({"status": "PENDING"}),
        ),
        Change::LeaseSet {
            id: lease.id,
            lease: Some(Box::new(lease.clone())),
        },
    ];
    Ok((changes, lease))
}

fn lease(catalog: &Catalog, id: Uuid) -> Result<&Lease, Rejection> {
    catalog.lease(id).ok_or(Rejection::LeaseNotFound(id))
}

/// Deletes a lease: whatever it holds is released at once.
pub fn delete_lease(catalog: &Catalog, id: Uuid, now: Instant) -> Result<Vec<Change>, Rejection> {
    let current = lease(catalog, id)?;
    let mut changes = vec![record(
        current,
        "lease.delete",
        now,
        serde_json::json!({"status": current.status.as_str()}),
    )];
    if current.started() && !current.ended() {
        changes.extend(crate::fence::lower(catalog, current, now));
    }
    changes.push(Change::LeaseSet { id, lease: None });
    Ok(changes)
}

/// Registers a floating IP for reservation.
pub fn register_floating_ip(catalog: &Catalog, fip: FloatingIp) -> Result<Vec<Change>, Rejection> {
    let taken = catalog
        .floating_ips()
        .any(|f| f.network_id == fip.network_id && f.address == fip.address);
    if taken {
        return Err(Rejection::FloatingIpExists(fip.address));
    }
    Ok(vec![Change::FloatingIpSet {
        id: fip.id,
        fip: Some(fip),
    }])
}

/// Removes a floating IP no lease holds.
pub fn delete_floating_ip(catalog: &Catalog, id: Uuid) -> Result<Vec<Change>, Rejection> {
    if catalog.floating_ip(id).is_none() {
        return Err(Rejection::FloatingIpNotFound(id));
    }
    if catalog.ledger().holds_any(id) {
        return Err(Rejection::FloatingIpInUse(id));
    }
    Ok(vec![Change::FloatingIpSet { id, fip: None }])
}

/// Marks a host property private (hidden from property listings unless asked for) or public.
pub fn set_property_privacy(
    catalog: &Catalog,
    name: &str,
    private: bool,
) -> Result<Vec<Change>, Rejection> {
    if !is_known_property(catalog, name) {
        return Err(Rejection::PropertyNotFound(name.to_owned()));
    }
    Ok(vec![Change::PropertyPrivacy {
        name: name.to_owned(),
        private,
    }])
}

mod events;
mod update;

pub use events::{fail_event, fire_event};
pub use update::update_lease;

#[cfg(test)]
mod tests;
