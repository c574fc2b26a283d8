//! `POST /promise/create-instance` and `/promise/destroy-instance` (Promise RPC), and
//! `GET /promise/instances`: instances created against a reservation or from unreserved
//! capacity, recorded as placement allocations.

use super::wire::{RpcInput, read_as, rpc_error, text, time};
use crate::http::error::ApiError;
use crate::http::extract::Caller;
use crate::http::routes::Routes;
use crate::http::state::AppState;
use crate::policy::Rule;
use axum::Json;
use axum::extract::State;
use axum::http::Method;
use berth_api::promise::{
    CreateInstance as CreateRequest, DestroyInstance, Instance, InstanceCreated, InstanceList,
    InstanceRejected, Nothing, RpcAnswer,
};
use berth_app::CreateInstance;
use berth_core::LeaseId;
use berth_core::model::promise::PromiseInstance;
use serde_json::{Map, Value};
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
            project_id: caller.0.project_id.clone(),
            user_id: caller.0.user_id.clone(),
        })
    })()
    .map_err(rpc_error)?;
    let instance = state.berth.create_instance(cmd).await.map_err(|e| {
        let rejected = InstanceRejected {
            status: "rejected".to_owned(),
        };
        rpc_error(ApiError::from(e)).merge_extra(rejected)
    })?;
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
    caller: Caller,
    RpcInput(body): RpcInput,
) -> Result<Json<RpcAnswer<Nothing>>, ApiError> {
    let id = read_as::<DestroyInstance>(body)
        .and_then(|body| uuid_field(&body, "instance-id"))
        .and_then(|id| id.ok_or_else(|| ApiError::bad_request("instance-id is missing")))
        .map_err(rpc_error)?;
    state
        .berth
        .destroy_instance(id, caller.project_scope())
        .await
        .map_err(|e| rpc_error(e.into()))?;
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
