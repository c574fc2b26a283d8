//! Utilization subscriptions through the public API: a running lease used below a percentage for
//! a time is told once per dip, told again when it recovers, and armed for the next dip; the
//! notification goes to that subscription alone; the clock stops when the lease ends; bad
//! subscriptions are refused with the field named.

use berth_core::decide::admission::Search;
use berth_core::decide::allocation::{ConsumerGeneration, ConsumerWrite, set_allocations};
use berth_core::decide::lease::create_lease;
use berth_core::decide::notify::{expand, subscribe, utilization_due_between};
use berth_core::model::lease::{Lease, LeaseRecord};
use berth_core::model::notify::{Subscription, Topic, UTILIZATION_RECORD_KIND};
use berth_core::model::provider::Attributes;
use berth_core::{Change, Instant, LeaseId, Rejection, ResourceClass, Span};
use std::collections::BTreeMap;
use uuid::Uuid;

mod support;
use support::{TICK, World, new_lease, one_host};

fn tick(n: i64) -> Instant {
    Instant::from_micros(n * TICK)
}

fn class(name: &str) -> ResourceClass {
    ResourceClass::parse(name).expect("a class")
}

/// A one-host lease of project `lab` over ticks 12 to 40.
fn running(w: &mut World) -> Lease {
    let new = new_lease(w, "lab", 12, 40, one_host());
    let (changes, _) = create_lease(&w.catalog, &new, w.at(), &Search::NONE).expect("fits");
    w.apply(&changes);
    w.catalog.lease(new.id).expect("created").clone()
}

fn subscription(id: u128, topic: Topic, callback: bool) -> Subscription {
    Subscription {
        id: Uuid::from_u128(id),
        project_id: "lab".into(),
        topic,
        callback: callback.then(|| "http://127.0.0.1:9/hook".to_owned()),
        secret: None,
        triggered: None,
        fired: 0,
        created_at: tick(10),
    }
}

fn watching(lease: LeaseId, below_percent: u32, for_ticks: i64, class: Option<&str>) -> Topic {
    Topic::Utilization {
        lease,
        below_percent,
        for_span: Span::from_micros(for_ticks * TICK),
        class: class.map(self::class),
        below_since: None,
    }
}

/// Runs a notifier pass with nothing new recorded; the utilization entries it writes.
fn pass(w: &mut World) -> Vec<LeaseRecord> {
    let changes = expand(&w.catalog, w.catalog.outbox_cursor(), &[], w.at());
    w.apply(&changes);
    changes
        .into_iter()
        .filter_map(|c| match c {
            Change::LeaseRecorded(r) if r.kind == UTILIZATION_RECORD_KIND => Some(r),
            _ => None,
        })
        .collect()
}

/// The `crossing` of each entry, with the utilization it saw.
fn crossings(records: &[LeaseRecord]) -> Vec<(String, u64)> {
    records
        .iter()
        .map(|r| {
            let details: serde_json::Value = serde_json::from_str(&r.details).expect("json");
            (
                details["crossing"].as_str().expect("crossing").to_owned(),
                details["utilization_percent"].as_u64().expect("percent"),
            )
        })
        .collect()
}

/// Consumer 77 of project `lab` holds `vcpus` VCPU and `mb` MEMORY_MB inside the lease.
fn consume(w: &mut World, lease: &Lease, vcpus: u64, mb: u64) {
    let host = w.catalog.lease(lease.id).expect("lease").reservations[0].hosts[0].0;
    let amounts: BTreeMap<ResourceClass, u64> = [(class("VCPU"), vcpus), (class("MEMORY_MB"), mb)]
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .collect();
    let write = ConsumerWrite {
        reservation: Some(lease.reservations[0].id),
        consumer: Uuid::from_u128(77),
        project_id: "lab".into(),
        user_id: "u".into(),
        consumer_type: None,
        generation: ConsumerGeneration::Unchecked,
        allocations: match amounts.is_empty() {
            true => BTreeMap::new(),
            false => BTreeMap::from([(host, amounts)]),
        },
    };
    let changes = set_allocations(&w.catalog, &[write], w.at()).expect("written");
    w.apply(&changes);
}

fn crossing(kind: &str, percent: u64) -> (String, u64) {
    (kind.to_owned(), percent)
}

