//! `berth node ...` and `berth claim ...`: bare-metal nodes and node claims
//! (`/baremetal/v1/nodes`, `/baremetal/v1/reservations`), with bulk enrolment from a file.

use crate::args::{list, properties};
use crate::client::{query, segment};
use crate::connection::{Connection, Ctx};
use crate::error::CliError;
use crate::hosts::{enrol_all, report_effects};
use crate::output::{Table, emit, get, items};
use clap::{Args, Subcommand};
use serde_json::{Value, json};
use std::path::PathBuf;

const NODES: &str = "/baremetal/v1/nodes";
const CLAIMS: &str = "/baremetal/v1/reservations";

/// `berth node`.
#[derive(Debug, Args)]
pub struct NodeCommand {
    /// Connection and output.
    #[command(flatten)]
    pub connection: Connection,
    /// What to do.
    #[command(subcommand)]
    pub verb: NodeVerb,
}

/// What `berth node` does.
#[derive(Debug, Subcommand)]
pub enum NodeVerb {
    /// List nodes.
    List {
        /// Only nodes in this provision state.
        #[arg(long)]
        provision_state: Option<String>,
        /// Only nodes in (true) or out of (false) maintenance.
        #[arg(long)]
        maintenance: Option<bool>,
        /// Only nodes with (true) or without (false) an instance.
        #[arg(long)]
        associated: Option<bool>,
        /// Only nodes of this resource class.
        #[arg(long)]
        resource_class: Option<String>,
    },
    /// Show a node (by uuid or name).
    Show {
        /// Node uuid or name.
        node: String,
    },
    /// Enrol a node, or every node of a file (`--from-file`).
    Create(CreateNode),
    /// Change a node: name, provision state, maintenance, properties, traits.
    Update(UpdateNode),
    /// Delete a node.
    Delete {
        /// Node uuid or name.
        node: String,
    },
    /// Claim the first eligible node of a list (or of a class) for an instance.
    Claim(ClaimArgs),
    /// Deploy an instance on a node with its claim.
    Deploy {
        /// Node uuid or name.
        node: String,
        /// The claim's uuid.
        #[arg(long)]
        claim: String,
        /// The instance's uuid.
        #[arg(long)]
        instance: String,
    },
}

/// `berth node create`.
#[derive(Debug, Args)]
pub struct CreateNode {
    /// Node name.
    #[arg(required_unless_present = "from_file", conflicts_with = "from_file")]
    pub name: Option<String>,
    /// Resource class, as `baremetal-gold`.
    #[arg(long, required_unless_present = "from_file")]
    pub resource_class: Option<String>,
    /// A property, `key=value` (numbers and true/false are typed); repeatable.
    #[arg(long = "property", value_name = "KEY=VALUE")]
    pub properties: Vec<String>,
    /// A trait, as `CUSTOM_GPU`; repeatable.
    #[arg(long = "trait", value_name = "TRAIT")]
    pub traits: Vec<String>,
    /// Availability zone.
    #[arg(long)]
    pub zone: Option<String>,
    /// Initial provision state: `enroll`, `manageable` or `available`.
    #[arg(long)]
    pub provision_state: Option<String>,
    /// The uuid to give it.
    #[arg(long)]
    pub uuid: Option<String>,
    /// Enrol every node of a JSON file: a list of node bodies as `POST nodes` takes them.
    #[arg(long, value_name = "FILE")]
    pub from_file: Option<PathBuf>,
}

/// `berth node update`.
#[derive(Debug, Args)]
pub struct UpdateNode {
    /// Node uuid or name.
    pub node: String,
    /// New name.
    #[arg(long)]
    pub name: Option<String>,
    /// Move to this provision state.
    #[arg(long)]
    pub provision_state: Option<String>,
    /// Put in (true) or take out of (false) maintenance.
    #[arg(long)]
    pub maintenance: Option<bool>,
    /// Why the node is in maintenance.
    #[arg(long)]
    pub maintenance_reason: Option<String>,
    /// Set a property, `key=value`; repeatable.
    #[arg(long = "property", value_name = "KEY=VALUE")]
    pub properties: Vec<String>,
    /// Remove a property; repeatable.
    #[arg(long = "unset-property", value_name = "KEY")]
    pub unset_properties: Vec<String>,
    /// Replace the traits with these (comma-separated; empty for none).
    #[arg(long)]
    pub traits: Option<String>,
}

/// A node claim's request.
#[derive(Debug, Args)]
pub struct ClaimArgs {
    /// The nodes to try, in order (uuids or names, comma-separated).
    #[arg(long, value_name = "NODES", required_unless_present = "resource_class")]
    pub from: Option<String>,
    /// Any node of this resource class instead of a list.
    #[arg(long, conflicts_with = "from")]
    pub resource_class: Option<String>,
    /// With `--resource-class`: traits the node must have; repeatable.
    #[arg(long = "trait", value_name = "TRAIT", requires = "resource_class")]
    pub traits: Vec<String>,
    /// The instance's uuid.
    #[arg(long)]
    pub instance: String,
    /// How long the claim holds its node [default: berth's], as `10m` or `2h`.
    #[arg(long, value_parser = crate::time::parse_duration)]
    pub ttl: Option<jiff::SignedDuration>,
}

