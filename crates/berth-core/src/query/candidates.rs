//! Allocation candidates: every way a request (one unsuffixed group plus any suffixed groups)
//! can be satisfied now, with Placement's semantics, computed over the in-memory catalog.
//!
//! The search visits trees (anchored at their roots) in creation order and stops as soon as it
//! has `limit` candidates; it never builds everything and slices. Within a tree, each group's
//! options are enumerated and combined; the number of combinations examined per request is
//! bounded by [`limits::CANDIDATE_COMBINATIONS_MAX`], and the number of candidates returned by
//! [`limits::PLACEMENT_CANDIDATES_MAX`]. When a bound cuts the search short the result says so.
//!
//! Spanning rules (Placement, and the forbidden-aggregates spec):
//! - the unsuffixed group may spread its classes over several providers of one tree plus sharing
//!   providers; `member_of` and forbidden aggregates are satisfied by a provider *or its root*
//!   (for a sharing provider: or the root it is anchored to); required traits are satisfied by
//!   the union of the traits of the providers used, and no provider used may have a forbidden one;
//! - a suffixed group is satisfied by one provider, judged on its own aggregates and traits.

use crate::catalog::Catalog;
use crate::limits;
use crate::model::id::{ProviderId, ReservationId};
use crate::model::name::{ResourceClass, TraitName};
use crate::model::provider::Provider;
use crate::query::providers::{MemberOf, TraitFilter};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use uuid::Uuid;

/// The trait that marks a provider as sharing its inventory through its aggregates.
pub const SHARING_TRAIT: &str = "MISC_SHARES_VIA_AGGREGATE";

/// One request group.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Group {
    /// `""` for the unsuffixed group.
    pub suffix: String,
    /// Amounts requested, one entry per class.
    pub resources: Vec<(ResourceClass, u64)>,
    /// Trait requirements.
    pub traits: TraitFilter,
    /// Aggregate requirements.
    pub member_of: MemberOf,
    /// Restrict to the tree containing this provider.
    pub in_tree: Option<ProviderId>,
}

impl Group {
    /// Whether this is the unsuffixed group (which may span providers).
    pub fn is_unsuffixed(&self) -> bool {
        self.suffix.is_empty()
    }
}

/// How suffixed groups relate to each other.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum GroupPolicy {
    /// Suffixed groups may share providers.
    #[default]
    None,
    /// Suffixed groups must use different providers.
    Isolate,
}

/// A whole allocation-candidates request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CandidateQuery {
    /// The groups; at most one unsuffixed.
    pub groups: Vec<Group>,
    /// How suffixed groups relate.
    pub group_policy: GroupPolicy,
    /// Traits the root of the tree must (not) have.
    pub root_required: TraitFilter,
    /// Sets of suffixes whose providers must lie in one subtree.
    pub same_subtree: Vec<Vec<String>>,
    /// Stop after this many candidates.
    pub limit: Option<usize>,
    /// From 1.29; before it, a candidate may use only one provider per tree.
    pub nested_aware: bool,
    /// The request presents no reservation and may not borrow: fenced capacity (see
    /// [`crate::decide::fence`]) is not offered.
    pub unreserved: bool,
    /// The request presents this instance reservation: each provider offers at most what the
    /// reservation holds there, less what its consumers use.
    pub within: Option<ReservationId>,
    /// Reservation aggregates the request names in `member_of`: providers in them (or under a
    /// root in them) are offered to it as to their holder, unfenced.
    pub presented: BTreeSet<Uuid>,
}

impl CandidateQuery {
    /// Every class some group asks for.
    pub fn requested_classes(&self) -> BTreeSet<&ResourceClass> {
        self.groups
            .iter()
            .flat_map(|g| g.resources.iter().map(|(class, _)| class))
            .collect()
    }
}

/// One provider's part of a candidate: the amounts it gives.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Part {
    /// The provider.
    pub provider: ProviderId,
    /// Amounts by class (summed over groups), sorted by class; shared between candidates that
    /// ask the same of different providers.
    pub resources: Arc<[(ResourceClass, u64)]>,
}

/// Suffix to the providers serving that group, sorted by suffix; providers sorted.
pub type Mapping = Vec<(String, Vec<ProviderId>)>;

