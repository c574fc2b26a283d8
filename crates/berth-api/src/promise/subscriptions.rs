//! Subscriptions and the requests that make them, undelivered notifications and the
//! notification feed.

use crate::promise::{Count, ReservationFilterItem, Text};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

/// One reservation a reservation subscription watches.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReservationRef {
    /// The reservation.
    pub reservation_id: Uuid,
}

/// The condition of a capacity subscription.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ThresholdCondition {
    /// `available`, `reserved`, `allocated` or `total`.
    pub capacity_info: String,
    /// `lt`, `le`, `gt`, `ge` or `eq`.
    pub condition: String,
    /// The value compared with.
    pub value: i64,
}

/// A capacity subscription's threshold.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionThreshold {
    /// `absoluteValue`.
    pub threshold_type: String,
    /// The condition.
    pub threshold: ThresholdCondition,
}

/// What a subscription is about.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum SubscriptionTopic {
    /// Changes of reservations.
    Reservation {
        /// The reservations watched (empty: every one the project may see).
        #[serde(rename = "inputFilter")]
        input_filter: Vec<ReservationRef>,
    },
    /// A capacity threshold.
    #[serde(rename_all = "camelCase")]
    Capacity {
        /// A flavor: the threshold then watches how many instances of it fit.
        flavor_id: Option<String>,
        /// `compute`, `network` or `storage`.
        resource_type: String,
        /// `numCpuCores`, `publicIps`, ...
        resource_type_id: String,
        /// The zone, or every zone.
        zone_id: Option<String>,
        /// The threshold.
        threshold: SubscriptionThreshold,
        /// Whether the condition held at the last evaluation.
        triggered: Option<bool>,
        /// The provider whose capacity is watched: a provider cloud's id, or `local` for
        /// berth's own (absent: every provider's).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        provider_id: Option<String>,
    },
    /// A lease's utilization staying low (berth).
    #[serde(rename_all = "camelCase")]
    Utilization {
        /// The lease (reservation) watched.
        reservation_id: Uuid,
        /// Fires when utilization stays below this percentage.
        below_percent: u32,
        /// ... for this many seconds.
        for_seconds: i64,
        /// Only this resource class (absent: the class the lease uses best).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resource_class: Option<String>,
        /// Since when utilization has been below (RFC 3339, UTC), while it is.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        below_since: Option<String>,
        /// Whether the current dip has been told.
        triggered: Option<bool>,
    },
}

/// A subscription.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Subscription {
    /// Its id.
    pub subscription_id: Uuid,
    /// Where notifications are POSTed; absent for a feed-only subscription, whose
    /// notifications are read from `GET /promise/notifications`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callback_uri: Option<String>,
    /// Whether notifications are signed.
    pub authentication: bool,
    /// Owning project.
    pub project_id: String,
    /// When it was made (RFC 3339, UTC).
    pub created: String,
    /// What it is about.
    #[serde(flatten)]
    pub topic: SubscriptionTopic,
}

/// `POST /promise/capacity/{kind}/subscribe`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapacitySubscribed {
    /// When it was made (RFC 3339, UTC).
    pub created: String,
    /// Its id.
    pub capacity_change_subscription_id: Uuid,
    /// The subscription.
    pub subscription: Subscription,
}

/// `POST /promise/reservation/subscribe`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReservationSubscribed {
    /// When it was made (RFC 3339, UTC).
    pub created: String,
    /// Its id.
    pub reservation_change_subscription_id: Uuid,
    /// The subscription.
    pub subscription: Subscription,
}

/// `GET /promise/subscriptions/{id}`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct SubscriptionEnvelope {
    /// The subscription.
    pub subscription: Subscription,
}

/// `GET /promise/subscriptions`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct SubscriptionList {
    /// The subscriptions the caller may see.
    pub subscriptions: Vec<Subscription>,
}

/// A notification not yet delivered (pending or dead).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Delivery {
    /// The notification's id, stable across retries.
    pub notification_id: String,
    /// Its subscription.
    pub subscription_id: Uuid,
    /// `pending` or `dead`.
    pub status: String,
    /// Failed attempts so far.
    pub attempts: u32,
    /// When the next attempt is due (RFC 3339, UTC).
    pub next_attempt: String,
    /// Why the last attempt failed (to an admin), or only that it failed.
    pub last_error: Option<String>,
    /// When it was made (RFC 3339, UTC).
    pub created: String,
}

