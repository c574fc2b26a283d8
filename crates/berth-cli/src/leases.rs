//! `berth lease ...`: leases on the Blazar surface (`/reservation/v1/leases`), with the
//! reservation specs of `--host`, `--instance` and `--floating-ip`, and `--wait` for a lease
//! to start.

use crate::args::{key_values, whole};
use crate::client::segment;
use crate::connection::{Connection, Ctx};
use crate::error::CliError;
use crate::filter;
use crate::output::{Table, cell, emit, emit_text, get, items};
use crate::progress;
use crate::time::{self, When, parse_duration, parse_when};
use clap::{Args, Subcommand};
use jiff::SignedDuration;
use serde_json::{Value, json};

pub(crate) const LEASES: &str = "/reservation/v1/leases";

/// `berth lease`.
#[derive(Debug, Args)]
pub struct LeaseCommand {
    /// Connection and output.
    #[command(flatten)]
    pub connection: Connection,
    /// What to do.
    #[command(subcommand)]
    pub verb: LeaseVerb,
}

/// What `berth lease` does.
#[derive(Debug, Subcommand)]
pub enum LeaseVerb {
    /// List leases.
    List {
        /// Only leases in this status.
        #[arg(long, value_parser = ["PENDING", "ACTIVE", "TERMINATED", "ERROR"], ignore_case = true)]
        status: Option<String>,
    },
    /// Show a lease (by id or name), its reservations and its events.
    Show {
        /// Lease id or name.
        lease: String,
    },
    /// Create a lease; refused with berth's reason and counter-offer when it does not fit.
    Create(CreateLease),
    /// Rename a lease or move its window.
    Update(UpdateLease),
    /// Delete a lease.
    Delete {
        /// Lease id or name.
        lease: String,
    },
    /// The lifecycle record of a lease.
    Events {
        /// Lease id or name.
        lease: String,
    },
    /// A recurring lease (created with `--recurrence`): show, rename or cancel every
    /// occurrence left; one occurrence is changed or deleted as the lease it is.
    Series {
        /// What to do.
        #[command(subcommand)]
        verb: SeriesVerb,
    },
    /// Share a lease with another project within a cap (or change its cap): its consumers
    /// then present the lease's reservations as the owner's do.
    Share {
        /// Lease id or name.
        lease: String,
        /// The project to share it with.
        #[arg(long)]
        project: String,
        /// The most of a resource class the project may hold inside the lease, as
        /// `VCPU=8`; repeatable, at least one.
        #[arg(long = "cap", value_name = "CLASS=N", required = true)]
        caps: Vec<String>,
    },
    /// Revoke a lease's share with a project: it may consume nothing more (what it holds
    /// stays until released).
    Unshare {
        /// Lease id or name.
        lease: String,
        /// The project.
        #[arg(long)]
        project: String,
    },
    /// A lease's shares, with what each project holds inside it.
    Shares {
        /// Lease id or name.
        lease: String,
    },
    /// How much of what a lease held its consumers used: per resource class, the unit-hours
    /// held and used and their ratio, then each change of the amounts over time.
    Utilization {
        /// Lease id or name.
        lease: String,
    },
}

/// What `berth lease series` does.
#[derive(Debug, Subcommand)]
pub enum SeriesVerb {
    /// Show the occurrences left of a series.
    Show {
        /// Series id (a lease's `series_id`).
        series: String,
    },
    /// Rename every occurrence left, or move them all (all or none).
    Update {
        /// Series id.
        series: String,
        /// New name.
        #[arg(long)]
        name: Option<String>,
        /// Move every occurrence by this many minutes (negative: earlier).
        #[arg(long, allow_hyphen_values = true)]
        shift_minutes: Option<i64>,
    },
    /// Cancel every occurrence left, in one decision.
    Delete {
        /// Series id.
        series: String,
    },
}

