//! Tests of recurring leases: a series admitted all or none, its conflicts listed with the
//! nearest window that fits, capacity free between occurrences, renamed and cancelled whole.

use super::*;

impl World {
    /// A series of whole-host leases of `n` hosts repeating by `rule` from `first` (hours).
    fn new_series(&mut self, rule: &str, first: (i64, i64), n: u32) -> NewSeries {
        let windows = series_windows(rule, at(first.0), at(first.1)).expect("a good rule");
        let series_id = self.id();
        let occurrences = windows
            .iter()
            .map(|w| {
                let mut new = self.new_lease(first, vec![hosts(n, n)]);
                new.start = w.start();
                new.end = w.end();
                new
            })
            .collect();
        NewSeries {
            series_id,
            rule: rule.into(),
            occurrences,
        }
    }
}

#[test]
fn a_series_with_one_conflict_is_refused_whole_with_the_nearest_window() {
    let mut w = World::new();
    w.host("h1");
    // Daily 10:00-12:00 for three days; the second day's window is taken in part.
    let blocker = w.lease((35, 36), vec![hosts(1, 1)]);
    let series = w.new_series("FREQ=DAILY;COUNT=3", (10, 12), 1);
    let searched = create_series(&w.catalog, &series, now(), &Search::until(horizon()));
    let refusal = match searched {
        Err(Rejection::SeriesDoesNotFit(refusal)) => refusal,
        other => panic!("expected a series refusal, got {other:?}"),
    };
    assert_eq!(refusal.occurrences, 3);
    assert_eq!(refusal.conflicts.len(), 1, "{refusal:?}");
    let conflict = &refusal.conflicts[0];
    assert_eq!(conflict.index, 1);
    assert_eq!(
        (conflict.window.start(), conflict.window.end()),
        (at(34), at(36))
    );
    assert_eq!(
        conflict.refusal.earliest_start,
        Some(at(36)),
        "right after the blocker"
    );
    assert!(refusal.to_string().contains("1 of the 3 occurrences"));
    // Under the writer lock nothing is searched: the conflict is listed without a window.
    let Err(Rejection::SeriesDoesNotFit(unsearched)) =
        create_series(&w.catalog, &series, now(), &Search::NONE)
    else {
        panic!("refused under the lock too");
    };
    assert_eq!(unsearched.conflicts[0].refusal.earliest_start, None);
    // Once the conflicting lease is gone, the whole series is admitted in one decision.
    let changes = delete_lease(&w.catalog, blocker.id, now()).expect("deleted");
    w.apply(&changes);
    let (changes, leases) =
        create_series(&w.catalog, &series, now(), &Search::NONE).expect("admitted");
    assert_eq!(record_kinds(&changes), ["lease.create"; 3]);
    w.apply(&changes);
    assert_eq!(leases.len(), 3);
    let listed: Vec<(u32, Instant)> = w
        .catalog
        .series(series.series_id)
        .map(|l| (l.series().map_or(99, |o| o.index), l.start))
        .collect();
    assert_eq!(listed, [(0, at(10)), (1, at(34)), (2, at(58))]);
    assert!(
        leases
            .iter()
            .all(|l| l.series().is_some_and(|o| o.count == 3))
    );
    // A catalog loaded from storage (its rows, leases as their documents) finds the series.
    let stored: Vec<std::sync::Arc<Lease>> = w
        .catalog
        .to_rows()
        .leases
        .iter()
        .map(|l| {
            let document = serde_json::to_string(&**l).expect("encodes");
            std::sync::Arc::new(serde_json::from_str(&document).expect("decodes"))
        })
        .collect();
    let reloaded = Catalog::from_rows(crate::catalog::CatalogRows {
        leases: stored,
        ..w.catalog.to_rows()
    });
    let again: Vec<&Lease> = reloaded.series(series.series_id).collect();
    assert_eq!(again.len(), 3);
    assert_eq!(
        again[2].series().map(|o| &*o.rule),
        Some("FREQ=DAILY;COUNT=3")
    );
}

#[test]
fn capacity_between_occurrences_is_free_and_a_series_takes_none_when_refused() {
    let mut w = World::new();
    w.host("h1");
    let series = w.new_series("FREQ=DAILY;COUNT=2", (10, 12), 1);
    let (changes, _) = create_series(&w.catalog, &series, now(), &Search::NONE).expect("admitted");
    w.apply(&changes);
    // Between the occurrences the host is free.
    w.lease((12, 34), vec![hosts(1, 1)]);
    // A second series over the same hours is refused on both occurrences and takes nothing.
    let other = w.new_series("FREQ=DAILY;COUNT=3", (11, 12), 1);
    let Err(Rejection::SeriesDoesNotFit(refusal)) =
        create_series(&w.catalog, &other, now(), &Search::NONE)
    else {
        panic!("refused");
    };
    let indexes: Vec<u32> = refusal.conflicts.iter().map(|c| c.index).collect();
    assert_eq!(
        indexes,
        [0, 1],
        "the third day is free, the first two are not"
    );
    assert_eq!(w.catalog.series(other.series_id).count(), 0);
    w.lease((59, 60), vec![hosts(1, 1)]);
}

