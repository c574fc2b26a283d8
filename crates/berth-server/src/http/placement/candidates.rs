//! `GET /allocation_candidates` (1.10): request parsing with Placement's microversion gates and
//! messages, and the response shapes of every microversion.

use super::query;
use super::wire::caching_headers;
use crate::http::error::ApiError;
use crate::http::rejection::to_api_error;
use crate::http::routes::Routes;
use crate::http::state::AppState;
use crate::http::surface::Microversion;
use crate::policy::Rule;
use axum::body::Body;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderValue, Method, header};
use axum::response::Response;
use berth_api::placement::AllocationCandidates;
use berth_core::decide::fence::FencePolicy;
use berth_core::model::lease::ReservationSpec;
use berth_core::query::candidates::{self, CandidateQuery, Candidates, Group, GroupPolicy};
use berth_core::query::providers::TraitFilter;
use berth_core::{Catalog, Provider, Rejection, ReservationId, ResourceClass, limits};
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

/// How many groups the request names; 400 when more than [`limits::REQUEST_GROUPS_MAX`],
/// before any work is done on them.
fn check_groups(pairs: &[(String, String)], mv: Microversion) -> Result<usize, ApiError> {
    let groups: BTreeSet<&str> = pairs
        .iter()
        .filter_map(|(key, _)| group_key(key, mv).map(|(_, suffix)| suffix))
        .collect();
    match groups.len() <= limits::REQUEST_GROUPS_MAX {
        true => Ok(groups.len()),
        false => Err(to_api_error(&Rejection::LimitExceeded {
            limit: "request_groups",
            max: limits::REQUEST_GROUPS_MAX as u64,
            got: groups.len() as u64,
        })),
    }
}

