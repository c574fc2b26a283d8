//! How domain rejections and the service's errors appear on the wire: status and stable code
//! for each, and a refused request's shortfalls and counter-offer.

use crate::http::error::{ApiError, UNDEFINED, members};
use axum::http::StatusCode;
use berth_api::errors::{
    CapacityInUse, CounterOffer, LimitExceeded, NoRoomLeft, NodeRefusal, NodeRefusals,
    OccurrenceConflict, PoolRoom, Refusal as RefusalMembers, SeriesRefusal as SeriesMembers,
    Shortfall, Window,
};
use berth_api::time::lease_time;
use berth_app::AppError;
use berth_core::Rejection;
use berth_core::rejection::{Refusal, SeriesRefusal};
use serde_json::Value;

/// Placement's code for a stale generation.
pub const CONCURRENT_UPDATE: &str = "placement.concurrent_update";
/// Placement's code for a name or uuid collision.
pub const DUPLICATE_NAME: &str = "placement.duplicate_name";
/// berth's code for a lease request that does not fit (the body carries the counter-offer).
pub const NOT_ENOUGH_RESOURCES: &str = "not_enough_resources";
/// berth's code for a recurring lease some occurrences of which do not fit.
pub const SERIES_DOES_NOT_FIT: &str = "series_does_not_fit";
/// berth's code for an `Idempotency-Key` sent again with a different request.
pub const IDEMPOTENCY_KEY_REUSED: &str = "idempotency_key_reused";
/// berth's code for a request over one of the named limits (the body names the limit).
pub const LIMIT_EXCEEDED: &str = "limit_exceeded";
/// Placement's code for removing an inventory that is in use.
pub const INVENTORY_INUSE: &str = "placement.inventory.inuse";