#[test]
fn a_series_is_renamed_and_cancelled_whole_and_one_occurrence_alone() {
    let mut w = World::new();
    w.host("h1");
    let series = w.new_series("FREQ=WEEKLY;COUNT=3", (10, 12), 1);
    let (changes, leases) =
        create_series(&w.catalog, &series, now(), &Search::NONE).expect("admitted");
    w.apply(&changes);
    // One occurrence is cancelled as the lease it is; the others stay.
    let changes = delete_lease(&w.catalog, leases[1].id, now()).expect("deleted");
    w.apply(&changes);
    assert_eq!(w.catalog.series(series.series_id).count(), 2);
    let (changes, renamed) =
        rename_series(&w.catalog, series.series_id, "standup", now()).expect("renamed");
    w.apply(&changes);
    assert!(renamed.iter().all(|l| &*l.name == "standup"));
    let changes = delete_series(&w.catalog, series.series_id, now()).expect("cancelled");
    assert_eq!(record_kinds(&changes), ["lease.delete"; 2]);
    w.apply(&changes);
    assert_eq!(w.catalog.series(series.series_id).count(), 0);
    assert!(matches!(
        delete_series(&w.catalog, series.series_id, now()),
        Err(Rejection::SeriesNotFound(_))
    ));
    // Everything is free again.
    w.lease((10, 12), vec![hosts(1, 1)]);
}

#[test]
fn bad_rules_are_refused_naming_recurrence_or_the_limit() {
    let bad = series_windows("FREQ=WEEKLY", at(10), at(12));
    assert!(matches!(&bad, Err(Rejection::BadLease(t)) if t.starts_with("recurrence: ")));
    let long = series_windows("FREQ=DAILY;COUNT=101", at(10), at(12));
    assert!(matches!(
        long,
        Err(Rejection::LimitExceeded {
            limit: "recurrence_occurrences",
            max: 100,
            got: 101
        })
    ));
    let overlapping = series_windows("FREQ=DAILY;COUNT=2", at(10), at(40));
    assert!(matches!(&overlapping, Err(Rejection::BadLease(t)) if t.contains("overlap")));
}

#[test]
fn a_series_moves_whole_over_its_own_holds_or_not_at_all() {
    let mut w = World::new();
    w.host("h1");
    let series = w.new_series("FREQ=DAILY;COUNT=3", (10, 12), 1);
    let (changes, _) = create_series(&w.catalog, &series, now(), &Search::NONE).expect("admitted");
    w.apply(&changes);
    // A day later: each occurrence moves onto the next one's old window, its own series' hold.
    let day = Shift::Later(Span::from_hours(24));
    let (changes, moved) =
        shift_series(&w.catalog, series.series_id, day, now(), &Search::NONE).expect("moved");
    w.apply(&changes);
    let starts: Vec<Instant> = moved.iter().map(|l| l.start).collect();
    assert_eq!(starts, [at(34), at(58), at(82)]);
    // A lease in the way of the last occurrence refuses the move, naming it; nothing moves.
    w.lease((84, 86), vec![hosts(1, 1)]);
    let hour = Shift::Later(Span::from_hours(1));
    let refused = shift_series(
        &w.catalog,
        series.series_id,
        hour,
        now(),
        &Search::until(horizon()),
    );
    let Err(Rejection::SeriesDoesNotFit(refusal)) = refused else {
        panic!("refused: {refused:?}");
    };
    let conflict = &refusal.conflicts[0];
    assert_eq!((refusal.conflicts.len(), conflict.index), (1, 2));
    assert_eq!(conflict.refusal.earliest_start, Some(at(86)));
    let back = Shift::Earlier(Span::from_hours(24));
    let (changes, moved) =
        shift_series(&w.catalog, series.series_id, back, now(), &Search::NONE).expect("moved back");
    w.apply(&changes);
    assert_eq!(moved[0].start, at(10));
}

#[test]
fn the_invariants_recount_open_holds_the_waitlist_and_series_from_the_leases() {
    use crate::catalog::ParkedIndex;
    let mut w = World::new();
    w.host("h1");
    w.host("h2");
    let new = w.new_lease((10, 20), vec![hosts(1, 1)]);
    let (changes, held) = create_hold(&w.catalog, &new, at(1), now()).expect("held");
    w.apply(&changes);
    let new = w.new_lease((10, 20), vec![hosts(2, 2)]);
    let (changes, waiting, _) = create_or_wait(&w.catalog, &new, at(10), now()).expect("decided");
    w.apply(&changes);
    let series = w.new_series("FREQ=DAILY;COUNT=2", (100, 102), 1);
    let (changes, _) = create_series(&w.catalog, &series, now(), &Search::NONE).expect("admitted");
    w.apply(&changes);
    assert_eq!(held.status, LeaseStatus::Held);
    assert_eq!(waiting.status, LeaseStatus::Waiting);
    assert_eq!(w.catalog.series(series.series_id).count(), 2);
    assert_eq!(w.catalog.check_invariants(), Ok(()));
    let expected = [
        (ParkedIndex::OpenHolds, "open-holds"),
        (ParkedIndex::Waiting, "waitlist"),
        (ParkedIndex::Series, "series index"),
    ];
    for (index, named) in expected {
        let mut corrupt = w.catalog.clone();
        corrupt.forget_parked(index);
        let found = corrupt.check_invariants();
        assert!(
            found.as_ref().is_err_and(|e| e.contains(named)),
            "{index:?}: {found:?}"
        );
    }
}
