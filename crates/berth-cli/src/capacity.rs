//! `berth capacity show` (`/promise/capacity/{kind}/query`: total, reserved, allocated and
//! available over a window, or how many instances of a flavor fit) and `berth flavor ...`
//! (`/promise/flavors`).

use crate::args::properties;
use crate::client::segment;
use crate::connection::{Connection, Ctx};
use crate::error::CliError;
use crate::output::{Table, emit, emit_text, get, items};
use crate::time::{self, When, parse_when};
use clap::{Args, Subcommand, ValueEnum};
use serde_json::{Value, json};

/// `berth capacity`.
#[derive(Debug, Args)]
pub struct CapacityCommand {
    /// Connection and output.
    #[command(flatten)]
    pub connection: Connection,
    /// What to do.
    #[command(subcommand)]
    pub verb: CapacityVerb,
}

/// What `berth capacity` does.
#[derive(Debug, Subcommand)]
pub enum CapacityVerb {
    /// Capacity over a window: the least total and available, the most reserved and allocated.
    Show(ShowCapacity),
}

/// Which capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Kind {
    /// VCPUs, memory and disk of compute hosts.
    Compute,
    /// Public IP addresses.
    Network,
    /// Storage.
    Storage,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Compute => "compute",
            Kind::Network => "network",
            Kind::Storage => "storage",
        }
    }

    fn measures(self) -> &'static [&'static str] {
        match self {
            Kind::Compute => &["numCpuCores", "virtualMemSize", "virtualDisk"],
            Kind::Network => &["publicIps"],
            Kind::Storage => &["storageSize"],
        }
    }
}

/// `berth capacity show`.
#[derive(Debug, Args)]
pub struct ShowCapacity {
    /// Only this availability zone.
    #[arg(long)]
    pub zone: Option<String>,
    /// Start of the window: `now`, `+2h` or an absolute time.
    #[arg(long, default_value = "now", value_parser = parse_when)]
    pub from: When,
    /// End of the window [default: a second after the start].
    #[arg(long, value_parser = parse_when)]
    pub to: Option<When>,
    /// How many instances of this flavor could be reserved over the whole window.
    #[arg(long, conflicts_with_all = ["measure", "utilization"])]
    pub flavor: Option<String>,
    /// Which capacity.
    #[arg(long, value_enum, default_value_t = Kind::Compute)]
    pub kind: Kind,
    /// Measures to show (`numCpuCores`, `virtualMemSize`, `virtualDisk`, `publicIps`,
    /// `storageSize`) [default: every measure of the kind]; repeatable.
    #[arg(long)]
    pub measure: Vec<String>,
    /// Also show the step function: each instant the figures change.
    #[arg(long)]
    pub utilization: bool,
}

/// Runs `berth capacity`.
pub(crate) async fn run(ctx: &Ctx, verb: CapacityVerb) -> Result<(), CliError> {
    let CapacityVerb::Show(show) = verb;
    let mut period = json!({ "startTime": show.from.wire() });
    if let Some(to) = show.to {
        period["stopTime"] = Value::String(to.wire());
    }
    let mut base = json!({ "timePeriod": period });
    if let Some(zone) = &show.zone {
        base["zoneId"] = Value::String(zone.clone());
    }
    let path = format!("/promise/capacity/{}/query", show.kind.name());
    if let Some(flavor) = &show.flavor {
        base["flavorId"] = Value::String(flavor.clone());
        let answer = ctx.client.post(&path, &base).await?;
        return emit_text(ctx.format, &answer, |a| {
            let mut table = Table::new(&["FLAVOR", "INSTANCES_THAT_FIT"]);
            table.row(vec![
                flavor.clone(),
                get(&a["capacityInformation"], "available"),
            ]);
            format!("{}\n{}", heading(a), table.render())
        });
    }
    let measures: Vec<String> = match show.measure.is_empty() {
        true => show
            .kind
            .measures()
            .iter()
            .map(|m| (*m).to_owned())
            .collect(),
        false => show.measure.clone(),
    };
    let mut answers = Vec::new();
    for measure in &measures {
        let mut body = base.clone();
        body[format!("{}ResourceTypeId", show.kind.name())] = Value::String(measure.clone());
        body["showUtilization"] = Value::Bool(show.utilization);
        let mut answer = ctx.client.post(&path, &body).await?;
        answer["measure"] = Value::String(measure.clone());
        answers.push(answer);
    }
    emit_text(ctx.format, &Value::Array(answers), |all| {
        let list = items(all);
        let mut text = list.first().map(heading).unwrap_or_default();
        text.push('\n');
        text.push_str(
            &figures(&["MEASURE"], list, |a| {
                (get(a, "measure"), &a["capacityInformation"])
            })
            .render(),
        );
        if show.utilization {
            for answer in list {
                text.push_str(&format!("\n{} over the window:\n", get(answer, "measure")));
                text.push_str(
                    &figures(&["TIME (UTC)"], items(&answer["utilization"]), |s| {
                        (time::show(&get(s, "timestamp")), s)
                    })
                    .render(),
                );
            }
        }
        text
    })
}

