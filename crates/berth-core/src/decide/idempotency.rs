//! Idempotency decisions: whether a request's key replays an earlier result, and the change
//! that records a key. See [`crate::model::idempotency`].

use crate::change::Change;
use crate::limits::IDEMPOTENCY_KEY_LEN_MAX;
use crate::model::idempotency::{IdempotencyRecord, Idempotent};
use crate::model::time::Instant;
use crate::rejection::Rejection;
use std::sync::Arc;
use uuid::Uuid;

/// The object an earlier request with this key created, given the key's `record` as the store
/// holds it: `Ok(Some(id))` for the same request, `Ok(None)` for a key not seen (or expired),
/// and [`Rejection::IdempotencyKeyReused`] for a key seen with a different request.
pub fn replay(
    record: Option<&IdempotencyRecord>,
    request: &Idempotent,
    now: Instant,
) -> Result<Option<Uuid>, Rejection> {
    let Some(record) = record.filter(|r| r.is_live(now)) else {
        return Ok(None);
    };
    match record.fingerprint == request.fingerprint {
        true => Ok(Some(record.object_id)),
        false => Err(Rejection::IdempotencyKeyReused(request.key.key.clone())),
    }
}

/// The change that records `request` as having created `object_id` at `now` (replacing an
/// expired record of the key). Expired records of other keys are pruned by the store.
pub fn record(request: &Idempotent, object_id: Uuid, now: Instant) -> Change {
    assert!(!request.key.key.is_empty());
    assert!(request.key.key.len() <= IDEMPOTENCY_KEY_LEN_MAX);
    Change::IdempotencySet {
        key: Arc::new(request.key.clone()),
        record: Some(Arc::new(IdempotencyRecord {
            fingerprint: request.fingerprint.clone(),
            object_id,
            created_at: now,
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::idempotency::{IDEMPOTENCY_TTL, IdempotencyKey};

    fn request(project: &str, key: &str, fingerprint: &str) -> Idempotent {
        Idempotent {
            key: IdempotencyKey {
                project_id: project.to_owned(),
                route: "POST /reservation/v1/leases".to_owned(),
                key: key.to_owned(),
            },
            fingerprint: fingerprint.to_owned(),
        }
    }

    const T0: Instant = Instant::from_micros(1_700_000_000_000_000);

    fn at(micros: i64) -> Instant {
        Instant::from_micros(T0.as_micros() + micros)
    }

    /// The record a change sets.
    fn recorded(change: &Change) -> IdempotencyRecord {
        match change {
            Change::IdempotencySet {
                record: Some(record),
                ..
            } => record.as_ref().clone(),
            other => panic!("not a recorded key: {other:?}"),
        }
    }

    #[test]
    fn a_key_replays_its_object_for_the_same_request_only() {
        let first = request("p1", "k", "f1");
        assert_eq!(replay(None, &first, T0), Ok(None));
        let object = Uuid::from_u128(7);
        let record = recorded(&record(&first, object, T0));
        assert_eq!(record.created_at, T0);
        assert_eq!(replay(Some(&record), &first, at(1)), Ok(Some(object)));
        assert_eq!(
            replay(Some(&record), &request("p1", "k", "f2"), at(1)),
            Err(Rejection::IdempotencyKeyReused("k".into()))
        );
        // Expired: the key is free again, whatever the request.
        let later = at(IDEMPOTENCY_TTL.as_micros());
        assert_eq!(replay(Some(&record), &first, later), Ok(None));
        assert_eq!(
            replay(Some(&record), &request("p1", "k", "f2"), later),
            Ok(None)
        );
        assert_eq!(
            replay(Some(&record), &first, at(IDEMPOTENCY_TTL.as_micros() - 1)),
            Ok(Some(object))
        );
    }
}
