//! Budgets (berth): the most resource-hours a project's leases may hold per period, by class,
//! and what they have been charged. A lease is charged what it holds from the moment it is
//! admitted or changed on; ending early refunds what it no longer holds; what it held stays
//! charged. So a period's charge is what the project's leases held in it so far plus what they
//! hold in it from now on.

use crate::model::ledger::Window;
use crate::model::name::ResourceClass;
use crate::model::recurrence::{civil_from_days, days_from_civil};
use crate::model::time::Instant;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Microseconds in a day.
const DAY: i64 = 86_400_000_000;

/// How long a budget's period is: UTC calendar days, ISO weeks (from Monday) or months.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BudgetPeriod {
    /// A UTC day.
    Day,
    /// A week from Monday, UTC.
    Week,
    /// A calendar month, UTC.
    Month,
}

impl BudgetPeriod {
    /// The wire form.
    pub fn as_str(self) -> &'static str {
        match self {
            BudgetPeriod::Day => "day",
            BudgetPeriod::Week => "week",
            BudgetPeriod::Month => "month",
        }
    }

    /// Parses the wire form.
    pub fn parse(text: &str) -> Option<BudgetPeriod> {
        [BudgetPeriod::Day, BudgetPeriod::Week, BudgetPeriod::Month]
            .into_iter()
            .find(|p| p.as_str() == text)
    }

    /// The period that holds `at`.
    pub fn containing(self, at: Instant) -> Window {
        let day = at.as_micros().div_euclid(DAY);
        let (first, next) = match self {
            BudgetPeriod::Day => (day, day + 1),
            // 1970-01-01 was a Thursday: Monday is three days later in the cycle.
            BudgetPeriod::Week => {
                let monday = day - (day + 3).rem_euclid(7);
                (monday, monday + 7)
            }
            BudgetPeriod::Month => {
                let (year, month) = year_month(day);
                let (next_year, next_month) = match month {
                    12 => (year + 1, 1),
                    _ => (year, month + 1),
                };
                (
                    days_from_civil(year, month, 1),
                    days_from_civil(next_year, next_month, 1),
                )
            }
        };
        Window::new(
            Instant::from_micros(first * DAY),
            Instant::from_micros(next * DAY),
        )
        .expect("invariant: a period has a length")
    }

    /// The periods `window` overlaps, in order, each with the part of `window` inside it.
    pub fn split(self, window: Window) -> Vec<(Instant, Window)> {
        let mut parts = Vec::new();
        let mut at = window.start();
        while at < window.end() {
            let period = self.containing(at);
            let end = period.end().min(window.end());
            parts.push((
                period.start(),
                Window::new(at, end).expect("invariant: a part has a length"),
            ));
            at = end;
        }
        parts
    }
}

/// The year and month of a day since the epoch.
fn year_month(day: i64) -> (i64, i64) {
    let (year, month, _) = civil_from_days(day);
    (year, month)
}

/// Unit-seconds (a budget's charges) as unit-hours.
pub fn hours(seconds: u64) -> f64 {
    seconds as f64 / 3600.0
}

/// A project's budget and what its leases have been charged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Budget {
    /// The project.
    pub project_id: String,
    /// How long each period is.
    pub period: BudgetPeriod,
    /// The most unit-hours of each class the project's leases may hold in one period (a class
    /// not named is not limited, but is charged).
    pub limits: BTreeMap<ResourceClass, u64>,
    /// What the project's leases hold or held in each period (by its start), by class, in
    /// unit-seconds (a VCPU held for an hour is 3,600), for the periods from the previous one
    /// on.
    pub charged: BTreeMap<Instant, BTreeMap<ResourceClass, u64>>,
    /// When it was last set.
    pub updated_at: Instant,
}

impl Budget {
    /// What the period starting at `period` has been charged of `class`.
    pub fn charged_in(&self, period: Instant, class: &ResourceClass) -> u64 {
        self.charged
            .get(&period)
            .and_then(|classes| classes.get(class))
            .copied()
            .unwrap_or(0)
    }
}