/// `GET /promise/deliveries`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct DeliveryList {
    /// The deliveries the caller may see.
    pub deliveries: Vec<Delivery>,
}

/// The notification of a change of a reservation (an entry of the lifecycle record), as a
/// reservation subscription's callback receives it and the feed shows it.
///
/// Members are declared in alphabetical order, the order of the body berth signs and sends.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReservationNotification {
    /// The entry's position in the lifecycle record.
    pub change_id: u64,
    /// What happened: `lease.create`, `lease.event.start_lease`, `lease.degraded`, ...
    pub change_type: String,
    /// The entry's details. Open: its members depend on `changeType` (a status, a due time, a
    /// reason, what a failure took away, a planned capacity change, ...), as the lifecycle
    /// record keeps them; the lease itself is read with the reservation endpoints.
    pub changed_reservation_data: Value,
    /// Its id, stable across retries (in the feed, the entry's position).
    pub notification_id: String,
    /// `ReservationChange`, `BeforeEndWarning`, `Termination`, `PreemptionNotice`,
    /// `AllocationChange` or `Failure`.
    pub notification_type: String,
    /// Before the end: the seconds left (callbacks of `before_end_lease` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remaining_seconds: Option<i64>,
    /// The reservation (lease) that changed.
    pub reservation_id: Uuid,
    /// When it happened, in microseconds since the epoch.
    pub time_stamp: i64,
    /// `berth`.
    pub vim_id: String,
}

/// The resource type id a capacity notification is about: the one member of its resource type.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceDescriptor {
    /// For a `compute` subscription.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_resource_type_id: Option<String>,
    /// For a `network` subscription.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_resource_type_id: Option<String>,
    /// For a `storage` subscription.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_resource_type_id: Option<String>,
}

/// The four figures of a capacity notification, now (members in alphabetical order).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, JsonSchema)]
pub struct CapacityFigures {
    /// Used by consumers.
    pub allocated: i64,
    /// Neither reserved nor allocated.
    pub available: i64,
    /// Held by reservations and not used by their consumers.
    pub reserved: i64,
    /// Usable capacity.
    pub total: i64,
}

/// The notification of a capacity threshold crossed, as a capacity subscription's callback
/// receives it.
///
/// Members are declared in alphabetical order, the order of the body berth signs and sends.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapacityNotification {
    /// When the crossing was seen, in microseconds since the epoch.
    pub capacity_change_time: i64,
    /// The figures then (for a flavor: instances that fit, as `total` and `available`).
    pub capacity_information: CapacityFigures,
    /// `entered` (the condition now holds) or `left` (it no longer does, by a margin).
    pub crossing: String,
    /// The flavor watched, if any.
    pub flavor_id: Option<String>,
    /// Its id, stable across retries.
    pub notification_id: String,
    /// `CapacityChange`.
    pub notification_type: String,
    /// The provider watched: a provider cloud's id, or `local` for berth's own capacity
    /// (absent: every provider's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_id: Option<String>,
    /// The resource type id watched.
    pub resource_descriptor: ResourceDescriptor,
    /// The threshold.
    pub threshold: ThresholdCondition,
    /// The zone watched, or every zone.
    pub zone_id: Option<String>,
}

/// A notification of the feed: a change of a reservation, or a capacity threshold crossed,
/// each as its subscription's callback receives it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(untagged)]
pub enum FeedNotification {
    /// A change of a reservation (`changeId`, `reservationId`, ...).
    Reservation(ReservationNotification),
    /// A capacity threshold crossed (`notificationType` `CapacityChange`).
    Capacity(CapacityNotification),
}

/// An entry of the notification feed.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct FeedEntry {
    /// Its position in the feed.
    pub cursor: u64,
    /// The notification, as its subscription's callback receives it.
    pub notification: FeedNotification,
}

/// `GET /promise/notifications`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Feed {
    /// The entries after the cursor asked for.
    pub notifications: Vec<FeedEntry>,
    /// The cursor to ask after next.
    pub next: u64,
}

/// How notifications are signed.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Authentication {
    /// The secret notifications are signed with (HMAC-SHA256).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<Text>,
}

