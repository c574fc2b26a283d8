//! A bounded worker pool: `concurrency` tasks take job indices from a shared counter until the
//! count is used up or the deadline passes. Nothing runs past the deadline: a request still in
//! flight then is dropped and the run is marked as cut short.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use tokio::task::JoinSet;

/// What a pool run produced.
pub(crate) struct Outcome<T> {
    /// One result per finished job, in no particular order.
    pub(crate) results: Vec<T>,
    /// The deadline stopped the run before every job finished.
    pub(crate) cut_short: bool,
}

/// Runs `job(0..total)` with at most `concurrency` jobs in flight, stopping at `deadline`.
pub(crate) async fn run<F, Fut, T>(
    total: usize,
    concurrency: usize,
    deadline: Instant,
    job: F,
) -> anyhow::Result<Outcome<T>>
where
    F: Fn(usize) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let next = Arc::new(AtomicUsize::new(0));
    let mut workers = JoinSet::new();
    for _ in 0..concurrency.clamp(1, total.max(1)) {
        let next = Arc::clone(&next);
        let job = job.clone();
        workers.spawn(async move {
            let mut results = Vec::new();
            let mut cut_short = false;
            loop {
                if Instant::now() >= deadline {
                    cut_short = true;
                    break;
                }
                let index = next.fetch_add(1, Ordering::Relaxed);
                if index >= total {
                    break;
                }
                match tokio::time::timeout_at(deadline.into(), job(index)).await {
                    Ok(result) => results.push(result),
                    Err(_) => {
                        cut_short = true;
                        break;
                    }
                }
            }
            (results, cut_short)
        });
    }
    let mut outcome = Outcome {
        results: Vec::with_capacity(total),
        cut_short: false,
    };
    while let Some(joined) = workers.join_next().await {
        let (results, cut_short) = joined?;
        outcome.results.extend(results);
        outcome.cut_short |= cut_short;
    }
    Ok(outcome)
}
