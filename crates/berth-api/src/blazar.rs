//! Wire types of the Blazar reservation API (`/reservation/v1`): versions, hosts and their
//! allocations and properties, leases with their reservations and events, the lifecycle record,
//! floating IPs and berth's availability search.
//!
//! Request types take fields the way the Blazar client sends them (integers as numbers or numeric
//! strings, flags as booleans or strings); the server validates them by hand, with Blazar's
//! messages, before it reads them as these types. Lease requests tolerate unknown fields, as
//! Blazar does.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use uuid::Uuid;

pub use crate::common::{Version, VersionList};

/// An integer as a JSON number or a numeric string.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[schemars(rename = "BlazarInteger")]
#[serde(untagged)]
pub enum Integer {
    /// A JSON number.
    Number(u64),
    /// A numeric string.
    Text(String),
}

/// A flag as a JSON boolean or a string (`true`, `false`; for affinity also `None`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[schemars(rename = "BlazarFlag")]
#[serde(untagged)]
pub enum Flag {
    /// A JSON boolean.
    Bool(bool),
    /// Its text.
    Text(String),
}

/// A host as Blazar returns it; extra capabilities are flattened in.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Host {
    /// Numeric id, as a string (the client treats anything else as a name).
    pub id: String,
    /// Host name.
    pub hypervisor_hostname: String,
    /// Hypervisor type.
    pub hypervisor_type: Option<String>,
    /// Hypervisor version (not tracked).
    pub hypervisor_version: Option<i64>,
    /// VCPU total.
    pub vcpus: u64,
    /// CPU description (not tracked).
    pub cpu_info: Option<String>,
    /// MEMORY_MB total.
    pub memory_mb: u64,
    /// DISK_GB total.
    pub local_gb: u64,
    /// Compute service name.
    pub service_name: Option<String>,
    /// Availability zone.
    pub availability_zone: Option<String>,
    /// Whether leases may take the host.
    pub reservable: bool,
    /// `up`, `down` or `maintenance` (berth's provider status).
    pub status: Option<String>,
    /// Why the host is down or in maintenance, when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_reason: Option<String>,
    /// Always null (no trusts here).
    pub trust_id: Option<String>,
    /// Enrolment time, `YYYY-MM-DD HH:MM:SS`.
    pub created_at: String,
    /// Last update time, `YYYY-MM-DD HH:MM:SS`.
    pub updated_at: Option<String>,
    /// Extra capabilities.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `{"host": ...}`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct HostEnvelope {
    /// The host.
    pub host: Host,
}

/// `{"hosts": [...]}`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct HostList {
    /// The hosts.
    pub hosts: Vec<Host>,
}

/// `POST /reservation/v1/os-hosts`: a host to enrol; every other field is an extra capability.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct CreateHost {
    /// Host name (required, non-empty).
    pub name: String,
    /// Whether leases may take the host (default `true`).
    #[serde(default)]
    pub reservable: Option<Flag>,
    /// VCPU total, a positive integer.
    #[serde(default)]
    pub vcpus: Option<Integer>,
    /// MEMORY_MB total, a positive integer.
    #[serde(default)]
    pub memory_mb: Option<Integer>,
    /// DISK_GB total, a positive integer.
    #[serde(default)]
    pub local_gb: Option<Integer>,
    /// Availability zone.
    #[serde(default)]
    pub availability_zone: Option<String>,
    /// Hypervisor type.
    #[serde(default)]
    pub hypervisor_type: Option<String>,
    /// Compute service name.
    #[serde(default)]
    pub service_name: Option<String>,
    /// Extra capabilities: strings, numbers and booleans.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `PUT /reservation/v1/os-hosts/{host_id}`: extra capabilities to set (strings, numbers,
/// booleans) or remove (`null`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(transparent)]
pub struct UpdateHost(pub Map<String, Value>);

/// The answer to a host status change: the host and what the change did to leases.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct HostStatusChanged {
    /// The host.
    pub host: Host,
    /// What the change did to leases.
    pub leases: crate::status::LeaseEffects,
}

/// `PUT /reservation/v1/os-hosts/{host_id}/allocation`: exactly one of the two ids.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Reallocate {
    /// Move every reservation of this lease off the host.
    #[serde(default)]
    pub lease_id: Option<Uuid>,
    /// Move this reservation off the host.
    #[serde(default)]
    pub reservation_id: Option<Uuid>,
}

