//! `berth provider-cloud add|list|show|remove`: the OpenStack clouds registered with berth
//! (Promise's `add-provider` at `/promise/add-provider`, and `/promise/providers`). Admins only.
//! The password is read from `BERTH_PROVIDER_PASSWORD` (or `--password-file`), never from the
//! command line, where other users of the machine could read it.

use crate::client::segment;
use crate::connection::{Connection, Ctx};
use crate::error::CliError;
use crate::output::{Table, emit, get, items};
use clap::{Args, Subcommand};
use serde_json::{Value, json};
use std::path::PathBuf;

const PROVIDERS: &str = "/promise/providers";

/// `berth provider-cloud`.
#[derive(Debug, Args)]
pub struct ProviderCloudCommand {
    /// Connection and output.
    #[command(flatten)]
    pub connection: Connection,
    /// What to do.
    #[command(subcommand)]
    pub verb: ProviderCloudVerb,
}

/// What `berth provider-cloud` does.
#[derive(Debug, Subcommand)]
pub enum ProviderCloudVerb {
    /// Register an OpenStack cloud: berth authenticates against its Keystone and finds its
    /// Placement before it registers anything.
    Add(AddCloud),
    /// List the registered clouds.
    List,
    /// Show a registered cloud.
    Show {
        /// The provider id.
        id: String,
    },
    /// Remove a registered cloud (refused while reservations or instances hold its capacity).
    Remove {
        /// The provider id.
        id: String,
        /// Remove it even so: the leases keep the providers they hold, out of service.
        #[arg(long)]
        force: bool,
    },
}

/// `berth provider-cloud add`.
#[derive(Debug, Args)]
pub struct AddCloud {
    /// Keystone's endpoint (`https://keystone.example:5000/v3`; a v2.0 URL is taken as v3).
    #[arg(long)]
    pub endpoint: String,
    /// The user berth authenticates as (default domain).
    #[arg(long)]
    pub username: String,
    /// The project berth works in, by name (default domain).
    #[arg(long, required_unless_present = "project_id")]
    pub project: Option<String>,
    /// The project berth works in, by id.
    #[arg(long)]
    pub project_id: Option<String>,
    /// The region whose endpoints berth uses [default: the first offering Placement].
    #[arg(long)]
    pub region: Option<String>,
    /// The user's password.
    #[arg(
        long,
        env = "BERTH_PROVIDER_PASSWORD",
        hide_env_values = true,
        hide = true
    )]
    pub password: Option<String>,
    /// A file holding the user's password (its first line) [default: BERTH_PROVIDER_PASSWORD].
    #[arg(long)]
    pub password_file: Option<PathBuf>,
}

/// Runs `berth provider-cloud`.
pub(crate) async fn run(ctx: &Ctx, verb: ProviderCloudVerb) -> Result<(), CliError> {
    match verb {
        ProviderCloudVerb::Add(add) => {
            let body = request(&add)?;
            let answer = ctx.client.post("/promise/add-provider", &body).await?;
            let id = get(&answer, "provider-id");
            for note in items(&answer["notes"]) {
                eprintln!("Note: {}", note.as_str().unwrap_or_default());
            }
            let shown = ctx.client.get(&path(&id)).await?;
            show(ctx, &shown["provider"])
        }
        ProviderCloudVerb::List => {
            let answer = ctx.client.get(PROVIDERS).await?;
            emit(ctx.format, &answer["providers"], |providers| {
                Table::of(
                    &["ID", "TYPE", "ENDPOINT", "PROJECT", "REGION", "CREATED"],
                    items(providers),
                    |p| {
                        vec![
                            get(p, "id"),
                            get(p, "provider-type"),
                            get(p, "endpoint"),
                            get(&p["tenant"], "name"),
                            get(p, "region"),
                            crate::time::show(&get(p, "created")),
                        ]
                    },
                )
            })
        }
        ProviderCloudVerb::Show { id } => {
            let answer = ctx.client.get(&path(&id)).await?;
            show(ctx, &answer["provider"])
        }
        ProviderCloudVerb::Remove { id, force } => {
            let query = if force { "?force=true" } else { "" };
            ctx.client.delete(&format!("{}{query}", path(&id))).await?;
            eprintln!("Removed provider cloud {id}.");
            Ok(())
        }
    }
}

fn path(id: &str) -> String {
    format!("{PROVIDERS}/{}", segment(id))
}

fn show(ctx: &Ctx, provider: &Value) -> Result<(), CliError> {
    emit(ctx.format, provider, |p| {
        Table::fields(
            p,
            &[
                "id",
                "provider-type",
                "endpoint",
                "username",
                "tenant",
                "region",
                "services",
            ],
        )
    })
}

/// The `add-provider` request of `add`, with the password from the environment or the file.
fn request(add: &AddCloud) -> Result<Value, CliError> {
    let password = match (&add.password_file, &add.password) {
        (Some(file), _) => std::fs::read_to_string(file)
            .map_err(|e| CliError::Usage(format!("reading {}: {e}", file.display())))?
            .lines()
            .next()
            .unwrap_or_default()
            .to_owned(),
        (None, Some(password)) => password.clone(),
        (None, None) => {
            return Err(CliError::Usage(
                "the password: set BERTH_PROVIDER_PASSWORD or give --password-file".to_owned(),
            ));
        }
    };
    let mut tenant = json!({});
    if let Some(name) = &add.project {
        tenant["name"] = json!(name);
    }
    if let Some(id) = &add.project_id {
        tenant["id"] = json!(id);
    }
    let mut body = json!({"provider-type": "openstack", "endpoint": add.endpoint,
        "username": add.username, "password": password, "tenant": tenant});
    if let Some(region) = &add.region {
        body["region"] = json!(region);
    }
    Ok(body)
}
