//! Budgets through the public API: a project's leases are charged what they hold from the
//! moment they are admitted, per period and class; a lease that would pass a limit is refused
//! with what would fit (ending earlier, or fewer hosts); deleting a lease refunds what it no
//! longer holds; a lease across a period's end is charged in both; a waitlisted lease its
//! budget cannot take keeps waiting without holding up the others; nothing is charged without
//! budgets.

use berth_core::decide::admission::Search;
use berth_core::decide::budget::{charge, delete_budget, loosens, set_budget};
use berth_core::decide::lease::{admit_waiting, create_lease, create_or_wait, delete_lease};
use berth_core::model::budget::BudgetPeriod;
use berth_core::model::lease::{LeaseStatus, ReservationSpec};
use berth_core::model::provider::Attributes;
use berth_core::{Change, Instant, LeaseId, Rejection, ResourceClass};
use std::collections::BTreeMap;

mod support;
use support::{TICK, World, new_lease, one_host};

fn tick(n: i64) -> Instant {
    Instant::from_micros(n * TICK)
}

fn vcpu() -> ResourceClass {
    ResourceClass::parse("VCPU").expect("a class")
}

fn hosts(n: u32) -> ReservationSpec {
    ReservationSpec::Host {
        min: n,
        max: n,
        hypervisor_properties: String::new().into(),
        resource_properties: String::new().into(),
        before_end: "default".into(),
    }
}

/// Asks for a lease of `spec` over ticks `[start, end)` for project lab: the changes with the
/// budget's charges, or the refusal.
fn ask(
    w: &mut World,
    start: i64,
    end: i64,
    spec: ReservationSpec,
) -> Result<(LeaseId, Vec<Change>), Rejection> {
    let new = new_lease(w, "lab", start, end, spec);
    let (mut changes, _) = create_lease(&w.catalog, &new, w.at(), &Search::NONE)?;
    let charges = charge(&w.catalog, &changes, w.at())?;
    changes.extend(charges);
    Ok((new.id, changes))
}

/// What lab's budget charged the period starting at `period`, in VCPU-hours.
fn charged(w: &World, period: Instant) -> f64 {
    let budget = w.catalog.budget("lab").expect("a budget");
    budget.charged_in(period, &vcpu()) as f64 / 3600.0
}

/// A world of two 8-VCPU hosts at tick 10 (a Thursday) where lab may hold 100 VCPU-hours a
/// week.
fn world() -> (World, Instant) {
    let mut w = World::with_hosts(2, |_| (None, Attributes::default()));
    let limits = BTreeMap::from([("VCPU".to_owned(), 100)]);
    let (changes, _) =
        set_budget(&w.catalog, "lab", BudgetPeriod::Week, &limits, w.at()).expect("a budget");
    w.apply(&changes);
    let week = BudgetPeriod::Week.containing(w.at()).start();
    (w, week)
}

#[test]
fn leases_are_charged_refused_past_the_limit_with_what_fits_and_refunded() {
    let (mut w, week) = world();
    // Ticks 20 to 30: one whole host, 8 VCPU for 10 hours.
    let (first, changes) = ask(&mut w, 20, 30, one_host()).expect("80 of 100");
    w.apply(&changes);
    assert_eq!(charged(&w, week), 80.0);
    // 4 hours more of a host would be 112: refused, with an end 2.5 hours in, to the minute.
    let refused = ask(&mut w, 40, 44, one_host()).expect_err("past the budget");
    let Rejection::BudgetExceeded(refusal) = refused else {
        panic!("{refused:?}");
    };
    assert_eq!(
        (
            refusal.limit_hours,
            refusal.charged_seconds,
            refusal.asked_seconds
        ),
        (100, 80 * 3600, 32 * 3600)
    );
    assert_eq!(
        refusal.shorter_end,
        Some(tick(40) + berth_core::Span::from_minutes(150))
    );
    assert_eq!(refusal.fewer, None, "one host is the least");
    // Deleted before it starts, the first lease is refunded whole: the second fits.
    let changes = delete_lease(&w.catalog, first, w.at()).expect("deleted");
    let mut changes = changes;
    changes.extend(charge(&w.catalog, &changes, w.at()).expect("refunds are never refused"));
    w.apply(&changes);
    assert_eq!(charged(&w, week), 0.0);
    let (_, changes) = ask(&mut w, 40, 44, one_host()).expect("fits now");
    w.apply(&changes);
    assert_eq!(charged(&w, week), 32.0);
}

#[test]
fn fewer_hosts_are_offered_and_a_lease_across_the_period_is_charged_in_both() {
    let (mut w, week) = world();
    // Two hosts for 10 hours: 160 > 100. One host fits; so do 6 h 15 min of both.
    let refused = ask(&mut w, 20, 30, hosts(2)).expect_err("past the budget");
    let Rejection::BudgetExceeded(refusal) = refused else {
        panic!("{refused:?}");
    };
    assert_eq!(refusal.fewer, Some(1));
    assert_eq!(
        refusal.shorter_end,
        Some(tick(20) + berth_core::Span::from_minutes(375))
    );
    // A lease over the week's end: 8 VCPU on each side of it.
    let next = BudgetPeriod::Week
        .containing(week + berth_core::Span::from_days(7))
        .start();
    let boundary = next.as_micros() / TICK;
    let (_, changes) = ask(&mut w, boundary - 1, boundary + 1, one_host()).expect("16 hours");
    w.apply(&changes);
    assert_eq!((charged(&w, week), charged(&w, next)), (8.0, 8.0));
}

