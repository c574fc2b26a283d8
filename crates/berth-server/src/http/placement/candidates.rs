//! `GET /allocation_candidates` (1.10): the query string parsed into a request with
//! Placement's microversion gates and messages, answered by `Berth::allocation_candidates`, and
//! the response shapes of every microversion, written straight from the borrowed catalog.

use super::query;
use super::schema::{CANDIDATES_QUERY, repr};
use super::wire::caching_headers;
use crate::http::error::ApiError;
use crate::http::routes::Routes;
use crate::http::state::AppState;
use crate::http::surface::Microversion;
use crate::policy::Rule;
use axum::body::Body;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderValue, Method, header};
use axum::response::Response;
use berth_api::placement::AllocationCandidates;
use berth_core::model::name::is_custom_name;
use berth_core::query::candidate_request::{CandidateRequest, Unanswerable, check_group_count};
use berth_core::query::candidates::{self, Candidates, Group, GroupPolicy};
use berth_core::query::names::Names;
use berth_core::query::providers::TraitFilter;
use berth_core::{Catalog, Provider, ProviderId, ReservationId, ResourceClass};
use std::collections::{BTreeMap, BTreeSet};
use uuid::Uuid;

/// Set on a response whose search hit a bound other than `limit`.
const TRUNCATED_HEADER: &str = "x-berth-candidates-truncated";

pub(super) fn register(routes: &mut Routes) {
    routes
        .add(
            Method::GET,
            "/placement/allocation_candidates",
            Rule::SERVICE,
            "List allocation candidates (1.10)",
            list,
        )
        .answers::<AllocationCandidates>(200);
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

#[derive(Default)]
struct RawGroup<'p> {
    resources: Option<&'p str>,
    required: Vec<&'p str>,
    member_of: Vec<&'p str>,
    in_tree: Option<&'p str>,
}

/// Refuses a request of more groups than the core allows, before any work is done on them.
fn check_groups(pairs: &[(String, String)], mv: Microversion) -> Result<(), ApiError> {
    let groups: BTreeSet<&str> = pairs
        .iter()
        .filter_map(|(key, _)| group_key(key, mv).map(|(_, suffix)| suffix))
        .collect();
    Ok(check_group_count(groups.len())?)
}

/// Parses the query string into a request; what needs the catalog (the names, the presented
/// reservation) is the core's, when the request is answered.
fn parse(pairs: &[(String, String)], mv: Microversion) -> Result<CandidateRequest, ApiError> {
    let mut raw: BTreeMap<&str, RawGroup<'_>> = BTreeMap::new();
    let (mut limit, mut policy, mut root_required, mut same_subtree) =
        (None, None, Vec::new(), Vec::new());
    let (mut reservation, mut preemptible) = (None, false);
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
            // As Placement, the first `limit` counts.
            ("limit", None) if mv.at_least(16) => limit = limit.or(Some(value.as_str())),
            ("group_policy", None) if mv.at_least(25) => policy = policy.or(Some(value.as_str())),
            ("root_required", None) if mv.at_least(35) => root_required.push(value.as_str()),
            ("same_subtree", None) if mv.at_least(36) => same_subtree.push(value.as_str()),
            ("reservation", None) => reservation = Some(query::uuid_param("reservation", value)?),
            ("preemptible", None) => preemptible = parse_preemptible(value, mv)?,
            (other, None) => return Err(unexpected(other)),
        }
    }
    let same_subtree = parse_same_subtree(&same_subtree, &raw)?;
    let mut names = Names::default();
    let mut groups = Vec::with_capacity(raw.len());
    for (suffix, group) in &raw {
        groups.push(parse_group(suffix, group, mv, &mut names)?);
    }
    check_shape(&groups, &same_subtree, mv)?;
    let group_policy = match policy {
        None => None,
        Some("none") => Some(GroupPolicy::None),
        Some("isolate") => Some(GroupPolicy::Isolate),
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
    let mut root_names = Names::default();
    let root_required = parse_root_required(&root_required, mv, &mut root_names)?;
    Ok(CandidateRequest {
        groups,
        group_policy,
        root_required,
        same_subtree,
        limit,
        nested_aware: mv.at_least(29),
        reservation: reservation.map(ReservationId::new),
        preemptible,
        names,
        root_names,
    })
}

