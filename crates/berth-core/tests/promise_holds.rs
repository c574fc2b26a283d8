//! A Promise reservation made from a hold: the hold becomes the reservation in one decision,
//! asking for more than was held is a mismatch, and another project's hold or a lease that is no
//! hold is a bad `hold_id`.

use berth_core::decide::admission::Search;
use berth_core::decide::lease::{NewLease, create_hold, create_lease};
use berth_core::decide::promise::{NewReservation, create_reservation_from_hold, specs};
use berth_core::model::lease::LeaseStatus;
use berth_core::model::promise::{Ask, PoolAsk, PromiseKind};
use berth_core::model::provider::Attributes;
use berth_core::{Change, Instant, LeaseId, Rejection, ReservationId, Span};

mod support;
use support::{TICK, World};

fn t(ticks: i64) -> Instant {
    Instant::from_micros(ticks * TICK)
}

/// A pool of `instances` instances of 2 VCPU and 2 GiB.
fn ask(instances: u64) -> Ask {
    Ask {
        pool: Some(PoolAsk {
            cores: 2 * instances,
            ram_mb: 2048 * instances,
            instances,
        }),
        ..Ask::default()
    }
}

/// A Promise reservation of `ask` for `project` over ticks 10 to 20.
fn reservation(w: &mut World, project: &str, ask: Ask) -> NewReservation {
    NewReservation {
        id: LeaseId::new(w.id()),
        reservation_ids: (0..4).map(|_| ReservationId::new(w.id())).collect(),
        event_ids: [w.id(), w.id(), w.id()],
        kind: PromiseKind::Compute,
        ask,
        start: Some(t(10)),
        end: Some(t(20)),
        expiry: None,
        zone: None,
        provider: None,
        priority: 50,
        displace_other_projects: false,
        project_id: project.into(),
        user_id: "u".into(),
        notice_lead: Span::ZERO,
    }
}

/// A lease of what `ask` becomes, over ticks 10 to 20, for project p.
fn lease_of(w: &mut World, ask: &Ask) -> NewLease {
    NewLease {
        id: LeaseId::new(w.id()),
        name: "held".into(),
        project_id: "p".into(),
        user_id: "u".into(),
        start: t(10),
        end: t(20),
        before_end: None,
        reservations: specs(ask, None, None)
            .into_iter()
            .map(|spec| (ReservationId::new(w.id()), spec))
            .collect(),
        event_ids: [w.id(), w.id(), w.id()],
        notice_lead: Span::ZERO,
    }
}

#[test]
fn a_hold_becomes_a_promise_reservation_of_what_it_held_or_less() {
    let mut w = World::with_hosts(1, |_| (Some("az1".to_owned()), Attributes::new()));
    // The hold takes all 8 cores of the only host.
    let held = lease_of(&mut w, &ask(4));
    let (changes, hold) = create_hold(&w.catalog, &held, t(5), w.at()).expect("held");
    w.apply(&changes);
    assert_eq!(hold.status, LeaseStatus::Held);
    // More than held is a mismatch; another project's hold, or a lease that is no hold, is a
    // bad hold_id.
    let more = reservation(&mut w, "p", ask(5));
    assert!(matches!(
        create_reservation_from_hold(&w.catalog, &more, hold.id, w.at()),
        Err(Rejection::HoldMismatch(_))
    ));
    let theirs = reservation(&mut w, "q", ask(4));
    let refused = create_reservation_from_hold(&w.catalog, &theirs, hold.id, w.at());
    assert!(
        matches!(&refused, Err(Rejection::BadLease(m)) if m.contains("hold_id")),
        "{refused:?}"
    );
    let mut plain = lease_of(&mut w, &ask(1));
    plain.start = t(30);
    plain.end = t(40);
    let (changes, plain) =
        create_lease(&w.catalog, &plain, w.at(), &Search::NONE).expect("a plain lease");
    w.apply(&changes);
    let mut elsewhere = reservation(&mut w, "p", ask(1));
    elsewhere.start = Some(t(30));
    elsewhere.end = Some(t(40));
    let refused = create_reservation_from_hold(&w.catalog, &elsewhere, plain.id, w.at());
    assert!(
        matches!(&refused, Err(Rejection::BadLease(m)) if m.contains("hold_id")),
        "{refused:?}"
    );
    // What was held: admitted over the hold's own capacity, the hold removed in the same
    // decision, the reservation carrying its Promise terms.
    let same = reservation(&mut w, "p", ask(4));
    let (changes, made) =
        create_reservation_from_hold(&w.catalog, &same, hold.id, w.at()).expect("from the hold");
    assert!(changes.iter().any(|c| matches!(
        c,
        Change::LeaseSet { id, lease: None } if *id == hold.id
    )));
    w.apply(&changes);
    assert_eq!(made.status, LeaseStatus::Pending);
    assert!(made.terms().is_some(), "a Promise reservation");
    assert!(w.catalog.lease(hold.id).is_none());
    assert_eq!(w.catalog.open_holds("p"), 0);
}
