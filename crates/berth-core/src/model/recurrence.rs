//! Recurrence rules (berth): the subset of RFC 5545's RRULE a recurring lease may carry
//! (`FREQ=DAILY|WEEKLY`, `INTERVAL`, `BYDAY` and exactly one of `COUNT` or `UNTIL`), parsed
//! and expanded into the windows of the series' occurrences.
//!
//! Parsing and expansion are pure integer arithmetic on UTC days: `BYDAY` names days of the UTC
//! week (weeks start on Monday, RFC 5545's default `WKST=MO`) and `UNTIL` is read as a UTC
//! instant. This is the one calendar text the core reads; it owns no clock and no time zone.

use crate::limits::{RECURRENCE_INTERVAL_MAX, RECURRENCE_OCCURRENCES_MAX};
use crate::model::ledger::Window;
use crate::model::time::{Instant, Span};

const DAY_MICROS: i64 = 86_400_000_000;
const WEEK_DAYS: i64 = 7;
/// The RFC 5545 two-letter day names, Monday first.
const DAY_NAMES: [&str; 7] = ["MO", "TU", "WE", "TH", "FR", "SA", "SU"];

/// How often a series repeats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Frequency {
    /// Every `INTERVAL` days.
    Daily,
    /// Every `INTERVAL` weeks (on the `BYDAY` days, or the first occurrence's day).
    Weekly,
}

/// Where a series stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Bound {
    /// After this many occurrences (the first included).
    Count(u32),
    /// No occurrence starts after this instant (inclusive, as RFC 5545 says).
    Until(Instant),
}

/// A parsed recurrence rule.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Recurrence {
    frequency: Frequency,
    interval: u32,
    /// The `BYDAY` days as a bit set, bit 0 for Monday; 0 when the rule names none.
    by_day: u8,
    bound: Bound,
}

/// Why a recurrence rule is refused; the text is for the client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecurrenceError {
    /// The rule is malformed, unbounded, or does not fit the first occurrence.
    #[error("{0}")]
    Bad(String),
    /// The rule gives more occurrences than [`RECURRENCE_OCCURRENCES_MAX`].
    #[error("the rule gives more than {max} occurrences (RECURRENCE_OCCURRENCES_MAX)")]
    TooMany {
        /// [`RECURRENCE_OCCURRENCES_MAX`].
        max: u32,
        /// How many it gives, at least.
        got: u32,
    },
}

fn bad(text: impl Into<String>) -> RecurrenceError {
    RecurrenceError::Bad(text.into())
}

