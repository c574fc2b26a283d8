//! Idempotency records, by key and by age.

use super::state::{Catalog, IdempotencyIndex};
use crate::model::idempotency::{IdempotencyKey, IdempotencyRecord};
use crate::model::time::Instant;

impl IdempotencyIndex {
    pub(super) fn set(&mut self, key: &IdempotencyKey, record: Option<&IdempotencyRecord>) {
        if let Some(old) = self.records.remove(key) {
            self.by_age.remove(&(old.created_at, key.clone()));
        }
        if let Some(record) = record {
            self.by_age.insert((record.created_at, key.clone()));
            self.records.insert(key.clone(), record.clone());
        }
    }
}

impl Catalog {
    /// The record of an idempotency key, live or expired.
    pub fn idempotency_record(&self, key: &IdempotencyKey) -> Option<&IdempotencyRecord> {
        self.idempotency.records.get(key)
    }

    /// Every idempotency record, in no order.
    pub fn idempotency_records(
        &self,
    ) -> impl Iterator<Item = (&IdempotencyKey, &IdempotencyRecord)> {
        self.idempotency.records.iter()
    }

    /// Keys whose record expired by `now`, oldest first.
    pub fn idempotency_expired(&self, now: Instant) -> impl Iterator<Item = &IdempotencyKey> {
        self.idempotency
            .by_age
            .iter()
            .take_while(move |(at, key)| {
                self.idempotency
                    .records
                    .get(key)
                    .is_some_and(|r| r.created_at == *at && !r.is_live(now))
            })
            .map(|(_, key)| key)
    }
}
