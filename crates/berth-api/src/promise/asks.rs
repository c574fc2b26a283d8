//! Reservation requests, in both styles: the ETSI-style bodies of
//! `/promise/reservation/{kind}/create`, `/update` and `/query`, and the bodies of the RPCs
//! `create-reservation`, `update-reservation`, `cancel-reservation` and `query-reservation`.
//!
//! Dates are RFC 3339, `YYYY-MM-DD HH:MM` (UTC) or `now`. Counts (cores, instances,
//! addresses, volumes, snapshots) are whole numbers up to 1,000,000
//! (`limits::REQUEST_QUANTITY_MAX`), sizes (MB, GB) up to 1,024 times that.

use crate::promise::{Count, Names, Text};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `computePoolReservation`: a pool of cores, memory and instances (at least one of them not
/// zero; other members are ignored).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ComputePoolReservation {
    /// Virtual CPUs (a count).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_cpu_cores: Option<Count>,
    /// Memory, MB (a size).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtual_mem_size: Option<Count>,
    /// Instances (a count).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_vc_instances: Option<Count>,
}

/// A container's virtual CPUs.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RequestedCpu {
    /// How many (a size; absent: 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_virtual_cpu: Option<Count>,
    /// Their architecture, echoed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_architecture: Option<Text>,
}

/// A container's memory.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RequestedMemory {
    /// MB (a size; absent: 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtual_mem_size: Option<Count>,
}

/// A container's disk.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RequestedStorage {
    /// GB (a size; absent: 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_of_storage: Option<Count>,
}

/// `containerFlavor`: the shape of a container (other members are ignored).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContainerFlavor {
    /// The flavor it is asked with, echoed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flavor_id: Option<Text>,
    /// Its CPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtual_cpu: Option<RequestedCpu>,
    /// Its memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtual_memory: Option<RequestedMemory>,
    /// Its disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_attributes: Option<RequestedStorage>,
}

/// One of `virtualizationContainerReservation`: an instance of a shape (other members are
/// ignored).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContainerReservation {
    /// Its id (absent: `container-<index>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_id: Option<Text>,
    /// Its shape (absent: no size).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_flavor: Option<ContainerFlavor>,
}

/// `networkReservation`: public addresses (other members are ignored).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkReservation {
    /// How many (a count, at least 1).
    pub num_public_ips: Count,
    /// On which network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_id: Option<Text>,
}

/// `storagePoolReservation`: storage (other members are ignored).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StoragePoolReservation {
    /// GB (a size, at least 1).
    pub storage_size: Count,
    /// Snapshots (a count; absent: 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_snapshots: Option<Count>,
    /// Volumes (a count; absent: 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_volumes: Option<Count>,
}

/// The body of `/promise/reservation/compute/create` and `/update`. A create asks for a pool,
/// containers or both; an update changes what it names. Unknown members are refused.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ComputeReservationRequest {
    /// When it starts (create: absent means now).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<String>,
    /// When it ends (create: absent means as late as the policy allows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time: Option<String>,
    /// When capacity not yet allocated is released (absent: the policy's expiry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiry_time: Option<String>,
    /// The zone (create only; ignored on update).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone_id: Option<Text>,
    /// Its priority, 0 to 100 (create only, default 50; ignored on update).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<Count>,
    /// The provider cloud whose capacity alone it may hold (its id, or `ResourceProvider:<id>`;
    /// create only): berth's, any capacity of the zone when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_id: Option<Text>,
    /// Accepted and ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_group_id: Option<Value>,
    /// The reservation to change (update only, where it is required; ignored on create).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation_id: Option<Text>,
    /// A pool of cores, memory and instances.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_pool_reservation: Option<ComputePoolReservation>,
    /// Instances of given shapes (a non-empty list).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub virtualization_container_reservation: Option<Vec<ContainerReservation>>,
}

/// The body of `/promise/reservation/network/create` and `/update`: public addresses. Unknown
/// members are refused.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NetworkReservationRequest {
    /// When it starts (create: absent means now).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<String>,
    /// When it ends (create: absent means as late as the policy allows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time: Option<String>,
    /// When addresses not yet allocated are released (absent: the policy's expiry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiry_time: Option<String>,
    /// The zone (create only; ignored on update).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone_id: Option<Text>,
    /// Its priority, 0 to 100 (create only, default 50; ignored on update).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<Count>,
    /// The provider cloud whose capacity alone it may hold (its id, or `ResourceProvider:<id>`;
    /// create only): berth's, any capacity of the zone when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_id: Option<Text>,
    /// Accepted and ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_group_id: Option<Value>,
    /// The reservation to change (update only, where it is required; ignored on create).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation_id: Option<Text>,
    /// Public addresses (required to create).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_reservation: Option<NetworkReservation>,
}

/// The body of `/promise/reservation/storage/create` and `/update`: storage. Unknown members
/// are refused.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StorageReservationRequest {
    /// When it starts (create: absent means now).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<String>,
    /// When it ends (create: absent means as late as the policy allows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time: Option<String>,
    /// When storage not yet allocated is released (absent: the policy's expiry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiry_time: Option<String>,
    /// The zone (create only; ignored on update).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone_id: Option<Text>,
    /// Its priority, 0 to 100 (create only, default 50; ignored on update).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<Count>,
    /// The provider cloud whose capacity alone it may hold (its id, or `ResourceProvider:<id>`;
    /// create only): berth's, any capacity of the zone when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_id: Option<Text>,
    /// Accepted and ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_group_id: Option<Value>,
    /// The reservation to change (update only, where it is required; ignored on create).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation_id: Option<Text>,
    /// Storage (required to create).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_pool_reservation: Option<StoragePoolReservation>,
}