/// Runs `berth node`.
pub(crate) async fn run(ctx: &Ctx, verb: NodeVerb) -> Result<(), CliError> {
    match verb {
        NodeVerb::List {
            provision_state,
            maintenance,
            associated,
            resource_class,
        } => {
            let path = format!(
                "{NODES}{}",
                query(&[
                    ("provision_state", provision_state),
                    ("maintenance", maintenance.map(|m| m.to_string())),
                    ("associated", associated.map(|a| a.to_string())),
                    ("resource_class", resource_class),
                ])
            );
            let answer = ctx.client.get(&path).await?;
            emit(ctx.format, &answer["nodes"], node_table)
        }
        NodeVerb::Show { node } => {
            let answer = ctx.client.get(&node_path(&node)).await?;
            show_node(ctx, &answer)
        }
        NodeVerb::Create(create) => match &create.from_file {
            Some(path) => bulk(ctx, path).await,
            None => {
                let answer = ctx.client.post(NODES, &node_body(&create)?).await?;
                show_node(ctx, &answer)
            }
        },
        NodeVerb::Update(update) => {
            let patch = patch(&update)?;
            let answer = ctx.client.patch(&node_path(&update.node), &patch).await?;
            report_effects(&answer["leases"]);
            show_node(ctx, &answer)
        }
        NodeVerb::Delete { node } => {
            ctx.client.delete(&node_path(&node)).await?;
            eprintln!("Deleted node {node}.");
            Ok(())
        }
        NodeVerb::Claim(claim) => self::claim(ctx, &claim).await,
        NodeVerb::Deploy {
            node,
            claim,
            instance,
        } => {
            let body = json!({"reservation_uuid": claim, "instance_uuid": instance});
            let answer = ctx
                .client
                .post(&format!("{}/deploy", node_path(&node)), &body)
                .await?;
            show_node(ctx, &answer)
        }
    }
}

fn node_path(node: &str) -> String {
    format!("{NODES}/{}", segment(node))
}

const NODE_HEADERS: [&str; 7] = [
    "UUID",
    "NAME",
    "RESOURCE_CLASS",
    "PROVISION_STATE",
    "MAINTENANCE",
    "INSTANCE",
    "ZONE",
];

fn node_table(nodes: &Value) -> Table {
    Table::of(&NODE_HEADERS, items(nodes), |n| {
        [
            "uuid",
            "name",
            "resource_class",
            "provision_state",
            "maintenance",
            "instance_uuid",
            "availability_zone",
        ]
        .iter()
        .map(|k| get(n, k))
        .collect()
    })
}

fn show_node(ctx: &Ctx, node: &Value) -> Result<(), CliError> {
    emit(ctx.format, node, |n| {
        let mut table = Table::fields(
            n,
            &[
                "uuid",
                "name",
                "resource_class",
                "provision_state",
                "maintenance",
                "maintenance_reason",
                "instance_uuid",
                "claim_uuid",
                "availability_zone",
                "properties",
                "traits",
            ],
        );
        table.retain(|key| key != "links");
        table
    })
}

fn node_body(create: &CreateNode) -> Result<Value, CliError> {
    let mut body = json!({
        "name": create.name,
        "resource_class": create.resource_class,
        "properties": properties("--property", &create.properties)?,
        "traits": create.traits,
    });
    for (key, value) in [
        ("availability_zone", &create.zone),
        ("provision_state", &create.provision_state),
        ("uuid", &create.uuid),
    ] {
        if let Some(value) = value {
            body[key] = Value::String(value.clone());
        }
    }
    Ok(body)
}

/// The JSON Patch of `node update`.
fn patch(update: &UpdateNode) -> Result<Value, CliError> {
    let mut ops = Vec::new();
    let replace = |path: &str, value: Value| json!({"op": "replace", "path": path, "value": value});
    if let Some(name) = &update.name {
        ops.push(replace("/name", json!(name)));
    }
    if let Some(state) = &update.provision_state {
        ops.push(replace("/provision_state", json!(state)));
    }
    if let Some(on) = update.maintenance {
        ops.push(replace("/maintenance", json!(on)));
    }
    if let Some(reason) = &update.maintenance_reason {
        ops.push(replace("/maintenance_reason", json!(reason)));
    }
    for (key, value) in properties("--property", &update.properties)? {
        ops.push(json!({"op": "add", "path": format!("/properties/{key}"), "value": value}));
    }
    for key in &update.unset_properties {
        ops.push(json!({"op": "remove", "path": format!("/properties/{key}")}));
    }
    if let Some(traits) = &update.traits {
        ops.push(replace("/traits", json!(list(traits))));
    }
    match ops.is_empty() {
        true => Err(CliError::Usage(
            "node update needs something to change (--name, --provision-state, --maintenance, ...)"
                .to_owned(),
        )),
        false => Ok(Value::Array(ops)),
    }
}

