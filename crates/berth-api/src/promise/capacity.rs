//! Capacity queries: the ETSI-style `/promise/capacity/{kind}/query` and the RPC
//! `query-capacity`, their requests and their answers.

use crate::promise::{Count, Flag, Names, Text};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The figures of a capacity query the `attributeSelector` keeps (all four by default).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Figures {
    /// Neither reserved nor allocated (the least over the window).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available: Option<i64>,
    /// Held by reservations and not used by their consumers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserved: Option<i64>,
    /// Usable capacity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<i64>,
    /// Used by consumers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocated: Option<i64>,
}

/// One step of the utilization: the figures from `timestamp` until the next step.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct FiguresStep {
    /// When the step starts (RFC 3339, UTC).
    pub timestamp: String,
    /// The figures.
    #[serde(flatten)]
    pub figures: Figures,
}

/// How many instances of the shape asked for fit over the whole window.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct InstancesAvailable {
    /// That number.
    pub available: u64,
}

/// `capacityInformation`: instances of a shape, or the figures of one resource type.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(untagged)]
pub enum CapacityInformation {
    /// For a flavor or `resourceCriteria`.
    Instances(InstancesAvailable),
    /// For a resource type id.
    Figures(Figures),
}

/// A query's window.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TimePeriod {
    /// Its start (RFC 3339, UTC).
    pub start_time: String,
    /// Its end (RFC 3339, UTC).
    pub stop_time: String,
}

/// One provider's share of an ETSI capacity query's answer.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderCapacityInformation {
    /// A provider cloud's id, or `local` for berth's own capacity (its hosts and floating IPs).
    pub provider_id: String,
    /// The capacity over the window of that provider's resources alone.
    pub capacity_information: CapacityInformation,
    /// How much of that provider's `reserved` open holds keep, at its peak over the window
    /// (berth). Absent as at the top level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<i64>,
}

/// The answer of `/promise/capacity/{kind}/query`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapacityQueryResult {
    /// The zone asked about, or every zone.
    pub zone_id: Option<String>,
    /// When the answer was computed (RFC 3339, UTC).
    pub last_update: String,
    /// The window.
    pub time_period: TimePeriod,
    /// The capacity over the window.
    pub capacity_information: CapacityInformation,
    /// On request, the step function of the figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utilization: Option<Vec<FiguresStep>>,
    /// How much of `reserved` open holds keep, at its peak over the window (berth): held
    /// capacity counts as reserved. Absent for the instance and volume counts and for a fit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<i64>,
    /// The same per provider (berth): berth's own capacity (`local`) when it has some in the
    /// zone, then each provider cloud with resources there, by id; only the provider asked
    /// for, when the query names one. The figures of the providers add up to those above.
    #[serde(default)]
    pub providers: Vec<ProviderCapacityInformation>,
}

/// The capacity vector of a capacity query: one figure per member.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct CapacityLevels {
    /// Virtual CPUs.
    pub cores: i64,
    /// Memory, MB.
    pub ram: i64,
    /// Disk, GB.
    pub gigabytes: i64,
    /// Floating IP addresses.
    pub addresses: i64,
}

/// `capacity` of a `query-capacity` answer: the vector of the figure asked for.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct SelectedCapacity {
    /// Neither reserved nor allocated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available: Option<CapacityLevels>,
    /// Usable capacity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<CapacityLevels>,
    /// Held by reservations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserved: Option<CapacityLevels>,
    /// Used by consumers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<CapacityLevels>,
}

/// One step of a `query-capacity` utilization.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct CapacityStep {
    /// When the step starts (RFC 3339, UTC).
    pub timestamp: String,
    /// The vector from then on.
    pub capacity: CapacityLevels,
}

/// One provider's share of a `query-capacity` answer.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ProviderCapacity {
    /// A provider cloud's id, or `local` for berth's own capacity (its hosts and floating IPs).
    #[serde(rename = "provider-id")]
    pub provider_id: String,
    /// The figure asked for, over the window, of that provider's resources alone.
    pub capacity: SelectedCapacity,
    /// How much of that provider's reserved capacity open holds keep, at its peak over the
    /// window (berth).
    pub held: CapacityLevels,
}

/// The members of the `query-capacity` answer.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct CapacityAnswer {
    /// The figure asked for, over the window.
    pub capacity: SelectedCapacity,
    /// The zone asked about, or every zone.
    pub zone: Option<String>,
    /// The resource collections in the window: the planned capacity changes in force
    /// (`ResourcePool:<id>`, as `increase-capacity` and `decrease-capacity` answer them), then the
    /// reservations holding capacity (`ResourceReservation:<id>`).
    pub collections: Vec<String>,
    /// The step function of the figure (empty unless asked for).
    pub utilization: Vec<CapacityStep>,
    /// How much of the reserved capacity open holds keep (berth), at its peak over the window:
    /// held capacity counts as reserved, and this says how much of it is only held, not yet
    /// a lease. Zeros when nothing is held.
    #[serde(default)]
    pub held: CapacityLevels,
    /// The same per provider (berth): berth's own capacity (`local`) when it has some in the
    /// zone, then each provider cloud with resources there, by id; only the provider asked
    /// for, when the query names one. The figures of the providers add up to `capacity`.
    #[serde(default)]
    pub providers: Vec<ProviderCapacity>,
}

/// The window of an ETSI capacity query: dates are RFC 3339, `YYYY-MM-DD HH:MM` (UTC) or
/// `now`. Absent, the start is now and the end one second later.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TimePeriodRequest {
    /// Its start (absent: now).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<String>,
    /// Its end (absent: one second after the start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_time: Option<String>,
    /// Its end, when `stopTime` is absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time: Option<String>,
}

