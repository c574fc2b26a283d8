//! `/reservation/v1/floatingips`: the addresses floating-IP reservations are taken from.
//! Admins register and remove them; anyone may list and show them.

use super::hosts::text;
use super::lease_wire::conform;
use crate::http::error::ApiError;
use crate::http::extract::{ApiJson, Caller};
use crate::http::routes::Routes;
use crate::http::state::AppState;
use crate::policy::Rule;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::{Method, StatusCode};
use berth_api::blazar::{CreateFloatingIp, FloatingIp, FloatingIpEnvelope, FloatingIpList};
use berth_api::time::record_time;
use berth_app::RegisterFloatingIp;
use serde_json::{Map, Value};
use uuid::Uuid;

pub(super) fn register(routes: &mut Routes) {
    routes
        .add(
            Method::GET,
            "/reservation/v1/floatingips",
            Rule::SYSTEM_ADMIN,
            "List floating IPs",
            list,
        )
        .answers::<FloatingIpList>(200)
        .add(
            Method::POST,
            "/reservation/v1/floatingips",
            Rule::SYSTEM_ADMIN,
            "Register a floating IP",
            create,
        )
        .accepts::<CreateFloatingIp>()
        .answers::<FloatingIpEnvelope>(201)
        .add(
            Method::GET,
            "/reservation/v1/floatingips/{fip_id}",
            Rule::SYSTEM_ADMIN,
            "Show a floating IP",
            show,
        )
        .answers::<FloatingIpEnvelope>(200)
        .add(
            Method::DELETE,
            "/reservation/v1/floatingips/{fip_id}",
            Rule::SYSTEM_ADMIN,
            "Remove a floating IP",
            delete,
        )
        .answers_empty(204);
}

fn representation(fip: &berth_core::model::lease::FloatingIp) -> FloatingIp {
    FloatingIp {
        id: fip.id,
        floating_network_id: fip.network_id.clone(),
        subnet_id: fip.subnet_id.clone(),
        floating_ip_address: fip.address.clone(),
        reservable: fip.reservable,
        created_at: record_time(fip.created_at.as_micros()),
        updated_at: record_time(fip.updated_at.as_micros()),
    }
}

fn fip_id(text: &str) -> Result<Uuid, ApiError> {
    Uuid::parse_str(text)
        .map_err(|_| ApiError::not_found(format!("Floating IP {text} could not be found")))
}

async fn list(
    State(state): State<AppState>,
    _caller: Caller,
) -> Result<Json<FloatingIpList>, ApiError> {
    let floatingips = state
        .berth
        .read(|c| c.floating_ips().map(representation).collect())
        .await?;
    Ok(Json(FloatingIpList { floatingips }))
}

async fn show(
    State(state): State<AppState>,
    _caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<FloatingIpEnvelope>, ApiError> {
    let id = fip_id(&id)?;
    let fip = state
        .berth
        .read(|c| c.floating_ip(id).map(representation))
        .await?;
    fip.map(|floatingip| Json(FloatingIpEnvelope { floatingip }))
        .ok_or_else(|| ApiError::not_found(format!("Floating IP {id} could not be found")))
}

async fn create(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<Map<String, Value>>,
) -> Result<(StatusCode, Json<FloatingIpEnvelope>), ApiError> {
    let cmd = register_command(&body)?;
    let fip = state.berth.register_floating_ip(cmd).await?;
    Ok((
        StatusCode::CREATED,
        Json(FloatingIpEnvelope {
            floatingip: representation(&fip),
        }),
    ))
}

/// The command of a create request, checked field by field with Blazar's messages first.
fn register_command(body: &Map<String, Value>) -> Result<RegisterFloatingIp, ApiError> {
    let network_id = text(body, "floating_network_id")?
        .ok_or_else(|| ApiError::bad_request("Missing parameter: floating_network_id"))?;
    let address = text(body, "floating_ip_address")?
        .ok_or_else(|| ApiError::bad_request("Missing parameter: floating_ip_address"))?;
    let address = address
        .parse::<std::net::IpAddr>()
        .map_err(|_| ApiError::bad_request(format!("{address} is not a valid IP address")))?
        .to_string();
    let subnet_id = text(body, "subnet_id")?;
    conform::<CreateFloatingIp>(body)?;
    Ok(RegisterFloatingIp {
        network_id,
        subnet_id,
        address,
    })
}

async fn delete(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.berth.delete_floating_ip(fip_id(&id)?).await?;
    Ok(StatusCode::NO_CONTENT)
}