impl Recurrence {
    /// Parses a rule (`RRULE:` prefix optional, parts separated by `;`, names case-insensitive).
    /// Refuses unknown or repeated parts, a missing `FREQ`, a rule with neither or both of
    /// `COUNT` and `UNTIL` (unbounded or ambiguous), `BYDAY` with `FREQ=DAILY`, and values out
    /// of range.
    pub fn parse(text: &str) -> Result<Recurrence, RecurrenceError> {
        let text = text.trim();
        let body = match text.get(..6) {
            Some(prefix) if prefix.eq_ignore_ascii_case("RRULE:") => &text[6..],
            _ => text,
        };
        let mut parts: Vec<(String, &str)> = Vec::new();
        // Bounded by the text's length: a rule has at most as many parts as characters.
        for part in body.split(';').filter(|p| !p.trim().is_empty()) {
            let (name, value) = part
                .split_once('=')
                .ok_or_else(|| bad(format!("part {part:?} is not NAME=VALUE")))?;
            let name = name.trim().to_ascii_uppercase();
            if parts.iter().any(|(n, _)| *n == name) {
                return Err(bad(format!("{name} is given twice")));
            }
            parts.push((name, value.trim()));
        }
        let value = |name: &str| parts.iter().find(|(n, _)| n == name).map(|(_, v)| *v);
        if let Some((name, _)) = parts.iter().find(|(n, _)| {
            !matches!(
                n.as_str(),
                "FREQ" | "INTERVAL" | "BYDAY" | "COUNT" | "UNTIL"
            )
        }) {
            return Err(bad(format!(
                "{name} is not supported (FREQ, INTERVAL, BYDAY, COUNT, UNTIL are)"
            )));
        }
        let frequency = match value("FREQ").map(str::to_ascii_uppercase).as_deref() {
            Some("DAILY") => Frequency::Daily,
            Some("WEEKLY") => Frequency::Weekly,
            Some(other) => return Err(bad(format!("FREQ={other} is not DAILY or WEEKLY"))),
            None => return Err(bad("FREQ is required (DAILY or WEEKLY)")),
        };
        let interval = match value("INTERVAL") {
            None => 1,
            Some(text) => number(text)
                .filter(|n| (1..=RECURRENCE_INTERVAL_MAX).contains(n))
                .ok_or_else(|| {
                    bad(format!(
                        "INTERVAL={text} is not a whole number from 1 to {RECURRENCE_INTERVAL_MAX}"
                    ))
                })?,
        };
        let by_day = match (value("BYDAY"), frequency) {
            (None, _) => 0,
            (Some(_), Frequency::Daily) => return Err(bad("BYDAY is for FREQ=WEEKLY only")),
            (Some(days), Frequency::Weekly) => parse_days(days)?,
        };
        let bound = match (value("COUNT"), value("UNTIL")) {
            (None, None) => {
                return Err(bad(
                    "the rule is unbounded: give COUNT or UNTIL (RECURRENCE_OCCURRENCES_MAX)",
                ));
            }
            (Some(_), Some(_)) => return Err(bad("give COUNT or UNTIL, not both")),
            (Some(text), None) => Bound::Count(
                number(text)
                    .filter(|n| *n >= 1)
                    .ok_or_else(|| bad(format!("COUNT={text} is not a whole number from 1")))?,
            ),
            (None, Some(text)) => Bound::Until(parse_until(text)?),
        };
        if let Bound::Count(count) = bound
            && count > RECURRENCE_OCCURRENCES_MAX
        {
            return Err(RecurrenceError::TooMany {
                max: RECURRENCE_OCCURRENCES_MAX,
                got: count,
            });
        }
        Ok(Recurrence {
            frequency,
            interval,
            by_day,
            bound,
        })
    }

    /// How often it repeats.
    pub fn frequency(&self) -> Frequency {
        self.frequency
    }

    /// Where it stops.
    pub fn bound(&self) -> Bound {
        self.bound
    }

    /// The windows of the series whose first occurrence is `first`, in order: each as long as
    /// `first`, at the same time of day. The first occurrence must fall on a `BYDAY` day when
    /// the rule names some; occurrences must not overlap; at most
    /// [`RECURRENCE_OCCURRENCES_MAX`] of them.
    pub fn occurrences(&self, first: Window) -> Result<Vec<Window>, RecurrenceError> {
        let start_day = first.start().as_micros().div_euclid(DAY_MICROS);
        let weekday = weekday(start_day);
        if self.by_day != 0 && self.by_day & (1 << weekday) == 0 {
            return Err(bad(format!(
                "the first occurrence (start_date) falls on {}, which BYDAY does not name",
                DAY_NAMES[weekday as usize]
            )));
        }
        let duration = first.end().since(first.start());
        let mut starts: Vec<Instant> = Vec::new();
        let limit = RECURRENCE_OCCURRENCES_MAX as usize;
        // One step per period (a day or a week); each gives at least one occurrence, so the loop
        // runs at most RECURRENCE_OCCURRENCES_MAX + 1 times before the limit stops it.
        for period in 0_i64.. {
            let before = starts.len();
            let period_start = period * i64::from(self.interval) * self.period_days();
            for offset in self.offsets_in_period(weekday, period == 0) {
                let days = period_start + offset;
                let start = first.start() + Span::from_days(days);
                if self.past_bound(start, starts.len()) {
                    return finish(starts, duration);
                }
                starts.push(start);
                if starts.len() > limit {
                    return Err(RecurrenceError::TooMany {
                        max: RECURRENCE_OCCURRENCES_MAX,
                        got: u32::try_from(starts.len()).unwrap_or(u32::MAX),
                    });
                }
            }
            assert!(starts.len() > before, "every period gives an occurrence");
        }
        unreachable!("the loop returns once the bound or the limit is reached")
    }

    fn period_days(&self) -> i64 {
        match self.frequency {
            Frequency::Daily => 1,
            Frequency::Weekly => WEEK_DAYS,
        }
    }

