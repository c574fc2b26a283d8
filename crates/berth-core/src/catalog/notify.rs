//! Subscriptions, deliveries and the outbox cursor.

use super::state::Catalog;
use crate::model::notify::{Delivery, Subscription};
use uuid::Uuid;

impl Catalog {
    /// Every subscription, by id.
    pub fn subscriptions(&self) -> impl Iterator<Item = &Subscription> {
        self.subscriptions.values()
    }

    /// One subscription.
    pub fn subscription(&self, id: Uuid) -> Option<&Subscription> {
        self.subscriptions.get(&id)
    }

    /// Every delivery pending or dead, by notification id.
    pub fn deliveries(&self) -> impl Iterator<Item = &Delivery> {
        self.deliveries.values()
    }

    /// One delivery.
    pub fn delivery(&self, id: &str) -> Option<&Delivery> {
        self.deliveries.get(id)
    }

    /// The outbox sequence number expanded into deliveries up to.
    pub fn outbox_cursor(&self) -> u64 {
        self.outbox_cursor
    }
}
