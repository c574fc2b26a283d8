//! Subscriptions and the notification feed: `POST /promise/capacity/{kind}/subscribe` (a
//! capacity threshold), `POST /promise/reservation/subscribe` (reservation changes), list, show
//! and delete under `/promise/subscriptions`, the dead letters under `/promise/deliveries`, and
//! `GET /promise/notifications?after=&limit=&wait=` for consumers that cannot take callbacks.
//!
//! A subscription without `callbackUri` is feed-only: nothing is POSTed for it, and its
//! notifications are read from the feed, which holds every notification (reservation changes
//! and capacity thresholds crossed), each visible to its project's members and to admins.
//!
//! `POST /promise/utilization/subscribe` (berth) watches one lease of the caller's project:
//! its notifications (`changeType` `lease.utilization`, `notificationType` `UtilizationChange`)
//! tell when the lease's utilization has stayed below a percentage for a time while it runs, and
//! when it recovers; they are entries of the lease's lifecycle record, delivered to that
//! subscription alone.
//!
//! A capacity subscription may watch one provider's capacity (`providerId`: a provider cloud's
//! id, or `local` for berth's own); its notifications then name it.
//!
//! A `callbackUri` whose host is a literal address the destination policy refuses is refused
//! here (the policy comes as a request extension); host names are checked at delivery.

use super::reservations::kind_of;
use super::wire::{Input, documented, number, object, provider_of, text, time};
use crate::http::error::ApiError;
use crate::http::extract::Caller;
use crate::http::routes::Routes;
use crate::http::state::AppState;
use crate::notifier::destination::Destinations;
use crate::policy::Rule;
use axum::extract::{Path, Query, State};
use axum::http::{Method, StatusCode};
use axum::{Extension, Json};
use berth_api::promise::{
    CapacityNotification, CapacitySubscribed, Delivery as DeliveryBody, DeliveryList, Feed,
    FeedEntry, FeedNotification, ReservationNotification, ReservationRef, ReservationSubscribed,
    SubscribeCapacity, SubscribeReservations, SubscribeUtilization,
    Subscription as SubscriptionBody, SubscriptionEnvelope, SubscriptionList,
    SubscriptionThreshold, SubscriptionTopic, ThresholdCondition, UtilizationSubscribed,
};
use berth_app::Subscribe;
use berth_core::LeaseId;
use berth_core::model::lease::LeaseRecord;
use berth_core::model::name::ResourceClass;
use berth_core::model::notify::{
    CapacityInfo, Condition, Delivery, Subscription, Threshold, Topic, is_capacity_record,
    reservation_body,
};
use berth_core::model::time::Span;
use berth_core::query::notify::sees;
use serde_json::{Map, Value};
use std::sync::Arc;
use uuid::Uuid;

pub(super) fn register(routes: &mut Routes) {
    routes
        .add(
            Method::POST,
            "/promise/capacity/{kind}/subscribe",
            Rule::PROJECT_MEMBER,
            "Subscribe to capacity changes",
            capacity,
        )
        .accepts::<SubscribeCapacity>()
        .answers::<CapacitySubscribed>(201)
        .add(
            Method::POST,
            "/promise/reservation/subscribe",
            Rule::PROJECT_MEMBER,
            "Subscribe to reservation changes",
            reservation,
        )
        .accepts::<SubscribeReservations>()
        .answers::<ReservationSubscribed>(201)
        .add(
            Method::POST,
            "/promise/utilization/subscribe",
            Rule::PROJECT_MEMBER,
            "Subscribe to a lease's low utilization (berth)",
            utilization,
        )
        .accepts::<SubscribeUtilization>()
        .answers::<UtilizationSubscribed>(201)
        .add(
            Method::GET,
            "/promise/subscriptions",
            Rule::PROJECT_READER,
            "List subscriptions",
            list,
        )
        .answers::<SubscriptionList>(200)
        .add(
            Method::GET,
            "/promise/subscriptions/{subscription_id}",
            Rule::PROJECT_READER,
            "Show a subscription",
            show,
        )
        .answers::<SubscriptionEnvelope>(200)
        .add(
            Method::DELETE,
            "/promise/subscriptions/{subscription_id}",
            Rule::PROJECT_MEMBER,
            "Delete a subscription",
            delete,
        )
        .answers_empty(204)
        .add(
            Method::GET,
            "/promise/deliveries",
            Rule::PROJECT_READER,
            "List undelivered notifications (pending and dead)",
            deliveries,
        )
        .answers::<DeliveryList>(200)
        .add(
            Method::POST,
            "/promise/deliveries/{notification_id}/retry",
            Rule::SYSTEM_ADMIN,
            "Retry a dead notification",
            retry,
        )
        .answers_empty(202)
        .add(
            Method::GET,
            "/promise/notifications",
            Rule::PROJECT_READER,
            "Read the notification feed",
            feed,
        )
        .answers::<Feed>(200);
}

