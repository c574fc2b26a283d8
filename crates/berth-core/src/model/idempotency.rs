//! Idempotency records: what a create request carrying an `Idempotency-Key` made, so that a
//! retry with the same key gets the first result instead of a second object.
//!
//! A record is written by the same decision (and so in the same commit) as the object it
//! names, and a later decision with the same key is given it, as the store holds it under the
//! writer lock: two requests with one key can never both create. The catalog holds no record:
//! a day of keys would cost memory and start-up time in proportion to the writes of that day. The fingerprint of the request is computed
//! outside the core (the server hashes what the request asked); here it is an opaque string.
//! Replaying and recording keys are decisions ([`crate::decide::idempotency`]).

use crate::model::time::{Instant, Span};
use uuid::Uuid;

/// How long a key is remembered: 24 hours.
pub const IDEMPOTENCY_TTL: Span = Span::from_hours(24);

const _: () = assert!(!IDEMPOTENCY_TTL.is_zero());

/// Where a key applies: one project's requests to one route. A key is never shared across
/// projects or routes.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct IdempotencyKey {
    /// The project of the caller.
    pub project_id: String,
    /// The method and path of the request (`POST /reservation/v1/leases`).
    pub route: String,
    /// The client's key.
    pub key: String,
}

/// What the first request with a key made.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct IdempotencyRecord {
    /// The fingerprint of the first request.
    pub fingerprint: String,
    /// The object it created.
    pub object_id: Uuid,
    /// When (the key expires [`IDEMPOTENCY_TTL`] later).
    pub created_at: Instant,
}

impl IdempotencyRecord {
    /// Whether the record still binds its key at `now`.
    pub fn is_live(&self, now: Instant) -> bool {
        now < self.created_at + IDEMPOTENCY_TTL
    }
}

/// A request's key with the fingerprint of what it asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Idempotent {
    /// The key, scoped.
    pub key: IdempotencyKey,
    /// The fingerprint of the request.
    pub fingerprint: String,
}