/// `Zone az1, 2030-01-01 00:00:00 to 2030-01-31 00:00:00 UTC`.
fn heading(answer: &Value) -> String {
    let zone = answer["zoneId"]
        .as_str()
        .map_or_else(|| "Every zone".to_owned(), |z| format!("Zone {z}"));
    format!(
        "{zone}, {} to {} UTC\n",
        time::show(&get(&answer["timePeriod"], "startTime")),
        time::show(&get(&answer["timePeriod"], "stopTime")),
    )
}

/// One row per item: a label, then total, reserved, allocated and available.
fn figures<'v>(
    first: &[&str],
    list: &'v [Value],
    label: impl Fn(&'v Value) -> (String, &'v Value),
) -> Table {
    let mut headers = first.to_vec();
    headers.extend(["TOTAL", "RESERVED", "ALLOCATED", "AVAILABLE"]);
    let mut table = Table::new(&headers);
    for item in list {
        let (name, figures) = label(item);
        let mut row = vec![name];
        row.extend(
            ["total", "reserved", "allocated", "available"]
                .iter()
                .map(|k| get(figures, k)),
        );
        table.row(row);
    }
    table
}

/// `berth flavor`.
#[derive(Debug, Args)]
pub struct FlavorCommand {
    /// Connection and output.
    #[command(flatten)]
    pub connection: Connection,
    /// What to do.
    #[command(subcommand)]
    pub verb: FlavorVerb,
}

/// What `berth flavor` does.
#[derive(Debug, Subcommand)]
pub enum FlavorVerb {
    /// List flavors.
    List,
    /// Show a flavor.
    Show {
        /// Flavor id.
        id: String,
    },
    /// Create a flavor.
    Create {
        /// Flavor name (also its id unless `--id` is given).
        name: String,
        /// Flavor id.
        #[arg(long)]
        id: Option<String>,
        /// VCPUs.
        #[arg(long)]
        vcpus: u64,
        /// Memory in MB.
        #[arg(long)]
        ram: u64,
        /// Disk in GB.
        #[arg(long, default_value_t = 0)]
        disk: u64,
        /// CPU architecture.
        #[arg(long)]
        cpu_arch: Option<String>,
        /// An extra spec, `key=value`; repeatable.
        #[arg(long = "extra-spec", value_name = "KEY=VALUE")]
        extra_specs: Vec<String>,
    },
    /// Delete a flavor.
    Delete {
        /// Flavor id.
        id: String,
    },
}

const FLAVORS: &str = "/promise/flavors";

/// Runs `berth flavor`.
pub(crate) async fn run_flavor(ctx: &Ctx, verb: FlavorVerb) -> Result<(), CliError> {
    match verb {
        FlavorVerb::List => {
            let answer = ctx.client.get(FLAVORS).await?;
            emit(ctx.format, &answer["flavors"], |f| {
                Table::of(
                    &["ID", "NAME", "VCPUS", "RAM", "DISK", "CPU_ARCH"],
                    items(f),
                    |f| {
                        ["id", "name", "vcpus", "ram", "disk", "cpu_architecture"]
                            .iter()
                            .map(|k| get(f, k))
                            .collect()
                    },
                )
            })
        }
        FlavorVerb::Show { id } => {
            let answer = ctx
                .client
                .get(&format!("{FLAVORS}/{}", segment(&id)))
                .await?;
            show_flavor(ctx, &answer["flavor"])
        }
        FlavorVerb::Create {
            name,
            id,
            vcpus,
            ram,
            disk,
            cpu_arch,
            extra_specs,
        } => {
            let mut body = json!({
                "id": id.unwrap_or_else(|| name.clone()),
                "name": name,
                "vcpus": vcpus,
                "ram": ram,
                "disk": disk,
            });
            if let Some(arch) = cpu_arch {
                body["cpu_architecture"] = Value::String(arch);
            }
            if !extra_specs.is_empty() {
                body["extra_specs"] = Value::Object(properties("--extra-spec", &extra_specs)?);
            }
            let answer = ctx.client.post(FLAVORS, &body).await?;
            show_flavor(ctx, &answer["flavor"])
        }
        FlavorVerb::Delete { id } => {
            ctx.client
                .delete(&format!("{FLAVORS}/{}", segment(&id)))
                .await?;
            eprintln!("Deleted flavor {id}.");
            Ok(())
        }
    }
}

fn show_flavor(ctx: &Ctx, flavor: &Value) -> Result<(), CliError> {
    emit(ctx.format, flavor, |f| {
        Table::fields(
            f,
            &["id", "name", "vcpus", "ram", "disk", "cpu_architecture"],
        )
    })
}