/// `berth lease create`.
#[derive(Debug, Args)]
pub struct CreateLease {
    /// Lease name [default: lease-<start time>].
    #[arg(long)]
    pub name: Option<String>,
    /// Whole hosts: `min=N,max=N` (or `count=N`), `filter=EXPR`, `zone=AZ`; repeatable.
    #[arg(long = "host", value_name = "SPEC")]
    pub hosts: Vec<String>,
    /// Instance slots: `vcpus=N,memory-mb=N,disk-gb=N,amount=N,affinity=true|false|none`,
    /// `filter=EXPR`, `zone=AZ`; repeatable.
    #[arg(long = "instance", value_name = "SPEC")]
    pub instances: Vec<String>,
    /// Floating IPs: `network=ID,amount=N`; repeatable.
    #[arg(long = "floating-ip", value_name = "SPEC")]
    pub floating_ips: Vec<String>,
    /// Start: `now`, `+2h`, `+3d` or an absolute time.
    #[arg(long, default_value = "now", value_parser = parse_when)]
    pub start: When,
    /// End: `+2h`, `+3d` (from now) or an absolute time.
    #[arg(long, value_parser = parse_when, required_unless_present = "duration", conflicts_with = "duration")]
    pub end: Option<When>,
    /// Length instead of an end, as `2h`, `3d` or `1d12h`.
    #[arg(long = "for", value_name = "DURATION", value_parser = parse_duration)]
    pub duration: Option<SignedDuration>,
    /// When the before-end event fires [default: berth's, an hour before the end].
    #[arg(long, value_parser = parse_when)]
    pub before_end: Option<When>,
    /// How many days ahead the counter-offer searches for a start.
    #[arg(long)]
    pub horizon_days: Option<u32>,
    /// Wait for the lease to start (ACTIVE), showing a spinner.
    #[arg(long)]
    pub wait: bool,
    /// How long `--wait` waits at most.
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    pub wait_timeout: SignedDuration,
    /// Make the lease from this hold (the hold id `berth availability --hold` printed).
    #[arg(long, value_name = "HOLD_ID")]
    pub hold_id: Option<String>,
    /// When it does not fit, keep it waiting (`WAITING`) until this time instead of refusing
    /// it; admitted as soon as capacity frees.
    #[arg(long, value_parser = parse_when, conflicts_with = "hold_id")]
    pub wait_until: Option<When>,
    /// Repeat the lease by an RRULE (`FREQ=DAILY|WEEKLY`, `INTERVAL`, `BYDAY`, `COUNT` or
    /// `UNTIL`), e.g. `FREQ=WEEKLY;COUNT=4`: every occurrence is admitted or none.
    #[arg(long, value_name = "RRULE", conflicts_with_all = ["hold_id", "wait_until", "wait"])]
    pub recurrence: Option<String>,
}

/// `berth lease update`.
#[derive(Debug, Args)]
pub struct UpdateLease {
    /// Lease id or name.
    pub lease: String,
    /// New name.
    #[arg(long)]
    pub name: Option<String>,
    /// New start.
    #[arg(long, value_parser = parse_when)]
    pub start: Option<When>,
    /// New end.
    #[arg(long, value_parser = parse_when)]
    pub end: Option<When>,
    /// New time of the before-end event.
    #[arg(long, value_parser = parse_when)]
    pub before_end: Option<When>,
}

