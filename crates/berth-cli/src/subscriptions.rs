//! `berth subscription ...` (Promise subscriptions: `/promise/reservation/subscribe`,
//! `/promise/capacity/{kind}/subscribe`, berth's `/promise/utilization/subscribe`,
//! `/promise/subscriptions`) and `berth notification
//! list` (the resumable feed at `/promise/notifications`).

use crate::capacity::Kind;
use crate::client::{query, segment};
use crate::connection::{Connection, Ctx};
use crate::error::CliError;
use crate::output::{Table, emit, emit_text, get, items};
use clap::{Args, Subcommand};
use serde_json::{Value, json};

const SUBSCRIPTIONS: &str = "/promise/subscriptions";

/// `berth subscription`.
#[derive(Debug, Args)]
pub struct SubscriptionCommand {
    /// Connection and output.
    #[command(flatten)]
    pub connection: Connection,
    /// What to do.
    #[command(subcommand)]
    pub verb: SubscriptionVerb,
}

/// What `berth subscription` does.
#[derive(Debug, Subcommand)]
pub enum SubscriptionVerb {
    /// List subscriptions.
    List,
    /// Show a subscription.
    Show {
        /// Subscription id.
        id: String,
    },
    /// Subscribe to reservation changes, a capacity threshold, or a lease's low utilization.
    Create(Box<CreateSubscription>),
    /// Delete a subscription.
    Delete {
        /// Subscription id.
        id: String,
    },
}

/// `berth subscription create`.
#[derive(Debug, Args)]
pub struct CreateSubscription {
    /// Where notifications are POSTed: an absolute http or https URL. Without it the
    /// subscription is feed-only: its notifications are read with `berth notification list`.
    #[arg(long)]
    pub callback: Option<String>,
    /// Secret signing each notification (`X-Berth-Signature`).
    #[arg(long)]
    pub secret: Option<String>,
    /// Reservation changes: `all` of your project's, or lease ids, comma-separated.
    #[arg(long, value_name = "all|IDS", conflicts_with_all = ["capacity", "utilization"])]
    pub reservations: Option<String>,
    /// A lease's utilization (the lease's id or name): tell when it stays below `--below` percent
    /// for `--for` while it runs, and when it recovers.
    #[arg(long, value_name = "LEASE", conflicts_with = "capacity", requires_all = ["below", "for_"])]
    pub utilization: Option<String>,
    /// With `--utilization`: the percentage (1 to 100).
    #[arg(long, value_name = "PERCENT", requires = "utilization")]
    pub below: Option<u32>,
    /// With `--utilization`: how long it must stay below, as 30m, 2h or 1d.
    #[arg(long = "for", value_name = "DURATION", requires = "utilization")]
    pub for_: Option<String>,
    /// With `--utilization`: only this resource class [default: the class the lease uses best].
    #[arg(long, value_name = "CLASS", requires = "utilization")]
    pub class: Option<String>,
    /// A capacity threshold on this kind of capacity.
    #[arg(long, value_enum, requires = "threshold")]
    pub capacity: Option<Kind>,
    /// With `--capacity`: the measure (`numCpuCores`, `virtualMemSize`, `virtualDisk`,
    /// `publicIps`, `storageSize`) [default: the kind's first].
    #[arg(long, requires = "capacity")]
    pub measure: Option<String>,
    /// With `--capacity`: when to notify, as `available < 100` (`total`, `reserved`,
    /// `allocated` or `available`; `<`, `<=`, `>`, `>=`, `==`).
    #[arg(long, requires = "capacity")]
    pub threshold: Option<String>,
    /// With `--capacity`: only this availability zone.
    #[arg(long, requires = "capacity")]
    pub zone: Option<String>,
    /// With `--capacity`: watch how many instances of this flavor fit (threshold on `available`).
    #[arg(long, requires = "capacity")]
    pub flavor: Option<String>,
}

/// Runs `berth subscription`.
pub(crate) async fn run(ctx: &Ctx, verb: SubscriptionVerb) -> Result<(), CliError> {
    match verb {
        SubscriptionVerb::List => {
            let answer = ctx.client.get(SUBSCRIPTIONS).await?;
            emit(ctx.format, &answer["subscriptions"], |subs| {
                Table::of(
                    &["ID", "TYPE", "WATCHES", "CALLBACK", "CREATED"],
                    items(subs),
                    |s| {
                        vec![
                            get(s, "subscriptionId"),
                            get(s, "type"),
                            watches(s),
                            get(s, "callbackUri"),
                            crate::time::show(&get(s, "created")),
                        ]
                    },
                )
            })
        }
        SubscriptionVerb::Show { id } => {
            let answer = ctx.client.get(&path(&id)).await?;
            show(ctx, &answer["subscription"])
        }
        SubscriptionVerb::Create(create) => {
            let (target, mut body) = request(&create)?;
            if let Some(lease) = &create.utilization {
                body["reservationId"] = json!(crate::leases::resolve(ctx, lease).await?);
            }
            let answer = ctx.client.post(&target, &body).await?;
            show(ctx, &answer["subscription"])
        }
        SubscriptionVerb::Delete { id } => {
            ctx.client.delete(&path(&id)).await?;
            eprintln!("Deleted subscription {id}.");
            Ok(())
        }
    }
}

