//! Defects planted on purpose, for the simulator's negative controls (feature `planted-defects`,
//! which no build of berth enables): each makes one check of the write path wrong, and
//! `berth-sim` must find it. Process-wide: one defect at a time, set before a run.

use std::sync::atomic::{AtomicU8, Ordering};

/// A defect that can be planted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Defect {
    /// Allocations are not checked against capacity.
    SkipCapacityCheck = 1,
    /// A consumer's generation is not checked.
    SkipGenerationCheck = 2,
    /// A batch answers its callers before its commit.
    AnswerBeforeCommit = 3,
    /// A catalog loaded from the store forgets which lease events fired, so they fire again
    /// after a restart.
    RefireAfterRecovery = 4,
    /// A floating-IP reservation is given addresses without looking at the leases that hold
    /// them.
    SkipFloatingIpCheck = 5,
    /// A node claim that ends (released or expired) leaves its instance's allocation on the node.
    ClaimKeepsNode = 6,
}

static PLANTED: AtomicU8 = AtomicU8::new(0);

/// Plants `defect` (or none) for the whole process.
pub fn plant(defect: Option<Defect>) {
    PLANTED.store(defect.map_or(0, |d| d as u8), Ordering::SeqCst);
}

/// Whether `defect` is planted.
pub fn planted(defect: Defect) -> bool {
    PLANTED.load(Ordering::SeqCst) == defect as u8
}