/// Refuses groups without resources as Placement does: from 1.36 only those `same_subtree` does
/// not name (and a request with no resources at all), before that any group whose traits or
/// aggregates have no resources to apply to, then any group without resources, then no group.
fn check_shape(
    groups: &[Group],
    same_subtree: &[Vec<String>],
    mv: Microversion,
) -> Result<(), ApiError> {
    let resourceless = || groups.iter().filter(|g| g.resources.is_empty());
    if mv.at_least(36) {
        if resourceless().count() == groups.len() {
            return Err(ApiError::bad_request(
                "There must be at least one resources or resources[$S] parameter.",
            )
            .with_code("placement.query.missing_value"));
        }
        let bad: Vec<String> = resourceless()
            .filter(|g| !same_subtree.iter().flatten().any(|s| *s == g.suffix))
            .map(|g| repr(&serde_json::Value::String(g.suffix.clone())))
            .collect();
        if !bad.is_empty() {
            return Err(ApiError::bad_request(format!(
                "Resourceless suffixed group request should be specified in `same_subtree` query param: bad group(s) - [{}].",
                bad.join(", ")
            ))
            .with_code(BAD_VALUE));
        }
        return Ok(());
    }
    let orphans = |key: &str, orphaned: &dyn Fn(&Group) -> bool| -> Vec<String> {
        resourceless()
            .filter(|g| orphaned(g))
            .map(|g| format!("{key}{}", g.suffix))
            .collect()
    };
    let traits = orphans("required", &|g| {
        !g.traits.all_of.is_empty() || !g.traits.any_of.is_empty()
    });
    if !traits.is_empty() {
        return Err(ApiError::bad_request(format!(
            "All traits parameters must be associated with resources.  Found the following orphaned traits keys: {}",
            traits.join(", ")
        )));
    }
    let member_of = orphans("member_of", &|g| {
        !g.member_of.required.is_empty() || !g.member_of.forbidden.is_empty()
    });
    if !member_of.is_empty() {
        return Err(ApiError::bad_request(format!(
            "All member_of parameters must be associated with resources. Found the following orphaned member_of keys: {}",
            member_of.join(", ")
        )));
    }
    if resourceless().next().is_some() {
        return Err(ApiError::bad_request(
            "All request groups must specify resources.",
        ));
    }
    if groups.is_empty() {
        return Err(ApiError::bad_request(
            "At least one request group (`resources` or `resources{$S}`) is required.",
        ));
    }
    Ok(())
}

fn parse_group(
    suffix: &str,
    raw: &RawGroup<'_>,
    mv: Microversion,
    names: &mut Names,
) -> Result<Group, ApiError> {
    let resources = match raw.resources {
        Some(text) => query::resources(text)?,
        None => Vec::new(),
    };
    names.classes(resources.iter().map(|(class, _)| class.clone()));
    let traits = match raw.required.is_empty() {
        true => TraitFilter::default(),
        false => {
            let key = format!("required{suffix}");
            let (traits, named) = query::required(raw.required.iter().copied(), mv, &key)?;
            names.traits(named);
            traits
        }
    };
    Ok(Group {
        suffix: suffix.to_owned(),
        resources,
        traits,
        member_of: query::member_of(raw.member_of.iter().copied(), mv)?,
        in_tree: raw
            .in_tree
            .map(|v| query::uuid_param(&format!("in_tree{suffix}"), v).map(ProviderId::new))
            .transpose()?,
    })
}

/// `preemptible=true|false` (a berth extension): the consumer may borrow fenced capacity and be
/// evicted for it. Preemptible consumers are `consumer_type` PREEMPTIBLE, which needs 1.38.
fn parse_preemptible(value: &str, mv: Microversion) -> Result<bool, ApiError> {
    if !mv.at_least(38) {
        return Err(ApiError::bad_request(
            "preemptible needs microversion 1.38 or later (consumer_type PREEMPTIBLE)",
        ));
    }
    match value {
        "true" | "True" | "1" => Ok(true),
        "false" | "False" | "0" => Ok(false),
        other => Err(ApiError::bad_request(format!(
            "Invalid query string parameters: preemptible must be true or false, not {other:?}"
        ))),
    }
}

