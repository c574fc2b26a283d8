//! Consumers: what each holds, the usage it adds to providers, and the reservations consumers
//! present.

use super::state::Catalog;
use crate::model::consumer::{Consumer, PREEMPTIBLE};
use crate::model::id::{ProviderId, ReservationId};
use crate::model::name::ResourceClass;
use uuid::Uuid;

impl Catalog {
    /// One consumer.
    pub fn consumer(&self, uuid: Uuid) -> Option<&Consumer> {
        self.consumers.get(&uuid)
    }

    /// Every consumer, in no particular order.
    pub fn consumers(&self) -> impl Iterator<Item = (Uuid, &Consumer)> {
        self.consumers
            .iter()
            .map(|(uuid, consumer)| (*uuid, consumer))
    }

    /// Every reservation some consumer presents.
    pub fn presented_reservations(&self) -> impl Iterator<Item = ReservationId> + '_ {
        self.reserved_consumers.keys().copied()
    }

    /// The consumers presenting a reservation.
    pub fn consumers_of_reservation(&self, reservation: ReservationId) -> Vec<Uuid> {
        self.reserved_consumers
            .get(&reservation)
            .map(|set| set.iter().copied().collect())
            .unwrap_or_default()
    }

    /// Units of `class` on `provider` that the consumers of `reservation` other than `except`
    /// hold.
    pub fn reserved_use(
        &self,
        reservation: ReservationId,
        provider: ProviderId,
        class: &ResourceClass,
        except: Uuid,
    ) -> u64 {
        self.reserved_consumers
            .get(&reservation)
            .into_iter()
            .flatten()
            .filter(|c| **c != except)
            .filter_map(|c| self.consumers.get(c))
            .map(|c| c.amount(provider, class))
            .sum()
    }

    pub(super) fn insert_consumer(&mut self, uuid: Uuid, consumer: Consumer) {
        let preemptible = is_preemptible(&consumer);
        for (provider, class, amount) in consumer.entries() {
            let class = self.intern(class);
            let found = self.provider_mut(provider);
            if consumer.reservation.is_some() {
                *found.reserved_usages.entry(class.clone()).or_insert(0) += amount;
            }
            if preemptible {
                *found.preemptible_usages.entry(class.clone()).or_insert(0) += amount;
            }
            *found.usages.entry(class).or_insert(0) += amount;
        }
        if let Some(reservation) = consumer.reservation {
            self.reserved_consumers
                .entry(reservation)
                .or_default()
                .insert(uuid);
        }
        let previous = self.consumers.insert(uuid, consumer);
        assert!(
            previous.is_none(),
            "invariant: a consumer is removed before it is replaced"
        );
    }

    pub(super) fn remove_consumer(&mut self, uuid: Uuid) {
        let Some(consumer) = self.consumers.remove(&uuid) else {
            return;
        };
        let reserved = consumer.reservation.is_some();
        let preemptible = is_preemptible(&consumer);
        for (provider, class, amount) in consumer.entries() {
            let found = self.provider_mut(provider);
            for (usages, applies) in [
                (&mut found.usages, true),
                (&mut found.reserved_usages, reserved),
                (&mut found.preemptible_usages, preemptible),
            ] {
                if !applies {
                    continue;
                }
                let used = usages
                    .get_mut(class)
                    .expect("invariant: a held amount is counted in usage");
                *used = used
                    .checked_sub(amount)
                    .expect("invariant: usage covers every held amount");
                if *used == 0 {
                    usages.remove(class);
                }
            }
        }
        if let Some(reservation) = consumer.reservation
            && let Some(set) = self.reserved_consumers.get_mut(&reservation)
        {
            set.remove(&uuid);
            if set.is_empty() {
                self.reserved_consumers.remove(&reservation);
            }
        }
    }
}

/// Whether a consumer is best-effort work a reservation may evict (preemptible, presenting no
/// reservation).
fn is_preemptible(consumer: &Consumer) -> bool {
    consumer.reservation.is_none() && consumer.consumer_type.as_deref() == Some(PREEMPTIBLE)
}