/// Runs `berth lease`.
pub(crate) async fn run(ctx: &Ctx, verb: LeaseVerb) -> Result<(), CliError> {
    match verb {
        LeaseVerb::List { status } => {
            let path = format!(
                "{LEASES}{}",
                crate::client::query(&[("status", status.map(|s| s.to_ascii_uppercase()))])
            );
            let answer = ctx.client.get(&path).await?;
            emit(ctx.format, &answer["leases"], list_table)
        }
        LeaseVerb::Show { lease } => show(ctx, &find(ctx, &lease).await?),
        LeaseVerb::Create(create) => self::create(ctx, &create).await,
        LeaseVerb::Update(update) => {
            let id = resolve(ctx, &update.lease).await?;
            let mut body = json!({});
            if let Some(name) = update.name {
                body["name"] = Value::String(name);
            }
            for (key, when) in [
                ("start_date", update.start),
                ("end_date", update.end),
                ("before_end_date", update.before_end),
            ] {
                if let Some(when) = when {
                    body[key] = Value::String(when.wire());
                }
            }
            if body.as_object().is_some_and(serde_json::Map::is_empty) {
                return Err(CliError::Usage(
                    "lease update needs --name, --start, --end or --before-end".to_owned(),
                ));
            }
            let answer = ctx.client.put(&lease_path(&id), &body).await?;
            show(ctx, &answer["lease"])
        }
        LeaseVerb::Delete { lease } => {
            let id = resolve(ctx, &lease).await?;
            ctx.client.delete(&lease_path(&id)).await?;
            eprintln!("Deleted lease {lease}.");
            Ok(())
        }
        LeaseVerb::Series { verb } => series(ctx, verb).await,
        LeaseVerb::Share {
            lease,
            project,
            caps,
        } => {
            let id = resolve(ctx, &lease).await?;
            let body = json!({ "cap": class_amounts("--cap", &caps)? });
            let path = format!("{}/shares/{}", lease_path(&id), segment(&project));
            let answer = ctx.client.put(&path, &body).await?;
            show_shares(ctx, &json!([answer["share"]]))
        }
        LeaseVerb::Unshare { lease, project } => {
            let id = resolve(ctx, &lease).await?;
            let path = format!("{}/shares/{}", lease_path(&id), segment(&project));
            ctx.client.delete(&path).await?;
            eprintln!("Lease {lease} is no longer shared with project {project}.");
            Ok(())
        }
        LeaseVerb::Shares { lease } => {
            let id = resolve(ctx, &lease).await?;
            let answer = ctx
                .client
                .get(&format!("{}/shares", lease_path(&id)))
                .await?;
            show_shares(ctx, &answer["shares"])
        }
        LeaseVerb::Utilization { lease } => utilization(ctx, &lease).await,
        LeaseVerb::Events { lease } => {
            let id = resolve(ctx, &lease).await?;
            let answer = ctx
                .client
                .get(&format!("{}/events", lease_path(&id)))
                .await?;
            emit(ctx.format, &answer["events"], |events| {
                Table::of(&["TIME", "TYPE", "DETAILS"], items(events), |e| {
                    vec![
                        time::show(&get(e, "time")),
                        get(e, "type"),
                        get(e, "details"),
                    ]
                })
            })
        }
    }
}

/// `berth lease utilization`.
async fn utilization(ctx: &Ctx, lease: &str) -> Result<(), CliError> {
    let id = resolve(ctx, lease).await?;
    let answer = ctx
        .client
        .get(&format!("{}/utilization", lease_path(&id)))
        .await?;
    emit_text(ctx.format, &answer, show_utilization)
}

/// A lease's utilization as text: a table of its classes' totals, then one of each class's
/// steps.
fn show_utilization(answer: &Value) -> String {
    let utilization = &answer["utilization"];
    let classes = items(&utilization["classes"]);
    let hours = |v: &Value, field: &str| {
        v[field]
            .as_f64()
            .map_or_else(|| "-".to_owned(), |h| format!("{h:.2}"))
    };
    let totals = Table::of(
        &["CLASS", "RESERVED_H", "CONSUMED_H", "UTILIZATION"],
        classes,
        |c| {
            vec![
                get(c, "resource_class"),
                hours(c, "reserved_hours"),
                hours(c, "consumed_hours"),
                c["utilization"]
                    .as_f64()
                    .map_or_else(|| "-".to_owned(), |u| format!("{:.0}%", u * 100.0)),
            ]
        },
    );
    let steps: Vec<Value> = classes
        .iter()
        .flat_map(|c| {
            items(&c["steps"]).iter().map(move |s| {
                json!({"class": c["resource_class"], "time": s["time"],
                                   "reserved": s["reserved"], "consumed": s["consumed"]})
            })
        })
        .collect();
    let steps = Table::of(&["CLASS", "FROM", "RESERVED", "CONSUMED"], &steps, |s| {
        vec![
            get(s, "class"),
            time::show(&get(s, "time")),
            get(s, "reserved"),
            get(s, "consumed"),
        ]
    });
    match utilization["start"].as_str() {
        None => "The lease has not started: nothing to count yet.".to_owned(),
        Some(start) => format!(
            "Counted from {} to {} UTC\n\n{}\n\n{}",
            time::show(start),
            time::show(&get(utilization, "counted_until")),
            totals.render(),
            steps.render()
        ),
    }
}