#[test]
fn a_low_lease_is_told_once_per_dip_and_again_when_it_recovers() {
    let mut w = World::with_hosts(1, |_| (None, Attributes::default()));
    let lease = running(&mut w);
    let watcher = subscription(1, watching(lease.id, 20, 3, None), true);
    let changes = subscribe(&w.catalog, watcher.clone(), Some("lab")).expect("subscribed");
    w.apply(&changes);
    w.now = 11;
    assert!(pass(&mut w).is_empty(), "a lease not started is not judged");
    w.now = 12;
    w.fire_due();
    assert!(pass(&mut w).is_empty(), "the dip starts its clock, untold");
    assert!(utilization_due_between(&w.catalog, tick(12), tick(15)));
    assert!(!utilization_due_between(&w.catalog, tick(15), tick(30)));
    w.now = 14;
    assert!(pass(&mut w).is_empty(), "not yet long enough");
    w.now = 15;
    let told = pass(&mut w);
    assert_eq!(crossings(&told), [crossing("below", 0)]);
    assert_eq!(told[0].lease_id, lease.id);
    assert_eq!(told[0].project_id().as_deref(), Some("lab"));
    w.now = 16;
    assert!(pass(&mut w).is_empty(), "one notification per dip");
    assert!(
        !utilization_due_between(&w.catalog, tick(15), tick(40)),
        "a dip told is not due again"
    );
    // Half the host's VCPU in use: the best-used class is at 50%.
    w.now = 17;
    consume(&mut w, &lease, 4, 0);
    assert_eq!(crossings(&pass(&mut w)), [crossing("recovered", 50)]);
    // One VCPU of eight: 12%, a new dip, told three ticks later.
    w.now = 18;
    consume(&mut w, &lease, 1, 0);
    assert!(pass(&mut w).is_empty());
    w.now = 21;
    assert_eq!(crossings(&pass(&mut w)), [crossing("below", 12)]);
    let stored = w.catalog.subscription(watcher.id).expect("kept");
    assert_eq!(stored.fired, 3);
    assert_eq!(stored.triggered, Some(true));
}

#[test]
fn the_notification_goes_to_its_subscription_alone() {
    let mut w = World::with_hosts(1, |_| (None, Attributes::default()));
    let lease = running(&mut w);
    let watcher = subscription(1, watching(lease.id, 20, 1, None), true);
    let everything = subscription(2, Topic::Reservations { ids: Vec::new() }, true);
    let other = subscription(3, watching(lease.id, 10, 5, None), true);
    for s in [&watcher, &everything, &other] {
        let changes = subscribe(&w.catalog, s.clone(), None).expect("subscribed");
        w.apply(&changes);
    }
    w.now = 12;
    w.fire_due();
    pass(&mut w);
    w.now = 13;
    let told = pass(&mut w);
    assert_eq!(crossings(&told), [crossing("below", 0)]);
    let cursor = w.catalog.outbox_cursor();
    let changes = expand(&w.catalog, cursor, &[(cursor + 1, told[0].clone())], w.at());
    let delivered: Vec<Uuid> = changes
        .iter()
        .filter_map(|c| match c {
            Change::DeliverySet {
                delivery: Some(d), ..
            } => Some(d.subscription),
            _ => None,
        })
        .collect();
    assert_eq!(delivered, [watcher.id]);
}

#[test]
fn a_class_is_watched_alone_and_the_clock_stops_when_the_lease_ends() {
    let mut w = World::with_hosts(1, |_| (None, Attributes::default()));
    let lease = running(&mut w);
    let memory = subscription(1, watching(lease.id, 50, 2, Some("MEMORY_MB")), false);
    let changes = subscribe(&w.catalog, memory.clone(), None).expect("subscribed");
    w.apply(&changes);
    w.now = 12;
    w.fire_due();
    // Every VCPU busy, a quarter of the memory: low on memory all the same.
    consume(&mut w, &lease, 8, 4_096);
    pass(&mut w);
    w.now = 14;
    assert_eq!(crossings(&pass(&mut w)), [crossing("below", 25)]);
    consume(&mut w, &lease, 8, 8_192);
    w.now = 15;
    assert_eq!(crossings(&pass(&mut w)), [crossing("recovered", 50)]);
    consume(&mut w, &lease, 0, 0);
    w.now = 16;
    pass(&mut w);
    w.now = 40;
    w.fire_due();
    assert!(pass(&mut w).is_empty(), "an ended lease is not told");
    let stored = w.catalog.subscription(memory.id).expect("kept");
    assert!(
        matches!(
            stored.topic,
            Topic::Utilization {
                below_since: None,
                ..
            }
        ),
        "{stored:?}"
    );
    assert!(!utilization_due_between(&w.catalog, tick(40), tick(100)));
}

#[test]
fn bad_utilization_subscriptions_are_refused() {
    let mut w = World::with_hosts(1, |_| (None, Attributes::default()));
    let lease = running(&mut w);
    let refused = |topic: Topic, scope: Option<&str>| {
        subscribe(&w.catalog, subscription(9, topic, false), scope).expect_err("refused")
    };
    assert!(matches!(
        refused(watching(lease.id, 20, 1, None), Some("another")),
        Rejection::LeaseNotFound(_)
    ));
    assert!(matches!(
        refused(watching(LeaseId::from_u128(404), 20, 1, None), None),
        Rejection::LeaseNotFound(_)
    ));
    for percent in [0, 101] {
        let refusal = refused(watching(lease.id, percent, 1, None), None);
        assert!(
            matches!(&refusal, Rejection::BadSubscription(m) if m.contains("belowPercent")),
            "{refusal:?}"
        );
    }
    let forever = Topic::Utilization {
        lease: lease.id,
        below_percent: 20,
        for_span: Span::from_days(31),
        class: None,
        below_since: None,
    };
    for topic in [watching(lease.id, 20, 0, None), forever] {
        let refusal = refused(topic, None);
        assert!(
            matches!(&refusal, Rejection::BadSubscription(m) if m.contains("forSeconds")),
            "{refusal:?}"
        );
    }
    assert!(matches!(
        refused(watching(lease.id, 20, 1, Some("CUSTOM_NOPE")), None),
        Rejection::UnknownResourceClass(_)
    ));
}