#[test]
fn nothing_is_charged_without_budgets() {
    let mut w = World::with_hosts(1, |_| (None, Attributes::default()));
    let (_, changes) = ask(&mut w, 20, 30, one_host()).expect("fits");
    assert!(
        !changes
            .iter()
            .any(|c| matches!(c, Change::BudgetSet { .. }))
    );
}

#[test]
fn periods_are_utc_days_weeks_from_monday_and_calendar_months() {
    // 2030-02-14T13:00:00Z, a Thursday.
    let thursday = Instant::from_micros(1_897_304_400_000_000);
    let day = BudgetPeriod::Day.containing(thursday);
    assert_eq!(day.start(), Instant::from_micros(1_897_257_600_000_000));
    let week = BudgetPeriod::Week.containing(thursday);
    // Monday 2030-02-11.
    assert_eq!(week.start(), Instant::from_micros(1_896_998_400_000_000));
    assert_eq!(week.duration(), berth_core::Span::from_days(7));
    let month = BudgetPeriod::Month.containing(thursday);
    // 2030-02-01 to 2030-03-01: 28 days.
    assert_eq!(month.start(), Instant::from_micros(1_896_134_400_000_000));
    assert_eq!(month.duration(), berth_core::Span::from_days(28));
}

#[test]
fn a_waitlisted_lease_past_its_budget_keeps_waiting_and_holds_up_no_one() {
    let (mut w, week) = world();
    // Another project, without a budget, holds both hosts over ticks 20 to 30.
    let both = new_lease(&mut w, "other", 20, 30, hosts(2));
    let (changes, _) = create_lease(&w.catalog, &both, w.at(), &Search::NONE).expect("fits");
    w.apply(&changes);
    // Lab waits for a host over ticks 20 to 40 (160 VCPU-hours: past its 100), then for one
    // over 20 to 25 (40).
    let wait = |w: &mut World, end: i64| {
        let new = new_lease(w, "lab", 20, end, one_host());
        let (changes, lease, refusal) =
            create_or_wait(&w.catalog, &new, tick(20), w.at()).expect("waits");
        assert_eq!(lease.status, LeaseStatus::Waiting);
        assert!(refusal.is_some());
        w.apply(&changes);
        new.id
    };
    let large = wait(&mut w, 40);
    let small = wait(&mut w, 25);
    assert_eq!(charged(&w, week), 0.0, "a waitlisted lease holds nothing");
    w.now = 11;
    let changes = delete_lease(&w.catalog, both.id, w.at()).expect("deleted");
    w.apply(&changes);
    // The first fits a host but not lab's budget: it waits on, and the second is admitted.
    let (admitted, attempts) = admit_waiting(&w.catalog, w.at(), 8);
    assert_eq!(attempts, 2);
    let charges = charge(&w.catalog, &admitted, w.at()).expect("within the budget");
    w.apply(&admitted);
    w.apply(&charges);
    let status = |w: &World, id| w.catalog.lease(id).expect("lease").status;
    assert_eq!(status(&w, large), LeaseStatus::Waiting);
    assert_eq!(status(&w, small), LeaseStatus::Pending);
    assert_eq!(charged(&w, week), 40.0);
    let (again, _) = admit_waiting(&w.catalog, w.at(), 8);
    assert!(again.is_empty(), "still past the budget: {again:?}");
}

#[test]
fn a_budget_removed_moved_or_raised_loosens_and_a_charge_or_a_lower_limit_does_not() {
    let (mut w, _) = world();
    let set = |w: &World, project: &str, period, vcpu: i64| {
        let limits = BTreeMap::from([("VCPU".to_owned(), vcpu)]);
        set_budget(&w.catalog, project, period, &limits, w.at())
            .expect("a budget")
            .0
    };
    let loosened = |w: &World, changes: &[Change]| changes.iter().any(|c| loosens(&w.catalog, c));
    assert!(loosened(&w, &set(&w, "lab", BudgetPeriod::Week, 200)));
    assert!(!loosened(&w, &set(&w, "lab", BudgetPeriod::Week, 50)));
    assert!(loosened(&w, &set(&w, "lab", BudgetPeriod::Month, 100)));
    assert!(loosened(
        &w,
        &delete_budget(&w.catalog, "lab").expect("removed")
    ));
    assert!(
        !loosened(&w, &set(&w, "elsewhere", BudgetPeriod::Week, 1)),
        "a first budget only restricts"
    );
    let (_, charged) = ask(&mut w, 20, 30, one_host()).expect("80 of 100");
    assert!(
        charged
            .iter()
            .any(|c| matches!(c, Change::BudgetSet { .. })),
        "{charged:?}"
    );
    assert!(!loosened(&w, &charged), "a charge keeps the limits");
}