/// A reservation holding a host, from the ledger.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct HeldBy {
    /// The reservation.
    pub id: Uuid,
    /// Its lease.
    pub lease_id: Uuid,
    /// Start of the hold.
    pub start_date: String,
    /// End of the hold.
    pub end_date: String,
}

/// The reservations holding one host, now and later.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct HostAllocation {
    /// The host's id.
    pub resource_id: String,
    /// The reservations holding it.
    pub reservations: Vec<HeldBy>,
}

/// `GET /reservation/v1/os-hosts/allocations`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct HostAllocationList {
    /// One entry per host.
    pub allocations: Vec<HostAllocation>,
}

/// `GET /reservation/v1/os-hosts/{host_id}/allocation`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct HostAllocationEnvelope {
    /// The host's entry.
    pub allocation: HostAllocation,
}

/// A property filters may name; with `detail`, whether it is private and its values.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ResourceProperty {
    /// Its name.
    pub property: String,
    /// Whether it is private (with `detail`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private: Option<bool>,
    /// The values hosts have (with `detail`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<String>>,
}

/// `GET /reservation/v1/os-hosts/properties`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ResourcePropertyList {
    /// The properties.
    pub resource_properties: Vec<ResourceProperty>,
}

/// `PATCH /reservation/v1/os-hosts/properties/{property_name}`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct SetPropertyPrivacy {
    /// Whether the property is private.
    pub private: bool,
}

/// A property's privacy record.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct PropertyPrivacy {
    /// The property's name.
    pub id: String,
    /// `physical:host`.
    pub resource_type: String,
    /// The property's name.
    pub property_name: String,
    /// Whether it is private.
    pub private: bool,
    /// `YYYY-MM-DD HH:MM:SS`.
    pub created_at: String,
    /// `YYYY-MM-DD HH:MM:SS`.
    pub updated_at: String,
}

/// `{"resource_property": ...}`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct PropertyPrivacyEnvelope {
    /// The record.
    pub resource_property: PropertyPrivacy,
}

/// A floating IP that reservations may take.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct FloatingIp {
    /// Its id.
    pub id: Uuid,
    /// The external network.
    pub floating_network_id: String,
    /// The subnet, when given.
    pub subnet_id: Option<String>,
    /// The address.
    pub floating_ip_address: String,
    /// Whether reservations may take it.
    pub reservable: bool,
    /// `YYYY-MM-DD HH:MM:SS`.
    pub created_at: String,
    /// `YYYY-MM-DD HH:MM:SS`.
    pub updated_at: String,
}

/// `{"floatingip": ...}`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct FloatingIpEnvelope {
    /// The floating IP.
    pub floatingip: FloatingIp,
}

/// `GET /reservation/v1/floatingips`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct FloatingIpList {
    /// The floating IPs.
    pub floatingips: Vec<FloatingIp>,
}

/// `POST /reservation/v1/floatingips`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct CreateFloatingIp {
    /// The external network (required).
    pub floating_network_id: String,
    /// The address (required).
    pub floating_ip_address: String,
    /// The subnet.
    #[serde(default)]
    pub subnet_id: Option<String>,
}

/// A reservation as Blazar returns it, with the hosts it holds (berth's addition).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[schemars(rename = "BlazarReservation")]
pub struct Reservation {
    /// Its id.
    pub id: Uuid,
    /// Its lease.
    pub lease_id: Uuid,
    /// `pending`, `active`, `deleted`, `error`.
    pub status: String,
    /// `false` when nothing is missing; otherwise how much (hosts or instances), their
    /// resources, and on which hosts out of service.
    pub missing_resources: Value,
    /// Whether its resources were changed under it.
    pub resources_changed: bool,
    /// Its id again (Blazar's resource id).
    pub resource_id: Uuid,
    /// What it reserves, with its kind's fields.
    #[serde(flatten)]
    pub spec: ReservationDetails,
    /// `YYYY-MM-DD HH:MM:SS`.
    pub created_at: String,
    /// `YYYY-MM-DD HH:MM:SS`.
    pub updated_at: String,
    /// The hosts it holds and how many slots on each.
    pub allocations: Vec<ReservationAllocation>,
}

