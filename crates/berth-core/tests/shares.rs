//! Shared leases through the public API: a lease's owner shares it with another project within
//! a cap; that project's consumers present the lease's reservations (named, or a host
//! reservation on a host they allocate) up to the cap and no further; a project it is not
//! shared with is refused; revoking stops new consumption and keeps what is held; bad shares
//! are refused with the field they name.

use berth_core::decide::admission::Search;
use berth_core::decide::allocation::{ConsumerGeneration, ConsumerWrite, set_allocations};
use berth_core::decide::lease::{NewLease, create_lease, revoke_share, share_lease};
use berth_core::model::lease::{Affinity, ReservationSpec};
use berth_core::model::provider::Attributes;
use berth_core::query::leases::shares;
use berth_core::{Change, LeaseId, ProviderId, Rejection, ReservationId, ResourceClass};
use std::collections::BTreeMap;
use uuid::Uuid;

mod support;
use support::{TICK, World, one_host};

const OWNER: &str = "owner";
const GUEST: &str = "guest";

fn class(name: &str) -> ResourceClass {
    ResourceClass::parse(name).expect("a class name")
}

fn cap(entries: &[(&str, i64)]) -> BTreeMap<String, i64> {
    entries.iter().map(|(c, n)| ((*c).to_owned(), *n)).collect()
}

/// A started lease of `OWNER` holding `spec` from now for ten ticks.
fn started_lease(w: &mut World, spec: ReservationSpec) -> (LeaseId, ReservationId) {
    let reservation = ReservationId::new(w.id());
    let new = NewLease {
        id: LeaseId::new(w.id()),
        name: "shared".into(),
        project_id: OWNER.into(),
        user_id: "u".into(),
        start: w.at(),
        end: berth_core::Instant::from_micros((w.now + 10) * TICK),
        before_end: None,
        reservations: vec![(reservation, spec)],
        event_ids: [w.id(), w.id(), w.id()],
        notice_lead: berth_core::model::lease::PREEMPTION_NOTICE_DEFAULT,
    };
    let (changes, lease) = create_lease(&w.catalog, &new, w.at(), &Search::NONE).expect("fits");
    w.apply(&changes);
    w.fire_due();
    (lease.id, reservation)
}

/// A consumer of `project` writing `vcpus` VCPU on `host`, presenting `reservation` when given.
fn write(
    w: &mut World,
    consumer: Uuid,
    project: &str,
    host: ProviderId,
    vcpus: u64,
    reservation: Option<ReservationId>,
) -> Result<(), Rejection> {
    let write = ConsumerWrite {
        reservation,
        consumer,
        project_id: project.into(),
        user_id: "u".into(),
        consumer_type: None,
        generation: ConsumerGeneration::Unchecked,
        allocations: BTreeMap::from([(host, BTreeMap::from([(class("VCPU"), vcpus)]))]),
    };
    let changes = set_allocations(&w.catalog, &[write], w.at())?;
    w.apply(&changes);
    Ok(())
}

fn share(w: &mut World, lease: LeaseId, project: &str, entries: &[(&str, i64)]) -> Vec<Change> {
    let (changes, _) = share_lease(
        &w.catalog,
        lease,
        Some(OWNER),
        project,
        &cap(entries),
        w.at(),
    )
    .expect("shared");
    w.apply(&changes);
    changes
}