/// `CLASS=N` flags (`--cap` of a share, `--limit` of a budget) as a JSON map: class names
/// upper-cased, the amounts checked by berth.
pub(crate) fn class_amounts(
    flag: &str,
    items: &[String],
) -> Result<serde_json::Map<String, Value>, CliError> {
    items
        .iter()
        .map(|item| {
            let (class, amount) = item
                .split_once('=')
                .ok_or_else(|| CliError::Usage(format!("{flag} {item}: use CLASS=N")))?;
            let amount = amount.trim().parse::<i64>().map_err(|_| {
                CliError::Usage(format!("{flag} {item}: {amount} is not a whole number"))
            })?;
            Ok((class.trim().to_ascii_uppercase(), json!(amount)))
        })
        .collect()
}

/// Shares as a table: the project, its cap and what it holds, class by class.
fn show_shares(ctx: &Ctx, shares: &Value) -> Result<(), CliError> {
    let amounts = |map: &Value| {
        map.as_object()
            .map(|m| {
                m.iter()
                    .map(|(class, n)| format!("{class}={n}"))
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_default()
    };
    emit(ctx.format, shares, |shares| {
        Table::of(&["PROJECT", "CAP", "USED", "UPDATED"], items(shares), |s| {
            vec![
                get(s, "project_id"),
                amounts(&s["cap"]),
                amounts(&s["used"]),
                time::show(&get(s, "updated_at")),
            ]
        })
    })
}

const SERIES: &str = "/reservation/v1/lease-series";

/// Runs `berth lease series`.
async fn series(ctx: &Ctx, verb: SeriesVerb) -> Result<(), CliError> {
    match verb {
        SeriesVerb::Show { series } => {
            let answer = ctx
                .client
                .get(&format!("{SERIES}/{}", segment(&series)))
                .await?;
            show_series(ctx, &answer["series"])
        }
        SeriesVerb::Update {
            series,
            name,
            shift_minutes,
        } => {
            if name.is_none() && shift_minutes.is_none() {
                return Err(CliError::Usage(
                    "lease series update needs --name or --shift-minutes".to_owned(),
                ));
            }
            let mut body = json!({});
            if let Some(name) = name {
                body["name"] = json!(name);
            }
            if let Some(minutes) = shift_minutes {
                body["shift_minutes"] = json!(minutes);
            }
            let path = format!("{SERIES}/{}", segment(&series));
            let answer = ctx.client.put(&path, &body).await?;
            show_series(ctx, &answer["series"])
        }
        SeriesVerb::Delete { series } => {
            ctx.client
                .delete(&format!("{SERIES}/{}", segment(&series)))
                .await?;
            eprintln!("Cancelled every occurrence of series {series}.");
            Ok(())
        }
    }
}

/// A series: its rule on standard error, its occurrences as a table.
fn show_series(ctx: &Ctx, series: &Value) -> Result<(), CliError> {
    eprintln!(
        "Series {} ({}): {}, {} of {} occurrences left.",
        get(series, "id"),
        get(series, "name"),
        get(series, "recurrence"),
        series["leases"].as_array().map_or(0, Vec::len),
        get(series, "count"),
    );
    emit(ctx.format, series, |series| {
        Table::of(
            &["OCCURRENCE", "ID", "START", "END", "STATUS"],
            items(&series["leases"]),
            |l| {
                vec![
                    get(l, "occurrence"),
                    get(l, "id"),
                    time::show(&get(l, "start_date")),
                    time::show(&get(l, "end_date")),
                    get(l, "status"),
                ]
            },
        )
    })
}

pub(crate) fn lease_path(id: &str) -> String {
    format!("{LEASES}/{}", segment(id))
}

/// A lease's id: the id itself, or the id of the one lease of that name.
pub(crate) async fn resolve(ctx: &Ctx, lease: &str) -> Result<String, CliError> {
    if uuid::Uuid::parse_str(lease).is_ok() {
        return Ok(lease.to_owned());
    }
    let answer = ctx.client.get(LEASES).await?;
    named(&answer, lease).map(|l| get(l, "id"))
}

/// A lease's record: by id, or the one lease of that name from the list (one request either
/// way).
pub(crate) async fn find(ctx: &Ctx, lease: &str) -> Result<Value, CliError> {
    if uuid::Uuid::parse_str(lease).is_ok() {
        return Ok(ctx.client.get(&lease_path(lease)).await?["lease"].take());
    }
    let answer = ctx.client.get(LEASES).await?;
    named(&answer, lease).cloned()
}

/// The one lease of that name in a lease list answer.
fn named<'a>(answer: &'a Value, lease: &str) -> Result<&'a Value, CliError> {
    let named: Vec<&Value> = items(&answer["leases"])
        .iter()
        .filter(|l| l["name"] == lease)
        .collect();
    match named.as_slice() {
        [one] => Ok(one),
        [] => Err(CliError::Refused {
            status: 404,
            body: json!({"error_message": format!("Lease {lease} could not be found")}),
        }),
        _ => Err(CliError::Usage(format!(
            "{} leases are named {lease}: give the id",
            named.len()
        ))),
    }
}