fn subscription_json(s: &Subscription) -> SubscriptionBody {
    let topic = match &s.topic {
        Topic::Reservations { ids } => SubscriptionTopic::Reservation {
            input_filter: ids
                .iter()
                .map(|id| ReservationRef {
                    reservation_id: id.uuid(),
                })
                .collect(),
        },
        Topic::Capacity {
            resource,
            type_id,
            zone,
            threshold,
            flavor,
            origin,
        } => SubscriptionTopic::Capacity {
            flavor_id: flavor.clone(),
            resource_type: resource.as_str().to_owned(),
            resource_type_id: type_id.clone(),
            zone_id: zone.clone(),
            threshold: SubscriptionThreshold {
                threshold_type: "absoluteValue".to_owned(),
                threshold: ThresholdCondition {
                    capacity_info: threshold.info.as_str().to_owned(),
                    condition: threshold.condition.as_str().to_owned(),
                    value: threshold.value,
                },
            },
            triggered: s.triggered,
            provider_id: origin.map(|o| o.to_string()),
        },
        Topic::Utilization {
            lease,
            below_percent,
            for_span,
            class,
            below_since,
        } => SubscriptionTopic::Utilization {
            reservation_id: lease.uuid(),
            below_percent: *below_percent,
            for_seconds: for_span.as_micros() / 1_000_000,
            resource_class: class.as_ref().map(|c| c.as_str().to_owned()),
            below_since: below_since.map(time),
            triggered: s.triggered,
        },
    };
    SubscriptionBody {
        subscription_id: s.id,
        callback_uri: s.callback.clone(),
        authentication: s.secret.is_some(),
        project_id: s.project_id.clone(),
        created: time(s.created_at),
        topic,
    }
}

/// `callbackUri`, when given (absent: a feed-only subscription): an absolute `http` or `https`
/// URL with a host, without user info, whose host, when it is a literal address, `destinations`
/// lets through (an `https` receiver's certificate is verified against the system's roots and
/// the configured callback CA file).
fn callback(
    body: &Map<String, Value>,
    destinations: &Destinations,
) -> Result<Option<String>, ApiError> {
    let Some(text) = text(body, "callbackUri")? else {
        return Ok(None);
    };
    let parsed = url::Url::parse(&text).map_err(|e| {
        ApiError::bad_request(format!("callbackUri {text} is not an absolute URL: {e}"))
    })?;
    match (parsed.scheme(), parsed.host_str()) {
        ("http" | "https", Some(_)) => {}
        _ => {
            return Err(ApiError::bad_request(format!(
                "callbackUri {text} must be an absolute http or https URL"
            )));
        }
    }
    destinations
        .check_url(&parsed)
        .map_err(|refused| ApiError::bad_request(format!("callbackUri: {refused}")))?;
    Ok(Some(text))
}

/// Makes a subscription of the caller's project to `topic`, with the callback and secret `body`
/// names.
async fn subscribe(
    state: &AppState,
    caller: &Caller,
    body: &Map<String, Value>,
    destinations: &Destinations,
    topic: Topic,
) -> Result<Subscription, ApiError> {
    let cmd = Subscribe {
        project_id: caller.0.project_id.clone(),
        topic,
        callback: callback(body, destinations)?,
        secret: secret(body)?,
        scope: caller.project_scope(),
    };
    Ok(state.berth.subscribe(cmd).await?)
}