/// What makes two candidates the same: their parts and their mappings (not their anchor).
#[derive(PartialEq, Eq, Hash)]
struct Identity(Vec<Part>, Mapping);

/// One allocation candidate.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// The root the candidate is anchored to.
    pub anchor: ProviderId,
    /// Providers and what each gives, in provider order.
    pub parts: Vec<Part>,
    /// Suffix to the providers serving that group.
    pub mappings: Mapping,
}

/// The candidates found, and whether a bound cut the search short.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Candidates {
    /// The candidates, in tree creation order.
    pub candidates: Vec<Candidate>,
    /// A bound (not `limit`) stopped the search.
    pub truncated: bool,
    /// Every candidate uses exactly one provider, a root, and no two share it (the flat path).
    pub one_root_each: bool,
}

/// Per-query indexes: sharing anchors (only built when sharing providers exist).
struct Index<'c> {
    catalog: &'c Catalog,
    /// Root to the sharing providers anchored to it (outside its own tree).
    shared_with: HashMap<ProviderId, Vec<&'c Provider>>,
    /// Whether the unsuffixed group must consider spreading over providers.
    spans: bool,
    /// What the request may use.
    rules: Rules<'c>,
}

impl<'c> Index<'c> {
    fn build(catalog: &'c Catalog, query: &'c CandidateQuery) -> Index<'c> {
        let mut shared_with: HashMap<ProviderId, Vec<&Provider>> = HashMap::new();
        if catalog.sharing_providers().next().is_some() {
            let mut roots_by_aggregate: HashMap<Uuid, BTreeSet<ProviderId>> = HashMap::new();
            for provider in catalog.providers() {
                for aggregate in provider.aggregates() {
                    roots_by_aggregate
                        .entry(*aggregate)
                        .or_default()
                        .insert(provider.root());
                }
            }
            for provider in catalog.sharing_providers() {
                let anchors: BTreeSet<ProviderId> = provider
                    .aggregates()
                    .iter()
                    .filter_map(|aggregate| roots_by_aggregate.get(aggregate))
                    .flatten()
                    .copied()
                    .filter(|root| *root != provider.root())
                    .collect();
                for anchor in anchors {
                    shared_with.entry(anchor).or_default().push(provider);
                }
            }
        }
        let spans = catalog.has_nested() || !shared_with.is_empty();
        Index {
            catalog,
            shared_with,
            spans,
            rules: Rules {
                catalog,
                fenced: query.unreserved,
                presented: &query.presented,
                within: query
                    .within
                    .and_then(|id| crate::query::presentation::find(catalog, id))
                    .map(|(_, reservation)| reservation),
            },
        }
    }

    fn root_of(&self, provider: &Provider) -> &'c Provider {
        self.catalog
            .provider(provider.root())
            .expect("invariant: roots exist")
    }
}

/// One way a group can be satisfied within one tree.
#[derive(Debug, Clone)]
struct GroupOption<'c> {
    /// `(provider, class, amount)` entries.
    entries: Vec<(&'c Provider, &'c ResourceClass, u64)>,
    /// Providers serving the group (for mappings, group policy and same_subtree).
    providers: BTreeSet<ProviderId>,
}

/// Whether `provider`, anchored at `anchor`, passes a group's aggregate filter.
fn aggregates_pass(group: &Group, provider: &Provider, anchor: &Provider, spans: bool) -> bool {
    if group.member_of.is_empty() {
        return true;
    }
    let own = provider.aggregates();
    if !spans {
        return group.member_of.admits(own);
    }
    // A provider of the tree passes when it or its root is in each required set, and neither
    // is in a forbidden aggregate; a sharing provider from outside the tree must be in them
    // itself (as Placement since its bug 1792503).
    let sharing = provider.root() != anchor.uuid();
    let reach: &[&BTreeSet<Uuid>] = match sharing {
        true => &[own],
        false => &[own, anchor.aggregates()],
    };
    let required = group
        .member_of
        .required
        .iter()
        .all(|any| reach.iter().any(|aggs| !any.is_disjoint(aggs)));
    let forbidden = reach
        .iter()
        .any(|aggs| !group.member_of.forbidden.is_disjoint(aggs));
    required && !forbidden
}

