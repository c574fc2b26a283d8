//! The storage port of berth: the narrow interface the application layer writes through, an
//! in-memory reference store, (feature `sql`) the code both SQL adapters share, and (feature
//! `testkit`) the conformance suite every adapter runs.
//!
//! This crate holds no SQL text. Adapters (`berth-store-sqlite`, `berth-store-postgres`) supply
//! their dialect's statements and locking to `sql`, which writes each change and reads the
//! catalog back; the orchestration ("lock, decide, persist, commit, apply") lives in `berth-app`.
#![forbid(unsafe_code)]

pub mod codec;
mod mem;
mod port;
#[cfg(feature = "sql")]
pub mod sql;
#[cfg(feature = "testkit")]
pub mod testkit;

pub use mem::MemStore;
pub use port::{
    CHANGE_LOG_PAGE, CHANGE_LOG_RETAINED, CommitFeed, Committed, Store, StoreError, Tail, WriteTx,
    WriterBid, WriterTerm,
};