fn secret(body: &Map<String, Value>) -> Result<Option<String>, ApiError> {
    match object(body, "authentication")? {
        Some(auth) => text(auth, "secret"),
        None => text(body, "secret"),
    }
}

fn threshold(body: &Map<String, Value>) -> Result<Threshold, ApiError> {
    let outer =
        object(body, "threshold")?.ok_or_else(|| ApiError::bad_request("threshold is missing"))?;
    let inner = object(outer, "threshold")?.unwrap_or(outer);
    let info = text(inner, "capacity_info")?
        .ok_or_else(|| ApiError::bad_request("threshold.capacity_info is missing"))?;
    let condition = text(inner, "condition")?
        .ok_or_else(|| ApiError::bad_request("threshold.condition is missing"))?;
    let value = number(inner, "value", i64::MAX as u64)?
        .ok_or_else(|| ApiError::bad_request("threshold.value is missing"))?;
    Ok(Threshold {
        info: CapacityInfo::parse(&info).ok_or_else(|| {
            ApiError::bad_request(format!(
                "Unknown capacity_info {info}: use available, reserved, allocated or total"
            ))
        })?,
        condition: Condition::parse(&condition).ok_or_else(|| {
            ApiError::bad_request(format!(
                "Unknown condition {condition}: use lt, le, gt, ge or eq"
            ))
        })?,
        value: value as i64,
    })
}

/// The members of a capacity subscription ([`SubscribeCapacity`]).
const CAPACITY_FIELDS: [&str; 10] = [
    "computeResourceTypeId",
    "networkResourceTypeId",
    "storageResourceTypeId",
    "flavorId",
    "zoneId",
    "providerId",
    "threshold",
    "callbackUri",
    "authentication",
    "secret",
];

/// The members of a reservation subscription ([`SubscribeReservations`]).
const RESERVATION_FIELDS: [&str; 4] = ["inputFilter", "callbackUri", "authentication", "secret"];

/// The members of a utilization subscription ([`SubscribeUtilization`]).
const UTILIZATION_FIELDS: [&str; 7] = [
    "reservationId",
    "belowPercent",
    "forSeconds",
    "resourceClass",
    "callbackUri",
    "authentication",
    "secret",
];

async fn capacity(
    State(state): State<AppState>,
    Extension(destinations): Extension<Arc<Destinations>>,
    caller: Caller,
    Path(kind): Path<String>,
    Input(body): Input,
) -> Result<(StatusCode, Json<CapacitySubscribed>), ApiError> {
    let resource = kind_of(&kind)?;
    let body = documented(body, &CAPACITY_FIELDS);
    let field = format!("{}ResourceTypeId", resource.as_str());
    let type_id =
        text(&body, &field)?.ok_or_else(|| ApiError::bad_request(format!("{field} is missing")))?;
    let flavor = text(&body, "flavorId")?;
    let threshold = threshold(&body)?;
    if flavor.is_some() {
        if threshold.info != CapacityInfo::Available {
            return Err(ApiError::bad_request(
                "a flavor threshold watches capacity_info available (instances that fit)",
            ));
        }
    } else if berth_core::model::capacity::measure_of(resource, &type_id).is_none() {
        return Err(ApiError::bad_request(format!(
            "Unknown {field} {type_id}: use numCpuCores, virtualMemSize, virtualDisk, storageSize or publicIps"
        )));
    }
    let topic = Topic::Capacity {
        resource,
        type_id,
        zone: text(&body, "zoneId")?,
        threshold,
        flavor,
        origin: provider_of(&body, &["providerId"])?,
    };
    let made = subscribe(&state, &caller, &body, &destinations, topic).await?;
    Ok((
        StatusCode::CREATED,
        Json(CapacitySubscribed {
            created: time(made.created_at),
            capacity_change_subscription_id: made.id,
            subscription: subscription_json(&made),
        }),
    ))
}

