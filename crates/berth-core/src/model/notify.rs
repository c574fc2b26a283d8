//! Subscriptions and the notifications delivered to them.
//!
//! Every state change of a lease is already an entry of the durable lifecycle record (the
//! outbox). Delivery expands the outbox in order: a decision takes the entries after the
//! catalog's outbox cursor, makes one [`Delivery`] per entry and matching reservation
//! subscription, evaluates the capacity subscriptions, and moves the cursor, all in one commit;
//! so every entry is expanded exactly once, in every replica, and a crash loses nothing. A
//! delivery then stays pending until its callback answers 2xx, is retried with exponential
//! back-off and jitter, and after [`crate::limits::DELIVERY_ATTEMPTS_MAX`] failed attempts is
//! kept, visibly, as dead. Its id (`notificationId`) never changes, so a retried notification
//! can be told from a new one.
//!
//! Capacity thresholds fire on crossing, not on every change: a subscription fires when its
//! condition starts to hold and again when it stops holding by more than a margin (5% of the
//! threshold, at least 1), so capacity hovering at the threshold makes no storm.
//!
//! A utilization subscription (berth) watches one lease: when its utilization (what consumers
//! presenting it hold, over what it holds, in percent) has stayed below a given percentage for a
//! given time while it runs, it fires once; when the lease is used again at or above the
//! percentage it fires once more (recovered) and is armed for the next dip. Each notification is an
//! entry of the lease's lifecycle record ([`UTILIZATION_RECORD_KIND`]) that belongs to that
//! subscription alone.

use crate::model::capacity::Figures;
use crate::model::cloud::Origin;
use crate::model::id::LeaseId;
use crate::model::lease::LeaseRecord;
use crate::model::name::ResourceClass;
use crate::model::promise::PromiseKind;
use crate::model::time::{Instant, Span};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The first retry delay; each further attempt doubles it, up to [`RETRY_DELAY_MAX`].
pub const RETRY_DELAY_FIRST: Span = Span::from_micros(500_000);
/// The longest retry delay: 5 minutes.
pub const RETRY_DELAY_MAX: Span = Span::from_minutes(5);

/// Which capacity figure a threshold watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CapacityInfo {
    /// `available`.
    Available,
    /// `reserved`.
    Reserved,
    /// `allocated`.
    Allocated,
    /// `total`.
    Total,
}

impl CapacityInfo {
    /// Parses the wire name.
    pub fn parse(text: &str) -> Option<CapacityInfo> {
        match text {
            "available" => Some(CapacityInfo::Available),
            "reserved" => Some(CapacityInfo::Reserved),
            "allocated" => Some(CapacityInfo::Allocated),
            "total" => Some(CapacityInfo::Total),
            _ => None,
        }
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            CapacityInfo::Available => "available",
            CapacityInfo::Reserved => "reserved",
            CapacityInfo::Allocated => "allocated",
            CapacityInfo::Total => "total",
        }
    }

    fn of(self, figures: &Figures) -> i64 {
        match self {
            CapacityInfo::Available => figures.available,
            CapacityInfo::Reserved => figures.reserved,
            CapacityInfo::Allocated => figures.allocated,
            CapacityInfo::Total => figures.total,
        }
    }
}

/// How a figure is compared with the threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Condition {
    /// `lt`.
    Lt,
    /// `le`.
    Le,
    /// `gt`.
    Gt,
    /// `ge`.
    Ge,
    /// `eq`.
    Eq,
}

impl Condition {
    /// Parses the wire name.
    pub fn parse(text: &str) -> Option<Condition> {
        match text {
            "lt" => Some(Condition::Lt),
            "le" => Some(Condition::Le),
            "gt" => Some(Condition::Gt),
            "ge" => Some(Condition::Ge),
            "eq" => Some(Condition::Eq),
            _ => None,
        }
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Condition::Lt => "lt",
            Condition::Le => "le",
            Condition::Gt => "gt",
            Condition::Ge => "ge",
            Condition::Eq => "eq",
        }
    }
}

/// A capacity threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Threshold {
    /// The figure watched.
    pub info: CapacityInfo,
    /// The comparison.
    pub condition: Condition,
    /// The value compared with.
    pub value: i64,
}

impl Threshold {
    /// Whether the condition holds for `figures`.
    pub fn holds(&self, figures: &Figures) -> bool {
        let v = self.info.of(figures);
        match self.condition {
            Condition::Lt => v < self.value,
            Condition::Le => v <= self.value,
            Condition::Gt => v > self.value,
            Condition::Ge => v >= self.value,
            Condition::Eq => v == self.value,
        }
    }

    /// Whether the condition is clear of holding by the hysteresis margin.
    pub fn clear(&self, figures: &Figures) -> bool {
        let v = self.info.of(figures);
        let margin = (self.value.abs() / 20).max(1);
        match self.condition {
            Condition::Lt | Condition::Le => v >= self.value + margin,
            Condition::Gt | Condition::Ge => v <= self.value - margin,
            Condition::Eq => (v - self.value).abs() >= margin,
        }
    }
}

