//! Provider status (up, down, maintenance) on the wire, shared by the Placement and Blazar
//! surfaces: the request body, the condition and what the change did to leases.

use crate::http::error::ApiError;
use berth_api::status::{Condition, LeaseEffects, StatusChange};
use berth_api::time::lease_time;
use berth_core::decide::health::Effects;
use berth_core::{LeaseId, Provider, ProviderStatus};
use serde::Deserialize;

/// `{"status": "up"|"down"|"maintenance", "reason": "..."}`.
#[derive(Debug, Deserialize)]
#[serde(transparent)]
pub struct StatusBody(pub StatusChange);

impl StatusBody {
    /// The status and reason, or 400 for an unknown status.
    pub fn parse(self) -> Result<(ProviderStatus, Option<String>), ApiError> {
        let StatusChange { status, reason } = self.0;
        let parsed = ProviderStatus::parse(&status).ok_or_else(|| {
            ApiError::bad_request(format!(
                "Unknown status {status:?}: expected up, down or maintenance"
            ))
        })?;
        Ok((parsed, reason))
    }
}

/// A provider's status, reason and since when.
pub fn condition(provider: &Provider) -> Condition {
    let condition = provider.condition();
    Condition {
        status: provider.status().as_str().to_owned(),
        reason: condition.and_then(|c| c.reason.clone()),
        since: condition.map(|c| lease_time(c.since.as_micros())),
    }
}

/// What a status change did to leases: healed, degraded, flagged and restored lease ids.
pub fn lease_effects(effects: Effects) -> LeaseEffects {
    let uuids = |ids: Vec<LeaseId>| ids.into_iter().map(LeaseId::uuid).collect();
    LeaseEffects {
        healed: uuids(effects.healed),
        degraded: uuids(effects.degraded),
        flagged: uuids(effects.flagged),
        restored: uuids(effects.restored),
    }
}
