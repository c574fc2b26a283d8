//! Histories checked under faults: concurrent clients write to and read from one to three
//! replicas of the real `berth serve` over a private PostgreSQL cluster while a nemesis kills,
//! pauses, cuts off and restarts them (and restarts PostgreSQL); every operation is recorded as
//! invoked, then ok, refused or unknown, and the history is checked for linearizability against
//! a model of the ledger, key by key, and the final state against the capacity invariant.

pub mod checker;
pub mod history;
pub mod model;
pub mod nemesis;
pub mod postgres;
pub mod proxy;
pub mod replica;
pub mod run;
pub mod workload;