/// What a subscription is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Topic {
    /// Changes of reservations (Promise reservations and Blazar leases alike).
    Reservations {
        /// The reservations (lease ids); empty means every one of the subscriber's project.
        ids: Vec<LeaseId>,
    },
    /// A capacity threshold.
    Capacity {
        /// The resource type (`compute`, `network`, `storage`).
        resource: PromiseKind,
        /// The resource type id (`numCpuCores`, `publicIps`, ...).
        type_id: String,
        /// The zone, or every zone.
        zone: Option<String>,
        /// The threshold.
        threshold: Threshold,
        /// A flavor: the threshold then watches how many instances of it could be reserved
        /// now (`available` only).
        #[serde(default)]
        flavor: Option<String>,
        /// Whose capacity: berth's own or one provider cloud's (`None`: every origin).
        /// Subscriptions stored before it was read have none.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        origin: Option<Origin>,
    },
    /// A lease's utilization staying low (berth).
    Utilization {
        /// The lease watched.
        lease: LeaseId,
        /// Fires when utilization stays below this percentage (1 to 100).
        below_percent: u32,
        /// ... for this long.
        for_span: Span,
        /// Only this class (`None`: the best-used class the lease holds).
        class: Option<ResourceClass>,
        /// Since when utilization has been seen below, while it is.
        below_since: Option<Instant>,
    },
}

impl Topic {
    /// When a utilization subscription's dip, not yet told, falls due (`None` for any other).
    pub fn utilization_due(&self, triggered: Option<bool>) -> Option<Instant> {
        match self {
            Topic::Utilization {
                for_span,
                below_since: Some(since),
                ..
            } if triggered != Some(true) => Some(*since + *for_span),
            _ => None,
        }
    }
}

/// The longest a utilization subscription's dip may have to last: 30 days.
pub const UTILIZATION_FOR_MAX: Span = Span::from_days(30);

/// The kind of the lifecycle entry a utilization notification is recorded as: it names the lease,
/// and its details carry the subscription's id, so it goes to that subscription alone.
pub const UTILIZATION_RECORD_KIND: &str = "lease.utilization";

/// A subscription.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subscription {
    /// Its id.
    pub id: Uuid,
    /// Owning project.
    pub project_id: String,
    /// What it is about.
    pub topic: Topic,
    /// Where notifications are POSTed (`callbackUri`); `None`: a feed-only subscription,
    /// whose notifications are read from the feed and never delivered by HTTP. Stored
    /// subscriptions made before it was optional name one.
    #[serde(default)]
    pub callback: Option<String>,
    /// The secret notifications are signed with, if any.
    pub secret: Option<String>,
    /// Capacity subscriptions: whether the condition held at the last evaluation.
    pub triggered: Option<bool>,
    /// Capacity subscriptions: notifications made so far (numbers their ids).
    pub fired: u64,
    /// Creation time.
    pub created_at: Instant,
}

/// Where a delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DeliveryStatus {
    /// Waiting for its next attempt.
    Pending,
    /// Given up after [`crate::limits::DELIVERY_ATTEMPTS_MAX`] failed attempts (the dead
    /// letter).
    Dead,
}

/// One notification to deliver to one subscription.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delivery {
    /// `notificationId`: stable across retries.
    pub id: String,
    /// The subscription.
    pub subscription: Uuid,
    /// The JSON body.
    pub body: String,
    /// Failed attempts so far.
    pub attempts: u32,
    /// When the next attempt is due.
    pub next_at: Instant,
    /// Where it stands.
    pub status: DeliveryStatus,
    /// Why the last attempt failed.
    pub last_error: Option<String>,
    /// Creation time.
    pub created_at: Instant,
}

/// The notification type of an outbox entry.
pub fn notification_type(kind: &str) -> &'static str {
    match kind {
        "lease.event.before_end_lease" => "BeforeEndWarning",
        "lease.event.end_lease" | "lease.delete" => "Termination",
        "consumer.preemption_notice" => "PreemptionNotice",
        "consumer.evicted" | "consumer.terminated" => "AllocationChange",
        "lease.degraded" | "lease.event.failed" => "Failure",
        UTILIZATION_RECORD_KIND => "UtilizationChange",
        _ => "ReservationChange",
    }
}

/// The body of the notification of an outbox entry (seed 7.2.2.6, with berth's additions).
pub fn reservation_body(
    id: &str,
    seq: u64,
    record: &LeaseRecord,
    remaining_micros: Option<i64>,
) -> serde_json::Value {
    let details: serde_json::Value =
        serde_json::from_str(&record.details).unwrap_or(serde_json::Value::Null);
    let mut body = serde_json::json!({
        "notificationId": id,
        "notificationType": notification_type(&record.kind),
        "changeId": seq,
        "reservationId": record.lease_id,
        "vimId": "berth",
        "changeType": record.kind,
        "timeStamp": record.at.as_micros(),
        "changedReservationData": details,
    });
    if let Some(left) = remaining_micros {
        body["remainingSeconds"] = serde_json::json!(left / 1_000_000);
    }
    body
}

