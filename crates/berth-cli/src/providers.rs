//! `berth provider ...`: resource providers on the Placement surface
//! (`/placement/resource_providers`, at microversion 1.39).

use crate::client::{query, segment};
use crate::connection::{Connection, Ctx};
use crate::error::CliError;
use crate::output::{Table, emit, get, items};
use clap::{Args, Subcommand};
use serde_json::{Value, json};

const PROVIDERS: &str = "/placement/resource_providers";

/// `berth provider`.
#[derive(Debug, Args)]
pub struct ProviderCommand {
    /// Connection and output.
    #[command(flatten)]
    pub connection: Connection,
    /// What to do.
    #[command(subcommand)]
    pub verb: ProviderVerb,
}

/// What `berth provider` does.
#[derive(Debug, Subcommand)]
pub enum ProviderVerb {
    /// List providers, optionally filtered as Placement filters them.
    List(ListProviders),
    /// Show a provider.
    Show {
        /// Provider uuid.
        uuid: String,
    },
    /// Create a provider.
    Create {
        /// Provider name.
        name: String,
        /// The uuid to give it (berth makes one otherwise).
        #[arg(long)]
        uuid: Option<String>,
        /// The parent provider's uuid.
        #[arg(long)]
        parent: Option<String>,
    },
    /// Rename a provider or move it under another parent.
    Update {
        /// Provider uuid.
        uuid: String,
        /// New name.
        #[arg(long)]
        name: Option<String>,
        /// New parent provider uuid.
        #[arg(long)]
        parent: Option<String>,
    },
    /// Delete a provider.
    Delete {
        /// Provider uuid.
        uuid: String,
    },
}

/// `berth provider list`.
#[derive(Debug, Args)]
pub struct ListProviders {
    /// Only the provider of this name.
    #[arg(long)]
    pub name: Option<String>,
    /// Only providers with this much free capacity, as `VCPU:2,MEMORY_MB:2048`.
    #[arg(long)]
    pub resources: Option<String>,
    /// Only members of these aggregates (`UUID,UUID`, `in:UUID,UUID`, `!UUID`).
    #[arg(long)]
    pub member_of: Option<String>,
    /// Only providers with (or, with `!`, without) these traits, as `HW_CPU_X86_AVX2,!CUSTOM_GPU`.
    #[arg(long)]
    pub required: Option<String>,
    /// Only providers in the tree of this provider.
    #[arg(long)]
    pub in_tree: Option<String>,
}

/// Runs `berth provider`.
pub(crate) async fn run(ctx: &Ctx, verb: ProviderVerb) -> Result<(), CliError> {
    match verb {
        ProviderVerb::List(list) => {
            let path = format!(
                "{PROVIDERS}{}",
                query(&[
                    ("name", list.name),
                    ("resources", list.resources),
                    ("member_of", list.member_of),
                    ("required", list.required),
                    ("in_tree", list.in_tree),
                ])
            );
            let answer = ctx.client.get(&path).await?;
            emit(ctx.format, &answer["resource_providers"], |p| {
                Table::of(
                    &["UUID", "NAME", "GENERATION", "PARENT", "ROOT"],
                    items(p),
                    row,
                )
            })
        }
        ProviderVerb::Show { uuid } => {
            let answer = ctx.client.get(&path(&uuid)).await?;
            show(ctx, &answer)
        }
        ProviderVerb::Create { name, uuid, parent } => {
            let mut body = json!({ "name": name });
            if let Some(uuid) = uuid {
                body["uuid"] = Value::String(uuid);
            }
            if let Some(parent) = parent {
                body["parent_provider_uuid"] = Value::String(parent);
            }
            let answer = ctx.client.post(PROVIDERS, &body).await?;
            show(ctx, &answer)
        }
        ProviderVerb::Update { uuid, name, parent } => {
            if name.is_none() && parent.is_none() {
                return Err(CliError::Usage(
                    "provider update needs --name or --parent".to_owned(),
                ));
            }
            let current = ctx.client.get(&path(&uuid)).await?;
            let mut body = json!({ "name": name.unwrap_or_else(|| get(&current, "name")) });
            if let Some(parent) = parent {
                body["parent_provider_uuid"] = Value::String(parent);
            } else if !current["parent_provider_uuid"].is_null() {
                body["parent_provider_uuid"] = current["parent_provider_uuid"].clone();
            }
            let answer = ctx.client.put(&path(&uuid), &body).await?;
            show(ctx, &answer)
        }
        ProviderVerb::Delete { uuid } => {
            ctx.client.delete(&path(&uuid)).await?;
            eprintln!("Deleted provider {uuid}.");
            Ok(())
        }
    }
}

fn path(uuid: &str) -> String {
    format!("{PROVIDERS}/{}", segment(uuid))
}

fn row(provider: &Value) -> Vec<String> {
    [
        "uuid",
        "name",
        "generation",
        "parent_provider_uuid",
        "root_provider_uuid",
    ]
    .iter()
    .map(|key| get(provider, key))
    .collect()
}

fn show(ctx: &Ctx, provider: &Value) -> Result<(), CliError> {
    emit(ctx.format, provider, |p| {
        let mut table = Table::fields(
            p,
            &[
                "uuid",
                "name",
                "generation",
                "parent_provider_uuid",
                "root_provider_uuid",
            ],
        );
        table.retain(|key| key != "links");
        table
    })
}