/// The fields of each kind of reservation, by `resource_type`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(tag = "resource_type")]
pub enum ReservationDetails {
    /// Whole hosts.
    #[serde(rename = "physical:host")]
    Host {
        /// Fewest hosts.
        min: u32,
        /// Most hosts.
        max: u32,
        /// Filter on hypervisor properties (JSON text).
        hypervisor_properties: String,
        /// Filter on extra capabilities (JSON text).
        resource_properties: String,
        /// What happens before the end.
        before_end: String,
    },
    /// Instances of a flavor.
    #[serde(rename = "virtual:instance")]
    Instance {
        /// VCPUs per instance.
        vcpus: u64,
        /// Memory per instance.
        memory_mb: u64,
        /// Disk per instance.
        disk_gb: u64,
        /// How many instances.
        amount: u32,
        /// `true` same host, `false` different hosts, `null` either.
        affinity: Option<bool>,
        /// Filter on extra capabilities (JSON text).
        resource_properties: String,
        /// The reservation's flavor.
        flavor_id: Uuid,
        /// The reservation's aggregate.
        aggregate_id: Uuid,
        /// The reservation's server group, when affinity is set.
        server_group_id: Option<Uuid>,
    },
    /// Floating IPs.
    #[serde(rename = "virtual:floatingip")]
    FloatingIp {
        /// The external network.
        network_id: String,
        /// How many addresses.
        amount: u32,
        /// Addresses asked for by value.
        required_floatingips: Vec<String>,
        /// The floating IPs it holds.
        floatingip_ids: Vec<Uuid>,
    },
}

/// Slots a reservation holds on one host.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[schemars(rename = "BlazarReservationAllocation")]
pub struct ReservationAllocation {
    /// The host's id, while it exists.
    pub host_id: Option<String>,
    /// Its provider's uuid.
    pub provider_uuid: Uuid,
    /// Slots held.
    pub slots: u32,
}

/// A lifecycle event of a lease (`start_lease`, `end_lease`, `before_end_lease`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[schemars(rename = "BlazarEvent")]
pub struct Event {
    /// Its id.
    pub id: Uuid,
    /// Its lease.
    pub lease_id: Uuid,
    /// Its kind.
    pub event_type: String,
    /// When it fires.
    pub time: String,
    /// `UNDONE`, `IN_PROGRESS`, `DONE`, `ERROR`.
    pub status: String,
    /// `YYYY-MM-DD HH:MM:SS`.
    pub created_at: String,
    /// `YYYY-MM-DD HH:MM:SS`.
    pub updated_at: String,
}

/// A lease as Blazar returns it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Lease {
    /// Its id.
    pub id: Uuid,
    /// Its name.
    pub name: String,
    /// Start of the window.
    pub start_date: String,
    /// End of the window.
    pub end_date: String,
    /// `PENDING`, `ACTIVE`, `TERMINATED`, `ERROR`, ...
    pub status: String,
    /// Why it is in error, when it is.
    pub status_reason: Option<String>,
    /// Whether a reservation lost resources.
    pub degraded: bool,
    /// Owning user.
    pub user_id: String,
    /// Owning project.
    pub project_id: String,
    /// Always null (no trusts here).
    pub trust_id: Option<String>,
    /// `YYYY-MM-DD HH:MM:SS`.
    pub created_at: String,
    /// `YYYY-MM-DD HH:MM:SS`.
    pub updated_at: String,
    /// Its reservations.
    pub reservations: Vec<Reservation>,
    /// Its lifecycle events.
    pub events: Vec<Event>,
    /// When a `HELD` or `WAITING` lease lapses (berth): a hold's expiry, a waitlisted lease's
    /// `wait_until`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lapses_at: Option<String>,
    /// The series (berth) this lease is an occurrence of, when it was created with a
    /// `recurrence`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub series_id: Option<Uuid>,
    /// Its place in that series, from 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub occurrence: Option<u32>,
}

/// `{"lease": ...}`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct LeaseEnvelope {
    /// The lease.
    pub lease: Lease,
    /// Why a lease created with `on_conflict: "wait"` is `WAITING` (berth): the shortfalls and
    /// the counter-offer, as the `not_enough_resources` error carries them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waitlisted: Option<crate::errors::Refusal>,
    /// The series (berth) a lease created with a `recurrence` starts: every occurrence, the
    /// first of which is `lease`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub series: Option<Series>,
}

