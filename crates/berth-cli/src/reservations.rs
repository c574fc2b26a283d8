//! `berth reservation ...`: the reservations of leases, as the Blazar surface holds them
//! (inside leases; changed with `PUT /reservation/v1/leases/{id}`).

use crate::connection::{Connection, Ctx};
use crate::error::CliError;
use crate::leases::{LEASES, filter_text, lease_path, reservations_table};
use crate::output::{Table, emit, get, items};
use clap::{Args, Subcommand};
use serde_json::{Value, json};

/// `berth reservation`.
#[derive(Debug, Args)]
pub struct ReservationCommand {
    /// Connection and output.
    #[command(flatten)]
    pub connection: Connection,
    /// What to do.
    #[command(subcommand)]
    pub verb: ReservationVerb,
}

/// What `berth reservation` does.
#[derive(Debug, Subcommand)]
pub enum ReservationVerb {
    /// List the reservations of every lease (or of one).
    List {
        /// Only the reservations of this lease (id or name).
        #[arg(long)]
        lease: Option<String>,
    },
    /// Show a reservation.
    Show {
        /// Reservation id.
        id: String,
    },
    /// Change a reservation (re-admitted by berth, or refused with a counter-offer).
    Update(UpdateReservation),
}

/// `berth reservation update`.
#[derive(Debug, Args)]
pub struct UpdateReservation {
    /// Reservation id.
    pub id: String,
    /// Hosts: the fewest.
    #[arg(long)]
    pub min: Option<u64>,
    /// Hosts: the most.
    #[arg(long)]
    pub max: Option<u64>,
    /// Instances or floating IPs: how many.
    #[arg(long)]
    pub amount: Option<u64>,
    /// Instances: VCPUs each.
    #[arg(long)]
    pub vcpus: Option<u64>,
    /// Instances: memory each, in MB.
    #[arg(long)]
    pub memory_mb: Option<u64>,
    /// Instances: disk each, in GB.
    #[arg(long)]
    pub disk_gb: Option<u64>,
    /// The filter hosts must pass (`gpu == true`, or berth's JSON).
    #[arg(long)]
    pub filter: Option<String>,
}

/// Runs `berth reservation`.
pub(crate) async fn run(ctx: &Ctx, verb: ReservationVerb) -> Result<(), CliError> {
    match verb {
        ReservationVerb::List { lease } => {
            let leases = match lease {
                Some(lease) => vec![crate::leases::find(ctx, &lease).await?],
                None => items(&ctx.client.get(LEASES).await?["leases"]).to_vec(),
            };
            let all: Vec<Value> = leases
                .iter()
                .flat_map(|l| items(&l["reservations"]).iter().cloned())
                .collect();
            emit(ctx.format, &Value::Array(all), |all| {
                let mut table = reservations_table(all);
                table.insert_column(
                    1,
                    "LEASE",
                    items(all).iter().map(|r| get(r, "lease_id")).collect(),
                );
                table
            })
        }
        ReservationVerb::Show { id } => {
            let (_, reservation) = find(ctx, &id).await?;
            show(ctx, &reservation)
        }
        ReservationVerb::Update(update) => self::update(ctx, update).await,
    }
}

/// The lease holding a reservation, and the reservation.
async fn find(ctx: &Ctx, id: &str) -> Result<(Value, Value), CliError> {
    let answer = ctx.client.get(LEASES).await?;
    items(&answer["leases"])
        .iter()
        .find_map(|lease| {
            items(&lease["reservations"])
                .iter()
                .find(|r| r["id"] == id)
                .map(|r| (lease.clone(), r.clone()))
        })
        .ok_or_else(|| CliError::Refused {
            status: 404,
            body: json!({"error_message": format!("Reservation {id} could not be found")}),
        })
}

fn show(ctx: &Ctx, reservation: &Value) -> Result<(), CliError> {
    emit(ctx.format, reservation, |r| {
        Table::fields(
            r,
            &[
                "id",
                "lease_id",
                "resource_type",
                "status",
                "missing_resources",
            ],
        )
    })
}

async fn update(ctx: &Ctx, update: UpdateReservation) -> Result<(), CliError> {
    let (lease, _) = find(ctx, &update.id).await?;
    let mut change = json!({ "id": update.id });
    for (key, value) in [
        ("min", update.min),
        ("max", update.max),
        ("amount", update.amount),
        ("vcpus", update.vcpus),
        ("memory_mb", update.memory_mb),
        ("disk_gb", update.disk_gb),
    ] {
        if let Some(value) = value {
            change[key] = json!(value);
        }
    }
    if let Some(filter) = update.filter {
        change["resource_properties"] =
            Value::String(filter_text("--filter", Some(&filter), None)?);
    }
    if change.as_object().is_some_and(|c| c.len() == 1) {
        return Err(CliError::Usage(
            "reservation update needs something to change (--min, --max, --amount, ...)".to_owned(),
        ));
    }
    let body = json!({ "reservations": [change] });
    let answer = ctx
        .client
        .put(&lease_path(&get(&lease, "id")), &body)
        .await?;
    let updated = items(&answer["lease"]["reservations"])
        .iter()
        .find(|r| r["id"] == update.id)
        .cloned()
        .unwrap_or(Value::Null);
    show(ctx, &updated)
}