/// A node's uuid: the uuid itself, or the uuid of the node of that name.
async fn node_uuid(ctx: &Ctx, node: &str) -> Result<String, CliError> {
    if uuid::Uuid::parse_str(node).is_ok() {
        return Ok(node.to_owned());
    }
    Ok(get(&ctx.client.get(&node_path(node)).await?, "uuid"))
}

async fn claim(ctx: &Ctx, claim: &ClaimArgs) -> Result<(), CliError> {
    let mut body = json!({ "instance_uuid": claim.instance });
    match (&claim.from, &claim.resource_class) {
        (Some(from), _) => {
            let mut uuids = Vec::new();
            for node in list(from) {
                uuids.push(node_uuid(ctx, &node).await?);
            }
            if uuids.is_empty() {
                return Err(CliError::Usage("--from names no node".to_owned()));
            }
            body["node_uuid"] = json!(uuids);
        }
        (None, Some(class)) => {
            body["resource_class"] = json!(class);
            body["traits"] = json!(claim.traits);
        }
        (None, None) => {
            return Err(CliError::Usage(
                "give --from NODES or --resource-class CLASS".to_owned(),
            ));
        }
    }
    if let Some(ttl) = claim.ttl {
        body["ttl"] = json!(ttl.as_secs());
    }
    let answer = ctx.client.post(CLAIMS, &body).await?;
    show_claim(ctx, &answer["reservation"])
}

/// Enrols every node of a file, with a progress bar; a refusal does not stop the others.
async fn bulk(ctx: &Ctx, path: &std::path::Path) -> Result<(), CliError> {
    enrol_all(ctx, path, (NODES, "node"), |node| node, node_table).await
}

/// `berth claim`.
#[derive(Debug, Args)]
pub struct ClaimCommand {
    /// Connection and output.
    #[command(flatten)]
    pub connection: Connection,
    /// What to do.
    #[command(subcommand)]
    pub verb: ClaimVerb,
}

/// What `berth claim` does.
#[derive(Debug, Subcommand)]
pub enum ClaimVerb {
    /// List claims.
    List {
        /// Only claims of this node (uuid).
        #[arg(long)]
        node: Option<String>,
        /// Only claims for this instance.
        #[arg(long)]
        instance: Option<String>,
    },
    /// Show a claim.
    Show {
        /// Claim uuid.
        uuid: String,
    },
    /// Claim a node (as `berth node claim`).
    Create(ClaimArgs),
    /// Release a claim.
    Delete {
        /// Claim uuid.
        uuid: String,
    },
}

/// Runs `berth claim`.
pub(crate) async fn run_claim(ctx: &Ctx, verb: ClaimVerb) -> Result<(), CliError> {
    match verb {
        ClaimVerb::List { node, instance } => {
            let node = match node {
                Some(node) => Some(node_uuid(ctx, &node).await?),
                None => None,
            };
            let path = format!(
                "{CLAIMS}{}",
                query(&[("node_uuid", node), ("instance_uuid", instance)])
            );
            let answer = ctx.client.get(&path).await?;
            emit(ctx.format, &answer["reservations"], |claims| {
                Table::of(
                    &["UUID", "NODE", "INSTANCE", "PROJECT", "EXPIRES"],
                    items(claims),
                    |c| {
                        vec![
                            get(c, "uuid"),
                            get(c, "node_uuid"),
                            get(c, "instance_uuid"),
                            get(c, "project_id"),
                            crate::time::show(&get(c, "expires_at")),
                        ]
                    },
                )
            })
        }
        ClaimVerb::Show { uuid } => {
            let answer = ctx
                .client
                .get(&format!("{CLAIMS}/{}", segment(&uuid)))
                .await?;
            show_claim(ctx, &answer["reservation"])
        }
        ClaimVerb::Create(claim) => self::claim(ctx, &claim).await,
        ClaimVerb::Delete { uuid } => {
            ctx.client
                .delete(&format!("{CLAIMS}/{}", segment(&uuid)))
                .await?;
            eprintln!("Released claim {uuid}.");
            Ok(())
        }
    }
}

fn show_claim(ctx: &Ctx, claim: &Value) -> Result<(), CliError> {
    emit(ctx.format, claim, |c| {
        let mut table = Table::fields(
            c,
            &[
                "uuid",
                "node_uuid",
                "instance_uuid",
                "project_id",
                "created_at",
                "expires_at",
            ],
        );
        table.retain(|key| key != "links");
        table
    })
}
