//! An allocation-candidates request as a client asks it (Placement's query string, parsed), and
//! its resolution against the catalog into the [`CandidateQuery`] the search answers: the names
//! it uses checked, the reservation it presents applied (see [`crate::query::presentation`]),
//! and the fence's rule for a request that presents none.
//!
//! Parsing is the surface's; it needs no catalog. What needs one is decided here, in the order
//! Placement reports it: the groups' names, the reservation, whether any group asks for
//! resources, whether a group policy is needed, and the names of `root_required`.

use crate::catalog::Catalog;
use crate::limits;
use crate::model::id::ReservationId;
use crate::model::time::Instant;
use crate::query::candidates::{CandidateQuery, Group, GroupPolicy};
use crate::query::names::Names;
use crate::query::presentation::{self, FencePolicy, Inside};
use crate::query::providers::TraitFilter;
use crate::rejection::Rejection;
use std::collections::BTreeSet;

/// An allocation-candidates request, parsed but not yet checked against the catalog.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CandidateRequest {
    /// The groups, in suffix order; at most one unsuffixed.
    pub groups: Vec<Group>,
    /// How suffixed groups relate; `None` when the request does not say.
    pub group_policy: Option<GroupPolicy>,
    /// Traits the root of the tree must (not) have.
    pub root_required: TraitFilter,
    /// Sets of suffixes whose providers must lie in one subtree.
    pub same_subtree: Vec<Vec<String>>,
    /// Stop after this many candidates.
    pub limit: Option<usize>,
    /// From 1.29; before it, a candidate may use only one provider per tree.
    pub nested_aware: bool,
    /// The reservation the request presents by id (`reservation=<id>`, a berth extension).
    pub reservation: Option<ReservationId>,
    /// The consumer may borrow fenced capacity (and be evicted for it).
    pub preemptible: bool,
    /// What the groups name, in the order they name it.
    pub names: Names,
    /// What `root_required` names.
    pub root_names: Names,
}

/// Why a candidates request cannot be answered as asked.
#[derive(Debug, Clone, PartialEq)]
pub enum Unanswerable {
    /// It names a class or trait the catalog does not know, or presents a reservation that
    /// cannot be presented now.
    Rejected(Rejection),
    /// It presents a reservation of floating IPs, which holds no Placement capacity.
    PresentsAddresses(ReservationId),
    /// No group asks for resources (counting the slot a presented reservation adds).
    NoResources,
    /// Several suffixed groups ask for resources and the request gives no group policy.
    GroupPolicyMissing,
}

/// Refuses a request of more than [`limits::REQUEST_GROUPS_MAX`] groups, before any work is done
/// on them.
pub fn check_group_count(groups: usize) -> Result<(), Rejection> {
    match groups <= limits::REQUEST_GROUPS_MAX {
        true => Ok(()),
        false => Err(Rejection::LimitExceeded {
            limit: "request_groups",
            max: limits::REQUEST_GROUPS_MAX as u64,
            got: groups as u64,
        }),
    }
}

/// Resolves `request` against the catalog at `now` under the fence `policy`.
///
/// A presented reservation must be running: a host reservation confines the first group (the
/// unsuffixed one if any) to its aggregate, an instance reservation adds one unit of its class
/// (one slot) to that group and confines every provider to what it holds there. Reservation
/// aggregates named in `member_of` are offered as to their holder. Under an enforced policy, a
/// request that presents no instance reservation and is not preemptible sees fenced capacity
/// as taken (`unreserved`).
pub fn resolve(
    catalog: &Catalog,
    request: CandidateRequest,
    policy: FencePolicy,
    now: Instant,
) -> Result<CandidateQuery, Unanswerable> {
    request
        .names
        .check(catalog)
        .map_err(Unanswerable::Rejected)?;
    let mut groups = request.groups;
    if let Some(reservation) = request.reservation {
        present(catalog, reservation, &mut groups, now)?;
    }
    let within = presentation::confined_to(
        catalog,
        request.reservation,
        groups
            .iter()
            .flat_map(|g| g.resources.iter().map(|(class, _)| class)),
    );
    let unreserved = policy == FencePolicy::Enforced && within.is_none() && !request.preemptible;
    let presented = presentation::presented_aggregates(
        catalog,
        groups
            .iter()
            .flat_map(|g| g.member_of.required.iter().flatten()),
    );
    if groups.iter().all(|g| g.resources.is_empty()) {
        return Err(Unanswerable::NoResources);
    }
    let with_resources = groups
        .iter()
        .filter(|g| !g.is_unsuffixed() && !g.resources.is_empty())
        .count();
    let group_policy = match request.group_policy {
        Some(policy) => policy,
        None if with_resources > 1 => return Err(Unanswerable::GroupPolicyMissing),
        None => GroupPolicy::None,
    };
    request
        .root_names
        .check(catalog)
        .map_err(Unanswerable::Rejected)?;
    Ok(CandidateQuery {
        groups,
        group_policy,
        root_required: request.root_required,
        same_subtree: request.same_subtree,
        limit: request.limit,
        nested_aware: request.nested_aware,
        unreserved,
        within,
        presented,
    })
}