/// What a request may use beyond plain capacity: whether it sees fenced capacity as taken,
/// and the instance reservation it is confined to.
#[derive(Clone, Copy)]
struct Rules<'c> {
    catalog: &'c Catalog,
    fenced: bool,
    within: Option<&'c crate::model::lease::Reservation>,
    presented: &'c BTreeSet<Uuid>,
}

impl Rules<'_> {
    /// Whether the fence applies to `provider` for this request.
    fn fences(&self, provider: &Provider) -> bool {
        if !self.fenced {
            return false;
        }
        if self.presented.is_empty() {
            return true;
        }
        let named = |p: &Provider| !self.presented.is_disjoint(p.aggregates());
        let root = self.catalog.provider(provider.root());
        !(named(provider) || root.is_some_and(named))
    }

    /// Whether `amount` of `class` on `provider` stays within the reservation's share there.
    fn within_share(&self, provider: &Provider, class: &ResourceClass, amount: u64) -> bool {
        let Some(reservation) = self.within else {
            return true;
        };
        if reservation.slots_on(provider.uuid()).is_none() {
            return false;
        }
        crate::query::presentation::limit_on(reservation, provider.uuid(), class).is_none_or(
            |limit| {
                let used =
                    self.catalog
                        .reserved_use(reservation.id, provider.uuid(), class, Uuid::nil());
                used + amount <= limit
            },
        )
    }
}

/// Whether `provider` can take `amount` of an interned `class` in one more allocation under
/// `rules`.
fn fits(provider: &Provider, class: &ResourceClass, amount: u64, rules: &Rules<'_>) -> bool {
    let used = match rules.fences(provider) {
        true if provider.fence().whole => return false,
        true => provider.used_unreserved_interned(class),
        false => provider.used_interned(class),
    };
    provider
        .inventory_interned(class)
        .is_some_and(|record| record.admits(used, amount))
        && rules.within_share(provider, class, amount)
}

/// Units of `class` a request must treat as taken on `provider`.
fn used_for(provider: &Provider, class: &ResourceClass, fenced: bool) -> u64 {
    match fenced {
        true => provider.used_unreserved_interned(class),
        false => provider.used_interned(class),
    }
}

/// Options of a group served by a single provider (suffixed groups, or flat deployments).
fn single_provider_options<'c>(
    group: &'c Group,
    pool: &[(&'c Provider, &'c Provider)],
    spans: bool,
    rules: &Rules<'_>,
) -> Vec<GroupOption<'c>> {
    let mut options = Vec::new();
    for (provider, anchor) in pool {
        let fits = group
            .resources
            .iter()
            .all(|(class, amount)| fits(provider, class, *amount, rules));
        if !fits
            || !group.traits.admits(provider.traits())
            || !aggregates_pass(group, provider, anchor, spans)
        {
            continue;
        }
        let entries = group
            .resources
            .iter()
            .map(|(class, amount)| (*provider, class, *amount))
            .collect();
        options.push(GroupOption {
            entries,
            providers: BTreeSet::from([provider.uuid()]),
        });
    }
    options
}