/// `GET /reservation/v1/leases`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct LeaseList {
    /// The leases the caller may see, oldest first.
    pub leases: Vec<Lease>,
}

/// One entry of a lease's lifecycle record.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[schemars(rename = "BlazarRecord")]
pub struct Record {
    /// The lease.
    pub lease_id: Uuid,
    /// What happened.
    #[serde(rename = "type")]
    pub kind: String,
    /// When.
    pub time: String,
    /// Details, as recorded.
    pub details: Value,
}

/// `GET /reservation/v1/leases/{lease_id}/events` (berth).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[schemars(rename = "BlazarRecordList")]
pub struct RecordList {
    /// The record, oldest first.
    pub events: Vec<Record>,
}

/// A reservation of a lease request. Which fields apply depends on `resource_type`
/// (`physical:host`: `min`, `max`, `hypervisor_properties`, `resource_properties`, `before_end`;
/// `virtual:instance`: `vcpus`, `memory_mb`, `disk_gb`, `amount`, `affinity`,
/// `resource_properties`; `virtual:floatingip`: `network_id`, `amount`, `required_floatingips`).
/// In an update, `id` names the reservation to change.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[schemars(rename = "BlazarReservationRequest")]
pub struct ReservationRequest {
    /// The reservation to change (updates only).
    #[serde(default)]
    pub id: Option<String>,
    /// `physical:host`, `virtual:instance` or `virtual:floatingip`.
    #[serde(default)]
    pub resource_type: Option<String>,
    /// Fewest hosts.
    #[serde(default)]
    pub min: Option<Integer>,
    /// Most hosts.
    #[serde(default)]
    pub max: Option<Integer>,
    /// How many instances or addresses.
    #[serde(default)]
    pub amount: Option<Integer>,
    /// VCPUs per instance.
    #[serde(default)]
    pub vcpus: Option<Integer>,
    /// Memory per instance.
    #[serde(default)]
    pub memory_mb: Option<Integer>,
    /// Disk per instance.
    #[serde(default)]
    pub disk_gb: Option<Integer>,
    /// `true`, `false` or `null` (or `"True"`, `"False"`, `"None"`).
    #[serde(default)]
    pub affinity: Option<Flag>,
    /// Filter on hypervisor properties: JSON text, or the filter as JSON.
    #[serde(default)]
    pub hypervisor_properties: Option<Value>,
    /// Filter on extra capabilities: JSON text, or the filter as JSON.
    #[serde(default)]
    pub resource_properties: Option<Value>,
    /// What happens before the end.
    #[serde(default)]
    pub before_end: Option<String>,
    /// The external network.
    #[serde(default)]
    pub network_id: Option<String>,
    /// Addresses asked for by value.
    #[serde(default)]
    pub required_floatingips: Option<Vec<String>>,
}

/// `POST /reservation/v1/leases` and `PUT /reservation/v1/leases/{lease_id}`. Dates are `YYYY-MM-DD HH:MM`, RFC 3339 or `now`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct LeaseRequest {
    /// The lease's name (required to create).
    #[serde(default)]
    pub name: Option<String>,
    /// Start of the window (required to create; may be `now`).
    #[serde(default)]
    pub start_date: Option<String>,
    /// End of the window (required to create).
    #[serde(default)]
    pub end_date: Option<String>,
    /// `start_date` as the instance-reservation seed names it (read when `start_date` is
    /// absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
    /// `end_date` as the instance-reservation seed names it (read when `end_date` is absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<String>,
    /// When the `before_end` event fires.
    #[serde(default)]
    pub before_end_date: Option<String>,
    /// The reservations to make or change.
    #[serde(default)]
    pub reservations: Option<Vec<ReservationRequest>>,
    /// Ignored; when creating, a list if given (the client may send events).
    #[serde(default)]
    pub events: Option<Value>,
    /// How far ahead to look for the earliest start of a counter-offer, in days (berth).
    #[serde(default)]
    pub search_horizon_days: Option<Integer>,
    /// The hold (berth) the new lease is made from: an availability search's `hold.hold_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold_id: Option<String>,
    /// What a new lease that does not fit does (berth): `refuse` (the default: 409 with a
    /// counter-offer) or `wait` (kept `WAITING` until `wait_until`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_conflict: Option<String>,
    /// With `on_conflict: "wait"`: how long the lease may wait (berth; required with `wait`,
    /// not in the past, before `end_date` and at most `WAIT_PAST_START_MAX_MINUTES` after
    /// `start_date`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_until: Option<String>,
    /// Makes the new lease recurring (berth): an RFC 5545 RRULE subset (`FREQ=DAILY|WEEKLY`,
    /// `INTERVAL`, `BYDAY`, exactly one of `COUNT` or `UNTIL`, at most
    /// `RECURRENCE_OCCURRENCES_MAX` occurrences). Every occurrence is admitted or none; the
    /// answer is the series (201, `{"series": ...}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recurrence: Option<String>,
}

