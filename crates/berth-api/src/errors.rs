//! The error envelopes, one a surface: Placement's `errors` list, Blazar's `error_code` body,
//! Ironic's `error_message` (for the bare-metal API), and RFC 9457 problem details for berth's
//! own endpoints (Promise too).
//!
//! A Blazar or problem body may carry machine-readable members beside these (a refusal's
//! shortfalls and counter-offer, a limit, the affected leases), merged in by the server.
//!
//! Every error berth answers has one code of [`ERROR_CODES`]: the table the README shows. Each
//! surface renders it in its upstream's envelope: Placement's `errors` list carries the
//! code's Placement code, Blazar's body carries only the status, and problem details carry
//! the code itself (with Promise's `result` and `message` beside it on the Promise RPCs).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One code of berth's error table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrorCode {
    /// The code, as problem details carry it.
    pub code: &'static str,
    /// The HTTP status it is answered with.
    pub status: u16,
    /// What it means.
    pub meaning: &'static str,
    /// The code Placement's envelope carries for it (`placement.undefined_code` for the
    /// generic ones).
    pub placement: &'static str,
}

/// Every error code berth answers, by status.
pub const ERROR_CODES: &[ErrorCode] = &[
    ErrorCode {
        code: "bad_request",
        status: 400,
        meaning: "The request is malformed or invalid; the detail names the field and the problem",
        placement: "placement.undefined_code",
    },
    ErrorCode {
        code: "query_bad_value",
        status: 400,
        meaning: "A query parameter has a value that cannot be used",
        placement: "placement.query.bad_value",
    },
    ErrorCode {
        code: "query_duplicate_key",
        status: 400,
        meaning: "A query parameter is given twice where it may be given once",
        placement: "placement.query.duplicate_key",
    },
    ErrorCode {
        code: "query_missing_value",
        status: 400,
        meaning: "A query parameter that needs a value has none",
        placement: "placement.query.missing_value",
    },
    ErrorCode {
        code: "limit_exceeded",
        status: 400,
        meaning: "The request is over a named limit; the body names it (`limit`) and what it allows (`max`)",
        placement: "limit_exceeded",
    },
    ErrorCode {
        code: "policy_violation",
        status: 400,
        meaning: "The window breaks the reservation policy; the detail names the rule",
        placement: "policy_violation",
    },
    ErrorCode {
        code: "provider_type_unsupported",
        status: 400,
        meaning: "The `provider-type` is not one berth registers; the detail names those it does",
        placement: "provider_type_unsupported",
    },
    ErrorCode {
        code: "unauthorized",
        status: 401,
        meaning: "No credentials, or credentials berth does not accept",
        placement: "unauthorized",
    },
    ErrorCode {
        code: "forbidden",
        status: 403,
        meaning: "The caller's roles do not allow the request, or the reservation it presents is another project's",
        placement: "forbidden",
    },
    ErrorCode {
        code: "not_found",
        status: 404,
        meaning: "The route, or the object the request names, does not exist (or is another project's)",
        placement: "placement.undefined_code",
    },
    ErrorCode {
        code: "resource_provider_not_found",
        status: 404,
        meaning: "The resource provider named does not exist",
        placement: "placement.resource_provider.not_found",
    },
    ErrorCode {
        code: "share_not_found",
        status: 404,
        meaning: "The lease is not shared with that project",
        placement: "share_not_found",
    },
    ErrorCode {
        code: "method_not_allowed",
        status: 405,
        meaning: "The route does not serve the method; `Allow` lists those it serves",
        placement: "placement.undefined_code",
    },
    ErrorCode {
        code: "not_acceptable",
        status: 406,
        meaning: "The `Accept` header refuses JSON, or the Placement microversion is not served",
        placement: "placement.undefined_code",
    },
    ErrorCode {
        code: "conflict",
        status: 409,
        meaning: "The request conflicts with the current state: the object exists, is in use, or the capacity is not there",
        placement: "placement.undefined_code",
    },
    ErrorCode {
        code: "concurrent_update",
        status: 409,
        meaning: "The generation sent is stale: read the object again and retry",
        placement: "placement.concurrent_update",
    },
    ErrorCode {
        code: "duplicate_name",
        status: 409,
        meaning: "Another object has this name or uuid",
        placement: "placement.duplicate_name",
    },
    ErrorCode {
        code: "inventory_inuse",
        status: 409,
        meaning: "The inventory to remove or shrink is allocated",
        placement: "placement.inventory.inuse",
    },
    ErrorCode {
        code: "resource_provider_inuse",
        status: 409,
        meaning: "The resource provider to delete has allocations",
        placement: "placement.resource_provider.inuse",
    },
    ErrorCode {
        code: "resource_provider_cannot_delete_parent",
        status: 409,
        meaning: "The resource provider to delete has children",
        placement: "placement.resource_provider.cannot_delete_parent",
    },
    ErrorCode {
        code: "not_enough_resources",
        status: 409,
        meaning: "The reservation does not fit; the body lists each shortfall and the counter-offer",
        placement: "not_enough_resources",
    },
    ErrorCode {
        code: "series_does_not_fit",
        status: 409,
        meaning: "Some occurrences of a recurring lease do not fit, so none was admitted; the body lists each (`conflicts`) with the nearest window that fits",
        placement: "series_does_not_fit",
    },
    ErrorCode {
        code: "hold_mismatch",
        status: 409,
        meaning: "A lease made from a hold (`hold_id`) asks for more than, or other than, what was held, or the hold lapsed; the detail says which",
        placement: "hold_mismatch",
    },
    ErrorCode {
        code: "too_many_holds",
        status: 409,
        meaning: "The project already keeps the most open holds it may (`HOLDS_PER_PROJECT_MAX`); use or release one first",
        placement: "too_many_holds",
    },
    ErrorCode {
        code: "share_exceeded",
        status: 409,
        meaning: "The consumers of a project a lease is shared with would hold more of a class inside it than the share's cap; the detail names the cap and what they hold",
        placement: "share_exceeded",
    },
    ErrorCode {
        code: "budget_exceeded",
        status: 409,
        meaning: "The lease would take its project past its budget of a class's unit-hours in a period; the body names the budget (`budget`) and what would fit it (`counter_offer`: an earlier `end_date`, or fewer hosts or instances as `amount`)",
        placement: "budget_exceeded",
    },
    ErrorCode {
        code: "capacity_in_use",
        status: 409,
        meaning: "The capacity decrease would leave reservations short; the body lists them (`affected`)",
        placement: "capacity_in_use",
    },
    ErrorCode {
        code: "no_room_left",
        status: 409,
        meaning: "The reservation has no room left for the instance; the body says what it has left (`room`)",
        placement: "no_room_left",
    },
    ErrorCode {
        code: "invalid_state_transition",
        status: 409,
        meaning: "The node cannot move to that provision state from its own",
        placement: "invalid_state_transition",
    },
    ErrorCode {
        code: "claim_required",
        status: 409,
        meaning: "Deploying the node needs its live claim",
        placement: "claim_required",
    },
    ErrorCode {
        code: "node_in_use",
        status: 409,
        meaning: "The node is claimed, deployed or reserved",
        placement: "node_in_use",
    },
    ErrorCode {
        code: "no_node_available",
        status: 409,
        meaning: "No candidate node can be claimed; the body says why, per node (`nodes`)",
        placement: "no_node_available",
    },
    ErrorCode {
        code: "provider_clouds_disabled",
        status: 409,
        meaning: "berth has no key to seal credentials with (`[provider_clouds] credential_key`), so it registers no provider cloud",
        placement: "provider_clouds_disabled",
    },
    ErrorCode {
        code: "provider_cloud_unreachable",
        status: 409,
        meaning: "The request does not fit, and capacity it could take is a provider cloud's that berth could not reach at its last synchronisation (unknown since then); the message names the provider and why",
        placement: "provider_cloud_unreachable",
    },
    ErrorCode {
        code: "provider_cloud_refused",
        status: 409,
        meaning: "berth placed an instance on a provider cloud's capacity and that cloud's Placement refused the allocation (taken there outside berth); nothing was created, and berth reads the cloud again",
        placement: "provider_cloud_refused",
    },
    ErrorCode {
        code: "provider_cloud_in_use",
        status: 409,
        meaning: "Reservations or instances still hold the provider cloud's capacity; an admin removes it anyway with `force`",
        placement: "provider_cloud_in_use",
    },
    ErrorCode {
        code: "idempotency_key_object_gone",
        status: 410,
        meaning: "The object an `Idempotency-Key` created is gone",
        placement: "idempotency_key_object_gone",
    },
    ErrorCode {
        code: "payload_too_large",
        status: 413,
        meaning: "The body is larger than the server accepts",
        placement: "payload_too_large",
    },
    ErrorCode {
        code: "unsupported_media_type",
        status: 415,
        meaning: "The body is not `application/json`",
        placement: "unsupported_media_type",
    },
    ErrorCode {
        code: "not_writer",
        status: 421,
        meaning: "A write forwarded between replicas reached one that does not take it; nothing was done",
        placement: "not_writer",
    },
    ErrorCode {
        code: "idempotency_key_reused",
        status: 422,
        meaning: "The `Idempotency-Key` was sent before with a different request",
        placement: "idempotency_key_reused",
    },
    ErrorCode {
        code: "provider_unreachable",
        status: 422,
        meaning: "The provider cloud's Keystone could not be reached or did not answer as Keystone; nothing was registered",
        placement: "provider_unreachable",
    },
    ErrorCode {
        code: "provider_credentials_refused",
        status: 422,
        meaning: "The provider cloud's Keystone refused the credentials; nothing was registered",
        placement: "provider_credentials_refused",
    },
    ErrorCode {
        code: "provider_service_missing",
        status: 422,
        meaning: "The provider cloud's service catalog has no Placement endpoint (in the region asked); nothing was registered",
        placement: "provider_service_missing",
    },
    ErrorCode {
        code: "internal",
        status: 500,
        meaning: "berth failed; the cause is in its log, never in the answer",
        placement: "internal",
    },
    ErrorCode {
        code: "busy",
        status: 503,
        meaning: "The database is busy; retrying shortly is safe",
        placement: "busy",
    },
    ErrorCode {
        code: "identity_unavailable",
        status: 503,
        meaning: "The identity service (Keystone) could not be reached to check the token",
        placement: "identity_unavailable",
    },
    ErrorCode {
        code: "timeout_not_committed",
        status: 503,
        meaning: "The request timed out before it was decided: nothing changed, retrying is safe",
        placement: "timeout_not_committed",
    },
    ErrorCode {
        code: "timeout_outcome_unknown",
        status: 503,
        meaning: "The request timed out while its write was being committed: read before retrying",
        placement: "timeout_outcome_unknown",
    },
];