    /// The days from the first occurrence's day on which occurrences of one period start: the
    /// period's first day only, or for `BYDAY` each named day of the calendar week (Monday to
    /// Sunday) the period falls in, those before the first occurrence left out of the first.
    fn offsets_in_period(&self, weekday: u32, first_period: bool) -> Vec<i64> {
        if self.by_day == 0 {
            return vec![0];
        }
        (0..7_u32)
            .filter(|day| self.by_day & (1 << day) != 0)
            .filter(|day| !first_period || *day >= weekday)
            .map(|day| i64::from(day) - i64::from(weekday))
            .collect()
    }

    fn past_bound(&self, start: Instant, n_before: usize) -> bool {
        match self.bound {
            Bound::Count(count) => n_before >= count as usize,
            // The first occurrence is the lease's own window: always in, as RFC 5545 says.
            Bound::Until(until) => n_before > 0 && start > until,
        }
    }
}

/// The windows of `starts`, each `duration` long, refused when they overlap.
fn finish(starts: Vec<Instant>, duration: Span) -> Result<Vec<Window>, RecurrenceError> {
    assert!(!starts.is_empty(), "the first occurrence is always in");
    let windows: Vec<Window> = starts
        .iter()
        .map(|start| {
            Window::new(*start, *start + duration)
                .ok_or_else(|| bad("an occurrence lies beyond the end of time"))
        })
        .collect::<Result<_, _>>()?;
    for pair in windows.windows(2) {
        if pair[1].start() < pair[0].end() {
            return Err(bad(
                "occurrences overlap: each lasts longer than the time to the next",
            ));
        }
    }
    Ok(windows)
}

/// Weekday of a day since the epoch, 0 for Monday (1970-01-01 was a Thursday).
fn weekday(day: i64) -> u32 {
    u32::try_from((day + 3).rem_euclid(WEEK_DAYS)).expect("invariant: a weekday is 0..7")
}

fn number(text: &str) -> Option<u32> {
    match text.chars().all(|c| c.is_ascii_digit()) {
        true => text.parse().ok(),
        false => None,
    }
}

/// `BYDAY`: a comma-separated list of two-letter days (no ordinal prefixes), as a bit set.
fn parse_days(text: &str) -> Result<u8, RecurrenceError> {
    let mut set = 0_u8;
    for day in text.split(',') {
        let day = day.trim().to_ascii_uppercase();
        let idx = DAY_NAMES
            .iter()
            .position(|name| *name == day)
            .ok_or_else(|| {
                bad(format!(
                    "BYDAY day {day:?} is not one of MO,TU,WE,TH,FR,SA,SU"
                ))
            })?;
        if set & (1 << idx) != 0 {
            return Err(bad(format!("BYDAY names {day} twice")));
        }
        set |= 1 << idx;
    }
    Ok(set)
}