fn record_kinds_and_projects(changes: &[Change]) -> Vec<(String, String)> {
    changes
        .iter()
        .filter_map(|c| match c {
            Change::LeaseRecorded(r) => {
                let details: serde_json::Value =
                    serde_json::from_str(&r.details).expect("details are JSON");
                Some((r.kind.clone(), details["project_id"].as_str()?.to_owned()))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn a_shared_host_reservation_is_consumed_up_to_the_cap_and_revoking_stops_new_consumption() {
    let mut w = World::with_hosts(2, |_| (None, Attributes::new()));
    let spec = one_host();
    let (lease, reservation) = started_lease(&mut w, spec);
    let host = w.catalog.lease(lease).expect("lease").reservations[0].hosts[0].0;

    // Not shared yet: the guest's consumers may not present it.
    let first = w.id();
    assert!(matches!(
        write(&mut w, first, GUEST, host, 2, Some(reservation)),
        Err(Rejection::ReservationForbidden(_))
    ));

    let changes = share(&mut w, lease, GUEST, &[("VCPU", 5)]);
    assert_eq!(
        record_kinds_and_projects(&changes),
        [
            ("lease.share".to_owned(), OWNER.to_owned()),
            ("lease.share".to_owned(), GUEST.to_owned())
        ],
        "both projects hear of the share"
    );
    // Named, then presented without naming it (a host reservation on the host it allocates).
    write(&mut w, first, GUEST, host, 2, Some(reservation)).expect("within the cap");
    let second = w.id();
    write(&mut w, second, GUEST, host, 3, None).expect("up to the cap, presented implicitly");
    let third = w.id();
    match write(&mut w, third, GUEST, host, 1, Some(reservation)) {
        Err(Rejection::ShareExceeded {
            cap, used, class, ..
        }) => {
            assert_eq!((cap, used, class.as_str()), (5, 5, "VCPU"));
        }
        other => panic!("expected the cap to refuse, got {other:?}"),
    }
    // The owner is not bound by the guest's cap.
    let owners = w.id();
    write(&mut w, owners, OWNER, host, 3, Some(reservation)).expect("the owner's own use");
    // A consumer may shrink within the cap and grow back to it.
    write(&mut w, second, GUEST, host, 1, None).expect("shrunk");
    write(&mut w, third, GUEST, host, 2, Some(reservation)).expect("room again");

    let listed = shares(&w.catalog, lease, Some(GUEST)).expect("the guest sees its share");
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].used.get(&class("VCPU")), Some(&5));
    assert!(shares(&w.catalog, lease, Some("stranger")).is_none());
    let all = shares(&w.catalog, lease, Some(OWNER)).expect("the owner sees every share");
    assert_eq!(all[0].share.project_id, GUEST);

    // Revoked: nothing new, what is held stays.
    let changes = revoke_share(&w.catalog, lease, Some(OWNER), GUEST, w.at()).expect("revoked");
    w.apply(&changes);
    assert_eq!(
        record_kinds_and_projects(&changes),
        [
            ("lease.share.revoked".to_owned(), OWNER.to_owned()),
            ("lease.share.revoked".to_owned(), GUEST.to_owned())
        ]
    );
    let fourth = w.id();
    assert!(matches!(
        write(&mut w, fourth, GUEST, host, 1, Some(reservation)),
        Err(Rejection::ReservationForbidden(_))
    ));
    assert_eq!(
        w.catalog
            .consumer(first)
            .map(|c| c.amount(host, &class("VCPU"))),
        Some(2),
        "what the guest held stays until released"
    );
    assert!(w.catalog.lease(lease).expect("lease").shares().is_none());
    assert!(matches!(
        revoke_share(&w.catalog, lease, Some(OWNER), GUEST, w.at()),
        Err(Rejection::ShareNotFound { .. })
    ));
}

#[test]
fn an_instance_reservation_shared_with_a_cap_on_its_slot_class() {
    let mut w = World::with_hosts(1, |_| (None, Attributes::new()));
    let spec = ReservationSpec::Instance {
        vcpus: 2,
        memory_mb: 1_024,
        disk_gb: 0,
        amount: 3,
        affinity: Affinity::Any,
        resource_properties: String::new().into(),
    };
    let (lease, reservation) = started_lease(&mut w, spec);
    let host = w.hosts[0];
    share(&mut w, lease, GUEST, &[("VCPU", 2)]);
    let one = w.id();
    write(&mut w, one, GUEST, host, 2, Some(reservation)).expect("one instance's worth");
    let two = w.id();
    assert!(matches!(
        write(&mut w, two, GUEST, host, 2, Some(reservation)),
        Err(Rejection::ShareExceeded { .. })
    ));
    // Raising the cap lets the second in; the reservation's own size still bounds both.
    share(&mut w, lease, GUEST, &[("VCPU", 100)]);
    write(&mut w, two, GUEST, host, 2, Some(reservation)).expect("cap raised");
    let three = w.id();
    write(&mut w, three, OWNER, host, 2, Some(reservation)).expect("the third slot");
    let four = w.id();
    assert!(matches!(
        write(&mut w, four, GUEST, host, 2, Some(reservation)),
        Err(Rejection::ReservationExceeded { .. })
    ));
}

#[test]
fn bad_shares_are_refused_naming_the_field() {
    let mut w = World::with_hosts(1, |_| (None, Attributes::new()));
    let spec = one_host();
    let (lease, _) = started_lease(&mut w, spec);
    let now = w.at();
    let refused = |project: &str, entries: &[(&str, i64)]| match share_lease(
        &w.catalog,
        lease,
        Some(OWNER),
        project,
        &cap(entries),
        now,
    ) {
        Err(Rejection::BadLease(text)) => text,
        other => panic!("expected a bad share, got {other:?}"),
    };
    assert!(refused(OWNER, &[("VCPU", 1)]).starts_with("project_id:"));
    assert!(refused(" ", &[("VCPU", 1)]).starts_with("project_id:"));
    assert!(refused(GUEST, &[]).starts_with("cap:"));
    assert!(refused(GUEST, &[("VCPU", -1)]).starts_with("cap.VCPU:"));
    assert!(refused(GUEST, &[("VCPU", 0)]).starts_with("cap.VCPU:"));
    assert!(refused(GUEST, &[("CUSTOM_NOPE", 1)]).starts_with("cap:"));
    // Only the lease's project (or an admin) shares it; to others it does not exist.
    assert!(matches!(
        share_lease(
            &w.catalog,
            lease,
            Some(GUEST),
            "third",
            &cap(&[("VCPU", 1)]),
            now
        ),
        Err(Rejection::LeaseNotFound(_))
    ));
    assert!(
        share_lease(&w.catalog, lease, None, GUEST, &cap(&[("VCPU", 1)]), now).is_ok(),
        "an admin may"
    );
    // At most SHARES_PER_LEASE_MAX projects.
    for n in 0..berth_core::limits::SHARES_PER_LEASE_MAX {
        share(&mut w, lease, &format!("p{n}"), &[("VCPU", 1)]);
    }
    assert!(matches!(
        share_lease(
            &w.catalog,
            lease,
            Some(OWNER),
            "one-more",
            &cap(&[("VCPU", 1)]),
            now
        ),
        Err(Rejection::CantUpdate(_))
    ));
}
