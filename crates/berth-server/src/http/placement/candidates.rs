//! `GET /allocation_candidates` (1.10): request parsing with Placement's microversion gates and
//! messages, and the response shapes of every microversion.

use super::{caching_headers, query};
use crate::http::AppState;
use crate::http::context::Microversion;
use crate::http::error::ApiError;
use crate::http::extract::Caller;
use crate::http::routes::Routes;
use axum::body::Body;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderValue, Method, header};
use axum::response::Response;
use berth_core::candidates::{self, CandidateQuery, Candidates, Group, GroupPolicy};
use berth_core::query::TraitFilter;
use berth_core::{Catalog, Provider, ResourceClass};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use uuid::Uuid;

/// Set on a response whose search hit a bound other than `limit`.
const TRUNCATED_HEADER: &str = "x-berth-candidates-truncated";

pub(super) fn register(routes: &mut Routes) {
    routes.add(
        Method::GET,
        "/placement/allocation_candidates",
        "List allocation candidates (1.10)",
        list,
    );
}

const BAD_VALUE: &str = "placement.query.bad_value";

/// The group keys a query parameter may name, with the microversion each arrives in.
const GROUP_KEYS: [(&str, u16); 4] = [
    ("resources", 10),
    ("required", 17),
    ("member_of", 21),
    ("in_tree", 31),
];

/// Splits `key` into a group key and its suffix, if it is one at this microversion.
fn group_key(key: &str, mv: Microversion) -> Option<(&'static str, &str)> {
    for (base, since) in GROUP_KEYS {
        let Some(suffix) = key.strip_prefix(base) else {
            continue;
        };
        if suffix.is_empty() {
            return mv.at_least(since).then_some((base, suffix));
        }
        let numbered = suffix.starts_with(|c: char| ('1'..='9').contains(&c))
            && suffix.bytes().all(|b| b.is_ascii_digit());
        let named = suffix.len() <= 64
            && suffix
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        let granular_since = if base == "in_tree" { 31 } else { 25 };
        let allowed = mv.at_least(granular_since) && (numbered || (mv.at_least(33) && named));
        return allowed.then_some((base, suffix));
    }
    None
}

fn unexpected(key: &str) -> ApiError {
    ApiError::bad_request(format!(
        "Invalid query string parameters: Additional properties are not allowed ('{key}' was unexpected)"
    ))
}

struct Parsed {
    query: CandidateQuery,
    requested: BTreeSet<ResourceClass>,
}

#[derive(Default)]
struct RawGroup<'p> {
    resources: Option<&'p str>,
    required: Vec<&'p str>,
    member_of: Vec<&'p str>,
    in_tree: Option<&'p str>,
}

fn parse(
    pairs: &[(String, String)],
    mv: Microversion,
    catalog: &Catalog,
) -> Result<Parsed, ApiError> {
    let mut raw: BTreeMap<&str, RawGroup<'_>> = BTreeMap::new();
    let (mut limit, mut policy, mut root_required, mut same_subtree) =
        (None, None, Vec::new(), Vec::new());
    for (key, value) in pairs {
        match (key.as_str(), group_key(key, mv)) {
            (_, Some((base, suffix))) => {
                let group = raw.entry(suffix).or_default();
                match base {
                    "resources" => group.resources = Some(value),
                    "required" => group.required.push(value),
                    "member_of" => group.member_of.push(value),
                    _ => group.in_tree = Some(value),
                }
            }
            ("limit", None) if mv.at_least(16) => limit = Some(value.as_str()),
            ("group_policy", None) if mv.at_least(25) => policy = policy.or(Some(value.as_str())),
            ("root_required", None) if mv.at_least(35) => root_required.push(value.as_str()),
            ("same_subtree", None) if mv.at_least(36) => same_subtree.push(value.as_str()),
            (other, None) => return Err(unexpected(other)),
        }
    }
    let same_subtree = parse_same_subtree(&same_subtree, &raw)?;
    let mut groups = Vec::with_capacity(raw.len());
    let mut requested = BTreeSet::new();
    for (suffix, group) in &raw {
        let parsed = parse_group(suffix, group, mv, catalog, &same_subtree)?;
        requested.extend(parsed.resources.iter().map(|(class, _)| class.clone()));
        groups.push(parsed);
    }
    if groups.iter().all(|g| g.resources.is_empty()) {
        let error = match mv.at_least(36) {
            true => ApiError::bad_request(
                "There must be at least one resources or resources[$S] parameter.",
            )
            .with_code("placement.query.missing_value"),
            false => ApiError::bad_request(
                "Invalid query string parameters: 'resources' is a required property",
            ),
        };
        return Err(error);
    }
    let with_resources = groups
        .iter()
        .filter(|g| !g.is_unsuffixed() && !g.resources.is_empty())
        .count();
    let group_policy = match policy {
        None if with_resources > 1 => {
            return Err(ApiError::bad_request(
                "The \"group_policy\" parameter is required when specifying more than one \"resources{N}\" parameter.",
            ));
        }
        None | Some("none") => GroupPolicy::None,
        Some("isolate") => GroupPolicy::Isolate,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "Invalid query string parameters: '{other}' is not one of ['none', 'isolate']"
            )));
        }
    };
    let limit = limit
        .map(|text| match text.parse::<usize>() {
            Ok(n) if n >= 1 && !text.starts_with('0') => Ok(n),
            _ => Err(ApiError::bad_request(format!(
                "Invalid query string parameters: '{text}' does not match '^[1-9][0-9]*$'"
            ))),
        })
        .transpose()?;
    let root_required = parse_root_required(&root_required, mv, catalog)?;
    let query = CandidateQuery {
        groups,
        group_policy,
        root_required,
        same_subtree,
        limit,
        nested_aware: mv.at_least(29),
    };
    Ok(Parsed { query, requested })
}

