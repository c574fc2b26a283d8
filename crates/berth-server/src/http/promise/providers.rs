//! Provider clouds: Promise's `add-provider` RPC (`POST /promise/add-provider`), and the
//! `providers` of the `promise` container (`/promise/providers`: register, list, show,
//! remove). Admins only. berth authenticates against the cloud's Keystone and finds its
//! Placement before it registers anything; the password is sealed with the configured key and
//! never answered. A registered cloud is read at once. Removing a cloud whose capacity
//! reservations or instances hold is refused unless `?force=true`.

use super::wire::{Input, RpcInput, documented, rpc_error, time};
use crate::cloud_placement::CloudPlacement;
use crate::cloud_sync::{Seen, SyncBoard};
use crate::clouds::{CloudClient, ConnectError, Credentials, keystone_v3};
use crate::http::error::ApiError;
use crate::http::routes::Routes;
use crate::http::state::AppState;
use crate::keystone::Secret;
use crate::policy::Rule;
use axum::extract::{Path, Query, State};
use axum::http::{Method, StatusCode};
use axum::{Extension, Json};
use berth_api::promise::{
    AddProvider, Provider, ProviderAdded, ProviderEnvelope, ProviderList, ProviderService,
    ProviderSync, RpcAnswer, Tenant,
};
use berth_app::AddProviderCloud;
use berth_core::catalog::Catalog;
use berth_core::model::cloud::{CloudKind, CloudProject, ProviderCloud};
use serde_json::{Map, Value};
use std::sync::Arc;
use uuid::Uuid;

pub(super) fn register(routes: &mut Routes) {
    routes
        .add(
            Method::POST,
            "/promise/add-provider",
            Rule::SYSTEM_ADMIN,
            "Register a provider cloud (Promise RPC)",
            add,
        )
        .accepts::<AddProvider>()
        .answers::<RpcAnswer<ProviderAdded>>(200)
        .add(
            Method::GET,
            "/promise/providers",
            Rule::SYSTEM_ADMIN,
            "List provider clouds",
            list,
        )
        .answers::<ProviderList>(200)
        .add(
            Method::POST,
            "/promise/providers",
            Rule::SYSTEM_ADMIN,
            "Register a provider cloud",
            create,
        )
        .accepts::<AddProvider>()
        .answers::<ProviderEnvelope>(201)
        .add(
            Method::GET,
            "/promise/providers/{provider_id}",
            Rule::SYSTEM_ADMIN,
            "Show a provider cloud",
            show,
        )
        .answers::<ProviderEnvelope>(200)
        .add(
            Method::DELETE,
            "/promise/providers/{provider_id}",
            Rule::SYSTEM_ADMIN,
            "Remove a provider cloud",
            remove,
        )
        .answers_empty(204);
}

/// The members of `add-provider`'s input; others are ignored, as Promise's YANG model allows.
const ADD_FIELDS: [&str; 6] = [
    "provider-type",
    "endpoint",
    "username",
    "password",
    "region",
    "tenant",
];

/// The `provider-type`s Promise lists, and the one berth registers.
const SUPPORTED_TYPES: &str = "openstack";

/// `cloud` as answered, with its synchronisation: the state written through the write path,
/// the last successful read this process saw (or the last written), and how many providers
/// it imported.
fn provider_json(cloud: &ProviderCloud, imported: usize, seen: Seen) -> Provider {
    let mut services = vec![ProviderService {
        kind: "placement".to_owned(),
        url: cloud.placement_url.clone(),
    }];
    if let Some(url) = &cloud.compute_url {
        services.push(ProviderService {
            kind: "compute".to_owned(),
            url: url.clone(),
        });
    }
    Provider {
        id: cloud.id,
        provider_type: cloud.kind.as_str().to_owned(),
        endpoint: cloud.auth_url.clone(),
        username: cloud.username.clone(),
        tenant: Tenant {
            id: cloud.project.id.clone(),
            name: cloud.project.name.clone(),
        },
        region: cloud.region.clone(),
        services,
        created: time(cloud.created_at),
        sync: ProviderSync {
            state: cloud.sync.state.as_str().to_owned(),
            since: cloud.sync.since.map(time),
            last_sync: seen.last_success.max(cloud.sync.last_success).map(time),
            last_error: cloud.sync.last_error.clone(),
            providers: imported,
        },
    }
}

/// Every registered cloud as answered.
fn providers_json(catalog: &Catalog, board: &SyncBoard, only: Option<Uuid>) -> Vec<Provider> {
    catalog
        .provider_clouds()
        .filter(|c| only.is_none_or(|id| c.id == id))
        .map(|c| provider_json(c, catalog.cloud_providers(c.id).count(), board.seen(c.id)))
        .collect()
}

/// A required non-empty text member.
fn required(value: Option<String>, field: &str) -> Result<String, ApiError> {
    value
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
        .ok_or_else(|| ApiError::bad_request(format!("Missing parameter: {field}")))
}

/// The cloud's kind: `openstack` (the YANG default when absent); the others Promise lists are
/// refused, naming the supported one.
fn kind(provider_type: Option<&str>) -> Result<CloudKind, ApiError> {
    match provider_type.map(str::trim) {
        None | Some("openstack") => Ok(CloudKind::Openstack),
        Some(other) => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "provider_type_unsupported",
            format!("provider-type {other:?} is not supported; berth registers: {SUPPORTED_TYPES}"),
        )),
    }
}

