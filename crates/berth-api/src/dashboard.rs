//! The dashboard's own reads (`/ui/api/...`): zones at a glance and providers out of service.

use crate::status::Condition;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// An availability zone at a glance.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Zone {
    /// The zone's name.
    pub name: String,
    /// Its hosts.
    pub hosts: usize,
    /// Its hosts that are down or in maintenance.
    pub hosts_out_of_service: usize,
    /// The resource classes its hosts offer.
    pub resource_classes: Vec<String>,
}

/// `GET /ui/api/zones`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ZoneList {
    /// Every zone.
    pub zones: Vec<Zone>,
}

/// A lease a provider out of service affects.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct AffectedLease {
    /// The lease.
    pub id: Uuid,
    /// Its name.
    pub name: String,
    /// Its project.
    pub project_id: String,
    /// Its status.
    pub status: String,
    /// Whether it misses part of what it reserved.
    pub degraded: bool,
    /// Its start (Blazar's lease time format).
    pub start_date: String,
    /// Its end (Blazar's lease time format).
    pub end_date: String,
    /// How many units it misses on this provider.
    pub missing_here: u32,
}

/// A provider out of service with the leases it affects.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Failure {
    /// Its status, reason and since when.
    #[serde(flatten)]
    pub condition: Condition,
    /// The provider.
    pub provider_uuid: Uuid,
    /// Its Blazar host id, if it is a host.
    pub host_id: Option<String>,
    /// Its name.
    pub name: String,
    /// Its availability zone.
    pub availability_zone: Option<String>,
    /// The leases it affects.
    pub leases: Vec<AffectedLease>,
}

/// `GET /ui/api/failures`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct FailureList {
    /// Every provider out of service.
    pub providers: Vec<Failure>,
}