fn path(id: &str) -> String {
    format!("{SUBSCRIPTIONS}/{}", segment(id))
}

/// What a subscription watches, in a few words.
fn watches(s: &Value) -> String {
    match s["type"].as_str() {
        Some("capacity") => {
            let t = &s["threshold"]["threshold"];
            let what = s["flavorId"]
                .as_str()
                .map_or_else(|| get(s, "resourceTypeId"), |f| format!("flavor {f}"));
            let zone = s["zoneId"]
                .as_str()
                .map(|z| format!(" in {z}"))
                .unwrap_or_default();
            format!(
                "{} {what}{zone} {} {}",
                get(t, "capacity_info"),
                get(t, "condition"),
                get(t, "value")
            )
        }
        Some("utilization") => {
            let class = s["resourceClass"]
                .as_str()
                .map(|c| format!(" {c}"))
                .unwrap_or_default();
            let seconds = s["forSeconds"].as_u64().unwrap_or(0);
            format!(
                "lease {}{class} below {}% for {}",
                get(s, "reservationId"),
                get(s, "belowPercent"),
                crate::time::span(seconds)
            )
        }
        _ => {
            let ids: Vec<String> = items(&s["inputFilter"])
                .iter()
                .map(|f| get(f, "reservationId"))
                .collect();
            match ids.is_empty() {
                true => "all reservations".to_owned(),
                false => ids.join(","),
            }
        }
    }
}

fn show(ctx: &Ctx, subscription: &Value) -> Result<(), CliError> {
    emit(ctx.format, subscription, |s| {
        Table::fields(
            s,
            &[
                "subscriptionId",
                "type",
                "callbackUri",
                "projectId",
                "created",
            ],
        )
    })
}

/// The path and body of a subscribe request.
fn request(create: &CreateSubscription) -> Result<(String, Value), CliError> {
    let mut body = json!({});
    if let Some(callback) = &create.callback {
        body["callbackUri"] = json!(callback);
    }
    if let Some(secret) = &create.secret {
        body["authentication"] = json!({ "secret": secret });
    }
    if create.utilization.is_some() {
        return utilization_request(create, body);
    }
    let Some(kind) = create.capacity else {
        let filter = match create.reservations.as_deref().map(str::trim) {
            None | Some("all") => json!("all"),
            Some(ids) => Value::Array(
                crate::args::list(ids)
                    .into_iter()
                    .map(|id| json!({ "reservationId": id }))
                    .collect(),
            ),
        };
        body["inputFilter"] = filter;
        return Ok(("/promise/reservation/subscribe".to_owned(), body));
    };
    let threshold = create
        .threshold
        .as_deref()
        .ok_or_else(|| CliError::Usage("--capacity needs --threshold".to_owned()))?;
    let (info, condition, value) = threshold_parts(threshold)?;
    let kind_name = match kind {
        Kind::Compute => "compute",
        Kind::Network => "network",
        Kind::Storage => "storage",
    };
    let measure = create.measure.clone().unwrap_or_else(|| {
        match kind {
            Kind::Compute if create.flavor.is_some() => "vcInstances",
            Kind::Compute => "numCpuCores",
            Kind::Network => "publicIps",
            Kind::Storage => "storageSize",
        }
        .to_owned()
    });
    body[format!("{kind_name}ResourceTypeId")] = Value::String(measure);
    body["threshold"] = json!({
        "thresholdType": "absoluteValue",
        "threshold": {"capacity_info": info, "condition": condition, "value": value},
    });
    if let Some(zone) = &create.zone {
        body["zoneId"] = Value::String(zone.clone());
    }
    if let Some(flavor) = &create.flavor {
        body["flavorId"] = Value::String(flavor.clone());
    }
    Ok((format!("/promise/capacity/{kind_name}/subscribe"), body))
}

