//! Decisions about subscriptions and notifications: subscribe and unsubscribe, expand the
//! outbox into deliveries (and evaluate capacity thresholds) exactly once, and record the
//! outcome of a delivery attempt. See [`crate::model::notify`].
//!
//! Only a subscription with a callback gets deliveries; every notification is in the feed
//! anyway: reservation notifications are the outbox entries themselves, and a capacity
//! notification is recorded as an outbox entry of its own ([`CAPACITY_RECORD_KIND`]).

use crate::catalog::Catalog;
use crate::change::{Change, record};
use crate::decide::admission::instances_that_fit_in;
use crate::limits::{DELIVERY_ATTEMPTS_MAX, SUBSCRIPTIONS_PER_PROJECT_MAX};
use crate::model::capacity::{Figures, measure_of};
use crate::model::id::LeaseId;
use crate::model::lease::{EventKind, LeaseRecord, LeaseStatus};
use crate::model::ledger::Window;
use crate::model::name::ResourceClass;
use crate::model::notify::{
    CAPACITY_RECORD_KIND, Delivery, DeliveryStatus, Subscription, Threshold, Topic,
    UTILIZATION_FOR_MAX, UTILIZATION_RECORD_KIND, reservation_body, retry_delay, wants,
};
use crate::model::time::{Instant, Span};
use crate::query::capacity::{self, Scope};
use crate::query::usage::utilization_at;
use crate::rejection::Rejection;
use uuid::Uuid;

/// Records a new subscription. What it names must exist: the zone, provider cloud and flavor of
/// a capacity threshold, and the leases of a reservation filter, which must be of `scope`'s project
/// (`None`: an admin, any).
pub fn subscribe(
    catalog: &Catalog,
    subscription: Subscription,
    scope: Option<&str>,
) -> Result<Vec<Change>, Rejection> {
    let held = catalog
        .subscriptions()
        .filter(|s| s.project_id == subscription.project_id)
        .count();
    if held >= SUBSCRIPTIONS_PER_PROJECT_MAX {
        return Err(Rejection::TooMany("subscriptions"));
    }
    match &subscription.topic {
        Topic::Capacity {
            zone,
            flavor,
            origin,
            ..
        } => {
            let scope = Scope {
                zone: zone.as_deref(),
                origin: *origin,
            };
            capacity::check_scope(catalog, scope)?;
            if let Some(flavor) = flavor
                && catalog.flavor(flavor).is_none()
            {
                return Err(Rejection::FlavorNotFound(flavor.clone()));
            }
        }
        Topic::Reservations { ids } => {
            if let Some(id) = ids.iter().find(|id| !visible(catalog, **id, scope)) {
                return Err(Rejection::LeaseNotFound(*id));
            }
        }
        Topic::Utilization {
            lease,
            below_percent,
            for_span,
            class,
            ..
        } => {
            if !visible(catalog, *lease, scope) {
                return Err(Rejection::LeaseNotFound(*lease));
            }
            if !(1..=100).contains(below_percent) {
                return Err(Rejection::BadSubscription(format!(
                    "belowPercent {below_percent} must be from 1 to 100"
                )));
            }
            if *for_span < Span::from_secs(1) || *for_span > UTILIZATION_FOR_MAX {
                return Err(Rejection::BadSubscription(format!(
                    "forSeconds {} must be from 1 to {}",
                    for_span.as_micros() / 1_000_000,
                    UTILIZATION_FOR_MAX.as_micros() / 1_000_000
                )));
            }
            if let Some(class) = class
                && !catalog.has_resource_class(class)
            {
                return Err(Rejection::UnknownResourceClass(class.as_str().to_owned()));
            }
        }
    }
    Ok(vec![Change::SubscriptionSet {
        id: subscription.id,
        subscription: Some(subscription),
    }])
}

/// Whether lease `id` exists and is of `scope`'s project (`None`: an admin, any).
fn visible(catalog: &Catalog, id: LeaseId, scope: Option<&str>) -> bool {
    catalog
        .lease(id)
        .is_some_and(|l| scope.is_none_or(|p| p == &*l.project_id))
}

/// Removes a subscription of `project` (`None`: any) and its pending deliveries.
pub fn unsubscribe(
    catalog: &Catalog,
    id: Uuid,
    project: Option<&str>,
) -> Result<Vec<Change>, Rejection> {
    catalog
        .subscription(id)
        .filter(|s| project.is_none_or(|p| p == s.project_id))
        .ok_or(Rejection::SubscriptionNotFound(id))?;
    let mut changes: Vec<Change> = catalog
        .deliveries()
        .filter(|d| d.subscription == id)
        .map(|d| Change::DeliverySet {
            id: d.id.clone(),
            delivery: None,
        })
        .collect();
    changes.push(Change::SubscriptionSet {
        id,
        subscription: None,
    });
    Ok(changes)
}