/// The body of `/promise/reservation/{kind}/create` and `/update`: the request of the path's
/// `kind` (`compute`, `network` or `storage`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(untagged)]
pub enum EtsiReservationRequest {
    /// On `compute`.
    Compute(ComputeReservationRequest),
    /// On `network`.
    Network(NetworkReservationRequest),
    /// On `storage`.
    Storage(StorageReservationRequest),
}

/// One item of a reservation filter (other members are ignored).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReservationFilterItem {
    /// The reservation (an id that is not a uuid names no reservation).
    pub reservation_id: String,
}

/// `queryReservationFilter`: the reservations asked for, as a list or one object.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(untagged)]
pub enum ReservationFilter {
    /// Several.
    List(Vec<ReservationFilterItem>),
    /// One.
    One(ReservationFilterItem),
}

/// The input of `/promise/reservation/{kind}/query`, as a JSON body or query parameters.
/// Members other than this one are ignored.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EtsiReservationQuery {
    /// The reservations to show (each must exist and be visible); absent, every reservation
    /// of the path's kind the caller may see.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query_reservation_filter: Option<ReservationFilter>,
}

/// `capacity`: what a reservation asks for, as a capacity vector (at least one member not
/// zero). Unknown members are refused.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CapacityRequest {
    /// Virtual CPUs (a count).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cores: Option<Count>,
    /// Memory, MB (a size).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ram: Option<Count>,
    /// Instances (a count).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instances: Option<Count>,
    /// Public addresses (a count).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addresses: Option<Count>,
    /// Storage, GB (a size): one volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gigabytes: Option<Count>,
    /// Accepted and ignored (storage is one volume of `gigabytes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volumes: Option<Value>,
}

/// The input of `POST /promise/create-reservation`. Members other than these are ignored.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct CreateReservation {
    /// What it asks for (required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<CapacityRequest>,
    /// When it starts (absent: now).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
    /// When it ends (absent: as late as the policy allows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<String>,
    /// When capacity not yet allocated is released (absent: the policy's expiry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiry: Option<String>,
    /// The zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<Text>,
    /// Its priority, 0 to 100 (absent: 50).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<Count>,
    /// Only this provider cloud's capacity (its id, or `ResourceProvider:<id>`).
    #[serde(
        default,
        rename = "provider-id",
        skip_serializing_if = "Option::is_none"
    )]
    pub provider_id: Option<Text>,
    /// The seed's way to name the provider cloud: `ResourceProvider:<id>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<Text>,
    /// A hold of the caller's project (a lease in `HELD`, from an availability search) that the
    /// reservation is made from in one decision (berth): it must ask for what was held or less.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold_id: Option<Text>,
}

/// The input of `POST /promise/update-reservation`: the members given change. Members other
/// than these are ignored.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct UpdateReservation {
    /// The reservation (required; a uuid, possibly `ResourceReservation:`-prefixed).
    #[serde(
        rename = "reservation-id",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub reservation_id: Option<Text>,
    /// What it asks for instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<CapacityRequest>,
    /// Its new start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
    /// Its new end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<String>,
    /// Its new expiry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiry: Option<String>,
}

/// The input of `POST /promise/cancel-reservation`. Members other than this one are ignored.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct CancelReservation {
    /// The reservation (required; a uuid, possibly `ResourceReservation:`-prefixed).
    #[serde(
        rename = "reservation-id",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub reservation_id: Option<Text>,
}

/// The window of `query-reservation` and how a reservation must fall in it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct QueryWindow {
    /// Its start (absent: now).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
    /// Its end (absent: one second after the start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<String>,
    /// `inclusive` (the default: a reservation that starts, ends or runs in the window) or
    /// `exclusive` (one that starts and ends in it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<Text>,
}

/// `elements`: the hosts (uuid or name) and addresses (id or address) a reservation holds. In
/// a JSON array, a `Kind:`-prefixed id is taken without its prefix.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Elements {
    /// It holds at least one of these.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub some: Option<Names>,
    /// It holds all of these.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub every: Option<Names>,
}

/// The input of `POST /promise/query-reservation`, as a JSON body or query parameters: the
/// caller's reservations that match every member given. Members other than these are ignored.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct QueryReservation {
    /// Reservations in this window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<QueryWindow>,
    /// Reservations in this zone (asked for in it, or holding a host of it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<Text>,
    /// Reservations to leave out (uuids, possibly `ResourceReservation:`-prefixed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub without: Option<Names>,
    /// Reservations holding these elements.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elements: Option<Elements>,
    /// Whether to answer with what they hold over time too (default `true`).
    #[serde(
        rename = "show-utilization",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub show_utilization: Option<crate::promise::Flag>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A body of one kind reads as that kind's request, whichever comes first in the union.
    #[test]
    fn a_kind_body_reads_as_its_own_request() {
        let body = serde_json::json!({"networkReservation": {"numPublicIps": 2}});
        let read: EtsiReservationRequest = serde_json::from_value(body).expect("reads");
        assert!(matches!(read, EtsiReservationRequest::Network(_)));
    }
}