/// The row of `code`.
pub fn error_code(code: &str) -> Option<&'static ErrorCode> {
    ERROR_CODES.iter().find(|row| row.code == code)
}

/// The table as the README shows it (a Markdown table).
pub fn error_table() -> String {
    let mut table =
        String::from("| code | status | meaning | Placement's code |\n|---|---|---|---|\n");
    for row in ERROR_CODES {
        table.push_str(&format!(
            "| `{}` | {} | {} | `{}` |\n",
            row.code, row.status, row.meaning, row.placement
        ));
    }
    table
}

/// One error of Placement's envelope.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct PlacementError {
    /// The HTTP status.
    pub status: u16,
    /// The status's reason phrase.
    pub title: String,
    /// What went wrong.
    pub detail: String,
    /// The request's id (`req-<uuid>`), also in the `x-openstack-request-id` header.
    pub request_id: String,
    /// A stable code such as `placement.concurrent_update` (from microversion 1.23).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// The lowest microversion served (on a 406 for an unsupported version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_version: Option<String>,
    /// The highest microversion served (on a 406 for an unsupported version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_version: Option<String>,
}

/// Placement's error envelope.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct PlacementErrors {
    /// The errors, one in practice.
    pub errors: Vec<PlacementError>,
}

/// Blazar's error body.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct BlazarError {
    /// The HTTP status.
    pub error_code: u16,
    /// What went wrong.
    pub error_message: String,
    /// The HTTP status again, as Blazar sends it.
    pub error_name: u16,
}