/// The path and body of a utilization subscription, `body` holding the callback (the lease's id
/// is set once resolved).
fn utilization_request(
    create: &CreateSubscription,
    mut body: Value,
) -> Result<(String, Value), CliError> {
    let duration = create
        .for_
        .as_deref()
        .ok_or_else(|| CliError::Usage("--utilization needs --for".to_owned()))?;
    let seconds = crate::time::parse_duration(duration)
        .map_err(|e| CliError::Usage(format!("--for {e}")))?
        .as_secs();
    body["belowPercent"] = json!(create.below);
    body["forSeconds"] = json!(seconds);
    if let Some(class) = &create.class {
        body["resourceClass"] = json!(class);
    }
    Ok(("/promise/utilization/subscribe".to_owned(), body))
}

/// `available < 100` as `("available", "lt", 100)`.
fn threshold_parts(text: &str) -> Result<(String, &'static str, u64), CliError> {
    let bad = || {
        CliError::Usage(format!(
            "--threshold {text}: use FIGURE OP NUMBER, as in \"available < 100\""
        ))
    };
    let ops = [
        ("<=", "le"),
        (">=", "ge"),
        ("==", "eq"),
        ("<", "lt"),
        (">", "gt"),
        ("=", "eq"),
    ];
    let (at, symbol, condition) = ops
        .iter()
        .find_map(|(symbol, condition)| text.find(symbol).map(|at| (at, *symbol, *condition)))
        .ok_or_else(bad)?;
    let info = text[..at].trim();
    let value = text[at + symbol.len()..]
        .trim()
        .parse::<u64>()
        .map_err(|_| bad())?;
    match ["available", "reserved", "allocated", "total"].contains(&info) {
        true => Ok((info.to_owned(), condition, value)),
        false => Err(bad()),
    }
}

/// `berth notification`.
#[derive(Debug, Args)]
pub struct NotificationCommand {
    /// Connection and output.
    #[command(flatten)]
    pub connection: Connection,
    /// What to do.
    #[command(subcommand)]
    pub verb: NotificationVerb,
}

/// What `berth notification` does.
#[derive(Debug, Subcommand)]
pub enum NotificationVerb {
    /// Read the notification feed after a cursor.
    List {
        /// Only entries after this cursor (the `next` of an earlier page).
        #[arg(long, default_value_t = 0)]
        after: u64,
        /// At most this many entries.
        #[arg(long)]
        limit: Option<u32>,
        /// Wait up to this many seconds (at most 30) for an entry when there is none.
        #[arg(long)]
        wait: Option<u32>,
    },
}

/// Runs `berth notification`.
pub(crate) async fn run_notification(ctx: &Ctx, verb: NotificationVerb) -> Result<(), CliError> {
    let NotificationVerb::List { after, limit, wait } = verb;
    let path = format!(
        "/promise/notifications{}",
        query(&[
            ("after", Some(after.to_string())),
            ("limit", limit.map(|l| l.to_string())),
            ("wait", wait.map(|w| w.to_string())),
        ])
    );
    let answer = ctx.client.get(&path).await?;
    emit_text(ctx.format, &answer, |a| {
        let table = Table::of(
            &["CURSOR", "TYPE", "CHANGE", "LEASE", "TIME"],
            items(&a["notifications"]),
            |entry| {
                let n = &entry["notification"];
                // A capacity notification says when it crossed and which way.
                let at = n["timeStamp"]
                    .as_i64()
                    .or_else(|| n["capacityChangeTime"].as_i64())
                    .and_then(|micros| jiff::Timestamp::from_microsecond(micros).ok())
                    .map(|t| t.strftime("%Y-%m-%d %H:%M:%S").to_string())
                    .unwrap_or_default();
                vec![
                    get(entry, "cursor"),
                    get(n, "notificationType"),
                    match n["changeType"].as_str() {
                        Some(change) => change.to_owned(),
                        None => format!(
                            "{} {} {} {}",
                            get(n, "crossing"),
                            get(&n["threshold"], "capacity_info"),
                            get(&n["threshold"], "condition"),
                            get(&n["threshold"], "value")
                        ),
                    },
                    get(n, "reservationId"),
                    at,
                ]
            },
        );
        format!("{}Next cursor: {}\n", table.render(), get(a, "next"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_read_as_words() {
        assert_eq!(
            threshold_parts("available < 100").expect("lt"),
            ("available".to_owned(), "lt", 100)
        );
        assert_eq!(
            threshold_parts("reserved>=5").expect("ge"),
            ("reserved".to_owned(), "ge", 5)
        );
        assert!(threshold_parts("free < 1").is_err());
        assert!(threshold_parts("available < x").is_err());
        assert!(threshold_parts("available").is_err());
    }
}