/// The kind of the outbox entry a capacity notification is recorded as: its `lease_id` names
/// the subscription, its details are the notification with the subscription's `project_id`.
pub const CAPACITY_RECORD_KIND: &str = "capacity.threshold";

/// Whether an outbox entry is a capacity notification ([`CAPACITY_RECORD_KIND`]) rather than
/// a change of a reservation.
pub fn is_capacity_record(record: &LeaseRecord) -> bool {
    record.kind == CAPACITY_RECORD_KIND
}

/// The subscription a utilization notification belongs to (`None`: the entry is not one).
pub fn utilization_subscription(record: &LeaseRecord) -> Option<Uuid> {
    if record.kind != UTILIZATION_RECORD_KIND {
        return None;
    }
    serde_json::from_str::<serde_json::Value>(&record.details)
        .ok()?
        .get("subscription_id")?
        .as_str()?
        .parse()
        .ok()
}

/// Whether a subscription gets a delivery of an outbox entry: a reservation subscription gets the
/// changes of its project's reservations it watches, a utilization subscription its own
/// notifications. Capacity notifications belong to their own subscription, which has had them
/// already, and utilization notifications to theirs alone.
pub fn wants(subscription: &Subscription, record: &LeaseRecord, project: Option<&str>) -> bool {
    if is_capacity_record(record) {
        return false;
    }
    match &subscription.topic {
        Topic::Reservations { ids } => {
            record.kind != UTILIZATION_RECORD_KIND
                && project == Some(subscription.project_id.as_str())
                && (ids.is_empty() || ids.contains(&record.lease_id))
        }
        Topic::Utilization { lease, .. } => {
            record.lease_id == *lease && utilization_subscription(record) == Some(subscription.id)
        }
        Topic::Capacity { .. } => false,
    }
}

/// The delay before attempt `attempts + 1`, with `jitter` in `[0, 1)` spreading it by up to a
/// half.
pub fn retry_delay(attempts: u32, jitter: f64) -> Span {
    let base = RETRY_DELAY_FIRST
        .saturating_mul(1_i64 << attempts.saturating_sub(1).min(20))
        .min(RETRY_DELAY_MAX);
    let spread = (base.as_micros() as f64 * 0.5 * jitter.clamp(0.0, 1.0)) as i64;
    base.saturating_add(Span::from_micros(spread))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures(available: i64) -> Figures {
        Figures {
            total: 100,
            reserved: 100 - available,
            allocated: 0,
            available,
        }
    }

    #[test]
    fn a_threshold_holds_and_clears_with_a_margin() {
        let t = Threshold {
            info: CapacityInfo::Available,
            condition: Condition::Lt,
            value: 40,
        };
        assert!(t.holds(&figures(39)));
        assert!(!t.holds(&figures(40)));
        assert!(
            !t.clear(&figures(40)),
            "at the threshold is not clear of it"
        );
        assert!(t.clear(&figures(42)));
    }

    /// Subscriptions are stored as JSON documents: those stored when every one had a callback
    /// keep loading with it, and a feed-only one has none.
    #[test]
    fn stored_subscriptions_load_with_or_without_a_callback() {
        let stored = r#"{"id":"00000000-0000-0000-0000-000000000001","project_id":"p",
            "topic":{"Reservations":{"ids":[]}},"callback":"http://127.0.0.1:9/x",
            "secret":null,"triggered":null,"fired":0,"created_at":0}"#;
        let old: Subscription = serde_json::from_str(stored).expect("an old document loads");
        assert_eq!(old.callback.as_deref(), Some("http://127.0.0.1:9/x"));
        let feed_only = stored.replace(r#""callback":"http://127.0.0.1:9/x","#, "");
        let new: Subscription = serde_json::from_str(&feed_only).expect("loads");
        assert_eq!(new.callback, None);
        let record = LeaseRecord {
            lease_id: LeaseId::from_u128(1),
            kind: CAPACITY_RECORD_KIND.to_owned(),
            at: Instant::from_micros(0),
            details: r#"{"project_id":"p"}"#.to_owned(),
        };
        assert!(
            !wants(&new, &record, Some("p")),
            "a reservation subscription never gets a capacity notification"
        );
    }

    #[test]
    fn retries_back_off_exponentially_with_bounded_jitter() {
        assert_eq!(retry_delay(1, 0.0), RETRY_DELAY_FIRST);
        assert_eq!(retry_delay(2, 0.0), RETRY_DELAY_FIRST.saturating_mul(2));
        assert_eq!(retry_delay(30, 0.0), RETRY_DELAY_MAX);
        let spread = retry_delay(3, 0.999);
        assert!(
            spread > RETRY_DELAY_FIRST.saturating_mul(4)
                && spread < RETRY_DELAY_FIRST.saturating_mul(6)
        );
    }
}