fn filter(body: &Map<String, Value>) -> Result<Vec<Uuid>, ApiError> {
    let items = match body.get("inputFilter") {
        None | Some(Value::Null) => return Err(ApiError::bad_request("inputFilter is missing")),
        Some(Value::String(all)) if all == "all" => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(_) => {
            return Err(ApiError::bad_request(
                "inputFilter must list {\"reservationId\": ...} objects, or be \"all\"",
            ));
        }
    };
    super::wire::reservation_ids("inputFilter", items)?
        .into_iter()
        .map(|id| {
            Uuid::parse_str(id)
                .map_err(|_| ApiError::bad_request(format!("inputFilter: {id} is not a uuid")))
        })
        .collect()
}

async fn reservation(
    State(state): State<AppState>,
    Extension(destinations): Extension<Arc<Destinations>>,
    caller: Caller,
    Input(body): Input,
) -> Result<(StatusCode, Json<ReservationSubscribed>), ApiError> {
    let body = documented(body, &RESERVATION_FIELDS);
    let topic = Topic::Reservations {
        ids: filter(&body)?.into_iter().map(LeaseId::new).collect(),
    };
    let made = subscribe(&state, &caller, &body, &destinations, topic).await?;
    Ok((
        StatusCode::CREATED,
        Json(ReservationSubscribed {
            created: time(made.created_at),
            reservation_change_subscription_id: made.id,
            subscription: subscription_json(&made),
        }),
    ))
}

/// What a utilization subscription watches: the lease, the percentage, the time and the class.
fn utilization_topic(body: &Map<String, Value>) -> Result<Topic, ApiError> {
    let lease = text(body, "reservationId")?
        .ok_or_else(|| ApiError::bad_request("reservationId is missing"))?;
    let lease = Uuid::parse_str(&lease)
        .map_err(|_| ApiError::bad_request(format!("reservationId {lease} is not a uuid")))?;
    let below_percent = number(body, "belowPercent", u64::from(u32::MAX))?
        .ok_or_else(|| ApiError::bad_request("belowPercent is missing"))?;
    let for_seconds = number(body, "forSeconds", u64::from(u32::MAX))?
        .ok_or_else(|| ApiError::bad_request("forSeconds is missing"))?;
    let class = text(body, "resourceClass")?
        .map(|name| {
            ResourceClass::parse(&name).ok_or_else(|| {
                ApiError::bad_request(format!("resourceClass {name} is not a resource class name"))
            })
        })
        .transpose()?;
    Ok(Topic::Utilization {
        lease: LeaseId::new(lease),
        below_percent: u32::try_from(below_percent).unwrap_or(u32::MAX),
        for_span: Span::from_secs(i64::try_from(for_seconds).unwrap_or(i64::MAX)),
        class,
        below_since: None,
    })
}

async fn utilization(
    State(state): State<AppState>,
    Extension(destinations): Extension<Arc<Destinations>>,
    caller: Caller,
    Input(body): Input,
) -> Result<(StatusCode, Json<UtilizationSubscribed>), ApiError> {
    let body = documented(body, &UTILIZATION_FIELDS);
    let topic = utilization_topic(&body)?;
    let made = subscribe(&state, &caller, &body, &destinations, topic).await?;
    Ok((
        StatusCode::CREATED,
        Json(UtilizationSubscribed {
            created: time(made.created_at),
            utilization_subscription_id: made.id,
            subscription: subscription_json(&made),
        }),
    ))
}

