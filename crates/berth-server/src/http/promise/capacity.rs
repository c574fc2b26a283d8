//! Capacity queries: `/promise/capacity/{compute,network,storage}/query` (ETSI style) and
//! `POST /promise/query-capacity` (Promise RPC). Each parses its input into a query, asks
//! `Berth::capacity` or `Berth::capacity_vector` (over [`berth_core::query::capacity`]: the
//! four figures over a window, `available` being its minimum over the window, and on request the
//! step function of each, `utilization`) and renders the answer.
//!
//! Both take a provider (`provider-id`, `providerId`: a provider cloud's id or `local` for
//! berth's own capacity) and answer, beside the figures of the scope, each provider's share of
//! them in `providers`.

use super::wire::{
    Input, RpcInput, documented, flag, names, object, provider_of, rpc_error, rpc_read_error, size,
    text, time, uuids,
};
use crate::http::error::ApiError;
use crate::http::extract::Caller;
use crate::http::routes::Routes;
use crate::http::state::AppState;
use crate::policy::Rule;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::{Method, StatusCode};
use berth_api::promise::{
    CapacityAnswer, CapacityInformation, CapacityLevels, CapacityQueryResult, CapacityStep,
    EtsiCapacityQuery, Figures as FigureSet, FiguresStep, InstancesAvailable, Names,
    ProviderCapacity, ProviderCapacityInformation, QueryCapacity, RpcAnswer, SelectedCapacity,
    TimePeriod,
};
use berth_app::{Asked, Capacity, CapacityQuery, Measured};
use berth_core::Instant;
use berth_core::model::capacity::{Figures, Series};
use berth_core::model::ledger::Window;
use berth_core::query::capacity::{Extent, Levels, VectorCapacity};
use serde_json::{Map, Value};

pub(super) fn register(routes: &mut Routes) {
    routes
        .add(
            Method::GET,
            "/promise/capacity/{kind}/query",
            Rule::SYSTEM_READER,
            "Query capacity (ETSI style)",
            etsi_query,
        )
        .answers::<CapacityQueryResult>(200)
        .add(
            Method::POST,
            "/promise/capacity/{kind}/query",
            Rule::SYSTEM_READER,
            "Query capacity (ETSI style)",
            etsi_query,
        )
        .changes_nothing()
        .accepts::<EtsiCapacityQuery>()
        .answers::<CapacityQueryResult>(200)
        .add(
            Method::POST,
            "/promise/query-capacity",
            Rule::SYSTEM_READER,
            "Query capacity (Promise RPC)",
            rpc_query,
        )
        .changes_nothing()
        .accepts::<QueryCapacity>()
        .answers::<RpcAnswer<CapacityAnswer>>(201);
}

/// The window a query names, or the current instant (one second from now) when it names none.
pub(super) fn window(
    start: Option<Instant>,
    end: Option<Instant>,
    now: Instant,
) -> Result<Window, ApiError> {
    let start = start.unwrap_or(now);
    let end = end.unwrap_or_else(|| Instant::from_micros(start.as_micros() + 1_000_000));
    Window::new(start, end)
        .ok_or_else(|| ApiError::bad_request("the end of the time period must be after its start"))
}

/// The instances of a shape an ETSI query counts (a shape of no size is refused).
fn shape(vcpus: u64, ram_mb: u64, disk_gb: u64) -> Result<Asked, ApiError> {
    let amounts = berth_core::model::lease::instance_amounts(vcpus, ram_mb, disk_gb, 1);
    match amounts.is_empty() {
        true => Err(ApiError::bad_request(
            "resourceCriteria must give a size (virtualCPU.numVirtualCpu, virtualMemory.virtualMemSize or sizeOfStorage)",
        )),
        false => Ok(Asked::Shape(amounts)),
    }
}

fn nested_size(body: &Map<String, Value>, outer: &[&str], field: &str) -> Result<u64, ApiError> {
    for name in outer {
        if let Some(inner) = object(body, name)? {
            return Ok(size(inner, field)?.unwrap_or(0));
        }
    }
    Ok(size(body, field)?.unwrap_or(0))
}

fn criteria_shape(criteria: &Map<String, Value>) -> Result<Asked, ApiError> {
    let vcpus = nested_size(criteria, &["virtualCPU", "virtualCpu"], "numVirtualCpu")?;
    let ram = nested_size(criteria, &["virtualMemory"], "virtualMemSize")?;
    let disk = nested_size(
        criteria,
        &["storageAttributes", "virtualDisk"],
        "sizeOfStorage",
    )?;
    shape(vcpus, ram, disk)
}

