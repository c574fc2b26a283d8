//! The deadline of a request, as the write path sees it: a task-local set around the request's
//! work by the caller (the HTTP layer), which also decides when the deadline has passed and says
//! so with [`Deadline::expire`]. [`crate::Berth::write`] obeys it. No clock is read here.
//!
//! A request is open until one of two things happens first: a batch leader takes one of its
//! decisions (from then on the request runs to the end of that batch, whatever the time, so its
//! answer tells what was committed), or its deadline passes while nothing of it was taken (from
//! then on none of its decisions is ever made). The two are settled by one atomic state, so a
//! decision is never both taken and given up.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use tokio::sync::Notify;

/// No decision of the request was taken yet, and its deadline has not passed.
const OPEN: u8 = 0;
/// A decision of the request was taken into a batch: the request is never cut short again.
const TAKEN: u8 = 1;
/// The deadline passed before any decision was taken: none will be.
const CLOSED: u8 = 2;

tokio::task_local! {
    static DEADLINE: Arc<Deadline>;
}

/// Whether a request's decisions may still be made.
#[derive(Debug, Default)]
pub struct Deadline {
    state: AtomicU8,
    /// Wakes the request's queued decisions when it closes.
    closing: Notify,
}

impl Deadline {
    /// An open deadline.
    pub fn new() -> Arc<Deadline> {
        Arc::new(Deadline::default())
    }

    /// Runs `work` under this deadline: every write it makes through [`crate::Berth`] obeys it.
    pub async fn scope<F: Future>(self: &Arc<Self>, work: F) -> F::Output {
        DEADLINE.scope(Arc::clone(self), work).await
    }

    /// The deadline has passed. Returns `true` when no decision of the request was taken: none
    /// ever will be, its queued decisions are answered [`crate::AppError::TimedOut`], and the
    /// caller may answer that nothing was changed. Returns `false` when one was taken: the
    /// request must run until that batch's outcome is known.
    pub fn expire(&self) -> bool {
        let closed =
            match self
                .state
                .compare_exchange(OPEN, CLOSED, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => true,
                Err(state) => state == CLOSED,
            };
        if closed {
            self.closing.notify_waiters();
        }
        closed
    }

    /// Marks a decision of the request taken into a batch; `false` when the request was closed
    /// (its decision must be dropped undecided).
    pub(crate) fn take(&self) -> bool {
        match self
            .state
            .compare_exchange(OPEN, TAKEN, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => true,
            Err(state) => state == TAKEN,
        }
    }

    /// Resolves once the request is closed (never, if one of its decisions was taken).
    pub(crate) async fn closed(&self) {
        // Bounded: each pass either returns or waits for the next wake-up.
        loop {
            let notified = self.closing.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.state.load(Ordering::Acquire) == CLOSED {
                return;
            }
            notified.await;
        }
    }

    /// The deadline of the current task's request, if it runs under one.
    pub(crate) fn current() -> Option<Arc<Deadline>> {
        DEADLINE.try_with(Arc::clone).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn taking_and_closing_exclude_each_other() {
        let taken = Deadline::new();
        assert!(taken.take());
        assert!(taken.take(), "a request may have several decisions taken");
        assert!(!taken.expire(), "a taken request is never cut short");
        let closed = Deadline::new();
        assert!(closed.expire());
        assert!(closed.expire(), "expiring twice gives the same answer");
        assert!(!closed.take(), "a closed request's decisions are dropped");
    }
}