fn parse_group(
    suffix: &str,
    raw: &RawGroup<'_>,
    mv: Microversion,
    catalog: &Catalog,
    same_subtree: &[Vec<String>],
) -> Result<Group, ApiError> {
    let resources = match raw.resources {
        Some(text) => query::resources(text, catalog)?,
        None => Vec::new(),
    };
    if resources.is_empty() && !suffix.is_empty() {
        let named = same_subtree.iter().flatten().any(|s| s == suffix);
        if !(mv.at_least(36) && named) {
            let detail = match mv.at_least(36) {
                true => format!(
                    "Resourceless suffixed group request should be specified in `same_subtree` query param: bad prefix(es): {suffix}"
                ),
                false => "All member_of parameters must be associated with resources".to_owned(),
            };
            return Err(ApiError::bad_request(detail).with_code(BAD_VALUE));
        }
    }
    if resources.is_empty()
        && suffix.is_empty()
        && (!raw.required.is_empty() || !raw.member_of.is_empty() || raw.in_tree.is_some())
    {
        return Err(ApiError::bad_request("The unsuffixed group must request resources when it names traits, aggregates or a tree")
            .with_code(BAD_VALUE));
    }
    let traits = match raw.required.is_empty() {
        true => TraitFilter::default(),
        false => query::required(raw.required.iter().copied(), mv, catalog)?,
    };
    Ok(Group {
        suffix: suffix.to_owned(),
        resources,
        traits,
        member_of: query::member_of(raw.member_of.iter().copied(), mv)?,
        in_tree: raw
            .in_tree
            .map(|v| query::uuid_param(&format!("in_tree{suffix}"), v))
            .transpose()?,
    })
}

fn parse_same_subtree(
    values: &[&str],
    raw: &BTreeMap<&str, RawGroup<'_>>,
) -> Result<Vec<Vec<String>>, ApiError> {
    let mut out = Vec::with_capacity(values.len());
    for value in values {
        let suffixes: Vec<String> = value.split(',').map(|s| s.trim().to_owned()).collect();
        if suffixes.iter().any(String::is_empty) {
            return Err(ApiError::bad_request(
                "Empty string (unsuffixed group) can not be specified in `same_subtree` ",
            )
            .with_code(BAD_VALUE));
        }
        if let Some(unknown) = suffixes.iter().find(|s| !raw.contains_key(s.as_str())) {
            return Err(ApiError::bad_request(format!(
                "Real suffixes should be specified in `same_subtree`: {unknown} not found in request"
            ))
            .with_code(BAD_VALUE));
        }
        out.push(suffixes);
    }
    Ok(out)
}

fn parse_root_required(
    values: &[&str],
    mv: Microversion,
    catalog: &Catalog,
) -> Result<TraitFilter, ApiError> {
    match values {
        [] => Ok(TraitFilter::default()),
        [value] if value.starts_with("in:") => Err(ApiError::bad_request(format!(
            "Invalid query string parameters: 'in:' is not allowed in root_required: {value}"
        ))),
        [value] => query::required(std::iter::once(*value), mv, catalog).map_err(|e| {
            let conflict = value
                .split(',')
                .any(|t| value.split(',').any(|u| u.strip_prefix('!') == Some(t)));
            match conflict {
                true => e.with_code(BAD_VALUE),
                false => e,
            }
        }),
        _ => Err(ApiError::bad_request(
            "Query parameter 'root_required' may be specified only once.",
        )
        .with_code("placement.query.duplicate_key")),
    }
}

#[derive(Serialize)]
struct Resources<'a> {
    resources: BTreeMap<&'a str, u64>,
}

#[derive(Serialize)]
struct DictRequest<'a> {
    allocations: BTreeMap<Uuid, Resources<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mappings: Option<BTreeMap<&'a str, &'a BTreeSet<Uuid>>>,
}