fn list_table(leases: &Value) -> Table {
    Table::of(
        &["ID", "NAME", "STATUS", "START", "END", "RESERVATIONS"],
        items(leases),
        |l| {
            let status = match l["degraded"].as_bool() {
                Some(true) => format!("{} (degraded)", get(l, "status")),
                _ => get(l, "status"),
            };
            vec![
                get(l, "id"),
                get(l, "name"),
                status,
                time::show(&get(l, "start_date")),
                time::show(&get(l, "end_date")),
                items(&l["reservations"])
                    .iter()
                    .map(reservation_size)
                    .collect::<Vec<_>>()
                    .join("; "),
            ]
        },
    )
}

/// What a reservation asks for, in a few words: `hosts 1-2`, `5 x 2 vcpus/4096 MB/20 GB`,
/// `1 floating IP`.
pub(crate) fn reservation_size(r: &Value) -> String {
    match r["resource_type"].as_str() {
        Some("physical:host") if r["min"] == r["max"] => format!("{} hosts", get(r, "min")),
        Some("physical:host") => format!("hosts {}-{}", get(r, "min"), get(r, "max")),
        Some("virtual:instance") => format!(
            "{} x {} vcpus/{} MB/{} GB",
            get(r, "amount"),
            get(r, "vcpus"),
            get(r, "memory_mb"),
            get(r, "disk_gb")
        ),
        Some("virtual:floatingip") => format!("{} floating IPs", get(r, "amount")),
        _ => get(r, "resource_type"),
    }
}

/// The reservations of a lease as a table.
pub(crate) fn reservations_table(reservations: &Value) -> Table {
    Table::of(
        &["ID", "TYPE", "STATUS", "SIZE", "FILTER", "HOLDS"],
        items(reservations),
        |r| {
            let filters: Vec<String> = ["hypervisor_properties", "resource_properties"]
                .iter()
                .map(|k| get(r, k))
                .filter(|f| !f.is_empty())
                .collect();
            vec![
                get(r, "id"),
                get(r, "resource_type"),
                get(r, "status"),
                reservation_size(r),
                filters.join(" and "),
                holds(r),
            ]
        },
    )
}