/// The status and code of a rejection (the order of arms follows [`Rejection`]).
// One table of arms, one per rejection: splitting it would hide the table.
#[allow(clippy::too_many_lines)]
pub fn to_api_error(rejection: &Rejection) -> ApiError {
    let detail = rejection.to_string();
    let (status, code) = match rejection {
        Rejection::ProviderNotFound(_) | Rejection::HostNotFound(_) => {
            (StatusCode::NOT_FOUND, UNDEFINED)
        }
        Rejection::DuplicateName(_) | Rejection::DuplicateUuid(_) => {
            (StatusCode::CONFLICT, DUPLICATE_NAME)
        }
        Rejection::GenerationConflict { .. } | Rejection::ConsumerGenerationConflict { .. } => {
            (StatusCode::CONFLICT, CONCURRENT_UPDATE)
        }
        Rejection::NoInventory { .. }
        | Rejection::AllocationUnitRules { .. }
        | Rejection::CapacityExceeded { .. } => (StatusCode::CONFLICT, UNDEFINED),
        Rejection::ConsumerNotFound(_) => (StatusCode::NOT_FOUND, UNDEFINED),
        Rejection::ProviderHasChildren(_) => (
            StatusCode::CONFLICT,
            "placement.resource_provider.cannot_delete_parent",
        ),
        Rejection::ProviderInUse(_) => (StatusCode::CONFLICT, "placement.resource_provider.inuse"),
        Rejection::InventoryInUse { .. } => (StatusCode::CONFLICT, INVENTORY_INUSE),
        Rejection::InventoryNotFound { .. } | Rejection::TraitNotFound(_) => {
            (StatusCode::NOT_FOUND, UNDEFINED)
        }
        Rejection::DuplicateAggregateName(_)
        | Rejection::InventoryExists { .. }
        | Rejection::ResourceClassExists(_)
        | Rejection::ResourceClassInUse(_)
        | Rejection::TraitInUse(_)
        | Rejection::HostExists(_)
        | Rejection::HostNotRoot(_)
        | Rejection::HostInUse(_)
        | Rejection::HostHasChildren(_) => (StatusCode::CONFLICT, UNDEFINED),
        Rejection::ParentNotFound(_)
        | Rejection::BadName
        | Rejection::ParentCycle
        | Rejection::ParentIsSelf
        | Rejection::TreeTooDeep
        | Rejection::ReparentNotAllowed
        | Rejection::UnparentNotAllowed
        | Rejection::UnknownResourceClass(_)
        | Rejection::UnknownTraits(_)
        | Rejection::BadInventory { .. }
        | Rejection::NotCustomName(_)
        | Rejection::ResourceClassStandard(_)
        | Rejection::TraitStandard(_)
        | Rejection::BadAttribute { .. }
        | Rejection::NothingToUpdate
        | Rejection::AllocationProviderNotFound(_)
        | Rejection::DuplicateConsumer(_)
        | Rejection::TooMany(_)
        | Rejection::BadLease(_)
        | Rejection::BadBudget(_)
        | Rejection::BadSubscription(_) => (StatusCode::BAD_REQUEST, UNDEFINED),
        Rejection::Policy { .. } => (StatusCode::BAD_REQUEST, "policy_violation"),
        Rejection::LimitExceeded { limit, max, .. } => return limit_error(limit, *max, detail),
        Rejection::LeaseNotFound(_)
        | Rejection::FloatingIpNotFound(_)
        | Rejection::PropertyNotFound(_)
        | Rejection::FlavorNotFound(_)
        | Rejection::ProviderCloudNotFound(_)
        | Rejection::ZoneNotFound(_)
        | Rejection::InstanceNotFound(_) => (StatusCode::NOT_FOUND, UNDEFINED),
        Rejection::ProviderImported { .. } => (StatusCode::CONFLICT, UNDEFINED),
        Rejection::ProviderCloudUnreachable { .. } => {
            (StatusCode::CONFLICT, "provider_cloud_unreachable")
        }
        Rejection::ProviderCloudRefused { .. } => (StatusCode::CONFLICT, "provider_cloud_refused"),
        Rejection::ProviderCloudInUse { .. } => (StatusCode::CONFLICT, "provider_cloud_in_use"),
        Rejection::FlavorExists(_)
        | Rejection::ProviderCloudExists(_)
        | Rejection::InstanceRefused(_) => (StatusCode::CONFLICT, UNDEFINED),
        Rejection::NoRoomLeft { room, .. } => {
            return ApiError::new(StatusCode::CONFLICT, "no_room_left", detail).with_extra(
                NoRoomLeft {
                    room: PoolRoom {
                        num_vc_instances: room.instances,
                        num_cpu_cores: room.vcpus,
                        virtual_mem_size: room.ram_mb,
                    },
                },
            );
        }
        Rejection::SourceNotFound(_)
        | Rejection::PoolNotFound(_)
        | Rejection::SubscriptionNotFound(_)
        | Rejection::DeliveryNotFound(_) => (StatusCode::NOT_FOUND, UNDEFINED),
        Rejection::CapacityInUse(leases) => {
            return ApiError::new(StatusCode::CONFLICT, "capacity_in_use", detail).with_extra(
                CapacityInUse {
                    affected: leases.iter().map(|id| id.uuid()).collect(),
                },
            );
        }
        Rejection::HoldMismatch(_) => (StatusCode::CONFLICT, "hold_mismatch"),
        Rejection::TooManyHolds { .. } => (StatusCode::CONFLICT, "too_many_holds"),
        Rejection::CantUpdate(_)
        | Rejection::FloatingIpExists(_)
        | Rejection::FloatingIpInUse(_)
        | Rejection::ReservationUnavailable { .. }
        | Rejection::ReservationExceeded { .. }
        | Rejection::Fenced { .. } => (StatusCode::CONFLICT, UNDEFINED),
        Rejection::ReservationForbidden(_) => (StatusCode::FORBIDDEN, "forbidden"),
        Rejection::ShareNotFound { .. } => (StatusCode::NOT_FOUND, "share_not_found"),
        Rejection::BudgetNotFound(_) => (StatusCode::NOT_FOUND, UNDEFINED),
        Rejection::ShareExceeded { .. } => (StatusCode::CONFLICT, "share_exceeded"),
        Rejection::BudgetExceeded(refused) => {
            use berth_core::model::budget::hours;
            let time = |at: berth_core::Instant| berth_api::time::lease_time(at.as_micros());
            return ApiError::new(StatusCode::CONFLICT, "budget_exceeded", detail).with_extra(
                berth_api::errors::BudgetExceeded {
                    budget: berth_api::errors::BudgetFigures {
                        project_id: refused.project.clone(),
                        resource_class: refused.class.clone(),
                        period: refused.period.as_str().to_owned(),
                        period_start: time(refused.period_start),
                        limit_hours: refused.limit_hours,
                        charged_hours: hours(refused.charged_seconds),
                        asked_hours: hours(refused.asked_seconds),
                    },
                    counter_offer: berth_api::errors::BudgetOffer {
                        end_date: refused.shorter_end.map(time),
                        amount: refused.fewer,
                    },
                },
            );
        }
        Rejection::NodeNotFound(_)
        | Rejection::ClaimNotFound(_)
        | Rejection::AllocationNotFound(_)
        | Rejection::BadNode(_)
        | Rejection::NodeTransition { .. }
        | Rejection::NodeInUse(_)
        | Rejection::DeployRefused(_)
        | Rejection::NoNodeClaimable(_) => return node_error(rejection, detail),
        Rejection::IdempotencyKeyReused(_) => {
            (StatusCode::UNPROCESSABLE_ENTITY, IDEMPOTENCY_KEY_REUSED)
        }
        Rejection::IdempotentObjectGone(_) => (StatusCode::GONE, "idempotency_key_object_gone"),
        Rejection::DoesNotFit(refusal) => {
            return ApiError::new(StatusCode::CONFLICT, NOT_ENOUGH_RESOURCES, detail)
                .with_extra(refusal_json(refusal));
        }
        Rejection::SeriesDoesNotFit(refusal) => {
            return ApiError::new(StatusCode::CONFLICT, SERIES_DOES_NOT_FIT, detail)
                .with_extra(series_refusal(refusal));
        }
        Rejection::SeriesNotFound(_) => (StatusCode::NOT_FOUND, UNDEFINED),
    };
    ApiError::new(status, code, detail)
}

