//! Work that may take long runs off the writer lock and off the runtime's worker threads.
//!
//! A search (a counter-offer's earliest start, the availability search, the displacement of
//! lower priorities, allocation candidates) runs on a snapshot of the readers' catalog (a
//! copy that shares leases and ledger timelines with it, see ARCHITECTURE.md), on a blocking
//! thread of its own at a lower priority (nice 10), within [`limits::SEARCH_BUDGET_MICROS`] measured by
//! the injected clock and handed to the core as a probe, and at most [`searches_in_flight`] at
//! once (the rest wait their turn, first come first served), so searches never hold the writer
//! lock, never stall the runtime that answers `/healthz` and other requests, and never take
//! every core. Decisions under the writer lock only re-check what a search chose.

use crate::error::AppError;
use crate::service::Berth;
use berth_core::decide::admission::Search;
use berth_core::{Catalog, Instant, limits};
use std::sync::OnceLock;
use tokio::sync::Semaphore;

/// How many searches run at once: half the machine's cores, at least one.
pub fn searches_in_flight() -> usize {
    std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1))
}

fn searches() -> &'static Semaphore {
    static SEARCHES: OnceLock<Semaphore> = OnceLock::new();
    SEARCHES.get_or_init(|| Semaphore::new(searches_in_flight()))
}

/// The full search up to `horizon_end` that a budget probe allows.
pub(crate) fn search_until(horizon_end: Instant, stop: &dyn Fn() -> bool) -> Search<'_> {
    Search {
        horizon_end,
        steps: limits::SEARCH_STEPS_MAX,
        stop,
    }
}

impl Berth {
    /// Runs `f` over a snapshot of a current catalog on a blocking thread, so that work bounded
    /// by the limits but not trivial (admitting a large request as asked) neither holds a lock
    /// nor occupies a runtime worker.
    pub async fn read_blocking<R: Send + 'static>(
        &self,
        f: impl FnOnce(&Catalog) -> R + Send + 'static,
    ) -> Result<R, AppError> {
        let snapshot = self.read(Catalog::clone).await?;
        lowered(move || f(&snapshot)).await
    }

    /// Runs the search `f` over a snapshot of a current catalog on a blocking thread, once a
    /// search slot is free, with a probe that turns `true` when
    /// [`limits::SEARCH_BUDGET_MICROS`] have passed since the search started.
    pub async fn search<R: Send + 'static>(
        &self,
        f: impl FnOnce(&Catalog, &dyn Fn() -> bool) -> R + Send + 'static,
    ) -> Result<R, AppError> {
        let _turn = searches().acquire().await.map_err(|_| AppError::Busy)?;
        let snapshot = self.read(Catalog::clone).await?;
        let clock = std::sync::Arc::clone(&self.clock);
        lowered(move || {
            let deadline = clock.now().as_micros() + limits::SEARCH_BUDGET_MICROS;
            let stop = move || clock.now().as_micros() >= deadline;
            f(&snapshot, &stop)
        })
        .await
    }

    /// `rejection`, with its counter-offer searched off the writer lock when it is a refusal:
    /// `offer` re-decides over a snapshot within the search it is given and returns its
    /// refusal. When the snapshot now admits the request (the catalog moved), the refusal made
    /// under the lock stands as it is (the most that fits, no earliest start).
    pub(crate) async fn with_offer(
        &self,
        rejection: berth_core::Rejection,
        horizon_end: impl FnOnce(&Catalog) -> Instant + Send + 'static,
        offer: impl FnOnce(&Catalog, &Search<'_>) -> Option<berth_core::Rejection> + Send + 'static,
    ) -> AppError {
        if !matches!(rejection, berth_core::Rejection::DoesNotFit(_)) {
            return AppError::Rejected(rejection);
        }
        let searched = self
            .search(move |catalog, stop| {
                let search = search_until(horizon_end(catalog), stop);
                offer(catalog, &search)
            })
            .await;
        match searched {
            Ok(Some(refusal @ berth_core::Rejection::DoesNotFit(_))) => AppError::Rejected(refusal),
            Ok(_) => AppError::Rejected(rejection),
            Err(error) => error,
        }
    }
}

/// The nice value of a search thread: it gets the CPU the runtime and the writers leave, so a
/// search, however long within its budget, does not slow the requests that are not searching.
const SEARCH_NICE: u8 = 10;

/// Runs `f` on a thread of its own at a lower scheduling priority (nice [`SEARCH_NICE`]; where
/// that cannot be set, at the normal one); a panic in it resumes in the caller.
async fn lowered<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> Result<R, AppError> {
    let (done, answer) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("berth-search".into())
        .spawn(move || {
            lower_priority();
            let _ = done.send(std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)));
        })
        .map_err(|_| AppError::Busy)?;
    match answer.await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        Err(_) => Err(AppError::Busy),
    }
}

/// Lowers the current thread's priority to nice [`SEARCH_NICE`] (Linux keeps a nice value per
/// thread); a failure only leaves it at the normal priority.
fn lower_priority() {
    use thread_priority::{ThreadPriority, ThreadPriorityValue, set_current_thread_priority};
    // The crate maps 0..=99 onto nice 19..=-20, rounding towards the lower nice.
    let value = 99_u32.saturating_sub((u32::from(SEARCH_NICE) + 20) * 99 / 39 + 1);
    if let Ok(value) = u8::try_from(value)
        .map_err(|_| ())
        .and_then(|v| ThreadPriorityValue::try_from(v).map_err(|_| ()))
        && let Err(error) = set_current_thread_priority(ThreadPriority::Crossplatform(value))
    {
        tracing::debug!(?error, "a search thread keeps the normal priority");
    }
}