/// What a reservation holds: hosts and slots, or addresses.
fn holds(r: &Value) -> String {
    let hosts: Vec<String> = items(&r["allocations"])
        .iter()
        .map(|a| {
            let host = a["host_id"]
                .as_str()
                .map_or_else(|| get(a, "provider_uuid"), str::to_owned);
            match a["slots"].as_u64() {
                Some(slots) if slots > 1 => format!("host {host} ({slots} slots)"),
                _ => format!("host {host}"),
            }
        })
        .collect();
    match hosts.is_empty() {
        true => cell(&r["floatingip_ids"]),
        false => hosts.join(", "),
    }
}

fn show(ctx: &Ctx, lease: &Value) -> Result<(), CliError> {
    emit_text(ctx.format, lease, |l| {
        let mut out = Table::fields(
            l,
            &[
                "id",
                "name",
                "status",
                "status_reason",
                "degraded",
                "start_date",
                "end_date",
                "project_id",
                "user_id",
                "created_at",
                "updated_at",
            ],
        );
        out.retain(|key| !matches!(key, "reservations" | "events" | "trust_id"));
        let mut text = out.render();
        text.push_str("\nReservations:\n");
        text.push_str(&reservations_table(&l["reservations"]).render());
        text.push_str("\nEvents:\n");
        text.push_str(
            &Table::of(&["TYPE", "TIME", "STATUS"], items(&l["events"]), |e| {
                vec![
                    get(e, "event_type"),
                    time::show(&get(e, "time")),
                    get(e, "status"),
                ]
            })
            .render(),
        );
        text
    })
}

/// The `reservations` of a create or availability request from the specs given.
pub(crate) fn reservations(
    hosts: &[String],
    instances: &[String],
    floating_ips: &[String],
) -> Result<Vec<Value>, CliError> {
    let mut out = Vec::new();
    for spec in hosts {
        out.push(host_spec(spec)?);
    }
    for spec in instances {
        out.push(instance_spec(spec)?);
    }
    for spec in floating_ips {
        out.push(floating_ip_spec(spec)?);
    }
    Ok(out)
}

/// A filter as berth takes it (JSON in a string; empty for none), with a zone added.
pub(crate) fn filter_text(
    flag: &str,
    text: Option<&str>,
    zone: Option<&str>,
) -> Result<String, CliError> {
    let mut clauses = Vec::new();
    if let Some(text) = text {
        let parsed =
            filter::translate(text).map_err(|e| CliError::Usage(format!("{flag}: {e}")))?;
        clauses.extend(parsed);
    }
    if let Some(zone) = zone {
        clauses.push(json!(["==", "$availability_zone", zone]));
    }
    Ok(filter::all(clauses)
        .map(|f| f.to_string())
        .unwrap_or_default())
}

fn host_spec(spec: &str) -> Result<Value, CliError> {
    let (mut min, mut max, mut filter, mut zone) = (None, None, None, None);
    let mut before_end = None;
    for (key, value) in key_values("--host", spec)? {
        match key.as_str() {
            "min" => min = Some(whole("--host", &key, &value)?),
            "max" => max = Some(whole("--host", &key, &value)?),
            "count" | "hosts" => {
                let n = whole("--host", &key, &value)?;
                (min, max) = (Some(n), Some(n));
            }
            "filter" => filter = Some(value),
            "zone" | "availability_zone" => zone = Some(value),
            "before_end" => before_end = Some(value),
            _ => {
                return Err(unknown_key(
                    "--host",
                    &key,
                    "min, max, count, filter, zone, before-end",
                ));
            }
        }
    }
    let (min, max) = match (min, max) {
        (None, None) => (1, 1),
        (Some(n), None) | (None, Some(n)) => (n, n),
        (Some(min), Some(max)) => (min, max),
    };
    let mut body = json!({
        "resource_type": "physical:host",
        "min": min,
        "max": max,
        "hypervisor_properties": "",
        "resource_properties": filter_text("--host", filter.as_deref(), zone.as_deref())?,
    });
    if let Some(before_end) = before_end {
        body["before_end"] = Value::String(before_end);
    }
    Ok(body)
}