/// Options of the unsuffixed group, which may spread classes over providers of one tree and
/// sharing providers: one provider per class, every combination, traits judged on the union.
fn spanning_options<'c>(
    group: &'c Group,
    pool: &[(&'c Provider, &'c Provider)],
    budget: &mut usize,
    rules: &Rules<'_>,
) -> Vec<GroupOption<'c>> {
    let mut per_class: Vec<Vec<(&Provider, &ResourceClass, u64)>> =
        Vec::with_capacity(group.resources.len());
    for (class, amount) in &group.resources {
        let eligible: Vec<_> = pool
            .iter()
            .filter(|(provider, anchor)| {
                fits(provider, class, *amount, rules)
                    && group.traits.forbidden.is_disjoint(provider.traits())
                    && aggregates_pass(group, provider, anchor, true)
            })
            .map(|(provider, _)| (*provider, class, *amount))
            .collect();
        if eligible.is_empty() {
            return Vec::new();
        }
        per_class.push(eligible);
    }
    let mut options = Vec::new();
    let mut cursor = vec![0usize; per_class.len()];
    // Odometer over the per-class choices; bounded by the shared combination budget.
    loop {
        if *budget == 0 {
            break;
        }
        *budget -= 1;
        let entries: Vec<_> = cursor
            .iter()
            .zip(&per_class)
            .map(|(idx, choices)| choices[*idx])
            .collect();
        let mut union: BTreeSet<&TraitName> = BTreeSet::new();
        for (provider, _, _) in &entries {
            union.extend(provider.traits());
        }
        let all_of = group.traits.all_of.iter().all(|t| union.contains(t));
        let any_of = group
            .traits
            .any_of
            .iter()
            .all(|any| any.iter().any(|t| union.contains(t)));
        if all_of && any_of {
            let providers = entries.iter().map(|(p, _, _)| p.uuid()).collect();
            options.push(GroupOption { entries, providers });
        }
        if !advance(&mut cursor, &per_class) {
            break;
        }
    }
    options
}

/// Moves an odometer one step; false when it wrapped around.
fn advance<T>(cursor: &mut [usize], choices: &[Vec<T>]) -> bool {
    for position in (0..cursor.len()).rev() {
        cursor[position] += 1;
        if cursor[position] < choices[position].len() {
            return true;
        }
        cursor[position] = 0;
    }
    false
}

/// Whether every provider in `providers` lies under one of them.
fn same_subtree(catalog: &Catalog, providers: &BTreeSet<ProviderId>) -> bool {
    if providers.len() <= 1 {
        return true;
    }
    providers.iter().any(|top| {
        providers.iter().all(|other| {
            let mut current = Some(*other);
            let mut steps = 0;
            while let Some(uuid) = current {
                if uuid == *top {
                    return true;
                }
                steps += 1;
                assert!(
                    steps <= limits::TREE_DEPTH_MAX,
                    "invariant: trees are shallower than the limit"
                );
                current = catalog.provider(uuid).and_then(Provider::parent);
            }
            false
        })
    })
}