impl From<berth_core::Rejection> for ApiError {
    fn from(rejection: berth_core::Rejection) -> ApiError {
        to_api_error(&rejection)
    }
}

impl From<AppError> for ApiError {
    fn from(error: AppError) -> ApiError {
        match error {
            AppError::Rejected(rejection) => to_api_error(&rejection),
            AppError::Busy => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "busy",
                "The database is busy; retry shortly.",
            ),
            AppError::TimedOut => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "timeout_not_committed",
                "The request timed out before it was decided; nothing was changed, and \
                 retrying is safe.",
            ),
            AppError::Store(store) => {
                // Logged once here with its cause chain; the body carries no internal text.
                let mut chain = store.to_string();
                let mut source = std::error::Error::source(&store);
                while let Some(cause) = source {
                    chain.push_str(": ");
                    chain.push_str(&cause.to_string());
                    source = cause.source();
                }
                tracing::error!(error = %chain, "storage failure");
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal",
                    "An internal error occurred.",
                )
            }
        }
    }
}

/// 400 naming the limit a request is over, and what it allows.
fn limit_error(limit: &str, max: u64, detail: String) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, LIMIT_EXCEEDED, detail).with_extra(LimitExceeded {
        limit: limit.to_owned(),
        max,
    })
}

/// The status and code of a bare-metal rejection; a refused claim lists why, per node.
fn node_error(rejection: &Rejection, detail: String) -> ApiError {
    let (status, code) = match rejection {
        Rejection::NodeNotFound(_)
        | Rejection::ClaimNotFound(_)
        | Rejection::AllocationNotFound(_) => (StatusCode::NOT_FOUND, UNDEFINED),
        Rejection::BadNode(_) => (StatusCode::BAD_REQUEST, UNDEFINED),
        Rejection::NodeTransition { .. } => (StatusCode::CONFLICT, "invalid_state_transition"),
        Rejection::DeployRefused(_) => (StatusCode::CONFLICT, "claim_required"),
        Rejection::NoNodeClaimable(reasons) => {
            let nodes = reasons
                .iter()
                .map(|r| NodeRefusal {
                    node_uuid: r.node_uuid.uuid(),
                    reason: r.reason.to_owned(),
                    detail: r.detail.clone(),
                })
                .collect();
            return ApiError::new(StatusCode::CONFLICT, "no_node_available", detail)
                .with_extra(NodeRefusals { nodes });
        }
        _ => (StatusCode::CONFLICT, "node_in_use"),
    };
    ApiError::new(status, code, detail)
}

/// Why a request does not fit and the counter-offer, as berth adds them to a 409.
pub fn refusal_json(refusal: &Refusal) -> Value {
    members(refusal_members(refusal))
}

/// A refused request's shortfalls and counter-offer, as their wire type.
pub fn refusal_members(refusal: &Refusal) -> RefusalMembers {
    RefusalMembers {
        reservations: refusal
            .shortfalls
            .iter()
            .map(|s| Shortfall {
                index: s.index,
                resource_type: s.resource_type.to_owned(),
                requested: s.requested,
                available: s.available,
                reason: s.reason.to_owned(),
            })
            .collect(),
        counter_offer: CounterOffer {
            amounts: refusal.amounts.clone(),
            earliest_start: refusal.earliest_start.map(|at| lease_time(at.as_micros())),
            truncated: refusal.truncated,
        },
    }
}

/// A refused series' conflicting occurrences, each with its shortfalls and nearest window.
pub fn series_refusal(refusal: &SeriesRefusal) -> SeriesMembers {
    SeriesMembers {
        occurrences: refusal.occurrences,
        conflicts: refusal
            .conflicts
            .iter()
            .map(|conflict| {
                let members = refusal_members(&conflict.refusal);
                let (start, end) = (conflict.window.start(), conflict.window.end());
                OccurrenceConflict {
                    index: conflict.index,
                    start_date: lease_time(start.as_micros()),
                    end_date: lease_time(end.as_micros()),
                    reservations: members.reservations,
                    alternative: conflict.refusal.earliest_start.map(|at| Window {
                        start_date: lease_time(at.as_micros()),
                        end_date: lease_time((at + end.since(start)).as_micros()),
                    }),
                    truncated: conflict.refusal.truncated,
                }
            })
            .collect(),
    }
}