fn instance_spec(spec: &str) -> Result<Value, CliError> {
    let flag = "--instance";
    let mut body = json!({"resource_type": "virtual:instance", "disk_gb": 0, "amount": 1});
    let (mut filter, mut zone) = (None, None);
    for (key, value) in key_values(flag, spec)? {
        match key.as_str() {
            "vcpus" => body["vcpus"] = json!(whole(flag, &key, &value)?),
            "memory_mb" | "memory" | "ram" => body["memory_mb"] = json!(whole(flag, &key, &value)?),
            "disk_gb" | "disk" => body["disk_gb"] = json!(whole(flag, &key, &value)?),
            "amount" | "count" => body["amount"] = json!(whole(flag, &key, &value)?),
            "affinity" => {
                body["affinity"] = match value.to_ascii_lowercase().as_str() {
                    "true" | "yes" | "same" => Value::Bool(true),
                    "false" | "no" | "different" => Value::Bool(false),
                    "none" | "null" | "any" => Value::Null,
                    _ => {
                        return Err(CliError::Usage(format!(
                            "{flag}: affinity={value} must be true, false or none"
                        )));
                    }
                }
            }
            "filter" => filter = Some(value),
            "zone" | "availability_zone" => zone = Some(value),
            _ => {
                return Err(unknown_key(
                    flag,
                    &key,
                    "vcpus, memory-mb, disk-gb, amount, affinity, filter, zone",
                ));
            }
        }
    }
    for required in ["vcpus", "memory_mb"] {
        if body.get(required).is_none() {
            return Err(CliError::Usage(format!(
                "{flag} {spec}: {} is required",
                required.replace('_', "-")
            )));
        }
    }
    body["resource_properties"] =
        Value::String(filter_text(flag, filter.as_deref(), zone.as_deref())?);
    Ok(body)
}

fn floating_ip_spec(spec: &str) -> Result<Value, CliError> {
    let flag = "--floating-ip";
    let mut body = json!({"resource_type": "virtual:floatingip", "amount": 1});
    for (key, value) in key_values(flag, spec)? {
        match key.as_str() {
            "network" | "network_id" => body["network_id"] = Value::String(value),
            "amount" | "count" => body["amount"] = json!(whole(flag, &key, &value)?),
            _ => return Err(unknown_key(flag, &key, "network, amount")),
        }
    }
    match body.get("network_id") {
        Some(_) => Ok(body),
        None => Err(CliError::Usage(format!(
            "{flag} {spec}: network is required"
        ))),
    }
}

fn unknown_key(flag: &str, key: &str, known: &str) -> CliError {
    CliError::Usage(format!("{flag}: unknown key {key} (use {known})"))
}

/// The end of a window: `--end`, or the start plus `--for`.
pub(crate) fn window_end(
    start: When,
    end: Option<When>,
    duration: Option<SignedDuration>,
) -> Result<When, CliError> {
    match (end, duration) {
        (Some(end), _) => Ok(end),
        (None, Some(duration)) => start
            .instant()
            .checked_add(duration)
            .map(When::At)
            .map_err(|_| CliError::Usage("the end is too far away".to_owned())),
        (None, None) => Err(CliError::Usage("give --end or --for".to_owned())),
    }
}

async fn create(ctx: &Ctx, create: &CreateLease) -> Result<(), CliError> {
    let reservations = reservations(&create.hosts, &create.instances, &create.floating_ips)?;
    if reservations.is_empty() {
        return Err(CliError::Usage(
            "lease create needs at least one --host, --instance or --floating-ip".to_owned(),
        ));
    }
    let end = window_end(create.start, create.end, create.duration)?;
    let name = create
        .name
        .clone()
        .unwrap_or_else(|| format!("lease-{}", create.start.instant().strftime("%Y%m%d-%H%M%S")));
    let mut body = json!({
        "name": name,
        "start_date": create.start.wire(),
        "end_date": end.wire(),
        "reservations": reservations,
        "events": [],
    });
    if let Some(before_end) = create.before_end {
        body["before_end_date"] = Value::String(before_end.wire());
    }
    if let Some(days) = create.horizon_days {
        body["search_horizon_days"] = json!(days);
    }
    if let Some(hold) = &create.hold_id {
        body["hold_id"] = json!(hold);
    }
    if let Some(until) = create.wait_until {
        body["on_conflict"] = json!("wait");
        body["wait_until"] = Value::String(until.wire());
    }
    if let Some(rule) = &create.recurrence {
        body["recurrence"] = json!(rule);
    }
    let mut answer = ctx.client.post(LEASES, &body).await?;
    if answer["series"].is_object() {
        return show_series(ctx, &answer["series"]);
    }
    let mut lease = answer["lease"].take();
    if lease["status"] == "WAITING" {
        eprintln!(
            "Lease {} does not fit now and is WAITING until {} UTC (earliest start that fits: {}).",
            get(&lease, "name"),
            time::show(&get(&lease, "lapses_at")),
            answer["waitlisted"]["counter_offer"]["earliest_start"]
                .as_str()
                .map_or_else(|| "none found".to_owned(), time::show),
        );
    }
    if create.wait {
        lease = wait_active(ctx, &lease, create.wait_timeout).await?;
    }
    show(ctx, &lease)
}