/// What an ETSI query on the path's `kind` measures: a flavor's instances, a shape's, or the
/// figures of the resource type id.
fn asked(kind: &str, body: &Map<String, Value>) -> Result<Asked, ApiError> {
    let resource = super::reservations::kind_of(kind)?;
    let type_field = format!("{kind}ResourceTypeId");
    let type_id = text(body, &type_field)?;
    let criteria = object(body, "resourceCriteria")?;
    if let Some(flavor) = text(body, "flavorId")? {
        return Ok(Asked::Flavor(flavor));
    }
    let id = match (kind, type_id.as_deref(), criteria) {
        ("compute", None | Some("vcInstances" | "instances"), Some(criteria)) => {
            return criteria_shape(criteria);
        }
        ("storage", None | Some("volumes" | "numVolumes"), Some(criteria)) => {
            return shape(0, 0, size(criteria, "sizeOfStorage")?.unwrap_or(0));
        }
        (_, None, _) => return Err(ApiError::bad_request(format!("{type_field} is missing"))),
        (_, Some(id), _) => id,
    };
    if let Some(measure) = berth_core::model::capacity::measure_of(resource, id) {
        return Ok(Asked::Measure(measure));
    }
    let known = match kind {
        "compute" => "numCpuCores, virtualMemSize, virtualDisk, vcInstances",
        "network" => "publicIps",
        _ => "storageSize, volumes",
    };
    Err(ApiError::bad_request(format!(
        "Unknown {type_field} {id}: use one of {known}"
    )))
}

/// The members of an ETSI capacity query ([`EtsiCapacityQuery`]).
const ETSI_QUERY_FIELDS: [&str; 12] = [
    "zoneId",
    "timePeriod",
    "attributeSelector",
    "showUtilization",
    "show-utilization",
    "without",
    "flavorId",
    "computeResourceTypeId",
    "networkResourceTypeId",
    "storageResourceTypeId",
    "resourceCriteria",
    "providerId",
];

/// The members of `query-capacity` ([`QueryCapacity`]).
const QUERY_FIELDS: [&str; 8] = [
    "window",
    "capacity",
    "zone",
    "show-utilization",
    "showUtilization",
    "without",
    "provider-id",
    "source",
];

const SELECTORS: [&str; 4] = ["available", "reserved", "total", "allocated"];

fn selectors(body: &Map<String, Value>) -> Result<Vec<&'static str>, ApiError> {
    let names: Vec<String> = match names(body, "attributeSelector") {
        Ok(None) => return Ok(SELECTORS.to_vec()),
        Ok(Some(Names::Joined(t))) => t.split(',').map(|s| s.trim().to_owned()).collect(),
        Ok(Some(Names::List(items))) => items,
        Err(()) => return Err(ApiError::bad_request("attributeSelector must list names")),
    };
    names
        .iter()
        .map(|n| {
            SELECTORS.iter().find(|s| **s == n).copied().ok_or_else(|| {
                ApiError::bad_request(format!(
                    "Unknown attributeSelector {n}: use available, reserved, total or allocated"
                ))
            })
        })
        .collect()
}

pub(super) fn figures_json(figures: &Figures, keep: &[&str]) -> FigureSet {
    let kept = |name: &str, value: i64| keep.contains(&name).then_some(value);
    FigureSet {
        available: kept("available", figures.available),
        reserved: kept("reserved", figures.reserved),
        total: kept("total", figures.total),
        allocated: kept("allocated", figures.allocated),
    }
}

fn utilization_json(series: &Series, keep: &[&str]) -> Vec<FiguresStep> {
    series
        .steps
        .iter()
        .map(|(at, f)| FiguresStep {
            timestamp: time(*at),
            figures: figures_json(f, keep),
        })
        .collect()
}

fn show_utilization(body: &Map<String, Value>, default: bool) -> Result<bool, ApiError> {
    Ok(flag(body, "show-utilization")?
        .or(flag(body, "showUtilization")?)
        .unwrap_or(default))
}

async fn etsi_query(
    State(state): State<AppState>,
    _caller: Caller,
    Path(kind): Path<String>,
    Input(body): Input,
) -> Result<Json<CapacityQueryResult>, ApiError> {
    let body = documented(body, &ETSI_QUERY_FIELDS);
    let now = state.berth.now();
    let period = object(&body, "timePeriod")?;
    let (start, end) = match period {
        Some(p) => (
            super::wire::date(p, "startTime", now)?,
            super::wire::date(p, "stopTime", now)?.or(super::wire::date(p, "endTime", now)?),
        ),
        None => (None, None),
    };
    let window = window(start, end, now)?;
    let zone = text(&body, "zoneId")?;
    let keep = selectors(&body)?;
    let utilization = show_utilization(&body, false)?;
    let query = CapacityQuery {
        extent: Extent {
            zone: zone.clone(),
            origin: provider_of(&body, &["providerId"])?,
            window,
            without: uuids(&body, "without")?,
        },
        asked: asked(&kind, &body)?,
    };
    let answer = state.berth.capacity(query).await?;
    let information = |measured: &Measured| match &measured.capacity {
        Capacity::Instances(fit) => {
            CapacityInformation::Instances(InstancesAvailable { available: *fit })
        }
        Capacity::Figures(series) => {
            CapacityInformation::Figures(figures_json(&series.summary(), &keep))
        }
    };
    let steps = match &answer.whole.capacity {
        Capacity::Figures(series) if utilization => Some(utilization_json(series, &keep)),
        _ => None,
    };
    Ok(Json(CapacityQueryResult {
        zone_id: zone,
        last_update: time(now),
        time_period: TimePeriod {
            start_time: time(window.start()),
            stop_time: time(window.end()),
        },
        capacity_information: information(&answer.whole),
        utilization: steps,
        held: answer.whole.held,
        providers: answer
            .origins
            .iter()
            .map(|(origin, measured)| ProviderCapacityInformation {
                provider_id: origin.to_string(),
                capacity_information: information(measured),
                held: measured.held,
            })
            .collect(),
    }))
}

