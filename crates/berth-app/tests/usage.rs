//! Usage history through the service: a lease's and a consumer's writes leave the history the
//! report adds up (creating them and a start event write none; closing what they used changes
//! no report), the history outlives a restart, and a report's period is bounded in length and
//! age.

mod common;

use berth_app::AppError;
use berth_core::decide::allocation::{ConsumerGeneration, ConsumerWrite};
use berth_core::model::ledger::Window;
use berth_core::model::usage::UsageSource;
use berth_core::query::usage::{UNIT_HOUR, UsageTotals};
use berth_core::{Instant, Rejection, ResourceClass, Span};
use berth_store::{MemStore, Store};
use common::{ManualClock, host, one_host_lease, open};
use std::collections::BTreeMap;
use uuid::Uuid;

const T0: i64 = 1_700_000_000_000_000;
const HOUR: i64 = 3_600_000_000;

fn vcpu() -> ResourceClass {
    ResourceClass::parse("VCPU").expect("a class")
}

fn period(from: i64, to: i64) -> Window {
    Window::new(Instant::from_micros(from), Instant::from_micros(to)).expect("a period")
}

#[tokio::test]
async fn writes_leave_the_history_the_report_adds_up() {
    let store = MemStore::new();
    let clock = ManualClock::at(T0);
    let berth = open(&store, &clock, 0).await;
    berth.enroll_host(host("cn1", "az1")).await.expect("enroll");
    // p1 leases the host for hours 1 to 5.
    let lease = berth
        .create_lease(one_host_lease("week", T0 + HOUR, T0 + 5 * HOUR))
        .await
        .expect("created");
    let (reservation, host) = (lease.reservations[0].id, lease.reservations[0].hosts[0].0);
    let everything = period(T0, T0 + 10 * HOUR);
    let closed = || async {
        let seq = store.catalog_seq().await.expect("seq");
        store
            .usage_segments(everything, seq, 100)
            .await
            .expect("read")
    };
    let write = |vcpus: u64| ConsumerWrite {
        reservation: Some(reservation),
        consumer: Uuid::from_u128(77),
        project_id: "p1".into(),
        user_id: "u1".into(),
        consumer_type: None,
        generation: ConsumerGeneration::Unchecked,
        allocations: match vcpus {
            0 => BTreeMap::new(),
            n => BTreeMap::from([(host, BTreeMap::from([(vcpu(), n)]))]),
        },
    };
    // Hour 1: it starts (no usage update), and a consumer holds 2 VCPU in it until hour 3.
    clock.set(T0 + HOUR);
    assert_eq!(berth.fire_due_events().await.expect("fired"), 1);
    berth
        .set_allocations(vec![write(2)])
        .await
        .expect("written");
    assert_eq!(closed().await, [], "creating and starting write no history");
    clock.set(T0 + 3 * HOUR);
    berth
        .set_allocations(vec![write(0)])
        .await
        .expect("emptied");
    // Hour 4: deleted an hour early. Closing what it reserved changes no report.
    clock.set(T0 + 4 * HOUR);
    let until_now = berth.usage_report(everything, None).await.expect("report");
    berth.delete_lease(lease.id).await.expect("deleted");
    assert_eq!(
        berth.usage_report(everything, None).await.expect("report"),
        until_now
    );
    clock.set(T0 + 6 * HOUR);

    let segments = closed().await;
    assert_eq!(
        segments.len(),
        4,
        "the lease's three classes, the consumer's one"
    );
    let of_lease: Vec<_> = segments
        .iter()
        .filter(|s| s.source == UsageSource::Lease(lease.id))
        .collect();
    assert_eq!(of_lease.len(), 3, "one segment per class of the host");
    assert!(
        of_lease
            .iter()
            .all(|s| s.since == Instant::from_micros(T0 + HOUR)
                && s.until == Some(Instant::from_micros(T0 + 4 * HOUR)))
    );
    let expected = UsageTotals {
        reserved: 8 * 3 * UNIT_HOUR,
        consumed: 2 * 2 * UNIT_HOUR,
        lent: 0,
        idle: (24 - 4) * UNIT_HOUR,
        on_demand: 0,
        preemptible: 0,
    };
    let report = berth
        .usage_report(everything, Some("p1"))
        .await
        .expect("report");
    assert_eq!(report.get(&("p1".to_owned(), vcpu())), Some(&expected));
    // Another project's report is empty; a service opened afresh reads the same history.
    let other = berth
        .usage_report(everything, Some("p2"))
        .await
        .expect("report");
    assert!(other.is_empty());
    let reopened = open(&store, &clock, 1_000).await;
    let again = reopened
        .usage_report(everything, Some("p1"))
        .await
        .expect("report");
    assert_eq!(again, report);
}

#[tokio::test]
async fn a_report_longer_than_the_named_limit_is_refused() {
    let store = MemStore::new();
    let clock = ManualClock::at(T0);
    let berth = open(&store, &clock, 0).await;
    let day = Span::from_days(1).as_micros();
    let longest = berth_core::limits::USAGE_PERIOD_DAYS_MAX;
    berth
        .usage_report(period(T0, T0 + longest * day), None)
        .await
        .expect("the longest period is answered");
    let refused = berth
        .usage_report(period(T0, T0 + longest * day + 1), None)
        .await
        .expect_err("refused");
    assert!(matches!(
        refused,
        AppError::Rejected(Rejection::LimitExceeded {
            limit: "usage_period_days",
            ..
        })
    ));
}

#[tokio::test]
async fn a_report_reaching_past_the_retention_is_refused() {
    let store = MemStore::new();
    let clock = ManualClock::at(T0);
    let berth = open(&store, &clock, 0).await;
    let kept = berth_core::limits::USAGE_RETENTION_DAYS * Span::from_days(1).as_micros();
    berth
        .usage_report(period(T0 - kept, T0 - kept + HOUR), None)
        .await
        .expect("the oldest period kept is answered");
    let refused = berth
        .usage_report(period(T0 - kept - 1, T0 - kept + HOUR), None)
        .await
        .expect_err("refused");
    assert!(
        matches!(
            refused,
            AppError::Rejected(Rejection::LimitExceeded {
                limit: "usage_retention_days",
                max: 400,
                got: 401,
            })
        ),
        "{refused:?}"
    );
}
