//! `berth availability`: when a number of hosts (or instance slots) are free together for a
//! while, from berth's availability search (`POST /reservation/v1/availability`): now, or the
//! counter-offer's earliest start.

use crate::connection::{Connection, Ctx};
use crate::error::CliError;
use crate::leases::{filter_text, reservations, window_end};
use crate::output::{Table, emit_text, get, items};
use crate::time::{self, When, parse_duration, parse_when};
use clap::Args;
use jiff::SignedDuration;
use serde_json::{Value, json};

/// `berth availability`.
#[derive(Debug, Args)]
pub struct AvailabilityArgs {
    /// Connection and output.
    #[command(flatten)]
    pub connection: Connection,
    /// How many whole hosts, together.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub hosts: Option<u64>,
    /// The filter the hosts must pass: `gpu == true`, `vcpus >= 32 and zone in (az1, az2)`, or
    /// berth's JSON filter.
    #[arg(long)]
    pub filter: Option<String>,
    /// Only hosts of this availability zone.
    #[arg(long)]
    pub zone: Option<String>,
    /// Instance slots instead of (or beside) hosts, as in `lease create --instance`; repeatable.
    #[arg(long = "instance", value_name = "SPEC")]
    pub instances: Vec<String>,
    /// For how long, as `48h`, `2d` or `1d12h`.
    #[arg(long = "for", value_name = "DURATION", value_parser = parse_duration)]
    pub duration: SignedDuration,
    /// The earliest start to consider: `now`, `+2h` or an absolute time.
    #[arg(long, alias = "from", default_value = "now", value_parser = parse_when)]
    pub start: When,
    /// How many days ahead to search for a start [default: berth's, 30].
    #[arg(long)]
    pub horizon_days: Option<u32>,
    /// Hold the offer for this long (whole minutes, 1m to 60m: `10m`, `1h`); the answer's
    /// hold id makes the lease (`berth lease create --hold-id`).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub hold: Option<SignedDuration>,
}

/// Runs `berth availability`: exit 0 when the request is free now or later, 1 when it is not
/// free within the search horizon.
pub(crate) async fn run(ctx: &Ctx, args: &AvailabilityArgs) -> Result<(), CliError> {
    let mut wanted = Vec::new();
    if let Some(hosts) = args.hosts {
        wanted.push(json!({
            "resource_type": "physical:host",
            "min": hosts,
            "max": hosts,
            "hypervisor_properties": "",
            "resource_properties": filter_text("--filter", args.filter.as_deref(), args.zone.as_deref())?,
        }));
    } else if args.filter.is_some() || args.zone.is_some() {
        return Err(CliError::Usage(
            "--filter and --zone apply to --hosts (give instance filters in --instance)".to_owned(),
        ));
    }
    wanted.extend(reservations(&[], &args.instances, &[])?);
    if wanted.is_empty() {
        return Err(CliError::Usage(
            "availability needs --hosts N or --instance SPEC".to_owned(),
        ));
    }
    let end = window_end(args.start, None, Some(args.duration))?;
    let mut body = json!({
        "start_date": args.start.wire(),
        "end_date": end.wire(),
        "reservations": wanted,
    });
    if let Some(days) = args.horizon_days {
        body["search_horizon_days"] = json!(days);
    }
    if let Some(hold) = args.hold {
        let seconds = hold.as_secs();
        if seconds <= 0 || seconds % 60 != 0 {
            return Err(CliError::Usage(
                "--hold takes whole minutes, as 10m or 1h".to_owned(),
            ));
        }
        body["hold_minutes"] = json!(seconds / 60);
    }
    let answer = ctx
        .client
        .post("/reservation/v1/availability", &body)
        .await?;
    let found = answer["fits"].as_bool() == Some(true)
        || answer["counter_offer"]["earliest_start"].is_string();
    emit_text(ctx.format, &answer, |a| text(args, a))?;
    match found {
        true => Ok(()),
        false => Err(CliError::Failed(format!(
            "{} not free for {} within the search horizon",
            what(args),
            time::span(args.duration.as_secs().unsigned_abs())
        ))),
    }
}

