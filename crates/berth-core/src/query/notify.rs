//! Reads of subscriptions, their deliveries and the outbox: what a project sees (`None`: every
//! project's, for admins). A delivery belongs to the project of its subscription.

use crate::catalog::Catalog;
use crate::model::lease::LeaseRecord;
use crate::model::notify::{Delivery, Subscription};

/// Whether `project` (`None`: any) sees `subscription`.
pub fn sees(project: Option<&str>, subscription: &Subscription) -> bool {
    project.is_none_or(|p| p == subscription.project_id)
}

/// The subscriptions `project` sees, by id.
pub fn subscriptions<'a>(catalog: &'a Catalog, project: Option<&str>) -> Vec<&'a Subscription> {
    catalog
        .subscriptions()
        .filter(|s| sees(project, s))
        .collect()
}

/// The undelivered notifications (pending or dead) of the subscriptions `project` sees, by
/// notification id; those of a subscription gone are nobody's.
pub fn deliveries<'a>(catalog: &'a Catalog, project: Option<&str>) -> Vec<&'a Delivery> {
    catalog
        .deliveries()
        .filter(|d| {
            catalog
                .subscription(d.subscription)
                .is_some_and(|s| sees(project, s))
        })
        .collect()
}

/// Whether `project` (`None`: any) sees an outbox entry: an entry is its lease's project's, and
/// one that names no project is an admin's only.
pub fn sees_record(project: Option<&str>, record: &LeaseRecord) -> bool {
    project.is_none() || record.project_id().as_deref() == project
}