/// A recurring lease (berth): the occurrences left of a series, each an ordinary lease.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[schemars(rename = "BlazarSeries")]
pub struct Series {
    /// The series' id.
    pub id: Uuid,
    /// The name of its first occurrence left.
    pub name: String,
    /// The recurrence rule it was created with.
    pub recurrence: String,
    /// How many occurrences it was created with.
    pub count: u32,
    /// The occurrences left, in order.
    pub leases: Vec<Lease>,
}

/// `{"series": ...}` (berth).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[schemars(rename = "BlazarSeriesEnvelope")]
pub struct SeriesEnvelope {
    /// The series.
    pub series: Series,
}

/// `PUT /reservation/v1/lease-series/{series_id}` (berth): renames every occurrence left,
/// moves them all, or both (at least one).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[schemars(rename = "BlazarSeriesRequest")]
#[serde(deny_unknown_fields)]
pub struct SeriesRequest {
    /// The new name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Moves every occurrence by this many minutes (negative: earlier), all or none; only
    /// while every occurrence is pending.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shift_minutes: Option<i64>,
}

/// `POST /reservation/v1/availability` (berth): whether a lease request would fit.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[schemars(rename = "BlazarAvailabilityRequest")]
pub struct AvailabilityRequest {
    /// Start of the window (required; may be `now`).
    #[serde(default)]
    pub start_date: Option<String>,
    /// End of the window (required).
    #[serde(default)]
    pub end_date: Option<String>,
    /// The reservations to fit.
    #[serde(default)]
    pub reservations: Option<Vec<ReservationRequest>>,
    /// How far ahead to look for the earliest start of a counter-offer, in days.
    #[serde(default)]
    pub search_horizon_days: Option<Integer>,
    /// Whether to hold the offer for the caller's project (default `false`; implied by
    /// `hold_minutes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold: Option<bool>,
    /// How long to hold the offer, in minutes (1 to `HOLD_MINUTES_MAX`, 60; default
    /// `HOLD_MINUTES_DEFAULT`, 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold_minutes: Option<Integer>,
}

/// What became of the hold an availability search asked for (berth).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[schemars(rename = "BlazarHold")]
pub struct Hold {
    /// Whether the offer is held.
    pub held: bool,
    /// The hold's id, to create the lease with (`hold_id`); the hold is a lease in `HELD`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold_id: Option<Uuid>,
    /// Start of the held window (the window asked, or the counter-offer's earliest start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_date: Option<String>,
    /// End of the held window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_date: Option<String>,
    /// When the hold lapses and frees what it holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lapses_at: Option<String>,
    /// Per reservation, the hosts held.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reservations: Vec<OfferedHosts>,
    /// Why nothing is held, when nothing is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Free capacity of one availability zone over a window.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[schemars(rename = "BlazarZoneCapacity")]
pub struct ZoneCapacity {
    /// The zone (`null`: hosts in none).
    pub availability_zone: Option<String>,
    /// Hosts in the zone.
    pub hosts: u32,
    /// Hosts free over the whole window.
    pub free_hosts: u32,
    /// Free amount per resource class over the whole window.
    pub free: BTreeMap<String, u64>,
}

/// Hosts one reservation would take, and how many slots on each.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct OfferedHosts {
    /// The hosts.
    pub hosts: Vec<OfferedHost>,
}

/// Slots a reservation would take on one host.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct OfferedHost {
    /// The host's provider uuid.
    pub provider_uuid: Uuid,
    /// Slots.
    pub slots: u32,
}