fn pending(
    subscription: &Subscription,
    id: String,
    body: &serde_json::Value,
    now: Instant,
) -> Change {
    Change::DeliverySet {
        id: id.clone(),
        delivery: Some(Delivery {
            id,
            subscription: subscription.id,
            body: body.to_string(),
            attempts: 0,
            next_at: now,
            status: DeliveryStatus::Pending,
            last_error: None,
            created_at: now,
        }),
    }
}

/// The time left before the end, for a before-end warning.
fn remaining(catalog: &Catalog, record: &LeaseRecord) -> Option<i64> {
    let due = EventKind::BeforeEndLease.as_str();
    (record.kind == format!("lease.event.{due}"))
        .then(|| catalog.lease(record.lease_id))
        .flatten()
        .map(|lease| lease.end.as_micros() - record.at.as_micros())
}

/// Expands the outbox entries after the catalog's cursor into deliveries, evaluates capacity
/// thresholds, and moves the cursor. `seen` is the cursor the caller read `records` after: if
/// another writer moved it since, nothing is decided (it did the work).
pub fn expand(
    catalog: &Catalog,
    seen: u64,
    records: &[(u64, LeaseRecord)],
    now: Instant,
) -> Vec<Change> {
    if catalog.outbox_cursor() != seen {
        return Vec::new();
    }
    let mut changes = Vec::new();
    for (seq, record) in records {
        let project = record.project_id().or_else(|| {
            catalog
                .lease(record.lease_id)
                .map(|l| l.project_id.to_string())
        });
        for subscription in catalog
            .subscriptions()
            .filter(|s| s.callback.is_some() && wants(s, record, project.as_deref()))
        {
            let id = format!("{seq}.{}", subscription.id);
            let body = reservation_body(&id, *seq, record, remaining(catalog, record));
            changes.push(pending(subscription, id, &body, now));
        }
    }
    changes.extend(thresholds(catalog, now));
    changes.extend(utilizations(catalog, now));
    if let Some((last, _)) = records.last() {
        changes.push(Change::OutboxCursor(*last));
    }
    changes
}

/// The figures a capacity subscription watches, now, over its zone's providers of its origin
/// (`None` when a zone or cloud it names is gone).
fn figures_now(catalog: &Catalog, subscription: &Subscription, now: Instant) -> Option<Figures> {
    let Topic::Capacity {
        resource,
        type_id,
        zone,
        flavor,
        origin,
        ..
    } = &subscription.topic
    else {
        return None;
    };
    let scope = Scope {
        zone: zone.as_deref(),
        origin: *origin,
    };
    let window = Window::instant(now);
    if let Some(flavor) = flavor {
        let flavor = catalog.flavor(flavor)?;
        let size =
            crate::model::lease::instance_amounts(flavor.vcpus, flavor.ram_mb, flavor.disk_gb, 1);
        let fit = instances_that_fit_in(catalog, scope, window, &size, &[]).ok()?;
        let fit = i64::try_from(fit).unwrap_or(i64::MAX);
        return Some(Figures {
            total: fit,
            reserved: 0,
            allocated: 0,
            available: fit,
        });
    }
    let measure = measure_of(*resource, type_id)?;
    capacity::series_in(catalog, scope, window, &measure, &[])
        .ok()
        .map(|s| s.summary())
}

fn threshold_body(
    id: &str,
    subscription: &Subscription,
    threshold: &Threshold,
    figures: &Figures,
    entered: bool,
    now: Instant,
) -> serde_json::Value {
    let Topic::Capacity {
        resource,
        type_id,
        zone,
        flavor,
        origin,
        ..
    } = &subscription.topic
    else {
        return serde_json::Value::Null;
    };
    let mut body = serde_json::json!({
        "flavorId": flavor,
        "notificationId": id,
        "notificationType": "CapacityChange",
        "zoneId": zone,
        "capacityChangeTime": now.as_micros(),
        "resourceDescriptor": {format!("{}ResourceTypeId", resource.as_str()): type_id},
        "capacityInformation": {
            "available": figures.available, "reserved": figures.reserved,
            "total": figures.total, "allocated": figures.allocated,
        },
        "threshold": {
            "capacity_info": threshold.info.as_str(),
            "condition": threshold.condition.as_str(),
            "value": threshold.value,
        },
        "crossing": if entered { "entered" } else { "left" },
    });
    // Only a subscription naming a provider says which: the bodies of the others are as they
    // were before provider clouds.
    if let (Some(origin), serde_json::Value::Object(members)) = (origin, &mut body) {
        members.insert(
            "providerId".to_owned(),
            serde_json::Value::String(origin.to_string()),
        );
    }
    body
}

