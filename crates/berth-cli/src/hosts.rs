//! `berth host ...`: hosts on the Blazar surface (`/reservation/v1/os-hosts`), one at a time or
//! in bulk from a file, and their status (up, down, maintenance).

use crate::args::{bodies, properties};
use crate::client::segment;
use crate::connection::{Connection, Ctx};
use crate::error::CliError;
use crate::output::{Table, emit, get, items};
use crate::progress;
use clap::{Args, Subcommand};
use serde_json::{Map, Value, json};
use std::path::PathBuf;

const HOSTS: &str = "/reservation/v1/os-hosts";

/// `berth host`.
#[derive(Debug, Args)]
pub struct HostCommand {
    /// Connection and output.
    #[command(flatten)]
    pub connection: Connection,
    /// What to do.
    #[command(subcommand)]
    pub verb: HostVerb,
}

/// What `berth host` does.
#[derive(Debug, Subcommand)]
pub enum HostVerb {
    /// List hosts.
    List,
    /// Show a host (by id or name).
    Show {
        /// Host id or name.
        host: String,
    },
    /// Enrol a host, or every host of a file (`--from-file`).
    Create(CreateHost),
    /// Set or remove extra capabilities, or mark a host up, down or in maintenance.
    Update(UpdateHost),
    /// Un-enrol a host.
    Delete {
        /// Host id or name.
        host: String,
    },
}

/// `berth host create`.
#[derive(Debug, Args)]
pub struct CreateHost {
    /// Host name.
    #[arg(required_unless_present = "from_file", conflicts_with = "from_file")]
    pub name: Option<String>,
    /// VCPUs.
    #[arg(long)]
    pub vcpus: Option<u64>,
    /// Memory in MB.
    #[arg(long)]
    pub memory_mb: Option<u64>,
    /// Local disk in GB.
    #[arg(long)]
    pub local_gb: Option<u64>,
    /// Availability zone.
    #[arg(long)]
    pub zone: Option<String>,
    /// Hypervisor type.
    #[arg(long)]
    pub hypervisor_type: Option<String>,
    /// Compute service name.
    #[arg(long)]
    pub service_name: Option<String>,
    /// Keep the host out of leases.
    #[arg(long)]
    pub not_reservable: bool,
    /// An extra capability, `key=value` (numbers and true/false are typed); repeatable.
    #[arg(long = "extra", value_name = "KEY=VALUE")]
    pub extra: Vec<String>,
    /// Enrol every host of a JSON file: a list of host bodies as `POST os-hosts` takes them.
    #[arg(long, value_name = "FILE")]
    pub from_file: Option<PathBuf>,
}

/// `berth host update`.
#[derive(Debug, Args)]
pub struct UpdateHost {
    /// Host id or name.
    pub host: String,
    /// Set an extra capability, `key=value`; repeatable.
    #[arg(long = "extra", value_name = "KEY=VALUE")]
    pub extra: Vec<String>,
    /// Remove an extra capability; repeatable.
    #[arg(long = "unset", value_name = "KEY")]
    pub unset: Vec<String>,
    /// Mark the host up, down or in maintenance (leases on it are healed).
    #[arg(long, value_parser = ["up", "down", "maintenance"])]
    pub status: Option<String>,
    /// Why the host is down or in maintenance.
    #[arg(long, requires = "status")]
    pub reason: Option<String>,
}

/// Runs `berth host`.
pub(crate) async fn run(ctx: &Ctx, verb: HostVerb) -> Result<(), CliError> {
    match verb {
        HostVerb::List => {
            let answer = ctx.client.get(HOSTS).await?;
            let hosts = answer["hosts"].clone();
            emit(ctx.format, &hosts, |h| Table::of(&HEADERS, items(h), row))
        }
        HostVerb::Show { host } => {
            // By id, the host; by name, the list already holds it.
            if host.parse::<u64>().is_ok() {
                let answer = ctx.client.get(&format!("{HOSTS}/{host}")).await?;
                return show(ctx, &answer["host"]);
            }
            let answer = ctx.client.get(HOSTS).await?;
            show(ctx, named(&answer, &host)?)
        }
        HostVerb::Create(create) => match &create.from_file {
            Some(path) => bulk(ctx, path).await,
            None => {
                let answer = ctx.client.post(HOSTS, &body(&create)?).await?;
                show(ctx, &answer["host"])
            }
        },
        HostVerb::Update(update) => self::update(ctx, update).await,
        HostVerb::Delete { host } => {
            let id = resolve(ctx, &host).await?;
            ctx.client.delete(&format!("{HOSTS}/{id}")).await?;
            eprintln!("Deleted host {host}.");
            Ok(())
        }
    }
}

const HEADERS: [&str; 8] = [
    "ID",
    "NAME",
    "ZONE",
    "VCPUS",
    "MEMORY_MB",
    "LOCAL_GB",
    "RESERVABLE",
    "STATUS",
];

fn row(host: &Value) -> Vec<String> {
    [
        "id",
        "hypervisor_hostname",
        "availability_zone",
        "vcpus",
        "memory_mb",
        "local_gb",
        "reservable",
        "status",
    ]
    .iter()
    .map(|key| get(host, key))
    .collect()
}

fn show(ctx: &Ctx, host: &Value) -> Result<(), CliError> {
    emit(ctx.format, host, |h| {
        Table::fields(
            h,
            &[
                "id",
                "hypervisor_hostname",
                "availability_zone",
                "vcpus",
                "memory_mb",
                "local_gb",
                "reservable",
                "status",
                "status_reason",
            ],
        )
    })
}