/// What fits or, when nothing does, why.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[schemars(rename = "BlazarAvailabilityOutcome")]
#[serde(untagged)]
pub enum AvailabilityOutcome {
    /// It fits: the hosts each reservation would take.
    Fits {
        /// One entry per requested reservation.
        reservations: Vec<OfferedHosts>,
    },
    /// It does not fit: per reservation the shortfall (`reservations`) and the counter-offer
    /// (`counter_offer`), as in the `not_enough_resources` error.
    Refused(Map<String, Value>),
}

/// `POST /reservation/v1/availability` (berth).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[schemars(rename = "BlazarAvailability")]
pub struct Availability {
    /// Whether the request fits.
    pub fits: bool,
    /// Start of the window asked about.
    pub start_date: String,
    /// End of the window asked about.
    pub end_date: String,
    /// Free capacity per zone.
    pub availability_zones: Vec<ZoneCapacity>,
    /// The offer or the refusal.
    #[serde(flatten)]
    pub outcome: AvailabilityOutcome,
    /// The hold, when one was asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold: Option<Hold>,
}

/// Blazar's error body.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Error {
    /// HTTP status.
    pub error_code: u16,
    /// Human-readable message.
    pub error_message: String,
    /// Status again, or an error class name.
    pub error_name: Value,
}

/// `PUT /reservation/v1/leases/{lease_id}/shares/{project_id}` (berth): shares the lease's
/// reservations with the project, within a cap (or changes the cap).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[schemars(rename = "BlazarShareRequest")]
#[serde(deny_unknown_fields)]
pub struct ShareRequest {
    /// The most of each resource class (`VCPU`, `MEMORY_MB`, a reservation's own class, ...)
    /// the project's consumers may hold inside the lease at once; at least one class, each at
    /// least 1. Classes not named are bounded only by the reservations.
    pub cap: BTreeMap<String, i64>,
}

/// `PUT /reservation/v1/budgets/{project_id}` (berth): a project's budget.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[schemars(rename = "BlazarBudgetRequest")]
#[serde(deny_unknown_fields)]
pub struct BudgetRequest {
    /// `day`, `week` (from Monday) or `month` (UTC); `month` when not given.
    pub period: Option<String>,
    /// The most unit-hours of each resource class the project's leases may hold per period
    /// (`{"VCPU": 2000}`), each a whole number, 0 or more; at least one class.
    pub limits: BTreeMap<String, Value>,
}

/// `GET /reservation/v1/budgets/{project_id}`, and the answer to `PUT` (berth).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[schemars(rename = "BlazarBudgetEnvelope")]
pub struct BudgetEnvelope {
    /// The budget.
    pub budget: BudgetBody,
}

/// `GET /reservation/v1/budgets` (berth): the budgets the caller sees.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[schemars(rename = "BlazarBudgetList")]
pub struct BudgetList {
    /// Every project's (an admin), or the caller's project's.
    pub budgets: Vec<BudgetBody>,
}

/// A project's budget and what its leases have been charged in each period it keeps.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[schemars(rename = "BlazarBudget")]
pub struct BudgetBody {
    /// The project.
    pub project_id: String,
    /// `day`, `week` or `month`.
    pub period: String,
    /// The most unit-hours of each class per period.
    pub limits: BTreeMap<String, u64>,
    /// The current period and those charged (from the previous one on), in order.
    pub periods: Vec<BudgetPeriodBody>,
    /// When it was last set.
    pub updated_at: String,
}

/// One period of a budget.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[schemars(rename = "BlazarBudgetPeriod")]
pub struct BudgetPeriodBody {
    /// Its start (`%Y-%m-%dT%H:%M:%S.%f`, UTC).
    pub start: String,
    /// Its end.
    pub end: String,
    /// Unit-hours charged, by class: what the project's leases held in it so far and hold in
    /// it from now on.
    pub charged_hours: BTreeMap<String, f64>,
    /// Unit-hours left under each limit.
    pub left_hours: BTreeMap<String, f64>,
}