/// Virtual CPUs of a shape.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CpuCriteria {
    /// How many (other members, such as `cpuArchitecture`, are ignored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_virtual_cpu: Option<Count>,
}

/// Memory of a shape.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemoryCriteria {
    /// MB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtual_mem_size: Option<Count>,
}

/// Disk of a shape.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StorageCriteria {
    /// GB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_of_storage: Option<Count>,
}

/// `resourceCriteria`: the shape whose instances a compute query counts (each size nested or
/// flat, the nested form first), or the volume size a storage query counts. Sizes are whole
/// numbers up to 1,024,000,000; other members (`typeOfStorage`,
/// `rdmaSupported`, ...) are ignored.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ResourceCriteria {
    /// Virtual CPUs (compute).
    #[serde(
        rename = "virtualCPU",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub virtual_cpu_upper: Option<CpuCriteria>,
    /// Virtual CPUs, when `virtualCPU` is absent (compute).
    #[serde(
        rename = "virtualCpu",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub virtual_cpu: Option<CpuCriteria>,
    /// Virtual CPUs, when neither object is given (compute).
    #[serde(
        rename = "numVirtualCpu",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub num_virtual_cpu: Option<Count>,
    /// Memory (compute).
    #[serde(
        rename = "virtualMemory",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub virtual_memory: Option<MemoryCriteria>,
    /// Memory, MB, when `virtualMemory` is absent (compute).
    #[serde(
        rename = "virtualMemSize",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub virtual_mem_size: Option<Count>,
    /// Disk (compute).
    #[serde(
        rename = "storageAttributes",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub storage_attributes: Option<StorageCriteria>,
    /// Disk, when `storageAttributes` is absent (compute).
    #[serde(
        rename = "virtualDisk",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub virtual_disk: Option<StorageCriteria>,
    /// Disk (compute, when neither object is given) or the volume size (storage), GB.
    #[serde(
        rename = "sizeOfStorage",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub size_of_storage: Option<Count>,
}

/// The input of `/promise/capacity/{kind}/query` (`kind`: `compute`, `network` or `storage`),
/// as a JSON body or as query parameters (`timePeriod.startTime=...`). What is measured: a
/// flavor's or a shape's instances (`flavorId`, else `resourceCriteria` with the resource type
/// id absent or `vcInstances` for compute, `volumes` for storage), or else the figures of the
/// resource type id. Members other than these are ignored.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EtsiCapacityQuery {
    /// The zone (absent: every zone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone_id: Option<Text>,
    /// The window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_period: Option<TimePeriodRequest>,
    /// The figures to answer with: `available`, `reserved`, `total`, `allocated` (absent:
    /// all four).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attribute_selector: Option<Names>,
    /// Whether to answer with the step function of the figures too (default `false`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub show_utilization: Option<Flag>,
    /// The same, as Promise spells it (read first).
    #[serde(
        rename = "show-utilization",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub show_utilization_rpc: Option<Flag>,
    /// Reservations to leave out, as if they did not exist (uuids, possibly
    /// `ResourceReservation:`-prefixed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub without: Option<Names>,
    /// A flavor (id or name): count its instances.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flavor_id: Option<Text>,
    /// On `compute`: `numCpuCores`, `virtualMemSize`, `virtualDisk` or `vcInstances`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_resource_type_id: Option<Text>,
    /// On `network`: `publicIps`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_resource_type_id: Option<Text>,
    /// On `storage`: `storageSize` or `volumes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_resource_type_id: Option<Text>,
    /// The shape or volume size whose instances to count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_criteria: Option<ResourceCriteria>,
    /// Only this provider's capacity (berth): a provider cloud's id (`add-provider`'s
    /// `provider-id`, or `ResourceProvider:<id>`), or `local` for berth's own (its hosts and
    /// floating IPs). Absent: every provider's, and the answer's `providers` says what each
    /// holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_id: Option<Text>,
}

/// The window of a Promise RPC: dates are RFC 3339, `YYYY-MM-DD HH:MM` (UTC) or `now`.
/// Absent, the start is now and the end one second later.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct RequestWindow {
    /// Its start (absent: now).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
    /// Its end (absent: one second after the start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<String>,
}

/// The input of `POST /promise/query-capacity`, as a JSON body or as query parameters.
/// Members other than these are ignored.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct QueryCapacity {
    /// The window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<RequestWindow>,
    /// The figure to answer with: `available` (the default), `total`, `reserved`, `usage` or
    /// `allocated` (answered as `usage`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<Text>,
    /// The zone (absent: every zone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<Text>,
    /// Whether to answer with the step function of the figure too (default `true`).
    #[serde(
        rename = "show-utilization",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub show_utilization: Option<Flag>,
    /// The same, in the ETSI spelling (read when `show-utilization` is absent).
    #[serde(
        rename = "showUtilization",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub show_utilization_etsi: Option<Flag>,
    /// Reservations to leave out, as if they did not exist (uuids, possibly
    /// `ResourceReservation:`-prefixed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub without: Option<Names>,
    /// Only this provider's capacity: a provider cloud's id (`add-provider`'s `provider-id`, or
    /// `ResourceProvider:<id>`), or `local` for berth's own (its hosts and floating IPs).
    /// Absent: every provider's, and the answer's `providers` says what each holds.
    #[serde(
        rename = "provider-id",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub provider_id: Option<Text>,
    /// The seed's way to name the provider, read when `provider-id` is absent:
    /// `ResourceProvider:<id>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<Text>,
}