/// Applies a presented reservation to the first group (the unsuffixed one if any); a request
/// with no group is left as it is (and refused for asking for nothing).
fn present(
    catalog: &Catalog,
    reservation: ReservationId,
    groups: &mut [Group],
    now: Instant,
) -> Result<(), Unanswerable> {
    let inside = presentation::inside(catalog, reservation, now).map_err(Unanswerable::Rejected)?;
    let Some(group) = groups.iter_mut().min_by_key(|g| !g.is_unsuffixed()) else {
        return Ok(());
    };
    match inside {
        Inside::Aggregate(aggregate) => group.member_of.required.push(BTreeSet::from([aggregate])),
        Inside::Slot(class) => group.resources.push((class, 1)),
        Inside::Addresses => return Err(Unanswerable::PresentsAddresses(reservation)),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::name::{ResourceClass, TraitName};

    fn group(suffix: &str, resources: &[(&str, u64)]) -> Group {
        Group {
            suffix: suffix.to_owned(),
            resources: resources
                .iter()
                .map(|(name, n)| (ResourceClass::parse(name).expect("class"), *n))
                .collect(),
            ..Group::default()
        }
    }

    #[test]
    fn a_request_must_ask_for_something_and_say_how_groups_relate() {
        let catalog = Catalog::new();
        let resolve = |request: CandidateRequest| {
            resolve(
                &catalog,
                request,
                FencePolicy::Enforced,
                Instant::from_micros(1),
            )
        };
        let empty = CandidateRequest {
            groups: vec![group("1", &[])],
            ..CandidateRequest::default()
        };
        assert_eq!(resolve(empty), Err(Unanswerable::NoResources));
        let two = CandidateRequest {
            groups: vec![group("1", &[("VCPU", 1)]), group("2", &[("VCPU", 1)])],
            ..CandidateRequest::default()
        };
        assert_eq!(resolve(two.clone()), Err(Unanswerable::GroupPolicyMissing));
        let isolated = CandidateRequest {
            group_policy: Some(GroupPolicy::Isolate),
            ..two
        };
        let query = resolve(isolated).expect("resolved");
        assert_eq!(query.group_policy, GroupPolicy::Isolate);
        assert!(query.unreserved, "an enforced fence keeps it out");
        assert_eq!(query.within, None);
    }

    #[test]
    fn names_are_checked_groups_first_and_root_last() {
        let catalog = Catalog::new();
        let nope = TraitName::parse("CUSTOM_NOPE").expect("trait");
        let mut request = CandidateRequest {
            groups: vec![group("", &[])],
            ..CandidateRequest::default()
        };
        request.root_names.traits(vec![nope.clone()]);
        let at = Instant::from_micros(1);
        assert_eq!(
            resolve(&catalog, request.clone(), FencePolicy::Enforced, at),
            Err(Unanswerable::NoResources),
            "the groups' faults come before the root's names"
        );
        request.groups = vec![group("", &[("VCPU", 1)])];
        assert_eq!(
            resolve(&catalog, request.clone(), FencePolicy::Off, at),
            Err(Unanswerable::Rejected(Rejection::UnknownTraits(
                "CUSTOM_NOPE".into()
            )))
        );
        request
            .names
            .classes([ResourceClass::parse("CUSTOM_GONE").expect("class")]);
        assert_eq!(
            resolve(&catalog, request, FencePolicy::Off, at),
            Err(Unanswerable::Rejected(Rejection::UnknownResourceClass(
                "CUSTOM_GONE".into()
            )))
        );
    }

    #[test]
    fn too_many_groups_are_refused() {
        assert_eq!(check_group_count(limits::REQUEST_GROUPS_MAX), Ok(()));
        assert!(matches!(
            check_group_count(limits::REQUEST_GROUPS_MAX + 1),
            Err(Rejection::LimitExceeded {
                limit: "request_groups",
                ..
            })
        ));
    }
}
