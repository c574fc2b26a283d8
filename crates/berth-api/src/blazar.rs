//! Wire types of the Blazar reservation API (`/reservation/v1`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

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
