//! Shared leases (berth): `/reservation/v1/leases/{lease_id}/shares` lists a lease's shares
//! with what each project holds inside it; `PUT .../shares/{project_id}` shares the lease with
//! a project within a cap (or changes the cap); `DELETE` revokes the share.
//!
//! The lease's project and admins see and change every share; a project the lease is shared
//! with sees its own share only and changes none; to anyone else the lease does not exist (404).

use super::leases::lease_id;
use crate::http::error::ApiError;
use crate::http::extract::{ApiJson, Caller};
use crate::http::routes::Routes;
use crate::http::state::AppState;
use crate::policy::Rule;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::{Method, StatusCode};
use berth_api::blazar::{Share, ShareEnvelope, ShareList, ShareRequest};
use berth_api::time::record_time;
use berth_core::model::id::LeaseId;
use berth_core::query::leases::{self, ShareUse};
use serde_json::{Map, Value};

const SHARES: &str = "/reservation/v1/leases/{lease_id}/shares";
const SHARE: &str = "/reservation/v1/leases/{lease_id}/shares/{project_id}";

pub(super) fn register(routes: &mut Routes) {
    routes
        .add(
            Method::GET,
            SHARES,
            Rule::PROJECT_READER,
            "List a lease's shares with other projects and what each holds (berth extension)",
            list,
        )
        .answers::<ShareList>(200)
        .add(
            Method::PUT,
            SHARE,
            Rule::PROJECT_MEMBER,
            "Share a lease with a project within a cap, or change the cap (berth extension)",
            put,
        )
        .accepts::<ShareRequest>()
        .answers::<ShareEnvelope>(200)
        .add(
            Method::DELETE,
            SHARE,
            Rule::PROJECT_MEMBER,
            "Revoke a lease's share with a project (berth extension)",
            revoke,
        )
        .answers_empty(204);
}

fn wire(lease: LeaseId, found: ShareUse) -> Share {
    let named = |map: std::collections::BTreeMap<berth_core::ResourceClass, u64>| {
        map.into_iter()
            .map(|(class, n)| (class.as_str().to_owned(), n))
            .collect()
    };
    Share {
        lease_id: lease.uuid(),
        project_id: found.share.project_id,
        cap: named(found.share.cap),
        used: named(found.used),
        updated_at: record_time(found.share.updated_at.as_micros()),
    }
}

fn not_found(id: LeaseId) -> ApiError {
    ApiError::not_found(format!("Lease {id} could not be found"))
}

/// The shares of `id` the caller sees; 404 when it sees neither the lease nor a share of it.
async fn visible(state: &AppState, caller: &Caller, id: LeaseId) -> Result<Vec<Share>, ApiError> {
    let shares = state
        .berth
        .lease_shares(id, caller.project_scope())
        .await?
        .ok_or_else(|| not_found(id))?;
    Ok(shares.into_iter().map(|s| wire(id, s)).collect())
}

async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<ShareList>, ApiError> {
    let id = lease_id(&id)?;
    Ok(Json(ShareList {
        shares: visible(&state, &caller, id).await?,
    }))
}

async fn put(
    State(state): State<AppState>,
    caller: Caller,
    Path((id, project)): Path<(String, String)>,
    ApiJson(body): ApiJson<Map<String, Value>>,
) -> Result<Json<ShareEnvelope>, ApiError> {
    let id = lease_id(&id)?;
    // To a project that does not see the lease, it does not exist, whatever the body says.
    let scope = caller.project_scope();
    let seen = state
        .berth
        .read(|catalog| leases::find(catalog, id, scope.as_deref()).is_some())
        .await?;
    if !seen {
        return Err(not_found(id));
    }
    let request: ShareRequest = serde_json::from_value(Value::Object(body)).map_err(|e| {
        ApiError::bad_request(format!(
            "cap: a map of resource class names to whole numbers ({e})"
        ))
    })?;
    let share = state
        .berth
        .share_lease(id, scope, project, request.cap)
        .await?;
    Ok(Json(ShareEnvelope {
        share: wire(id, share),
    }))
}

async fn revoke(
    State(state): State<AppState>,
    caller: Caller,
    Path((id, project)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let id = lease_id(&id)?;
    state
        .berth
        .revoke_share(id, caller.project_scope(), project)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}
