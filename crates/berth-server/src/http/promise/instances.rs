//! `POST /promise/create-instance` and `/promise/destroy-instance` (Promise RPC), and
//! `GET /promise/instances`: instances created against a reservation or from unreserved
//! capacity, recorded as placement allocations.
//!
//! An instance berth places on a provider cloud's capacity (`provider-id` names the cloud, or
//! its reservation or zone led there) is also written into that cloud's Placement, as Nova's
//! scheduler writes an instance's allocation, once berth has recorded it (so it is inside the
//! reservation's fence and no other request of berth can take the same capacity meanwhile).
//! When the cloud refuses (its capacity was taken there outside berth) or cannot be reached,
//! the instance is removed again, the answer says why, and the cloud is read again at once.
//! Destroying it removes the allocation there too.

use super::wire::{RpcInput, read_as, rpc_error, text, time};
use crate::cloud_placement::{ClaimError, CloudPlacement};
use crate::http::error::ApiError;
use crate::http::extract::Caller;
use crate::http::routes::Routes;
use crate::http::state::AppState;
use crate::policy::Rule;
use axum::extract::State;
use axum::http::Method;
use axum::{Extension, Json};
use berth_api::promise::{
    CreateInstance as CreateRequest, DestroyInstance, Instance, InstanceCreated, InstanceList,
    InstanceRejected, Nothing, RpcAnswer,
};
use berth_app::CreateInstance;
use berth_core::LeaseId;
use berth_core::Rejection;
use berth_core::model::promise::PromiseInstance;
use serde_json::{Map, Value};
use std::sync::Arc;
use uuid::Uuid;

pub(super) fn register(routes: &mut Routes) {
    routes
        .add(
            Method::POST,
            "/promise/create-instance",
            Rule::PROJECT_MEMBER,
            "Create an instance (Promise RPC)",
            create,
        )
        .accepts::<CreateRequest>()
        .answers::<RpcAnswer<InstanceCreated>>(200)
        .add(
            Method::POST,
            "/promise/destroy-instance",
            Rule::PROJECT_MEMBER,
            "Destroy an instance (Promise RPC)",
            destroy,
        )
        .accepts::<DestroyInstance>()
        .answers::<RpcAnswer<Nothing>>(200)
        .add(
            Method::GET,
            "/promise/instances",
            Rule::PROJECT_READER,
            "List instances",
            list,
        )
        .answers::<InstanceList>(200);
}

/// An instance; `status` is `active` while it holds its allocations and `deleted` once they
/// are gone (its reservation ended, or a reservation evicted it as best-effort work).
fn instance_json(instance: &PromiseInstance, live: bool) -> Instance {
    Instance {
        instance_id: instance.id,
        status: if live { "active" } else { "deleted" }.to_owned(),
        name: instance.name.clone(),
        flavor: instance.flavor_id.clone(),
        image: instance.image.clone(),
        reservation_id: instance.reservation.map(LeaseId::uuid),
        host: instance.host.uuid(),
        project_id: instance.project_id.clone(),
        priority: if instance.reservation.is_some() {
            "high"
        } else {
            "low"
        }
        .to_owned(),
        created_on: time(instance.created_at),
    }
}

fn uuid_field(body: &Map<String, Value>, field: &str) -> Result<Option<Uuid>, ApiError> {
    text(body, field)?
        .map(|t| {
            let id = t.rsplit_once(':').map_or(t.as_str(), |(_, id)| id);
            Uuid::parse_str(id)
                .map_err(|_| ApiError::bad_request(format!("{field}: {t} is not a uuid")))
        })
        .transpose()
}

async fn create(
    State(state): State<AppState>,
    Extension(clouds): Extension<Arc<CloudPlacement>>,
    caller: Caller,
    RpcInput(body): RpcInput,
) -> Result<Json<RpcAnswer<InstanceCreated>>, ApiError> {
    let cmd = (|| {
        let body = read_as::<CreateRequest>(body)?;
        Ok::<_, ApiError>(CreateInstance {
            name: text(&body, "name")?.ok_or_else(|| ApiError::bad_request("name is missing"))?,
            flavor: text(&body, "flavor")?
                .ok_or_else(|| ApiError::bad_request("flavor is missing"))?,
            image: text(&body, "image")?,
            reservation: uuid_field(&body, "reservation-id")?,
            zone: text(&body, "zone")?,
            provider: super::wire::cloud_of(&body, &["provider-id", "source"])?,
            project_id: caller.0.project_id.clone(),
            user_id: caller.0.user_id.clone(),
        })
    })()
    .map_err(rpc_error)?;
    let rejected = |error: ApiError| {
        rpc_error(error).merge_extra(InstanceRejected {
            status: "rejected".to_owned(),
        })
    };
    let instance = state
        .berth
        .create_instance(cmd)
        .await
        .map_err(|e| rejected(e.into()))?;
    let id = instance.id;
    if let Some(claim) = state.berth.read_local(|c| c.remote_claim(id))
        && let Err(error) = clouds
            .claim(&claim.cloud, id, claim.remote, &claim.amounts)
            .await
    {
        if let Err(undo) = state.berth.destroy_instance(id, None).await {
            tracing::error!(instance = %id, error = %undo, "an instance its cloud refused was not removed");
        }
        clouds.wake_sync();
        let cloud = claim.cloud.id;
        let rejection = match error {
            ClaimError::Refused(reason) => Rejection::ProviderCloudRefused { cloud, reason },
            ClaimError::Unreachable(reason) => {
                Rejection::ProviderCloudUnreachable { cloud, reason }
            }
        };
        return Err(rejected(rejection.into()));
    }
    Ok(Json(RpcAnswer::ok(
        "created-instance request accepted",
        InstanceCreated {
            instance_id: instance.id,
            instance: instance_json(&instance, true),
        },
    )))
}

async fn destroy(
    State(state): State<AppState>,
    Extension(clouds): Extension<Arc<CloudPlacement>>,
    caller: Caller,
    RpcInput(body): RpcInput,
) -> Result<Json<RpcAnswer<Nothing>>, ApiError> {
    let id = read_as::<DestroyInstance>(body)
        .and_then(|body| uuid_field(&body, "instance-id"))
        .and_then(|id| id.ok_or_else(|| ApiError::bad_request("instance-id is missing")))
        .map_err(rpc_error)?;
    let claim = state.berth.read_local(|c| c.remote_claim(id));
    state
        .berth
        .destroy_instance(id, caller.project_scope())
        .await
        .map_err(|e| rpc_error(e.into()))?;
    if let Some(claim) = claim {
        // berth no longer counts the instance; until the cloud forgets it too, the next
        // synchronisation counts its allocation there as the cloud's own usage.
        if let Err(error) = clouds.release(&claim.cloud, id).await {
            tracing::warn!(instance = %id, provider = %claim.cloud.id, %error, "a destroyed instance's allocation was not removed from its cloud");
        }
    }
    Ok(Json(RpcAnswer::ok(
        "instance destroyed and resource released back to pool",
        Nothing {},
    )))
}

async fn list(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Json<InstanceList>, ApiError> {
    let instances = state
        .berth
        .instances(caller.project_scope(), |seen| {
            seen.iter()
                .map(|s| instance_json(s.instance, s.live))
                .collect::<Vec<_>>()
        })
        .await?;
    Ok(Json(InstanceList { instances }))
}