/// What is asked for, in words.
fn what(args: &AvailabilityArgs) -> String {
    let mut parts = Vec::new();
    if let Some(hosts) = args.hosts {
        let mut text = format!("{hosts} hosts");
        if let Some(filter) = &args.filter {
            text.push_str(&format!(" with {filter}"));
        }
        if let Some(zone) = &args.zone {
            text.push_str(&format!(" in {zone}"));
        }
        parts.push(text);
    }
    parts.extend(
        args.instances
            .iter()
            .map(|spec| format!("instances {spec}")),
    );
    parts.join(" and ")
}

/// The answer for people: when, then the zones.
fn text(args: &AvailabilityArgs, answer: &Value) -> String {
    let length = time::span(args.duration.as_secs().unsigned_abs());
    let what = what(args);
    let mut out = match (
        answer["fits"].as_bool() == Some(true),
        answer["counter_offer"]["earliest_start"].as_str(),
    ) {
        (true, _) => {
            let start = get(answer, "start_date");
            let when = time::parse_server_time(&start).map_or_else(String::new, time::relative);
            format!(
                "Free {when}: {what}, from {} to {} UTC ({length}).\n",
                time::show(&start),
                time::show(&get(answer, "end_date")),
            )
        }
        (false, Some(earliest)) => {
            let start = time::parse_server_time(earliest);
            let end = start
                .and_then(|s| s.checked_add(args.duration).ok())
                .map(|e| e.strftime("%Y-%m-%d %H:%M:%S").to_string())
                .unwrap_or_default();
            format!(
                "Not free from {} UTC ({}).\nFree {}: {what}, from {} to {end} UTC ({length}).\n",
                time::show(&get(answer, "start_date")),
                shortfalls(answer),
                start.map_or_else(String::new, time::relative),
                time::show(earliest),
            )
        }
        (false, None) => format!(
            "Not free: {what} for {length} ({}), and no start within the search horizon.\n",
            shortfalls(answer)
        ),
    };
    out.push_str(&held(answer));
    let zones = Table::of(
        &["ZONE", "HOSTS", "FREE_HOSTS"],
        items(&answer["availability_zones"]),
        |z| {
            vec![
                get(z, "availability_zone"),
                get(z, "hosts"),
                get(z, "free_hosts"),
            ]
        },
    );
    out.push_str(
        "\nReservable hosts per zone (FREE_HOSTS: free over the whole window, any filter):\n",
    );
    out.push_str(&zones.render());
    out
}

/// What became of the hold asked for, in words (nothing when none was asked for).
fn held(answer: &Value) -> String {
    let hold = &answer["hold"];
    match hold["held"].as_bool() {
        Some(true) => format!(
            "Held from {} to {} UTC until {} UTC: hold id {} (berth lease create --hold-id {}).\n",
            time::show(&get(hold, "start_date")),
            time::show(&get(hold, "end_date")),
            time::show(&get(hold, "lapses_at")),
            get(hold, "hold_id"),
            get(hold, "hold_id"),
        ),
        Some(false) => format!("Not held: {}.\n", get(hold, "reason")),
        None => String::new(),
    }
}

/// Why the request does not fit now, in a few words.
fn shortfalls(answer: &Value) -> String {
    let parts: Vec<String> = items(&answer["reservations"])
        .iter()
        .map(|s| {
            let unit = match s["resource_type"].as_str() {
                Some("physical:host") => "hosts",
                Some("virtual:floatingip") => "floating IPs",
                _ => "instances",
            };
            format!(
                "{} of {} {unit} fit",
                get(s, "available"),
                get(s, "requested")
            )
        })
        .collect();
    match parts.is_empty() {
        true => "it does not fit".to_owned(),
        false => parts.join(", "),
    }
}