/// Ironic's error body, as the bare-metal API answers errors: the fault, JSON-encoded into a
/// string, as Ironic sends it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct IronicError {
    /// An [`IronicFault`] as JSON text.
    pub error_message: String,
}

/// What [`IronicError::error_message`] encodes.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct IronicFault {
    /// What went wrong.
    pub faultstring: String,
    /// `Client` for a 4xx answer, `Server` for a 5xx one.
    pub faultcode: String,
    /// Always null: berth shows no debugging information.
    pub debuginfo: Option<String>,
}

/// RFC 9457 problem details, for berth's own endpoints.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Problem {
    /// `https://berth.dev/errors/<code>`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The status's reason phrase.
    pub title: String,
    /// The HTTP status.
    pub status: u16,
    /// What went wrong.
    pub detail: String,
    /// A stable code.
    pub code: String,
    /// The request's id.
    pub request_id: String,
}

/// Why one requested item of a reservation does not fit.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Shortfall {
    /// The item's position in the request.
    pub index: usize,
    /// What it asks for, for example `physical:host`.
    pub resource_type: String,
    /// How many it asks for.
    pub requested: u32,
    /// How many are free over its window.
    pub available: u32,
    /// Why, as a stable word.
    pub reason: String,
}

/// What berth offers instead: the amounts that fit now, or the earliest start of the whole.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct CounterOffer {
    /// The most of each item that fits the asked window.
    pub amounts: Vec<u32>,
    /// The earliest start at which the whole request fits, if one was found.
    pub earliest_start: Option<String>,
    /// Whether the search stopped at its bound before it could answer.
    pub truncated: bool,
}