/// Combines one option per group into a candidate, or `None` when the combination breaks the
/// group policy, a same-subtree rule, or capacity once amounts are summed.
fn combine(
    query: &CandidateQuery,
    catalog: &Catalog,
    anchor: ProviderId,
    chosen: &[&GroupOption<'_>],
) -> Option<Candidate> {
    if query.group_policy == GroupPolicy::Isolate {
        let suffixed: Vec<&BTreeSet<ProviderId>> = query
            .groups
            .iter()
            .zip(chosen)
            .filter(|(g, _)| !g.is_unsuffixed())
            .map(|(_, o)| &o.providers)
            .collect();
        let distinct: BTreeSet<&ProviderId> = suffixed.iter().flat_map(|set| set.iter()).collect();
        if distinct.len() != suffixed.len() {
            return None;
        }
    }
    let mut by_suffix: BTreeMap<&str, BTreeSet<ProviderId>> = BTreeMap::new();
    for (group, option) in query.groups.iter().zip(chosen) {
        by_suffix
            .entry(group.suffix.as_str())
            .or_default()
            .extend(option.providers.iter().copied());
    }
    for suffixes in &query.same_subtree {
        let providers: BTreeSet<ProviderId> = suffixes
            .iter()
            .filter_map(|s| by_suffix.get(s.as_str()))
            .flatten()
            .copied()
            .collect();
        if !same_subtree(catalog, &providers) {
            return None;
        }
    }
    let mut sums: BTreeMap<(ProviderId, &ResourceClass), (&Provider, u64)> = BTreeMap::new();
    for option in chosen {
        for (provider, class, amount) in &option.entries {
            sums.entry((provider.uuid(), *class))
                .or_insert((*provider, 0))
                .1 += amount;
        }
    }
    let mut parts: Vec<(ProviderId, Vec<(ResourceClass, u64)>)> = Vec::new();
    // `sums` iterates in (provider, class) order: parts come out by provider, classes sorted.
    for ((uuid, class), (provider, amount)) in &sums {
        let record = provider
            .inventory_interned(class)
            .expect("invariant: options only use inventory");
        if *amount > record.max_unit()
            || (used_for(provider, class, query.unreserved) + amount) as f64
                > record.capacity_exact()
        {
            return None;
        }
        match parts.last_mut() {
            Some((provider, resources)) if provider == uuid => {
                resources.push(((*class).clone(), *amount))
            }
            _ => parts.push((*uuid, vec![((*class).clone(), *amount)])),
        }
    }
    if !query.nested_aware {
        // Before 1.29 a candidate may not use two providers of one tree.
        let roots: BTreeSet<ProviderId> = parts
            .iter()
            .filter_map(|(provider, _)| catalog.provider(*provider))
            .map(Provider::root)
            .collect();
        if roots.len() != parts.len() {
            return None;
        }
    }
    let mappings = by_suffix
        .into_iter()
        .map(|(suffix, providers)| (suffix.to_owned(), providers.into_iter().collect()))
        .collect();
    let parts = parts
        .into_iter()
        .map(|(provider, resources)| Part {
            provider,
            resources: resources.into(),
        })
        .collect();
    Some(Candidate {
        anchor,
        parts,
        mappings,
    })
}

/// The candidate of a request with one group that `provider` alone satisfies, if it does.
fn single(
    group: &Group,
    provider: &Provider,
    resources: &Arc<[(ResourceClass, u64)]>,
    rules: &Rules<'_>,
) -> Option<Candidate> {
    // Cheapest refusals first: aggregates and traits are set lookups, capacity is arithmetic.
    if !group.member_of.admits(provider.aggregates())
        || !group.traits.admits(provider.traits())
        || !group
            .resources
            .iter()
            .all(|(class, amount)| fits(provider, class, *amount, rules))
    {
        return None;
    }
    Some(Candidate {
        anchor: provider.root(),
        parts: vec![Part {
            provider: provider.uuid(),
            resources: Arc::clone(resources),
        }],
        mappings: vec![(group.suffix.clone(), vec![provider.uuid()])],
    })
}

/// The query with class names as the catalog shares them, so that capacity checks compare
/// pointers, not strings.
fn interned(catalog: &Catalog, query: &CandidateQuery) -> CandidateQuery {
    CandidateQuery {
        groups: query
            .groups
            .iter()
            .map(|g| Group {
                resources: g
                    .resources
                    .iter()
                    .map(|(c, n)| (catalog.interned_class(c), *n))
                    .collect(),
                ..g.clone()
            })
            .collect(),
        ..query.clone()
    }
}

/// Every allocation candidate for `query`, in tree creation order, stopping at `limit`.
pub fn allocation_candidates(catalog: &Catalog, query: &CandidateQuery) -> Candidates {
    allocation_candidates_within(catalog, query, &|| false)
}

/// How many steps of a candidates search pass between two calls of its `stop` probe.
const STOP_PROBE_EVERY: usize = 4_096;

/// [`allocation_candidates`] with a time budget: `stop` is asked every few thousand steps and
/// `true` ends the search, whose answer then says it is truncated (the core reads no clock;
/// the application's probe does).
pub fn allocation_candidates_within(
    catalog: &Catalog,
    query: &CandidateQuery,
    stop: &dyn Fn() -> bool,
) -> Candidates {
    let canonical = interned(catalog, query);
    let query = &canonical;
    let index = Index::build(catalog, query);
    let limit = query
        .limit
        .unwrap_or(usize::MAX)
        .min(limits::PLACEMENT_CANDIDATES_MAX)
        .min(limits::CANDIDATE_MAPPINGS_MAX / query.groups.len().max(1));
    let truncated = query.limit.is_none_or(|wanted| wanted > limit);
    let mut out = Candidates::default();
    // The common case, one group over flat providers with no sharing: each root alone.
    if let [group] = query.groups.as_slice()
        && !index.spans
        && group.in_tree.is_none()
        && !group.resources.is_empty()
    {
        let mut resources = group.resources.clone();
        resources.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let resources: Arc<[(ResourceClass, u64)]> = resources.into();
        out.one_root_each = true;
        for (step, root) in catalog
            .roots()
            .filter(|r| query.root_required.admits(r.traits()))
            .enumerate()
        {
            if step % STOP_PROBE_EVERY == STOP_PROBE_EVERY - 1 && stop() {
                out.truncated = true;
                return out;
            }
            let Some(candidate) = single(group, root, &resources, &index.rules) else {
                continue;
            };
            out.candidates.push(candidate);
            if out.candidates.len() >= limit {
                out.truncated = truncated;
                return out;
            }
        }
        return out;
    }
    let mut budget = limits::CANDIDATE_COMBINATIONS_MAX;
    // A sharing provider alone can satisfy a request from several anchors; one candidate each.
    let dedupe = !index.shared_with.is_empty();
    let mut seen: HashSet<Identity> = HashSet::new();
    let in_tree_roots: Vec<Option<Option<ProviderId>>> = query
        .groups
        .iter()
        .map(|g| {
            g.in_tree
                .map(|uuid| catalog.provider(uuid).map(Provider::root))
        })
        .collect();
    for root in catalog.roots() {
        if !query.root_required.admits(root.traits()) {
            continue;
        }
        if stop() {
            out.truncated = true;
            return out;
        }
        let members = catalog.tree(root.uuid());
        let mut per_group: Vec<Vec<GroupOption<'_>>> = Vec::with_capacity(query.groups.len());
        for (group, in_tree) in query.groups.iter().zip(&in_tree_roots) {
            let options = group_options(&index, group, root, &members, *in_tree, &mut budget);
            if options.is_empty() {
                break;
            }
            per_group.push(options);
        }
        if per_group.len() != query.groups.len() {
            continue;
        }
        let mut walk = Walk {
            query,
            catalog,
            anchor: root.uuid(),
            budget: &mut budget,
            stop,
            steps: 0,
            limit,
            truncated,
            dedupe,
            seen: &mut seen,
            out: &mut out,
        };
        if !walk.run(&per_group) {
            return out;
        }
    }
    out
}

/// The depth-first walk over one option per group within one tree. It visits combinations in
/// the order an odometer would (the first group slowest), but drops a partial combination as
/// soon as it breaks group isolation or sums more than a provider can give, so a dead-end
/// prefix (every group on the same first child of a wide tree) costs one step instead of
/// consuming the whole combination budget before a satisfiable combination is reached.
struct Walk<'w, 'c> {
    query: &'w CandidateQuery,
    catalog: &'c Catalog,
    anchor: ProviderId,
    budget: &'w mut usize,
    stop: &'w dyn Fn() -> bool,
    steps: usize,
    limit: usize,
    /// Whether reaching `limit` is a truncation (no `limit` was asked for).
    truncated: bool,
    dedupe: bool,
    seen: &'w mut HashSet<Identity>,
    out: &'w mut Candidates,
}

impl<'c> Walk<'_, 'c> {
    /// Walks every combination of `per_group`; false when the search must end (a bound or the
    /// limit was reached; `out` says which).
    fn run(&mut self, per_group: &[Vec<GroupOption<'c>>]) -> bool {
        let depth_max = per_group.len();
        let mut cursor = vec![0usize; depth_max];
        let mut sums: HashMap<(ProviderId, &'c ResourceClass), u64> = HashMap::new();
        let mut isolated: HashSet<ProviderId> = HashSet::new();
        let isolate = self.query.group_policy == GroupPolicy::Isolate;
        let mut depth = 0;
        loop {
            if depth == depth_max {
                if !self.leaf(per_group, &cursor) {
                    return false;
                }
            } else if cursor[depth] < per_group[depth].len() {
                if *self.budget == 0 || self.stopped() {
                    self.out.truncated = true;
                    return false;
                }
                *self.budget -= 1;
                let suffixed = isolate && !self.query.groups[depth].is_unsuffixed();
                let option = &per_group[depth][cursor[depth]];
                if self.admits(option, &sums, suffixed.then_some(&isolated)) {
                    add(&mut sums, option, true);
                    if suffixed {
                        isolated.extend(option.providers.iter().copied());
                    }
                    depth += 1;
                    continue;
                }
                cursor[depth] += 1;
                continue;
            } else {
                cursor[depth] = 0;
            }
            // Back up one group and move it to its next option.
            if depth == 0 {
                return true;
            }
            depth -= 1;
            let option = &per_group[depth][cursor[depth]];
            add(&mut sums, option, false);
            if isolate && !self.query.groups[depth].is_unsuffixed() {
                for provider in &option.providers {
                    isolated.remove(provider);
                }
            }
            cursor[depth] += 1;
        }
    }

    fn stopped(&mut self) -> bool {
        self.steps += 1;
        self.steps.is_multiple_of(STOP_PROBE_EVERY) && (self.stop)()
    }

    /// Whether `option` can join the partial combination: its suffixed providers unused (under
    /// `isolate`) and every amount still within what its provider can give.
    fn admits(
        &self,
        option: &GroupOption<'c>,
        sums: &HashMap<(ProviderId, &'c ResourceClass), u64>,
        isolated: Option<&HashSet<ProviderId>>,
    ) -> bool {
        if isolated.is_some_and(|used| option.providers.iter().any(|p| used.contains(p))) {
            return false;
        }
        option.entries.iter().all(|(provider, class, amount)| {
            let sum = sums.get(&(provider.uuid(), *class)).copied().unwrap_or(0) + amount;
            provider.inventory_interned(class).is_some_and(|record| {
                sum <= record.max_unit()
                    && (used_for(provider, class, self.query.unreserved) + sum) as f64
                        <= record.capacity_exact()
            })
        })
    }

    /// Judges a whole combination; false when the search must end.
    fn leaf(&mut self, per_group: &[Vec<GroupOption<'c>>], cursor: &[usize]) -> bool {
        let chosen: Vec<&GroupOption<'_>> = cursor
            .iter()
            .zip(per_group)
            .map(|(idx, options)| &options[*idx])
            .collect();
        let candidate = combine(self.query, self.catalog, self.anchor, &chosen).filter(|c| {
            !self.dedupe
                || self
                    .seen
                    .insert(Identity(c.parts.clone(), c.mappings.clone()))
        });
        if let Some(candidate) = candidate {
            self.out.candidates.push(candidate);
            if self.out.candidates.len() >= self.limit {
                self.out.truncated = self.truncated;
                return false;
            }
        }
        true
    }
}

/// Adds (or, `add` false, takes back) what `option` asks of each provider.
fn add<'c>(
    sums: &mut HashMap<(ProviderId, &'c ResourceClass), u64>,
    option: &GroupOption<'c>,
    add: bool,
) {
    for (provider, class, amount) in &option.entries {
        let sum = sums.entry((provider.uuid(), *class)).or_insert(0);
        *sum = match add {
            true => *sum + amount,
            false => sum.saturating_sub(*amount),
        };
    }
}

/// The options of one group within the tree of `root`.
fn group_options<'c>(
    index: &Index<'c>,
    group: &'c Group,
    root: &'c Provider,
    members: &[&'c Provider],
    in_tree: Option<Option<ProviderId>>,
    budget: &mut usize,
) -> Vec<GroupOption<'c>> {
    // `in_tree` naming this tree keeps the group in it; naming another tree, the group may still
    // be served by that tree's sharing providers anchored here (Placement's "DISK_GB from that
    // shared storage").
    let shared = index.shared_with.get(&root.uuid());
    let mut pool: Vec<(&Provider, &Provider)> = match in_tree {
        Some(None) => return Vec::new(),
        Some(Some(wanted)) if wanted != root.uuid() => shared
            .into_iter()
            .flatten()
            .filter(|p| index.root_of(p).uuid() == wanted)
            .map(|p| (*p, root))
            .collect(),
        _ => members.iter().map(|p| (*p, index.root_of(p))).collect(),
    };
    if let (None, Some(shared)) = (in_tree, shared) {
        pool.extend(shared.iter().map(|p| (*p, root)));
    }
    if pool.is_empty() {
        return Vec::new();
    }
    let spans = group.is_unsuffixed() && index.spans;
    match (spans, group.resources.is_empty()) {
        (true, false) => spanning_options(group, &pool, budget, &index.rules),
        _ => single_provider_options(group, &pool, spans, &index.rules),
    }
}

#[cfg(test)]
mod tests;
