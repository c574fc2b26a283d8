//! Provider status (up, down, maintenance) on the wire, shared by the Placement and Blazar
//! surfaces: the request body, the condition and what the change did to leases.

use crate::http::error::ApiError;
use berth_api::time::lease_time;
use berth_core::decide::health::Effects;
use berth_core::{Provider, ProviderStatus};
use serde::Deserialize;
use serde_json::{Value, json};

/// `{"status": "up"|"down"|"maintenance", "reason": "..."}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatusBody {
    status: String,
    #[serde(default)]
    reason: Option<String>,
}

impl StatusBody {
    /// The status and reason, or 400 for an unknown status.
    pub fn parse(self) -> Result<(ProviderStatus, Option<String>), ApiError> {
        let status = ProviderStatus::parse(&self.status).ok_or_else(|| {
            ApiError::bad_request(format!(
                "Unknown status {:?}: expected up, down or maintenance",
                self.status
            ))
        })?;
        Ok((status, self.reason))
    }
}

/// A provider's status, reason and since when.
pub fn condition_json(provider: &Provider) -> Value {
    let condition = provider.condition();
    json!({
        "status": provider.status().as_str(),
        "reason": condition.and_then(|c| c.reason.clone()),
        "since": condition.map(|c| lease_time(c.since.as_micros())),
    })
}

/// What a status change did to leases: healed, degraded, flagged and restored lease ids.
pub fn effects_json(effects: &Effects) -> Value {
    json!({
        "healed": effects.healed,
        "degraded": effects.degraded,
        "flagged": effects.flagged,
        "restored": effects.restored,
    })
}