/// A lease's share with one project (berth).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[schemars(rename = "BlazarShare")]
pub struct Share {
    /// The lease.
    pub lease_id: Uuid,
    /// The project it is shared with.
    pub project_id: String,
    /// The most of each class the project's consumers may hold inside the lease.
    pub cap: BTreeMap<String, u64>,
    /// What the project's consumers hold inside the lease now, by class.
    pub used: BTreeMap<String, u64>,
    /// When it was shared or its cap last changed.
    pub updated_at: String,
}

/// `PUT /reservation/v1/leases/{lease_id}/shares/{project_id}`'s answer (berth).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[schemars(rename = "BlazarShareEnvelope")]
pub struct ShareEnvelope {
    /// The share.
    pub share: Share,
}

/// `GET /reservation/v1/leases/{lease_id}/shares` (berth): the shares the caller sees.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[schemars(rename = "BlazarShareList")]
pub struct ShareList {
    /// Every share for the lease's project and admins; only its own for a project the lease is
    /// shared with.
    pub shares: Vec<Share>,
}

/// `GET /reservation/v1/usage` (berth): a usage report.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[schemars(rename = "BlazarUsageEnvelope")]
pub struct UsageEnvelope {
    /// The report.
    pub usage: UsageReport,
}

/// Unit-hours by project and resource class over a period, counted as far as the time of the
/// report (usage is history).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[schemars(rename = "BlazarUsageReport")]
pub struct UsageReport {
    /// The period's start (`%Y-%m-%d %H:%M:%S.%f`, UTC).
    pub start: String,
    /// The period's end.
    pub end: String,
    /// How far it is counted: the end, or the time of the report when the end is later.
    pub counted_until: String,
    /// One row per project and class, by project then class.
    pub rows: Vec<UsageRow>,
}

/// `GET /reservation/v1/leases/{id}/utilization` (berth): how much of what a lease held its
/// consumers used, over time.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[schemars(rename = "BlazarUtilizationEnvelope")]
pub struct UtilizationEnvelope {
    /// The lease's utilization.
    pub utilization: LeaseUtilization,
}

/// A lease's utilization from its start until its end or now, whichever is first (at most a
/// year back).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[schemars(rename = "BlazarLeaseUtilization")]
pub struct LeaseUtilization {
    /// The lease.
    pub lease_id: String,
    /// Where counting begins (`%Y-%m-%d %H:%M:%S.%f`, UTC); `null` before the lease starts.
    pub start: Option<String>,
    /// How far it is counted.
    pub counted_until: Option<String>,
    /// One entry per resource class, by class.
    pub classes: Vec<ClassUtilization>,
}

/// One class of a lease's utilization.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[schemars(rename = "BlazarClassUtilization")]
pub struct ClassUtilization {
    /// The resource class (a whole host counts as its inventories).
    pub resource_class: String,
    /// Unit-hours the lease held.
    pub reserved_hours: f64,
    /// Unit-hours consumers presenting it held (of any project it is shared with, too).
    pub consumed_hours: f64,
    /// Consumed over reserved, from 0 to 1 (`null` when it held nothing).
    pub utilization: Option<f64>,
    /// Where the amounts change, in time order; each holds until the next.
    pub steps: Vec<UtilizationStep>,
}

/// From `time` on, `reserved` units held and `consumed` of them used.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[schemars(rename = "BlazarUtilizationStep")]
pub struct UtilizationStep {
    /// When (`%Y-%m-%d %H:%M:%S.%f`, UTC).
    pub time: String,
    /// Units held.
    pub reserved: u64,
    /// Units used.
    pub consumed: u64,
}

/// One project's usage of one resource class, in unit-hours (a VCPU held for an hour is 1).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[schemars(rename = "BlazarUsageRow")]
pub struct UsageRow {
    /// The project.
    pub project_id: String,
    /// The resource class (a whole host counts as its inventories; a floating IP as one
    /// `IPV4_ADDRESS`).
    pub resource_class: String,
    /// Held by the project's reservations.
    pub reserved_hours: f64,
    /// The project's consumers' allocations inside reservations (its own or shared with it).
    pub consumed_hours: f64,
    /// Preemptible work that ran in the capacity the project's reservations held.
    pub lent_hours: f64,
    /// What the project's reservations held that no consumer used and nothing borrowed.
    pub idle_hours: f64,
    /// The project's consumers' allocations outside reservations.
    pub on_demand_hours: f64,
    /// The project's preemptible consumers' allocations.
    pub preemptible_hours: f64,
}