fn parse(
    pairs: &[(String, String)],
    mv: Microversion,
    catalog: &Catalog,
    fence: FencePolicy,
    now: berth_core::Instant,
) -> Result<Parsed, ApiError> {
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
            ("limit", None) if mv.at_least(16) => limit = Some(value.as_str()),
            ("group_policy", None) if mv.at_least(25) => policy = policy.or(Some(value.as_str())),
            ("root_required", None) if mv.at_least(35) => root_required.push(value.as_str()),
            ("same_subtree", None) if mv.at_least(36) => same_subtree.push(value.as_str()),
            ("reservation", None) => reservation = Some(query::uuid_param("reservation", value)?),
            ("preemptible", None) => preemptible = parse_preemptible(value, mv)?,
            (other, None) => return Err(unexpected(other)),
        }
    }
    let same_subtree = parse_same_subtree(&same_subtree, &raw)?;
    let mut groups = Vec::with_capacity(raw.len());
    for (suffix, group) in &raw {
        groups.push(parse_group(suffix, group, mv, catalog, &same_subtree)?);
    }
    if let Some(reservation) = reservation {
        present(catalog, ReservationId::new(reservation), &mut groups, now)?;
    }
    let within = confined_to(catalog, reservation.map(ReservationId::new), &groups);
    let unreserved = fence == FencePolicy::Enforced && within.is_none() && !preemptible;
    let presented = presented_aggregates(catalog, &groups);
    let mut requested = BTreeSet::new();
    for group in &groups {
        requested.extend(group.resources.iter().map(|(class, _)| class.clone()));
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
        unreserved,
        within,
        presented,
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

/// `reservation=<id>` (a berth extension): the request presents a running reservation, so it
/// gets candidates only inside it: a host reservation's aggregate, or an instance
/// reservation's class (one slot).
fn present(
    catalog: &Catalog,
    reservation: ReservationId,
    groups: &mut [Group],
    now: berth_core::Instant,
) -> Result<(), ApiError> {
    let (_, found) =
        berth_core::query::presentation::check_presented(catalog, reservation, None, now)
            .map_err(ApiError::from)?;
    let Some(group) = groups.iter_mut().min_by_key(|g| !g.is_unsuffixed()) else {
        return Ok(());
    };
    match found.spec {
        ReservationSpec::Host { .. } => {
            let aggregate = berth_core::model::fence::reservation_aggregate(reservation);
            group.member_of.required.push(BTreeSet::from([aggregate]));
        }
        ReservationSpec::Instance { .. } => {
            let class = berth_core::model::fence::reservation_class(reservation);
            group.resources.push((catalog.interned_class(&class), 1));
        }
        ReservationSpec::FloatingIp { .. } => {
            return Err(ApiError::bad_request(format!(
                "Reservation {reservation} reserves floating IPs, not placement capacity"
            )));
        }
    }
    Ok(())
}

/// The instance reservation a query presents (named, or by its class): it gets no more than
/// the reservation holds on each host.
fn confined_to(
    catalog: &Catalog,
    named: Option<ReservationId>,
    groups: &[Group],
) -> Option<ReservationId> {
    named
        .or_else(|| {
            groups
                .iter()
                .flat_map(|g| g.resources.iter())
                .find_map(|(class, _)| berth_core::model::fence::reservation_of_class(class))
        })
        .filter(|id| {
            berth_core::query::presentation::find(catalog, *id)
                .is_some_and(|(_, r)| matches!(r.spec, ReservationSpec::Instance { .. }))
        })
}

/// The reservation aggregates a query names in `member_of`: providers in them are offered as
/// to their holder (the rest of the query stays fenced).
fn presented_aggregates(catalog: &Catalog, groups: &[Group]) -> BTreeSet<Uuid> {
    groups
        .iter()
        .flat_map(|g| g.member_of.required.iter().flatten())
        // A reservation's aggregate has the reservation's id.
        .filter(|agg| {
            catalog
                .lease_of_reservation(ReservationId::new(**agg))
                .is_some()
        })
        .copied()
        .collect()
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

    fn uuid(&mut self, uuid: Uuid) {
        let mut buffer = Uuid::encode_buffer();
        let text = uuid.hyphenated().encode_lower(&mut buffer);
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
                    self.uuid(part.provider);
                    self.raw(":{");
                }
                false => {
                    self.raw("{\"resource_provider\":{\"uuid\":");
                    self.uuid(part.provider);
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
                    self.uuid(*provider);
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
        requested: &BTreeSet<ResourceClass>,
    ) {
        self.uuid(provider.uuid());
        self.raw(":{\"resources\":{");
        let classes = provider
            .inventories()
            .iter()
            .filter(|(class, _)| mv.at_least(27) || requested.contains(*class));
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
            self.raw(",\"traits\":[");
            for (idx, name) in provider.traits().iter().enumerate() {
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
                Some(parent) => self.uuid(parent),
                None => self.raw("null"),
            }
            self.raw(",\"root_provider_uuid\":");
            self.uuid(provider.root());
        }
        self.raw("}");
    }
}

/// Renders the response body while the catalog is borrowed.
fn render(
    catalog: &Catalog,
    found: &Candidates,
    mv: Microversion,
    requested: &BTreeSet<ResourceClass>,
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
    // Summaries cover every provider of every tree a candidate uses, each tree once.
    let mut first = true;
    if found.one_root_each && !catalog.has_nested() {
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
    let groups = check_groups(&pairs, mv)?;
    let fence = state.berth.fence_policy();
    let now = state.berth.now();
    let answer = move |catalog: &Catalog, stop: &dyn Fn() -> bool| {
        let parsed = parse(&pairs, mv, catalog, fence, now)?;
        let found = candidates::allocation_candidates_within(catalog, &parsed.query, stop);
        Ok::<_, ApiError>((
            render(catalog, &found, mv, &parsed.requested),
            found.truncated,
        ))
    };
    // One group visits each tree once (what Nova sends most): answered in place, from the
    // catalog. Several groups combine options and may search long: on a snapshot, off the
    // runtime threads, within the search budget.
    let (bytes, truncated) = match groups {
        0 | 1 => {
            state
                .berth
                .read(move |catalog| answer(catalog, &|| false))
                .await??
        }
        _ => state.berth.search(answer).await??,
    };
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