async fn list(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Json<SubscriptionList>, ApiError> {
    let all = state
        .berth
        .subscriptions(caller.project_scope(), |found| {
            found.into_iter().map(subscription_json).collect::<Vec<_>>()
        })
        .await?;
    Ok(Json(SubscriptionList { subscriptions: all }))
}

fn subscription_id(text: &str) -> Result<Uuid, ApiError> {
    Uuid::parse_str(text)
        .map_err(|_| ApiError::not_found(format!("Subscription {text} could not be found")))
}

async fn show(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<SubscriptionEnvelope>, ApiError> {
    let id = subscription_id(&id)?;
    let project = caller.project_scope();
    state
        .berth
        .read(move |c| {
            c.subscription(id)
                .filter(|s| sees(project.as_deref(), s))
                .map(subscription_json)
        })
        .await?
        .map(|subscription| Json(SubscriptionEnvelope { subscription }))
        .ok_or_else(|| ApiError::not_found(format!("Subscription {id} could not be found")))
}

async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let id = subscription_id(&id)?;
    state.berth.unsubscribe(id, caller.project_scope()).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// What a subscriber is told of a failed attempt: that it failed, never what answered (the
/// status, body, connection error or address of a receiver would tell them what runs where).
const DELIVERY_FAILED: &str = "delivery failed";

/// A delivery as `caller` sees it: an admin sees the last attempt's cause (also in the server
/// log), anyone else only that it failed.
fn delivery_json(d: &Delivery, admin: bool) -> DeliveryBody {
    let last_error = match admin {
        true => d.last_error.clone(),
        false => d.last_error.as_ref().map(|_| DELIVERY_FAILED.to_owned()),
    };
    DeliveryBody {
        notification_id: d.id.clone(),
        subscription_id: d.subscription,
        status: format!("{:?}", d.status).to_lowercase(),
        attempts: d.attempts,
        next_attempt: time(d.next_at),
        last_error,
        created: time(d.created_at),
    }
}

async fn deliveries(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Json<DeliveryList>, ApiError> {
    let admin = caller.0.is_admin();
    let all = state
        .berth
        .deliveries(caller.project_scope(), |found| {
            found
                .into_iter()
                .map(|d| delivery_json(d, admin))
                .collect::<Vec<_>>()
        })
        .await?;
    Ok(Json(DeliveryList { deliveries: all }))
}

async fn retry(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.berth.redeliver(id).await?;
    Ok(StatusCode::ACCEPTED)
}

/// The notification of an outbox entry, as a callback receives it: the body the core builds for
/// deliveries (`reservation_body`), read as its wire type, so the feed and the callbacks show
/// one body.
fn notification_json(
    id: &str,
    seq: u64,
    record: &LeaseRecord,
    remaining_micros: Option<i64>,
) -> ReservationNotification {
    let body = reservation_body(id, seq, record, remaining_micros);
    serde_json::from_value(body)
        .expect("invariant: the core's notification body is a ReservationNotification (tested)")
}

/// The notification of a feed entry: a capacity notification as its callback received it (the
/// entry's details, less the project they carry), or a reservation's change.
fn feed_notification(seq: u64, record: &LeaseRecord) -> FeedNotification {
    let capacity = is_capacity_record(record)
        .then(|| serde_json::from_str::<CapacityNotification>(&record.details).ok())
        .flatten();
    match capacity {
        Some(notification) => FeedNotification::Capacity(notification),
        None => {
            FeedNotification::Reservation(notification_json(&seq.to_string(), seq, record, None))
        }
    }
}

/// Query of the feed.
#[derive(Debug, serde::Deserialize)]
struct FeedQuery {
    after: Option<u64>,
    limit: Option<usize>,
    wait: Option<u64>,
}

/// Most entries one page of the feed holds.
const FEED_LIMIT_MAX: usize = 1_000;
/// Longest a feed request waits for an entry.
const FEED_WAIT_MAX_SECONDS: u64 = 30;
/// How long before the request timeout a feed request answers with what it has.
const FEED_TIMEOUT_MARGIN: std::time::Duration = std::time::Duration::from_secs(2);

async fn feed(
    State(state): State<AppState>,
    caller: Caller,
    Query(query): Query<FeedQuery>,
) -> Result<Json<Feed>, ApiError> {
    let limit = query.limit.unwrap_or(100).clamp(1, FEED_LIMIT_MAX);
    // The answer must leave before the request timeout turns it into a 503.
    let cutoff = state
        .limits
        .request_timeout
        .saturating_sub(FEED_TIMEOUT_MARGIN);
    let wait = std::time::Duration::from_secs(query.wait.unwrap_or(0).min(FEED_WAIT_MAX_SECONDS))
        .min(cutoff);
    let started = std::time::Instant::now();
    let project = caller.project_scope();
    let mut after = query.after.unwrap_or(0);
    loop {
        let page = state
            .berth
            .feed_page(after, limit, project.as_deref())
            .await?;
        let mine: Vec<FeedEntry> = page
            .entries
            .iter()
            .map(|(seq, r)| FeedEntry {
                cursor: *seq,
                notification: feed_notification(*seq, r),
            })
            .collect();
        if let Some(last) = page.last_read {
            after = last;
        }
        let exhausted = page.exhausted;
        let elapsed = started.elapsed();
        if !mine.is_empty() || (elapsed >= wait && exhausted) || elapsed >= cutoff {
            return Ok(Json(Feed {
                notifications: mine,
                next: after,
            }));
        }
        if exhausted {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::fields::{documented_fields, sorted};

    /// The core's notification bodies read as their wire type and write back byte for byte,
    /// with and without the seconds left, whatever the entry's details.
    #[test]
    fn notifications_are_their_wire_type_byte_for_byte() {
        let lease_id = Uuid::from_u128(7);
        let records = [
            ("lease.create", r#"{"status":"PENDING"}"#, None),
            (
                "lease.event.before_end_lease",
                r#"{"due":5,"status":"ACTIVE"}"#,
                Some(90_000_000),
            ),
            ("lease.degraded", r#"{"missing_resources":{}}"#, None),
            ("lease.delete", "not json", None),
        ];
        for (seq, (kind, details, remaining)) in (1u64..).zip(records) {
            let record = LeaseRecord {
                lease_id: LeaseId::new(lease_id),
                kind: kind.to_owned(),
                at: berth_core::Instant::from_micros(1_700_000_000_000_000),
                details: details.to_owned(),
            };
            let body = reservation_body(&format!("{seq}.x"), seq, &record, remaining);
            let typed = notification_json(&format!("{seq}.x"), seq, &record, remaining);
            let written = serde_json::to_string(&typed).expect("serializes");
            assert_eq!(written, body.to_string(), "{kind}");
        }
    }

    /// A feed entry is a reservation's change written exactly as before, or a capacity
    /// notification as its callback received it (without the project its entry carries).
    #[test]
    fn feed_entries_are_reservation_or_capacity_notifications() {
        let change = LeaseRecord {
            lease_id: LeaseId::new(Uuid::from_u128(7)),
            kind: "lease.create".to_owned(),
            at: berth_core::Instant::from_micros(1_700_000_000_000_000),
            details: r#"{"project_id":"p","status":"PENDING"}"#.to_owned(),
        };
        let entry = serde_json::to_string(&feed_notification(3, &change)).expect("serializes");
        let before =
            serde_json::to_string(&notification_json("3", 3, &change, None)).expect("serializes");
        assert_eq!(entry, before);
        let sent = r#"{"capacityChangeTime":1,"capacityInformation":{"allocated":0,"available":4,"reserved":12,"total":16},"crossing":"entered","flavorId":null,"notificationId":"s.c1","notificationType":"CapacityChange","resourceDescriptor":{"computeResourceTypeId":"numCpuCores"},"threshold":{"capacity_info":"available","condition":"lt","value":5},"zoneId":"az1"}"#;
        let crossed = LeaseRecord {
            kind: berth_core::model::notify::CAPACITY_RECORD_KIND.to_owned(),
            details: format!(r#"{},"project_id":"p"}}"#, &sent[..sent.len() - 1]),
            ..change
        };
        let entry = feed_notification(4, &crossed);
        assert!(matches!(entry, FeedNotification::Capacity(_)), "{entry:?}");
        assert_eq!(serde_json::to_string(&entry).expect("serializes"), sent);
    }

    /// The members the subscriptions read are exactly those their wire types document.
    #[test]
    fn subscription_fields_are_the_documented_ones() {
        assert_eq!(
            documented_fields::<SubscribeCapacity>(),
            sorted(&CAPACITY_FIELDS)
        );
        assert_eq!(
            documented_fields::<SubscribeReservations>(),
            sorted(&RESERVATION_FIELDS)
        );
        assert_eq!(
            documented_fields::<SubscribeUtilization>(),
            sorted(&UTILIZATION_FIELDS)
        );
    }
}