/// The outbox entry of a capacity notification: it names the subscription, and its details are
/// the notification with the subscription's project (whose members alone see it in the feed).
fn capacity_record(subscription: &Subscription, body: &serde_json::Value, now: Instant) -> Change {
    let mut details = body.clone();
    if let serde_json::Value::Object(members) = &mut details {
        members.insert(
            "project_id".to_owned(),
            serde_json::Value::String(subscription.project_id.clone()),
        );
    }
    Change::LeaseRecorded(LeaseRecord {
        lease_id: LeaseId::new(subscription.id),
        kind: CAPACITY_RECORD_KIND.to_owned(),
        at: now,
        details: details.to_string(),
    })
}

/// Capacity subscriptions whose threshold was crossed: a notification each (an outbox entry,
/// and a delivery when the subscription has a callback), and their new state.
fn thresholds(catalog: &Catalog, now: Instant) -> Vec<Change> {
    let mut changes = Vec::new();
    for subscription in catalog.subscriptions() {
        let Topic::Capacity { threshold, .. } = &subscription.topic else {
            continue;
        };
        let Some(figures) = figures_now(catalog, subscription, now) else {
            continue;
        };
        let holds = threshold.holds(&figures);
        let next = match subscription.triggered {
            Some(true) if threshold.clear(&figures) => Some(false),
            None | Some(false) if holds => Some(true),
            None => Some(false),
            _ => continue,
        };
        let mut updated = subscription.clone();
        updated.triggered = next;
        // The first evaluation only learns where capacity stands, unless the condition holds.
        if next == Some(true) || subscription.triggered.is_some() {
            updated.fired += 1;
            let id = format!("{}.c{}", subscription.id, updated.fired);
            let body = threshold_body(&id, subscription, threshold, &figures, holds, now);
            changes.push(capacity_record(subscription, &body, now));
            if subscription.callback.is_some() {
                changes.push(pending(subscription, id, &body, now));
            }
        }
        changes.push(Change::SubscriptionSet {
            id: subscription.id,
            subscription: Some(updated),
        });
    }
    changes
}

/// Whether a utilization subscription's dip falls due after `after` and by `by`: a notifier pass
/// then has something to decide even though nothing was recorded.
pub fn utilization_due_between(catalog: &Catalog, after: Instant, by: Instant) -> bool {
    catalog.subscriptions().any(|s| {
        s.topic
            .utilization_due(s.triggered)
            .is_some_and(|due| after < due && due <= by)
    })
}

/// Utilization subscriptions whose lease's use moved: a dip first seen starts the clock; a dip
/// that has lasted its time is told once (an entry of the lease's lifecycle record, delivered
/// to that subscription); use at or above the percentage again stops the clock, and is told
/// when the dip was. Only a running lease is judged; one that is not stops the clock, untold.
fn utilizations(catalog: &Catalog, now: Instant) -> Vec<Change> {
    let mut changes = Vec::new();
    for subscription in catalog.subscriptions() {
        let Topic::Utilization {
            lease,
            below_percent,
            for_span,
            class,
            below_since,
        } = &subscription.topic
        else {
            continue;
        };
        let lease = catalog
            .lease(*lease)
            .filter(|l| l.status == LeaseStatus::Active && l.start <= now && now < l.end);
        let percent = lease.and_then(|l| utilization_at(catalog, l, class.as_ref(), now));
        let below = percent.is_some_and(|p| p < *below_percent);
        let told = subscription.triggered == Some(true);
        let (since, triggered, crossing) = match (below, *below_since) {
            (true, None) => (Some(now), subscription.triggered, None),
            (true, Some(since)) if !told && since + *for_span <= now => {
                (Some(since), Some(true), Some("below"))
            }
            (false, Some(_)) if told => (None, Some(false), Some("recovered")),
            (false, Some(_)) => (None, subscription.triggered, None),
            _ => continue,
        };
        let mut updated = subscription.clone();
        updated.triggered = triggered;
        if let Topic::Utilization { below_since, .. } = &mut updated.topic {
            *below_since = since;
        }
        if let (Some(crossing), Some(lease)) = (crossing, lease) {
            updated.fired += 1;
            let details = serde_json::json!({
                "subscription_id": subscription.id,
                "crossing": crossing,
                "utilization_percent": percent,
                "below_percent": below_percent,
                "for_seconds": for_span.as_micros() / 1_000_000,
                "below_since": below_since.map(Instant::as_micros),
                "resource_class": class.as_ref().map(ResourceClass::as_str),
            });
            changes.push(record(lease, UTILIZATION_RECORD_KIND, now, details));
        }
        changes.push(Change::SubscriptionSet {
            id: subscription.id,
            subscription: Some(updated),
        });
    }
    changes
}