/// The members a refusal for lack of capacity adds to its error body.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Refusal {
    /// Each item that does not fit.
    pub reservations: Vec<Shortfall>,
    /// The counter-offer.
    pub counter_offer: CounterOffer,
}

/// The members a refused recurring lease adds to its error body (berth).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct SeriesRefusal {
    /// How many occurrences the series has.
    pub occurrences: u32,
    /// Each occurrence that does not fit, in order.
    pub conflicts: Vec<OccurrenceConflict>,
}

/// One occurrence of a refused recurring lease that does not fit.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct OccurrenceConflict {
    /// Its place in the series, from 0 (the request's own window).
    pub index: u32,
    /// Its start.
    pub start_date: String,
    /// Its end.
    pub end_date: String,
    /// Each reservation that does not fit in its window.
    pub reservations: Vec<Shortfall>,
    /// The nearest window at or after its own in which it fits, same duration, if one was
    /// found (searched for the first `RECURRENCE_ALTERNATIVES_MAX` conflicts only).
    pub alternative: Option<Window>,
    /// Whether the search for the alternative stopped at its bound.
    pub truncated: bool,
}

/// A window of time.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Window {
    /// Its start.
    pub start_date: String,
    /// Its end.
    pub end_date: String,
}

/// The members a request over a named limit adds to its error body.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct LimitExceeded {
    /// The limit's name.
    pub limit: String,
    /// What it allows.
    pub max: u64,
}

/// Why one node of a claim could not be taken.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct NodeRefusal {
    /// The node.
    pub node_uuid: uuid::Uuid,
    /// Why, as a stable word.
    pub reason: String,
    /// Why, in words.
    pub detail: String,
}

/// The members a refused node claim adds to its error body.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct NodeRefusals {
    /// Each candidate node and why it could not be taken.
    pub nodes: Vec<NodeRefusal>,
}

/// The members a lease refused for its project's budget adds to its error body.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct BudgetExceeded {
    /// The budget it would pass.
    pub budget: BudgetFigures,
    /// What would fit it, when something does.
    pub counter_offer: BudgetOffer,
}

/// A budget's figures in the period a refused lease would pass its limit in.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct BudgetFigures {
    /// The project.
    pub project_id: String,
    /// The resource class.
    pub resource_class: String,
    /// `day`, `week` or `month`.
    pub period: String,
    /// The period's start (`%Y-%m-%dT%H:%M:%S.%f`, UTC).
    pub period_start: String,
    /// The most unit-hours of the class the project's leases may hold in a period.
    pub limit_hours: u64,
    /// What the period is charged already, in unit-hours.
    pub charged_hours: f64,
    /// What the lease would add, in unit-hours.
    pub asked_hours: f64,
}

/// What would fit a budget: the same lease ending earlier, or holding fewer hosts or instances.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct BudgetOffer {
    /// The latest end, to the minute, at which the same lease fits.
    pub end_date: Option<String>,
    /// The most hosts or instances of its one reservation that fit over the same window.
    pub amount: Option<u32>,
}

/// The members an instance refused for want of room in its reservation adds to its error body.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct NoRoomLeft {
    /// What the reservation has left, in Promise's terms.
    pub room: PoolRoom,
}

/// What a reservation has left for instances.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PoolRoom {
    /// Instances.
    pub num_vc_instances: u64,
    /// Cores.
    pub num_cpu_cores: u64,
    /// Memory, MB.
    pub virtual_mem_size: u64,
}

/// The members a refused capacity decrease adds to its error body.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct CapacityInUse {
    /// The leases that hold what the change would take away.
    pub affected: Vec<uuid::Uuid>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_and_each_status_has_one_generic_code() {
        let mut codes: Vec<&str> = ERROR_CODES.iter().map(|row| row.code).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), ERROR_CODES.len(), "a code twice");
        let mut generic: Vec<u16> = ERROR_CODES
            .iter()
            .filter(|row| row.placement == "placement.undefined_code")
            .map(|row| row.status)
            .collect();
        let count = generic.len();
        generic.dedup();
        assert_eq!(generic.len(), count, "one generic code per status");
        assert!(
            ERROR_CODES.windows(2).all(|w| w[0].status <= w[1].status),
            "the table is by status"
        );
    }

    /// The README shows the table exactly.
    #[test]
    fn the_readme_shows_the_table() {
        let readme = include_str!("../../../README.md");
        assert!(
            readme.contains(&error_table()),
            "README.md's error table differs from berth_api::errors::ERROR_CODES; it should read:\n{}",
            error_table()
        );
    }
}
