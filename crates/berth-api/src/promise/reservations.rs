//! Reservations: `reservationData` as both styles show it, counter-offers, the ETSI answers
//! and the reservation RPCs' members.

use crate::promise::TimeWindow;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use uuid::Uuid;

/// `computePoolReserved`: a pool of cores, memory and instances.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ComputePoolReserved {
    /// Virtual CPUs.
    pub num_cpu_cores: u64,
    /// Instances.
    pub num_vc_instances: u64,
    /// Memory, MB.
    pub virtual_mem_size: u64,
    /// The zone.
    pub zone_id: Option<String>,
}

/// A container's virtual CPUs.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualCpu {
    /// How many.
    pub num_virtual_cpu: u64,
    /// Their architecture.
    pub cpu_architecture: Option<String>,
}

/// A container's memory.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMemory {
    /// MB.
    pub virtual_mem_size: u64,
    /// `"True"` when the container's flavor pins NUMA nodes (`hw:numa_nodes`), else
    /// `"False"` (absent from a counter-offer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa_enabled: Option<String>,
}

/// A container's disk.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualDisks {
    /// The disk's id: `<containerId>:disk`.
    pub storage_id: String,
    /// The storage flavour: the container's flavor, which gives the disk its size.
    pub flavour_id: Option<String>,
    /// `volume`: the instance's disk, reserved on its host.
    pub type_of_storage: String,
    /// GB.
    pub size_of_storage: u64,
    /// `enabled`.
    pub operational_state: String,
}

/// One of `virtualizationContainerReserved`: an instance of a shape.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContainerReserved {
    /// Its id.
    pub container_id: String,
    /// The flavor it was asked with.
    pub flavor_id: Option<String>,
    /// Its CPUs.
    pub virtual_cpu: VirtualCpu,
    /// Its memory.
    pub virtual_memory: VirtualMemory,
    /// Its disk.
    pub virtual_disks: VirtualDisks,
    /// The zone.
    pub zone_id: Option<String>,
}

/// `networkReserved`: public addresses.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkReserved {
    /// How many.
    pub num_public_ips: u64,
    /// On which network.
    pub network_id: Option<String>,
}

/// `storagePoolReserved`: storage.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StoragePoolReserved {
    /// GB.
    pub storage_size: u64,
    /// Snapshots.
    pub num_snapshots: u64,
    /// Volumes.
    pub num_volumes: u64,
    /// The zone.
    pub zone_id: Option<String>,
}

/// What a reservation asks for, in ETSI terms (each part present when asked for).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Reserved {
    /// A compute pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_pool_reserved: Option<ComputePoolReserved>,
    /// Instances of given shapes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtualization_container_reserved: Option<Vec<ContainerReserved>>,
    /// Public addresses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_reserved: Option<NetworkReserved>,
    /// Storage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_pool_reserved: Option<StoragePoolReserved>,
}

/// The capacity vector of a reservation (Promise RPC terms).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct CapacityVector {
    /// Virtual CPUs.
    pub cores: u64,
    /// Memory, MB.
    pub ram: u64,
    /// Instances.
    pub instances: u64,
    /// Public addresses.
    pub addresses: u64,
    /// Storage, GB.
    pub gigabytes: u64,
}

/// What a reservation's instances leave of what it holds.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Remaining {
    /// Virtual CPUs.
    pub cores: u64,
    /// Memory, MB.
    pub ram: u64,
    /// Instances.
    pub instances: u64,
}

/// Says that the priority asked for was lowered to the caller's grant.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct PriorityLowered {
    /// The priority asked for.
    pub requested: u32,
    /// The priority given.
    pub granted: u32,
    /// Why.
    pub reason: String,
}

/// What a reservation is missing on one host it lost capacity with.
///
/// Members are declared in alphabetical order, the order the lease records' JSON shows them.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, JsonSchema)]
pub struct MissingOnHost {
    /// How many hosts or instances.
    pub amount: u32,
    /// The host's Blazar id, while the host exists.
    pub host_id: Option<String>,
    /// The host's name, while it exists.
    pub hypervisor_hostname: Option<String>,
    /// The host's provider uuid.
    pub provider: Uuid,
    /// The host's status now (`up`, `down` or `maintenance`), while it exists.
    pub status: Option<String>,
}

/// What failures took from one reservation and could not be moved elsewhere.
///
/// Members are declared in alphabetical order, the order the lease records' JSON shows them.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, JsonSchema)]
pub struct MissingResources {
    /// How many hosts or instances in all.
    pub amount: u32,
    /// Per host it was lost with.
    pub hosts: Vec<MissingOnHost>,
    /// For instance reservations: what the missing instances are, per resource class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<BTreeMap<String, u64>>,
    /// What `amount` counts: `hosts` or `instances`.
    pub unit: String,
}