/// Records the outcome of an attempt at delivery `id`: delivered (`Ok`) removes it; a failure
/// schedules the next attempt `retry_delay` later (`jitter` in `[0, 1)`), or makes it
/// dead after [`DELIVERY_ATTEMPTS_MAX`] attempts. An unknown or dead delivery decides nothing.
pub fn attempted(
    catalog: &Catalog,
    id: &str,
    outcome: Result<(), String>,
    now: Instant,
    jitter: f64,
) -> Vec<Change> {
    let Some(current) = catalog
        .delivery(id)
        .filter(|d| d.status == DeliveryStatus::Pending)
    else {
        return Vec::new();
    };
    let delivery = match outcome {
        Ok(()) => None,
        Err(error) => {
            let mut next = current.clone();
            next.attempts += 1;
            next.last_error = Some(error);
            match next.attempts >= DELIVERY_ATTEMPTS_MAX {
                true => next.status = DeliveryStatus::Dead,
                false => {
                    next.next_at = now + retry_delay(next.attempts, jitter);
                }
            }
            Some(next)
        }
    };
    vec![Change::DeliverySet {
        id: id.to_owned(),
        delivery,
    }]
}

/// Puts a dead delivery back in the queue, due now (an admin's retry).
pub fn redeliver(catalog: &Catalog, id: &str, now: Instant) -> Result<Vec<Change>, Rejection> {
    let mut delivery = catalog
        .delivery(id)
        .cloned()
        .ok_or_else(|| Rejection::DeliveryNotFound(id.to_owned()))?;
    delivery.status = DeliveryStatus::Pending;
    delivery.attempts = 0;
    delivery.next_at = now;
    Ok(vec![Change::DeliverySet {
        id: id.to_owned(),
        delivery: Some(delivery),
    }])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Instant {
        Instant::from_micros(seconds * 1_000_000)
    }

    #[test]
    fn a_delivery_is_retried_then_dead_and_an_admin_can_retry_it() {
        let mut catalog = Catalog::new();
        let subscription = Subscription {
            id: Uuid::from_u128(1),
            project_id: "p".into(),
            topic: Topic::Reservations { ids: Vec::new() },
            callback: Some("http://127.0.0.1:9/x".into()),
            secret: None,
            triggered: None,
            fired: 0,
            created_at: at(0),
        };
        catalog.apply(&subscribe(&catalog, subscription.clone(), None).expect("subscribed"));
        let record = LeaseRecord {
            lease_id: crate::model::id::LeaseId::from_u128(2),
            kind: "lease.create".into(),
            at: at(0),
            details: r#"{"project_id": "p"}"#.into(),
        };
        let changes = expand(&catalog, 0, &[(7, record.clone())], at(1));
        catalog.apply(&changes);
        assert_eq!(catalog.outbox_cursor(), 7);
        assert!(
            expand(&catalog, 0, &[(7, record)], at(1)).is_empty(),
            "expanded once"
        );
        let id = format!("7.{}", subscription.id);
        let mut now = at(1);
        for attempt in 1..=DELIVERY_ATTEMPTS_MAX {
            catalog.apply(&attempted(&catalog, &id, Err("500".into()), now, 0.5));
            let delivery = catalog.delivery(&id).expect("kept");
            assert_eq!(delivery.attempts, attempt);
            match attempt < DELIVERY_ATTEMPTS_MAX {
                true => {
                    assert_eq!(delivery.status, DeliveryStatus::Pending);
                    assert!(delivery.next_at > now, "backs off");
                    now = delivery.next_at;
                }
                false => assert_eq!(delivery.status, DeliveryStatus::Dead),
            }
        }
        assert!(
            attempted(&catalog, &id, Ok(()), now, 0.0).is_empty(),
            "dead stays dead"
        );
        catalog.apply(&redeliver(&catalog, &id, now).expect("retried"));
        catalog.apply(&attempted(&catalog, &id, Ok(()), now, 0.0));
        assert!(catalog.delivery(&id).is_none(), "delivered");
    }
}