/// The condition of a capacity threshold.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ThresholdRequest {
    /// The condition, nested as answers show it; when given, the members beside it are
    /// ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<Box<ThresholdRequest>>,
    /// `available`, `reserved`, `allocated` or `total` (required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_info: Option<Text>,
    /// `lt`, `le`, `gt`, `ge` or `eq` (required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition: Option<Text>,
    /// The value compared with, not negative (required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Count>,
}

/// The input of `POST /promise/capacity/{kind}/subscribe` (`kind`: `compute`, `network` or
/// `storage`). Members other than these are ignored.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubscribeCapacity {
    /// On `compute` (required there): `numCpuCores`, `virtualMemSize` or `virtualDisk`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_resource_type_id: Option<Text>,
    /// On `network` (required there): `publicIps`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_resource_type_id: Option<Text>,
    /// On `storage` (required there): `storageSize`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_resource_type_id: Option<Text>,
    /// A flavor (id or name): the threshold then watches how many of its instances fit
    /// (`capacity_info` `available` only), and the resource type id is not checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flavor_id: Option<Text>,
    /// The zone (absent: every zone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone_id: Option<Text>,
    /// Only this provider's capacity (berth): a provider cloud's id (`add-provider`'s
    /// `provider-id`, or `ResourceProvider:<id>`), or `local` for berth's own (its hosts and
    /// floating IPs). Absent: every provider's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_id: Option<Text>,
    /// The threshold (required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<ThresholdRequest>,
    /// Where notifications are POSTed: an absolute `http` or `https` URL without user info, to
    /// a destination the server lets callbacks reach. Absent: a feed-only subscription, whose
    /// notifications are read from `GET /promise/notifications` and never POSTed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callback_uri: Option<Text>,
    /// How notifications are signed; when given, `secret` beside it is ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication: Option<Authentication>,
    /// The secret notifications are signed with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<Text>,
}

/// The input of `POST /promise/utilization/subscribe` (berth): tell when a lease's utilization
/// (what consumers presenting it hold, over what it holds, in percent) stays below `belowPercent`
/// for `forSeconds` while it runs, and when it recovers. Members other than these are ignored.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubscribeUtilization {
    /// The lease (a Blazar lease id or Promise reservation id) of the caller's project
    /// (required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation_id: Option<Text>,
    /// A whole percentage from 1 to 100 (required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub below_percent: Option<Count>,
    /// How long utilization must stay below, in seconds, from 1 to 30 days (required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub for_seconds: Option<Count>,
    /// Only this resource class (absent: the class the lease uses best, so a lease is low only
    /// when every class it holds is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_class: Option<Text>,
    /// Where notifications are POSTed: an absolute `http` or `https` URL without user info, to
    /// a destination the server lets callbacks reach. Absent: a feed-only subscription, whose
    /// notifications are read from `GET /promise/notifications` and never POSTed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callback_uri: Option<Text>,
    /// How notifications are signed; when given, `secret` beside it is ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication: Option<Authentication>,
    /// The secret notifications are signed with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<Text>,
}

/// `POST /promise/utilization/subscribe` (berth).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UtilizationSubscribed {
    /// When it was made (RFC 3339, UTC).
    pub created: String,
    /// Its id.
    pub utilization_subscription_id: Uuid,
    /// The subscription.
    pub subscription: Subscription,
}

/// Every reservation the project may see.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, JsonSchema)]
pub enum EveryReservation {
    /// `all`.
    #[serde(rename = "all")]
    All,
}

/// `inputFilter`: the reservations a subscription watches.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(untagged)]
pub enum InputFilter {
    /// `"all"`: every one the project may see.
    All(EveryReservation),
    /// These (each `reservationId` a uuid).
    Some(Vec<ReservationFilterItem>),
}

/// The input of `POST /promise/reservation/subscribe`. Members other than these are ignored.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubscribeReservations {
    /// The reservations watched (required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_filter: Option<InputFilter>,
    /// Where notifications are POSTed: an absolute `http` or `https` URL without user info, to
    /// a destination the server lets callbacks reach. Absent: a feed-only subscription, whose
    /// notifications are read from `GET /promise/notifications` and never POSTed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callback_uri: Option<Text>,
    /// How notifications are signed; when given, `secret` beside it is ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication: Option<Authentication>,
    /// The secret notifications are signed with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<Text>,
}