fn body(create: &CreateHost) -> Result<Value, CliError> {
    let mut body = properties("--extra", &create.extra)?;
    let fields = [
        ("name", create.name.clone().map(Value::from)),
        ("vcpus", create.vcpus.map(Value::from)),
        ("memory_mb", create.memory_mb.map(Value::from)),
        ("local_gb", create.local_gb.map(Value::from)),
        ("availability_zone", create.zone.clone().map(Value::from)),
        (
            "hypervisor_type",
            create.hypervisor_type.clone().map(Value::from),
        ),
        ("service_name", create.service_name.clone().map(Value::from)),
        (
            "reservable",
            create.not_reservable.then_some(Value::Bool(false)),
        ),
    ];
    for (key, value) in fields {
        if let Some(value) = value {
            body.insert(key.to_owned(), value);
        }
    }
    Ok(Value::Object(body))
}

/// A host's numeric id: the id itself, or the id of the host of that name.
pub(crate) async fn resolve(ctx: &Ctx, host: &str) -> Result<String, CliError> {
    if host.parse::<u64>().is_ok() {
        return Ok(host.to_owned());
    }
    let answer = ctx.client.get(HOSTS).await?;
    named(&answer, host).map(|h| get(h, "id"))
}

/// The host of that name in a host list answer.
fn named<'a>(answer: &'a Value, host: &str) -> Result<&'a Value, CliError> {
    answer["hosts"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|h| h["hypervisor_hostname"] == host)
        .ok_or_else(|| CliError::Refused {
            status: 404,
            body: json!({"error_message": format!("Host {host} not found")}),
        })
}

async fn update(ctx: &Ctx, update: UpdateHost) -> Result<(), CliError> {
    let id = resolve(ctx, &update.host).await?;
    let mut changes: Map<String, Value> = properties("--extra", &update.extra)?;
    for key in &update.unset {
        changes.insert(key.clone(), Value::Null);
    }
    if changes.is_empty() && update.status.is_none() {
        return Err(CliError::Usage(
            "host update needs --extra, --unset or --status".to_owned(),
        ));
    }
    let mut host = Value::Null;
    if !changes.is_empty() {
        host = ctx
            .client
            .put(
                &format!("{HOSTS}/{}", segment(&id)),
                &Value::Object(changes),
            )
            .await?["host"]
            .take();
    }
    if let Some(status) = update.status {
        let mut body = json!({ "status": status });
        if let Some(reason) = update.reason {
            body["reason"] = Value::String(reason);
        }
        let answer = ctx
            .client
            .put(&format!("{HOSTS}/{}/status", segment(&id)), &body)
            .await?;
        report_effects(&answer["leases"]);
        host = answer["host"].clone();
    }
    show(ctx, &host)
}

/// Tells what a status change did to leases.
pub(crate) fn report_effects(leases: &Value) {
    let Some(effects) = leases.as_object() else {
        return;
    };
    for (what, ids) in effects {
        let ids: Vec<String> = ids
            .as_array()
            .into_iter()
            .flatten()
            .map(crate::output::cell)
            .collect();
        if !ids.is_empty() {
            eprintln!("Leases {what}: {}", ids.join(", "));
        }
    }
}

/// Enrols every host of a file, with a progress bar; a refusal does not stop the others.
async fn bulk(ctx: &Ctx, path: &std::path::Path) -> Result<(), CliError> {
    enrol_all(
        ctx,
        path,
        (HOSTS, "host"),
        |mut answer| answer["host"].take(),
        |h| Table::of(&HEADERS, items(h), row),
    )
    .await
}

/// Enrols every entry of the file at `path` (a JSON list of request bodies) with a POST to
/// `url` each, `noun` naming one, with a progress bar; `unwrap` takes the record out of an
/// answer. Prints what was made and what was refused, and fails when anything was.
pub(crate) async fn enrol_all(
    ctx: &Ctx,
    path: &std::path::Path,
    (url, noun): (&str, &str),
    unwrap: impl Fn(Value) -> Value,
    table: impl FnOnce(&Value) -> Table,
) -> Result<(), CliError> {
    let plural = format!("{noun}s");
    let entries = bodies(path, &plural)?;
    let bar = progress::bar(entries.len(), &format!("enrolling {plural}"));
    let mut created = Vec::new();
    let mut failures = Vec::new();
    for (index, item) in entries.iter().enumerate() {
        match ctx.client.post(url, item).await {
            Ok(answer) => created.push(unwrap(answer)),
            Err(error @ CliError::Connection(_)) => {
                bar.abandon();
                return Err(error);
            }
            Err(error) => failures.push(format!(
                "{noun} {} ({}): {}",
                index + 1,
                get(item, "name"),
                failure_text(&error)
            )),
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    finish_bulk(ctx, &plural, &Value::Array(created), &failures, table)
}

/// One line saying why a bulk item failed.
fn failure_text(error: &CliError) -> String {
    match error {
        CliError::Refused { status, body } => format!("{status}: {}", crate::refusal::reason(body)),
        CliError::Usage(m) | CliError::Connection(m) | CliError::Failed(m) => m.clone(),
    }
}

/// Prints what a bulk command made and what it could not; fails when anything failed.
fn finish_bulk(
    ctx: &Ctx,
    what: &str,
    created: &Value,
    failures: &[String],
    table: impl FnOnce(&Value) -> Table,
) -> Result<(), CliError> {
    emit(ctx.format, created, table)?;
    let made = created.as_array().map_or(0, Vec::len);
    match failures.is_empty() {
        true => {
            eprintln!("Enrolled {made} {what}.");
            Ok(())
        }
        false => {
            for failure in failures {
                eprintln!("berth: refused: {failure}");
            }
            Err(CliError::Failed(format!(
                "enrolled {made} {what}; {} refused",
                failures.len()
            )))
        }
    }
}