/// `reservationData`: a reservation as both styles show it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReservationData {
    /// Its id.
    pub reservation_id: Uuid,
    /// `initialized`, `active`, `terminated`, `expired`, `preempted` or `error`.
    pub reservation_status: String,
    /// Its start (RFC 3339, UTC).
    pub start_time: String,
    /// Its end (RFC 3339, UTC).
    pub end_time: String,
    /// When capacity not yet allocated is released.
    pub expiry_time: Option<String>,
    /// The zone.
    pub zone_id: Option<String>,
    /// Its priority.
    pub priority: u32,
    /// Owning project.
    pub project_id: String,
    /// What its instances leave of what it holds.
    pub remaining: Remaining,
    /// Its instances.
    pub allocations: Vec<Uuid>,
    /// When it was made (RFC 3339, UTC).
    pub created_on: String,
    /// When it last changed (RFC 3339, UTC).
    pub modified_on: String,
    /// What it asks for, in ETSI terms (Promise reservations).
    #[serde(flatten)]
    pub reserved: Reserved,
    /// What it asks for, as a capacity vector (Promise reservations).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<CapacityVector>,
    /// The addresses it holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_ips: Option<Vec<String>>,
    /// Why it is in its status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_reason: Option<String>,
    /// Whether a failure took part of it away.
    pub degraded: bool,
    /// Per part (ledger reservation id), what failures took away; absent when nothing is
    /// missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing_resources: Option<BTreeMap<Uuid, MissingResources>>,
    /// On create: the priority asked for was lowered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_lowered: Option<PriorityLowered>,
    /// Whose capacity it holds (berth): `local` for berth's own hosts, else each provider
    /// cloud's id, in that order; absent while it holds no host.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub provider_ids: Vec<String>,
}

/// The counter-offer of a refused request: the most that fits in the window, and the earliest
/// window of the same length where all of it fits.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Offer {
    /// The most that fits, in ETSI terms.
    pub max_capacity: Reserved,
    /// The most that fits, as a capacity vector.
    pub capacity: CapacityVector,
    /// The window asked for.
    pub window: TimeWindow,
    /// The earliest window where all of it fits, if one was found.
    pub earliest_window: Option<TimeWindow>,
    /// Whether the search for it was cut short.
    pub truncated: bool,
}

/// What a refused create or update adds to the problem document.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Refused {
    /// The counter-offer.
    pub offer: Offer,
}

/// `POST /promise/reservation/{kind}/create` and `/update`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReservationDataEnvelope {
    /// The reservation.
    pub reservation_data: ReservationData,
}

/// `queryResult`: one reservation when the filter names one, else a list.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(untagged)]
pub enum QueryResult {
    /// The one reservation the filter names.
    One(Box<ReservationData>),
    /// The reservations found.
    Many(Vec<ReservationData>),
}

/// `/promise/reservation/{kind}/query`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReservationQueryResult {
    /// The reservations.
    pub query_result: QueryResult,
}

/// `DELETE /promise/reservation/{kind}/{id}`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReservationTerminated {
    /// The reservation ended.
    pub reservation_id: Uuid,
}

/// The members of the `create-reservation` answer.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ReservationAccepted {
    /// The new reservation's id.
    #[serde(rename = "reservation-id")]
    pub reservation_id: Uuid,
    /// The new reservation.
    pub reservation: ReservationData,
}

/// The members of the `update-reservation` answer.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ReservationUpdated {
    /// The reservation as changed.
    pub reservation: ReservationData,
}

/// What the matching reservations hold at a step.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct HeldVector {
    /// Virtual CPUs.
    pub cores: i64,
    /// Memory, MB.
    pub ram: i64,
    /// Instances.
    pub instances: i64,
    /// Public addresses.
    pub addresses: i64,
}

/// One step of a `query-reservation` utilization.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct HeldStep {
    /// When the step starts (RFC 3339, UTC).
    pub timestamp: String,
    /// How many matching reservations hold capacity then.
    pub count: i64,
    /// What they hold.
    pub capacity: HeldVector,
}

/// The members of the `query-reservation` answer.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ReservationsMatched {
    /// The matching reservations, by start.
    pub reservations: Vec<Uuid>,
    /// What they hold over the window (empty unless asked for).
    pub utilization: Vec<HeldStep>,
}
