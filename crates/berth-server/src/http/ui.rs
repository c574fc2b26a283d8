//! The dashboard at `/ui`: static HTML, CSS and JavaScript embedded in the binary (no build
//! step), and two small read-only JSON endpoints under `/ui/api` for what the public APIs do not
//! say.
//!
//! The page itself needs no credentials (it holds no data); everything it shows comes from
//! calls the browser makes with the caller's token: the Blazar leases and hosts, the Promise
//! capacity queries and notification feed, and `/ui/api/zones` and `/ui/api/failures`, which
//! only read the catalog (through `Berth::zones` and `Berth::failures`). Assets are served with
//! their content type, `Cache-Control: no-cache` and an `ETag` (a hash of their bytes, computed
//! at compile time), so a browser revalidates and gets `304 Not Modified` until the binary
//! changes.

use crate::http::error::ApiError;
use crate::http::extract::Caller;
use crate::http::routes::Routes;
use crate::http::state::AppState;
use crate::http::status::condition;
use crate::policy::Rule;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use berth_api::dashboard::{AffectedLease, Failure, FailureList, Zone, ZoneList};
use berth_api::time::lease_time;
use berth_core::query::health;

/// One embedded file.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    bytes: &'static [u8],
    etag: &'static str,
}

/// FNV-1a over `bytes`: a cheap, stable content hash for `ETag`s.
const fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut i = 0;
    while i < bytes.len() {
        hash ^= bytes[i] as u64;
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        i += 1;
    }
    hash
}

/// `"<16 hex digits>"`, the quoted `ETag` of `bytes`.
const fn etag_bytes(bytes: &[u8]) -> [u8; 18] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let hash = fnv1a(bytes);
    let mut out = [b'"'; 18];
    let mut i = 0;
    while i < 16 {
        out[1 + i] = HEX[((hash >> (60 - 4 * i)) & 0xf) as usize];
        i += 1;
    }
    out
}

macro_rules! asset {
    ($name:literal, $content_type:expr) => {{
        const BYTES: &[u8] = include_bytes!(concat!("../../ui/", $name));
        const ETAG: [u8; 18] = etag_bytes(BYTES);
        Asset {
            name: $name,
            content_type: $content_type,
            bytes: BYTES,
            etag: match std::str::from_utf8(&ETAG) {
                Ok(text) => text,
                Err(_) => panic!("an etag is ASCII"),
            },
        }
    }};
}

const JS: &str = "text/javascript; charset=utf-8";

/// The page.
const INDEX: Asset = asset!("index.html", "text/html; charset=utf-8");

/// Everything under `/ui/assets/`.
const ASSETS: [Asset; 11] = [
    asset!("app.css", "text/css; charset=utf-8"),
    asset!("app.js", JS),
    asset!("api.js", JS),
    asset!("dom.js", JS),
    asset!("time.js", JS),
    asset!("timeline.js", JS),
    asset!("capacity.js", JS),
    asset!("leases.js", JS),
    asset!("failures.js", JS),
    asset!("usage.js", JS),
    asset!("favicon.svg", "image/svg+xml"),
];

/// The page may load its own scripts, styles and images, and call this origin; nothing else.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; \
     frame-ancestors 'none'";

/// Registers the dashboard's routes.
pub fn register(routes: &mut Routes) {
    routes
        .add(Method::GET, "/ui", Rule::PUBLIC, "The dashboard", page)
        .answers_media(200, "text/html")
        .add(Method::GET, "/ui/", Rule::PUBLIC, "The dashboard", page)
        .answers_media(200, "text/html")
        .add(
            Method::GET,
            "/ui/assets/{file}",
            Rule::PUBLIC,
            "A static file of the dashboard",
            asset,
        )
        .answers_media(200, "application/octet-stream")
        .answers_empty(304)
        .add(
            Method::GET,
            "/ui/api/zones",
            Rule::SYSTEM_READER,
            "Zones with their hosts and measured resource classes (dashboard)",
            zones,
        )
        .answers::<ZoneList>(200)
        .add(
            Method::GET,
            "/ui/api/failures",
            Rule::SYSTEM_ADMIN,
            "Providers down or in maintenance and the leases they affect (dashboard)",
            failures,
        )
        .answers::<FailureList>(200);
}

fn serve(file: &Asset, headers: &HeaderMap) -> Response {
    let fresh = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|tags| tags.split(',').any(|t| t.trim() == file.etag));
    let mut response = match fresh {
        true => StatusCode::NOT_MODIFIED.into_response(),
        false => (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static(file.content_type),
            )],
            file.bytes,
        )
            .into_response(),
    };
    let out = response.headers_mut();
    out.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    out.insert(header::ETAG, HeaderValue::from_static(file.etag));
    out.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

async fn page(headers: HeaderMap) -> Response {
    let mut response = serve(&INDEX, &headers);
    let out = response.headers_mut();
    out.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    out.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

async fn asset(Path(file): Path<String>, headers: HeaderMap) -> Result<Response, ApiError> {
    ASSETS
        .iter()
        .find(|a| a.name == file)
        .map(|a| serve(a, &headers))
        .ok_or_else(|| ApiError::not_found(format!("The dashboard has no file {file}")))
}

async fn zones(State(state): State<AppState>, _caller: Caller) -> Result<Json<ZoneList>, ApiError> {
    let zones = state
        .berth
        .zones()
        .await?
        .into_iter()
        .map(|z| Zone {
            name: z.zone,
            hosts: z.hosts,
            hosts_out_of_service: z.hosts_out_of_service,
            resource_classes: z.classes.iter().map(|c| c.as_str().to_owned()).collect(),
        })
        .collect();
    Ok(Json(ZoneList { zones }))
}

/// A provider out of service with the leases it affects.
fn failure(found: &health::Failure<'_>) -> Failure {
    let provider = found.provider;
    let leases = found
        .leases
        .iter()
        .map(|affected| {
            let lease = affected.lease;
            AffectedLease {
                id: lease.id.uuid(),
                name: lease.name.to_string(),
                project_id: lease.project_id.to_string(),
                status: lease.status.as_str().to_owned(),
                degraded: lease.degraded,
                start_date: lease_time(lease.start.as_micros()),
                end_date: lease_time(lease.end.as_micros()),
                missing_here: affected.missing_here,
            }
        })
        .collect();
    Failure {
        condition: condition(provider),
        provider_uuid: provider.uuid().uuid(),
        host_id: provider.host().map(|_| provider.id().to_string()),
        name: provider.name().to_owned(),
        availability_zone: provider.availability_zone().map(str::to_owned),
        leases,
    }
}

async fn failures(State(state): State<AppState>) -> Result<Json<FailureList>, ApiError> {
    let providers = state.berth.failures(failure).await?;
    Ok(Json(FailureList { providers }))
}