fn connect_error(error: ConnectError) -> ApiError {
    let code = match &error {
        ConnectError::Unreachable(_) => "provider_unreachable",
        ConnectError::Refused(_) => "provider_credentials_refused",
        ConnectError::NoPlacement(_) => "provider_service_missing",
    };
    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, code, error.to_string())
}

/// Authenticates against the cloud the request names, then registers it: the registered
/// cloud and the note on its endpoint, if any.
async fn register_cloud(
    state: &AppState,
    clouds: &CloudClient,
    body: Map<String, Value>,
) -> Result<(ProviderCloud, Option<String>), ApiError> {
    let request: AddProvider = serde_json::from_value(Value::Object(documented(body, &ADD_FIELDS)))
        .map_err(|e| ApiError::bad_request(format!("Malformed request body: {e}")))?;
    let kind = kind(request.provider_type.as_deref())?;
    let endpoint = required(request.endpoint, "endpoint")?;
    let username = required(request.username, "username")?;
    let password = Secret::new(required(request.password, "password")?);
    let tenant = request.tenant.unwrap_or_default();
    let project = CloudProject {
        id: tenant.id.filter(|v| !v.trim().is_empty()),
        name: tenant.name.filter(|v| !v.trim().is_empty()),
    };
    if project.id.is_none() && project.name.is_none() {
        return Err(ApiError::bad_request(
            "Missing parameter: tenant (its id or name)",
        ));
    }
    let (auth_url, note) = keystone_v3(&endpoint).ok_or_else(|| {
        ApiError::bad_request(format!(
            "endpoint {endpoint:?} is not an http(s) URL of Keystone"
        ))
    })?;
    let key = clouds.key().cloned().ok_or_else(|| {
        ApiError::new(
            StatusCode::CONFLICT,
            "provider_clouds_disabled",
            "berth registers no provider cloud without [provider_clouds] credential_key in its configuration",
        )
    })?;
    let region = request.region.filter(|r| !r.trim().is_empty());
    let connected = clouds
        .connect(&auth_url, &username, &password, &project, region.as_deref())
        .await
        .map_err(connect_error)?;
    let cmd = AddProviderCloud {
        kind,
        auth_url,
        username,
        project: CloudProject {
            id: Some(connected.project_id),
            name: Some(connected.project_name),
        },
        region: connected.region,
        placement_url: connected.placement_url,
        compute_url: connected.compute_url,
    };
    let credentials = Credentials {
        password: password.expose().to_owned(),
    };
    let cloud = state
        .berth
        .add_provider_cloud(cmd, move |id| key.seal(id, &credentials))
        .await?;
    Ok((cloud, note))
}

/// `POST /promise/add-provider`: Promise's RPC, its answer in the `{"result", "message"}`
/// envelope.
async fn add(
    State(state): State<AppState>,
    Extension(clouds): Extension<Arc<CloudClient>>,
    Extension(placement): Extension<Arc<CloudPlacement>>,
    RpcInput(body): RpcInput,
) -> Result<Json<RpcAnswer<ProviderAdded>>, ApiError> {
    let (cloud, note) = register_cloud(&state, &clouds, body)
        .await
        .map_err(rpc_error)?;
    // A new cloud's capacity is read at once, not at the next interval.
    placement.wake_sync();
    Ok(Json(RpcAnswer::ok(
        "provider registered",
        ProviderAdded {
            provider_id: cloud.id,
            notes: note.into_iter().collect(),
        },
    )))
}

/// `POST /promise/providers`: the same registration, answered as the provider created.
async fn create(
    State(state): State<AppState>,
    Extension(clouds): Extension<Arc<CloudClient>>,
    Extension(placement): Extension<Arc<CloudPlacement>>,
    Input(body): Input,
) -> Result<(StatusCode, Json<ProviderEnvelope>), ApiError> {
    let (cloud, _) = register_cloud(&state, &clouds, body).await?;
    placement.wake_sync();
    Ok((
        StatusCode::CREATED,
        Json(ProviderEnvelope {
            provider: provider_json(&cloud, 0, Seen::default()),
        }),
    ))
}

async fn list(
    State(state): State<AppState>,
    Extension(board): Extension<SyncBoard>,
) -> Result<Json<ProviderList>, ApiError> {
    let providers = state
        .berth
        .read(move |c| providers_json(c, &board, None))
        .await?;
    Ok(Json(ProviderList { providers }))
}

fn provider_id(text: &str) -> Result<Uuid, ApiError> {
    text.rsplit_once(':')
        .map_or(text, |(_, id)| id)
        .parse()
        .map_err(|_| ApiError::not_found(format!("Provider {text} could not be found")))
}

async fn show(
    State(state): State<AppState>,
    Extension(board): Extension<SyncBoard>,
    Path(id): Path<String>,
) -> Result<Json<ProviderEnvelope>, ApiError> {
    let uuid = provider_id(&id)?;
    state
        .berth
        .read(move |c| providers_json(c, &board, Some(uuid)).pop())
        .await?
        .map(|provider| Json(ProviderEnvelope { provider }))
        .ok_or_else(|| ApiError::not_found(format!("Provider {id} could not be found")))
}

/// The query of `DELETE /promise/providers/{id}`.
#[derive(Debug, serde::Deserialize)]
struct RemoveQuery {
    /// Remove the cloud even while reservations or instances hold its capacity.
    #[serde(default)]
    force: bool,
}

async fn remove(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(query): Query<RemoveQuery>,
) -> Result<StatusCode, ApiError> {
    let uuid = provider_id(&id)?;
    state.berth.remove_provider_cloud(uuid, query.force).await?;
    Ok(StatusCode::NO_CONTENT)
}