/// Why the core could not answer a request as asked, in Placement's words.
fn unanswerable(error: Unanswerable, mv: Microversion) -> ApiError {
    match error {
        Unanswerable::Rejected(rejection) => query::refusal(rejection),
        Unanswerable::PresentsAddresses(reservation) => ApiError::bad_request(format!(
            "Reservation {reservation} reserves floating IPs, not placement capacity"
        )),
        Unanswerable::NoResources => match mv.at_least(36) {
            true => ApiError::bad_request(
                "There must be at least one resources or resources[$S] parameter.",
            )
            .with_code("placement.query.missing_value"),
            false => ApiError::bad_request(
                "Invalid query string parameters: 'resources' is a required property",
            ),
        },
        Unanswerable::GroupPolicyMissing => ApiError::bad_request(
            "The \"group_policy\" parameter is required when specifying more than one \"resources{N}\" parameter.",
        ),
    }
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
    names: &mut Names,
) -> Result<TraitFilter, ApiError> {
    match values {
        [] => Ok(TraitFilter::default()),
        [value] if value.starts_with("in:") => Err(ApiError::bad_request(format!(
            "Invalid query string parameters: 'in:' is not allowed in root_required: {value}"
        ))),
        [value] => {
            let written: Vec<&str> = value.split(',').map(str::trim).collect();
            let conflicts: Vec<&str> = written
                .iter()
                .filter(|name| {
                    written
                        .iter()
                        .any(|other| other.strip_prefix('!') == Some(**name))
                })
                .copied()
                .collect();
            if !conflicts.is_empty() {
                return Err(ApiError::bad_request(format!(
                    "Conflicting required and forbidden traits found in root_required: {}",
                    conflicts.join(", ")
                ))
                .with_code(BAD_VALUE));
            }
            let (traits, named) = query::required(std::iter::once(*value), mv, "root_required")?;
            names.traits(named);
            Ok(traits)
        }
        _ => Err(ApiError::bad_request(
            "Query parameter 'root_required' may be specified only once.",
        )
        .with_code("placement.query.duplicate_key")),
    }
}

/// Writes the response body (an `AllocationCandidates`) straight from the catalog and the
/// candidates into bytes.
///
/// This is the hottest path of the Placement surface (an answer can hold thousands of
/// candidates), so it writes JSON directly instead of going through serde: every string it
/// writes is a uuid, a resource class or trait name (`[A-Z0-9_]`), a group suffix
/// (`[A-Za-z0-9_-]`) or a literal key, none of which needs escaping. Tests parse the output
/// into the wire type at every microversion that changes its shape.
struct Json {
    out: Vec<u8>,
    numbers: itoa::Buffer,
}

impl Json {
    fn raw(&mut self, text: &str) {
        self.out.extend_from_slice(text.as_bytes());
    }

    /// A string that needs no escaping (checked in debug builds).
    fn plain(&mut self, text: &str) {
        debug_assert!(
            text.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        );
        self.out.push(b'"');
        self.out.extend_from_slice(text.as_bytes());
        self.out.push(b'"');
    }

    fn provider(&mut self, provider: ProviderId) {
        let mut buffer = Uuid::encode_buffer();
        let text = provider.uuid().hyphenated().encode_lower(&mut buffer);
        self.plain(text);
    }

    fn number(&mut self, value: u64) {
        let text = self.numbers.format(value);
        self.out.extend_from_slice(text.as_bytes());
    }