#[derive(Serialize)]
struct ProviderRef {
    uuid: Uuid,
}

#[derive(Serialize)]
struct ListEntry<'a> {
    resource_provider: ProviderRef,
    resources: BTreeMap<&'a str, u64>,
}

#[derive(Serialize)]
struct ListRequest<'a> {
    allocations: Vec<ListEntry<'a>>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum Request<'a> {
    Dict(DictRequest<'a>),
    List(ListRequest<'a>),
}

#[derive(Serialize)]
struct Capacity {
    capacity: u64,
    used: u64,
}

#[derive(Serialize)]
struct Summary<'a> {
    resources: BTreeMap<&'a str, Capacity>,
    #[serde(skip_serializing_if = "Option::is_none")]
    traits: Option<Vec<&'a str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parent_provider_uuid: Option<Option<Uuid>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    root_provider_uuid: Option<Uuid>,
}

#[derive(Serialize)]
struct CandidatesBody<'a> {
    allocation_requests: Vec<Request<'a>>,
    provider_summaries: BTreeMap<Uuid, Summary<'a>>,
}

fn request<'a>(candidate: &'a candidates::Candidate, mv: Microversion) -> Request<'a> {
    let resources = |part: &'a candidates::Part| {
        part.resources
            .iter()
            .map(|(c, n)| (c.as_str(), *n))
            .collect()
    };
    match mv.at_least(12) {
        true => Request::Dict(DictRequest {
            allocations: candidate
                .parts
                .iter()
                .map(|p| {
                    (
                        p.provider,
                        Resources {
                            resources: resources(p),
                        },
                    )
                })
                .collect(),
            mappings: mv.at_least(34).then(|| {
                candidate
                    .mappings
                    .iter()
                    .map(|(s, p)| (s.as_str(), p))
                    .collect()
            }),
        }),
        false => Request::List(ListRequest {
            allocations: candidate
                .parts
                .iter()
                .map(|p| ListEntry {
                    resource_provider: ProviderRef { uuid: p.provider },
                    resources: resources(p),
                })
                .collect(),
        }),
    }
}

fn summary<'a>(
    provider: &'a Provider,
    mv: Microversion,
    requested: &BTreeSet<ResourceClass>,
) -> Summary<'a> {
    let resources = provider
        .inventories()
        .iter()
        .filter(|(class, _)| mv.at_least(27) || requested.contains(*class))
        .map(|(class, record)| {
            (
                class.as_str(),
                Capacity {
                    capacity: record.capacity(),
                    used: provider.used(class),
                },
            )
        })
        .collect();
    Summary {
        resources,
        traits: mv.at_least(17).then(|| {
            provider
                .traits()
                .iter()
                .map(berth_core::TraitName::as_str)
                .collect()
        }),
        parent_provider_uuid: mv.at_least(29).then(|| provider.parent()),
        root_provider_uuid: mv.at_least(29).then(|| provider.root()),
    }
}

/// Renders the response body while the catalog is borrowed.
fn render(
    catalog: &Catalog,
    found: &Candidates,
    mv: Microversion,
    requested: &BTreeSet<ResourceClass>,
) -> Vec<u8> {
    let roots: BTreeSet<Uuid> = found
        .candidates
        .iter()
        .flat_map(|c| c.parts.iter())
        .filter_map(|p| catalog.provider(p.provider))
        .map(Provider::root)
        .collect();
    let provider_summaries = match roots.is_empty() {
        true => BTreeMap::new(),
        false => catalog
            .providers()
            .filter(|p| roots.contains(&p.root()))
            .map(|p| (p.uuid(), summary(p, mv, requested)))
            .collect(),
    };
    let body = CandidatesBody {
        allocation_requests: found.candidates.iter().map(|c| request(c, mv)).collect(),
        provider_summaries,
    };
    serde_json::to_vec(&body).expect("invariant: candidates serialize")
}

async fn list(
    State(state): State<AppState>,
    caller: Caller,
    mv: Microversion,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    mv.require(10)?;
    caller.require_admin()?;
    let pairs = query::pairs(raw.as_deref())?;
    let (bytes, truncated) = state
        .berth
        .read(|catalog| {
            let parsed = parse(&pairs, mv, catalog)?;
            let found = candidates::allocation_candidates(catalog, &parsed.query);
            Ok::<_, ApiError>((
                render(catalog, &found, mv, &parsed.requested),
                found.truncated,
            ))
        })
        .await??;
    let mut response = Response::new(Body::from(bytes));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if truncated {
        headers.insert(TRUNCATED_HEADER, HeaderValue::from_static("true"));
    }
    caching_headers(mv, state.berth.now(), headers);
    Ok(response)
}