/// `UNTIL`: `YYYYMMDD` (the end of that UTC day) or `YYYYMMDDTHHMMSSZ` (UTC).
fn parse_until(text: &str) -> Result<Instant, RecurrenceError> {
    let refuse = || {
        bad(format!(
            "UNTIL={text} is not YYYYMMDD or YYYYMMDDTHHMMSSZ (UTC)"
        ))
    };
    let digits = |range: std::ops::Range<usize>| -> Result<i64, RecurrenceError> {
        let part = text.get(range).ok_or_else(refuse)?;
        match part.chars().all(|c| c.is_ascii_digit()) {
            true => part.parse().map_err(|_| refuse()),
            false => Err(refuse()),
        }
    };
    let (year, month, day) = (digits(0..4)?, digits(4..6)?, digits(6..8)?);
    if !(1..=12).contains(&month) || !(1..=days_in_month(year, month)).contains(&day) {
        return Err(refuse());
    }
    let seconds = match text.len() {
        8 => 86_400 - 1,
        16 if text.as_bytes()[8] == b'T' && text.as_bytes()[15].eq_ignore_ascii_case(&b'Z') => {
            let (h, m, s) = (digits(9..11)?, digits(11..13)?, digits(13..15)?);
            if h > 23 || m > 59 || s > 59 {
                return Err(refuse());
            }
            h * 3600 + m * 60 + s
        }
        _ => return Err(refuse()),
    };
    let days = days_from_civil(year, month, day);
    Ok(Instant::from_micros(
        days * DAY_MICROS + seconds * 1_000_000,
    ))
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
pub(crate) fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The proleptic Gregorian `(year, month, day)` of a day since 1970-01-01: the inverse of
/// [`days_from_civil`].
pub(crate) fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const HOUR: i64 = 3_600_000_000;
    /// 2026-11-30T09:00:00Z, a Monday.
    const MONDAY_9: i64 = 1_796_029_200_000_000;

    fn window(start: i64, hours: i64) -> Window {
        Window::new(
            Instant::from_micros(start),
            Instant::from_micros(start + hours * HOUR),
        )
        .expect("a window")
    }

    fn starts(rule: &str, first: Window) -> Vec<i64> {
        Recurrence::parse(rule)
            .and_then(|r| r.occurrences(first))
            .unwrap_or_else(|e| panic!("{rule}: {e}"))
            .iter()
            .map(|w| w.start().as_micros())
            .collect()
    }

    fn refusal(rule: &str, first: Window) -> String {
        match Recurrence::parse(rule).and_then(|r| r.occurrences(first)) {
            Ok(windows) => panic!("{rule} gave {} occurrences", windows.len()),
            Err(error) => error.to_string(),
        }
    }

    #[test]
    fn the_reference_day_is_a_monday_at_nine() {
        assert_eq!(weekday(MONDAY_9.div_euclid(DAY_MICROS)), 0);
        assert_eq!(MONDAY_9.rem_euclid(DAY_MICROS), 9 * HOUR);
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(weekday(days_from_civil(2026, 11, 30)), 0);
    }

    #[test]
    fn daily_and_weekly_repeat_at_the_interval() {
        let first = window(MONDAY_9, 2);
        let day = DAY_MICROS;
        assert_eq!(
            starts("FREQ=DAILY;COUNT=3", first),
            [MONDAY_9, MONDAY_9 + day, MONDAY_9 + 2 * day]
        );
        assert_eq!(
            starts("RRULE:freq=daily;interval=2;count=2", first),
            [MONDAY_9, MONDAY_9 + 2 * day]
        );
        assert_eq!(
            starts("FREQ=WEEKLY;COUNT=3", first),
            [MONDAY_9, MONDAY_9 + 7 * day, MONDAY_9 + 14 * day]
        );
        assert_eq!(
            starts("FREQ=WEEKLY;INTERVAL=2;BYDAY=MO,WE;COUNT=4", first),
            [
                MONDAY_9,
                MONDAY_9 + 2 * day,
                MONDAY_9 + 14 * day,
                MONDAY_9 + 16 * day
            ]
        );
        // From a Wednesday, every other calendar week: the Monday before it is not in.
        assert_eq!(
            starts(
                "FREQ=WEEKLY;INTERVAL=2;BYDAY=MO,WE;COUNT=3",
                window(MONDAY_9 + 2 * day, 1)
            ),
            [MONDAY_9 + 2 * day, MONDAY_9 + 14 * day, MONDAY_9 + 16 * day]
        );
    }

    #[test]
    fn until_is_inclusive_and_a_bare_date_means_its_whole_day() {
        let first = window(MONDAY_9, 1);
        // 2026-12-14 is two weeks after the first occurrence.
        assert_eq!(starts("FREQ=WEEKLY;UNTIL=20261214", first).len(), 3);
        assert_eq!(starts("FREQ=WEEKLY;UNTIL=20261214T090000Z", first).len(), 3);
        assert_eq!(starts("FREQ=WEEKLY;UNTIL=20261214T085959Z", first).len(), 2);
        // An UNTIL before the first occurrence still keeps it (it is the lease's own window).
        assert_eq!(starts("FREQ=DAILY;UNTIL=20200101", first).len(), 1);
    }

    #[test]
    fn bad_rules_are_refused_with_what_is_wrong() {
        let first = window(MONDAY_9, 1);
        for (rule, says) in [
            ("FREQ=WEEKLY", "unbounded"),
            ("FREQ=MONTHLY;COUNT=2", "FREQ=MONTHLY"),
            ("COUNT=2", "FREQ is required"),
            ("FREQ=WEEKLY;COUNT=2;UNTIL=20270101", "not both"),
            ("FREQ=WEEKLY;COUNT=0", "COUNT=0"),
            ("FREQ=WEEKLY;COUNT=-1", "COUNT=-1"),
            ("FREQ=WEEKLY;COUNT=2;BYMONTH=1", "BYMONTH is not supported"),
            ("FREQ=WEEKLY;COUNT=2;COUNT=3", "twice"),
            ("FREQ=DAILY;BYDAY=MO;COUNT=2", "WEEKLY only"),
            ("FREQ=WEEKLY;BYDAY=XX;COUNT=2", "XX"),
            ("FREQ=WEEKLY;BYDAY=1MO;COUNT=2", "1MO"),
            ("FREQ=WEEKLY;BYDAY=TU;COUNT=2", "falls on MO"),
            ("FREQ=WEEKLY;INTERVAL=0;COUNT=2", "INTERVAL=0"),
            ("FREQ=WEEKLY;UNTIL=20270230", "UNTIL=20270230"),
            ("FREQ=WEEKLY;UNTIL=2027-01-01", "UNTIL"),
            ("FREQ=WEEKLY;COUNT=101", "RECURRENCE_OCCURRENCES_MAX"),
            ("FREQ=DAILY;UNTIL=20300101", "RECURRENCE_OCCURRENCES_MAX"),
            ("nonsense", "NAME=VALUE"),
        ] {
            let text = refusal(rule, first);
            assert!(text.contains(says), "{rule}: {text}");
        }
        // A day-long occurrence every day fits; a longer one overlaps the next.
        assert_eq!(starts("FREQ=DAILY;COUNT=3", window(MONDAY_9, 24)).len(), 3);
        assert!(refusal("FREQ=DAILY;COUNT=3", window(MONDAY_9, 25)).contains("overlap"));
        assert!(
            refusal("FREQ=WEEKLY;BYDAY=MO,TU;COUNT=3", window(MONDAY_9, 25)).contains("overlap")
        );
    }

    proptest! {
        #[test]
        fn expansion_is_ordered_bounded_and_on_the_named_days(
            weekly in any::<bool>(),
            interval in 1_u32..5,
            days in 1_u8..128,
            count in proptest::option::of(1_u32..=RECURRENCE_OCCURRENCES_MAX),
            until_days in 0_i64..400,
            hours in 1_i64..24,
        ) {
            // The first occurrence on the first named day of the reference week.
            let days = if weekly { days } else { 0 };
            let first_day = (0..7).find(|d| days & (1 << d) != 0).unwrap_or(0);
            let start = MONDAY_9 + i64::from(first_day) * DAY_MICROS;
            let names: Vec<&str> = (0..7).filter(|d| days & (1 << d) != 0).map(|d| DAY_NAMES[d]).collect();
            let mut rule = format!("FREQ={};INTERVAL={interval}", if weekly { "WEEKLY" } else { "DAILY" });
            if !names.is_empty() {
                rule.push_str(&format!(";BYDAY={}", names.join(",")));
            }
            let until = Instant::from_micros(start + until_days * DAY_MICROS);
            match count {
                Some(count) => rule.push_str(&format!(";COUNT={count}")),
                None => {
                    let day = until.as_micros().div_euclid(DAY_MICROS);
                    let (y, m, d) = civil_from_days(day);
                    rule.push_str(&format!(";UNTIL={y:04}{m:02}{d:02}"));
                }
            }
            let parsed = Recurrence::parse(&rule).expect("a valid rule");
            let first = window(start, hours);
            match parsed.occurrences(first) {
                Ok(windows) => {
                    prop_assert_eq!(windows[0], first);
                    prop_assert!(windows.len() <= RECURRENCE_OCCURRENCES_MAX as usize);
                    if let Some(count) = count {
                        prop_assert_eq!(windows.len(), count as usize);
                    }
                    let day_end = (until.as_micros().div_euclid(DAY_MICROS) + 1) * DAY_MICROS;
                    for pair in windows.windows(2) {
                        prop_assert!(pair[0].end() <= pair[1].start());
                    }
                    for w in &windows {
                        prop_assert_eq!(w.end().since(w.start()), first.end().since(first.start()));
                        prop_assert_eq!(w.start().as_micros().rem_euclid(DAY_MICROS), 9 * HOUR);
                        if count.is_none() && *w != first {
                            prop_assert!(w.start().as_micros() < day_end);
                        }
                        if days != 0 {
                            let wd = weekday(w.start().as_micros().div_euclid(DAY_MICROS));
                            prop_assert!(days & (1 << wd) != 0);
                        }
                    }
                }
                Err(RecurrenceError::TooMany { .. }) => prop_assert!(count.is_none()),
                Err(RecurrenceError::Bad(text)) => prop_assert!(text.contains("overlap"), "{}", text),
            }
        }
    }
}