    fn amounts<'a>(&mut self, amounts: impl Iterator<Item = (&'a ResourceClass, u64)>) {
        self.raw("{");
        for (idx, (class, amount)) in amounts.enumerate() {
            if idx > 0 {
                self.raw(",");
            }
            self.plain(class.as_str());
            self.raw(":");
            self.number(amount);
        }
        self.raw("}");
    }

    fn request(&mut self, candidate: &candidates::Candidate, mv: Microversion) {
        self.raw("{\"allocations\":");
        let dict = mv.at_least(12);
        self.raw(if dict { "{" } else { "[" });
        for (idx, part) in candidate.parts.iter().enumerate() {
            if idx > 0 {
                self.raw(",");
            }
            match dict {
                true => {
                    self.provider(part.provider);
                    self.raw(":{");
                }
                false => {
                    self.raw("{\"resource_provider\":{\"uuid\":");
                    self.provider(part.provider);
                    self.raw("},");
                }
            }
            self.raw("\"resources\":");
            self.amounts(
                part.resources
                    .iter()
                    .map(|(class, amount)| (class, *amount)),
            );
            self.raw("}");
        }
        self.raw(if dict { "}" } else { "]" });
        if mv.at_least(34) {
            self.raw(",\"mappings\":{");
            for (idx, (suffix, providers)) in candidate.mappings.iter().enumerate() {
                if idx > 0 {
                    self.raw(",");
                }
                self.out.push(b'"');
                self.raw(suffix);
                self.raw("\":[");
                for (n, provider) in providers.iter().enumerate() {
                    if n > 0 {
                        self.raw(",");
                    }
                    self.provider(*provider);
                }
                self.raw("]");
            }
            self.raw("}");
        }
        self.raw("}");
    }

    fn summary(
        &mut self,
        provider: &Provider,
        mv: Microversion,
        requested: &BTreeSet<&ResourceClass>,
    ) {
        self.provider(provider.uuid());
        self.raw(":{\"resources\":{");
        let classes = provider
            .inventories()
            .iter()
            .filter(|(class, _)| mv.at_least(27) || requested.contains(class));
        for (idx, (class, record)) in classes.enumerate() {
            if idx > 0 {
                self.raw(",");
            }
            self.plain(class.as_str());
            self.raw(":{\"capacity\":");
            self.number(record.capacity());
            self.raw(",\"used\":");
            self.number(provider.used_interned(class));
            self.raw("}");
        }
        self.raw("}");
        if mv.at_least(17) {
            // Standard traits before custom ones, as Placement lists them (in the order their
            // rows were made: the standard ones at start-up, custom ones later).
            self.raw(",\"traits\":[");
            let traits = provider.traits();
            let standard = traits.iter().filter(|t| !is_custom_name(t.as_str()));
            let custom = traits.iter().filter(|t| is_custom_name(t.as_str()));
            for (idx, name) in standard.chain(custom).enumerate() {
                if idx > 0 {
                    self.raw(",");
                }
                self.plain(name.as_str());
            }
            self.raw("]");
        }
        if mv.at_least(29) {
            self.raw(",\"parent_provider_uuid\":");
            match provider.parent() {
                Some(parent) => self.provider(parent),
                None => self.raw("null"),
            }
            self.raw(",\"root_provider_uuid\":");
            self.provider(provider.root());
        }
        self.raw("}");
    }
}

/// Renders the response body while the catalog is borrowed.
fn render(
    catalog: &Catalog,
    found: &Candidates,
    mv: Microversion,
    requested: &BTreeSet<&ResourceClass>,
) -> Vec<u8> {
    let mut json = Json {
        out: Vec::with_capacity(512 * found.candidates.len() + 64),
        numbers: itoa::Buffer::new(),
    };
    json.raw("{\"allocation_requests\":[");
    for (idx, candidate) in found.candidates.iter().enumerate() {
        if idx > 0 {
            json.raw(",");
        }
        json.request(candidate, mv);
    }
    json.raw("],\"provider_summaries\":{");
    // From 1.29 summaries cover every provider of every tree a candidate uses, each tree once;
    // before, only the providers the candidates allocate from.
    let mut first = true;
    if !mv.at_least(29) {
        let mut seen = std::collections::HashSet::new();
        for part in found.candidates.iter().flat_map(|c| c.parts.iter()) {
            let Some(provider) = catalog.provider(part.provider) else {
                continue;
            };
            if !seen.insert(part.provider) {
                continue;
            }
            if !first {
                json.raw(",");
            }
            first = false;
            json.summary(provider, mv, requested);
        }
    } else if found.one_root_each && !catalog.has_nested() {
        // Flat answers: each candidate is one root, used once; its tree is itself.
        for candidate in &found.candidates {
            let Some(root) = catalog.provider(candidate.anchor) else {
                continue;
            };
            if !first {
                json.raw(",");
            }
            first = false;
            json.summary(root, mv, requested);
        }
    } else {
        let mut seen = std::collections::HashSet::new();
        for part in found.candidates.iter().flat_map(|c| c.parts.iter()) {
            let Some(root) = catalog.provider(part.provider).map(Provider::root) else {
                continue;
            };
            if !seen.insert(root) {
                continue;
            }
            for provider in catalog.tree(root) {
                if !first {
                    json.raw(",");
                }
                first = false;
                json.summary(provider, mv, requested);
            }
        }
    }
    json.raw("}}");
    json.out
}

async fn list(
    State(state): State<AppState>,
    mv: Microversion,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    mv.require(10)?;
    let pairs = query::pairs(raw.as_deref())?;
    CANDIDATES_QUERY.check_query(mv.minor(), &pairs, &["reservation", "preemptible"])?;
    check_groups(&pairs, mv)?;
    let request = parse(&pairs, mv)?;
    let answer = state
        .berth
        .allocation_candidates(request, move |catalog, query, found| {
            let requested = query.requested_classes();
            (render(catalog, found, mv, &requested), found.truncated)
        })
        .await?;
    let (bytes, truncated) = answer.map_err(|error| unanswerable(error, mv))?;
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