/// Polls a lease until it is ACTIVE, showing a spinner; fails when it ends otherwise or the
/// time runs out.
async fn wait_active(ctx: &Ctx, lease: &Value, timeout: SignedDuration) -> Result<Value, CliError> {
    let id = get(lease, "id");
    let start = time::show(&get(lease, "start_date"));
    let spinner = progress::spinner(&format!(
        "waiting for lease {} to start (at {start} UTC)",
        get(lease, "name")
    ));
    let limit = std::time::Duration::try_from(timeout).unwrap_or(std::time::Duration::MAX);
    let deadline =
        tokio::time::Instant::now() + limit.min(std::time::Duration::from_secs(365 * 86_400));
    let mut current = lease.clone();
    loop {
        match current["status"].as_str() {
            Some("ACTIVE") => {
                spinner.finish_and_clear();
                eprintln!("Lease {} is ACTIVE.", get(&current, "name"));
                return Ok(current);
            }
            Some("PENDING" | "WAITING") | None => {}
            Some(other) => {
                spinner.finish_and_clear();
                return Err(CliError::Failed(format!(
                    "lease {id} is {other} instead of starting: {}",
                    get(&current, "status_reason")
                )));
            }
        }
        if tokio::time::Instant::now() >= deadline {
            spinner.finish_and_clear();
            return Err(CliError::Failed(format!(
                "lease {id} did not start within {}; it is {}",
                time::span(limit.as_secs()),
                get(&current, "status")
            )));
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        current = ctx.client.get(&lease_path(&id)).await?["lease"].take();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_become_reservations() {
        let host = host_spec("min=1,max=2,filter=gpu == true,zone=az1").expect("host");
        assert_eq!(host["resource_type"], "physical:host");
        assert_eq!(
            (host["min"].clone(), host["max"].clone()),
            (json!(1), json!(2))
        );
        assert_eq!(
            host["resource_properties"],
            r#"["and",["==","$gpu",true],["==","$availability_zone","az1"]]"#
        );
        assert_eq!(host_spec("count=3").expect("count")["min"], 3);
        assert_eq!(host_spec("").expect("default")["max"], 1);
        let instance = instance_spec("vcpus=2,memory-mb=4096,disk-gb=20,amount=5,affinity=false")
            .expect("instance");
        assert_eq!(
            instance,
            json!({"resource_type": "virtual:instance", "vcpus": 2, "memory_mb": 4096,
                   "disk_gb": 20, "amount": 5, "affinity": false, "resource_properties": ""})
        );
        assert!(instance_spec("vcpus=2").is_err());
        assert!(instance_spec("vcpus=2,memory-mb=1,affinity=maybe").is_err());
        assert!(host_spec("min=x").is_err());
        assert!(host_spec("colour=blue").is_err());
        assert!(host_spec("filter=gpu ==").is_err());
        assert_eq!(
            floating_ip_spec("network=public,amount=2").expect("fip")["amount"],
            2
        );
        assert!(floating_ip_spec("amount=2").is_err());
    }
}