/// A capacity vector on the wire.
fn levels_json(levels: Levels) -> CapacityLevels {
    CapacityLevels {
        cores: levels.cores,
        ram: levels.ram,
        gigabytes: levels.gigabytes,
        addresses: levels.addresses,
    }
}

/// Picks one figure.
type Pick = fn(&Figures) -> i64;

fn selector(body: &Map<String, Value>) -> Result<(&'static str, Pick), ApiError> {
    match text(body, "capacity")?.as_deref() {
        None | Some("available") => Ok(("available", |f| f.available)),
        Some("total") => Ok(("total", |f| f.total)),
        Some("reserved") => Ok(("reserved", |f| f.reserved)),
        Some("usage" | "allocated") => Ok(("usage", |f| f.allocated)),
        Some(other) => Err(ApiError::bad_request(format!(
            "Unknown capacity {other}: use total, reserved, usage or available"
        ))),
    }
}

/// The window of an RPC query: `window.start` / `window.end`.
pub(super) fn rpc_window(body: &Map<String, Value>, now: Instant) -> Result<Window, ApiError> {
    let (start, end) = match object(body, "window")? {
        Some(w) => (
            super::wire::date(w, "start", now)?,
            super::wire::date(w, "end", now)?,
        ),
        None => (None, None),
    };
    window(start, end, now)
}

/// The figure `name` (picked by `pick`) of `vector` over its window, as `capacity` answers it.
fn selected(name: &str, pick: Pick, vector: &VectorCapacity) -> SelectedCapacity {
    let summary = Some(levels_json(vector.summary(pick)));
    match name {
        "total" => SelectedCapacity {
            total: summary,
            ..SelectedCapacity::default()
        },
        "reserved" => SelectedCapacity {
            reserved: summary,
            ..SelectedCapacity::default()
        },
        "usage" => SelectedCapacity {
            usage: summary,
            ..SelectedCapacity::default()
        },
        _ => SelectedCapacity {
            available: summary,
            ..SelectedCapacity::default()
        },
    }
}

/// Answers 201, as the seed's example of `query-capacity` shows (Annex C 12.10).
async fn rpc_query(
    State(state): State<AppState>,
    _caller: Caller,
    RpcInput(body): RpcInput,
) -> Result<(StatusCode, Json<RpcAnswer<CapacityAnswer>>), ApiError> {
    let body = documented(body, &QUERY_FIELDS);
    let now = state.berth.now();
    let parsed = (|| {
        Ok::<_, ApiError>((
            rpc_window(&body, now)?,
            selector(&body)?,
            text(&body, "zone")?,
            show_utilization(&body, true)?,
            uuids(&body, "without")?,
            provider_of(&body, &["provider-id", "source"])?,
        ))
    })()
    .map_err(rpc_error)?;
    let (window, (name, pick), zone, utilization, without, origin) = parsed;
    let extent = Extent {
        zone: zone.clone(),
        origin,
        window,
        without,
    };
    let answer = state
        .berth
        .capacity_vector(extent)
        .await
        .map_err(rpc_read_error)?;
    let vector = &answer.whole;
    let providers = answer
        .origins
        .iter()
        .map(|(origin, vector)| ProviderCapacity {
            provider_id: origin.to_string(),
            capacity: selected(name, pick, vector),
            held: levels_json(vector.held),
        })
        .collect();
    let capacity = selected(name, pick, vector);
    let steps = match utilization {
        true => vector
            .steps(pick)
            .into_iter()
            .map(|(at, levels)| CapacityStep {
                timestamp: time(at),
                capacity: levels_json(levels),
            })
            .collect(),
        false => Vec::new(),
    };
    let answer = RpcAnswer::ok(
        "capacity query answered",
        CapacityAnswer {
            capacity,
            zone,
            collections: vector
                .pools
                .iter()
                .map(|id| format!("ResourcePool:{id}"))
                .chain(
                    vector
                        .collections
                        .iter()
                        .map(|id| format!("ResourceReservation:{id}")),
                )
                .collect(),
            utilization: steps,
            held: levels_json(vector.held),
            providers,
        },
    );
    Ok((StatusCode::CREATED, Json(answer)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::fields::{documented_fields, sorted};

    /// The members the capacity queries read are exactly those their wire types document.
    #[test]
    fn query_fields_are_the_documented_ones() {
        assert_eq!(
            documented_fields::<EtsiCapacityQuery>(),
            sorted(&ETSI_QUERY_FIELDS)
        );
        assert_eq!(documented_fields::<QueryCapacity>(), sorted(&QUERY_FIELDS));
    }
}
