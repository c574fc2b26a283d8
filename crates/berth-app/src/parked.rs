//! Holds and waitlisted leases (berth's use cases): the availability search holding what it
//! offers, a lease made from a hold, and a lease that waits when it does not fit.
//!
//! The search runs off the writer lock as any search; holding its offer is one decision under
//! the lock, admission as asked over the offered window (`decide::lease::create_hold`): an
//! offer taken meanwhile is not held, and the answer says so. A lease made from a hold and a
//! waitlisted lease are decided under the lock with no search; a waitlisted lease's
//! counter-offer is searched after it, over a snapshot.

use crate::error::AppError;
use crate::leases::{
    AskHold, Availability, CreateLease, HoldOutcome, find_lease, horizon_end, lease_id,
};
use crate::service::Berth;
use berth_core::decide::admission::Search;
use berth_core::decide::lease::{self as decide};
use berth_core::model::lease::{Lease, ReservationSpec};
use berth_core::model::ledger::Window;
use berth_core::rejection::Refusal;
use berth_core::{Catalog, Instant, LeaseId, Rejection, Span};
use uuid::Uuid;

/// A waitlisted lease's replay answers with the lease as it is now, with no refusal.
fn find_waited(catalog: &Catalog, id: Uuid) -> Option<(Lease, Option<Refusal>)> {
    find_lease(catalog, id).map(|lease| (lease, None))
}

fn waited_id(created: &(Lease, Option<Refusal>)) -> Uuid {
    lease_id(&created.0)
}

impl Berth {
    /// Holds the offer of `answer` (the window asked when it fits, else the counter-offer's
    /// earliest start for as long), until `ask.minutes` from now.
    pub(crate) async fn hold_offer(
        &self,
        answer: &Availability,
        window: Window,
        specs: Vec<ReservationSpec>,
        ask: AskHold,
    ) -> Result<HoldOutcome, AppError> {
        let offered = match &answer.refusal {
            None => window,
            Some(refusal) => match refusal.earliest_start {
                Some(start) => window.shifted_to(start),
                None => {
                    return Ok(HoldOutcome::NotHeld(
                        "nothing fits within the search horizon".into(),
                    ));
                }
            },
        };
        let cmd = CreateLease {
            name: "hold".into(),
            project_id: ask.project_id,
            user_id: ask.user_id,
            start: offered.start(),
            end: offered.end(),
            before_end: None,
            reservations: specs,
            horizon: Span::from_days(1),
            idempotency: None,
            hold: None,
        };
        let new = self.new_lease(&cmd);
        let lapses_at = self.now() + Span::from_minutes(i64::from(ask.minutes));
        let held = self
            .write(move |catalog, now| decide::create_hold(catalog, &new, lapses_at, now))
            .await;
        match held {
            Ok(lease) => {
                self.lifecycle.notify_one();
                Ok(HoldOutcome::Held(Box::new(lease)))
            }
            Err(AppError::Rejected(Rejection::DoesNotFit(_))) => Ok(HoldOutcome::NotHeld(
                "the offer was taken between the search and the hold".into(),
            )),
            Err(other) => Err(other),
        }
    }

    /// Turns hold `hold` into the lease `cmd` asks for, in one decision under the lock (the
    /// hold's capacity is never free in between).
    pub(crate) async fn create_lease_from_hold(
        &self,
        cmd: CreateLease,
        hold: LeaseId,
    ) -> Result<Lease, AppError> {
        let new = self.new_lease(&cmd);
        let lease = self
            .write_once(
                cmd.idempotency,
                find_lease,
                lease_id,
                move |catalog, now| decide::create_lease_from_hold(catalog, &new, hold, now),
            )
            .await?;
        self.lifecycle.notify_one();
        Ok(lease)
    }

    /// Creates the lease `cmd` asks for or, when it does not fit, keeps it waitlisted until
    /// `wait_until`: the lease (`PENDING` or `WAITING`) and, when it waits, the refusal with
    /// its counter-offer (searched after the lock, over a snapshot).
    pub async fn create_lease_or_wait(
        &self,
        cmd: CreateLease,
        wait_until: Instant,
    ) -> Result<(Lease, Option<Refusal>), AppError> {
        decide::check_limits(cmd.reservations.iter())?;
        decide::check_horizon(cmd.horizon)?;
        let new = self.new_lease(&cmd);
        let horizon = horizon_end(cmd.start, cmd.horizon);
        let decided = new.clone();
        let (lease, refusal) = self
            .write_once(
                cmd.idempotency,
                find_waited,
                waited_id,
                move |catalog, now| {
                    decide::create_or_wait(catalog, &decided, wait_until, now)
                        .map(|(changes, lease, refusal)| (changes, (lease, refusal)))
                },
            )
            .await?;
        self.lifecycle.notify_one();
        let Some(refusal) = refusal else {
            return Ok((lease, None));
        };
        let now = self.now();
        let offer = move |catalog: &Catalog, search: &Search<'_>| {
            decide::create_lease(catalog, &new, now, search).err()
        };
        let searched = self
            .with_offer(
                Rejection::DoesNotFit(Box::new(refusal.clone())),
                move |_| horizon,
                offer,
            )
            .await;
        let refusal = match searched {
            AppError::Rejected(Rejection::DoesNotFit(searched)) => *searched,
            _ => refusal,
        };
        Ok((lease, Some(refusal)))
    }
}
