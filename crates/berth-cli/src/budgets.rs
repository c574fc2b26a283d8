//! `berth budget` (`/reservation/v1/budgets`): a project's budget of resource-hours per period
//! and what each period has been charged; an admin sets and removes them.

use crate::client::segment;
use crate::connection::{Connection, Ctx};
use crate::error::CliError;
use crate::leases::class_amounts;
use crate::output::{Table, emit, get, items};
use crate::time;
use clap::{Args, Subcommand};
use serde_json::{Value, json};

/// `berth budget`.
#[derive(Debug, Args)]
pub struct BudgetCommand {
    /// Connection and output.
    #[command(flatten)]
    pub connection: Connection,
    /// What to do.
    #[command(subcommand)]
    pub verb: BudgetVerb,
}

/// What `berth budget` does.
#[derive(Debug, Subcommand)]
pub enum BudgetVerb {
    /// The budgets you see (your project's, or every project's for an admin), period by period.
    List,
    /// One project's budget, period by period.
    Show {
        /// The project.
        project: String,
    },
    /// Set a project's budget (admin): the most unit-hours of each class its leases may hold
    /// per period; a lease past it is refused with what would fit.
    Set {
        /// The project.
        project: String,
        /// `day`, `week` (from Monday) or `month` (UTC).
        #[arg(long, default_value = "month", value_parser = ["day", "week", "month"])]
        period: String,
        /// The most unit-hours of a class per period, as `VCPU=2000`; repeatable, at least
        /// one.
        #[arg(long = "limit", value_name = "CLASS=HOURS", required = true)]
        limits: Vec<String>,
    },
    /// Remove a project's budget (admin).
    Delete {
        /// The project.
        project: String,
    },
}

const BUDGETS: &str = "/reservation/v1/budgets";

/// Runs `berth budget`.
pub(crate) async fn run(ctx: &Ctx, verb: BudgetVerb) -> Result<(), CliError> {
    match verb {
        BudgetVerb::List => {
            let answer = ctx.client.get(BUDGETS).await?;
            show(ctx, &answer["budgets"])
        }
        BudgetVerb::Show { project } => {
            let path = format!("{BUDGETS}/{}", segment(&project));
            let answer = ctx.client.get(&path).await?;
            show(ctx, &json!([answer["budget"]]))
        }
        BudgetVerb::Set {
            project,
            period,
            limits,
        } => {
            let body = json!({"period": period, "limits": class_amounts("--limit", &limits)?});
            let path = format!("{BUDGETS}/{}", segment(&project));
            let answer = ctx.client.put(&path, &body).await?;
            show(ctx, &json!([answer["budget"]]))
        }
        BudgetVerb::Delete { project } => {
            ctx.client
                .delete(&format!("{BUDGETS}/{}", segment(&project)))
                .await?;
            eprintln!("Project {project} has no budget any more.");
            Ok(())
        }
    }
}

/// Budgets as a table: one line per project, period and limited class.
fn show(ctx: &Ctx, budgets: &Value) -> Result<(), CliError> {
    emit(ctx.format, budgets, |budgets| {
        let mut rows = Vec::new();
        for budget in items(budgets) {
            let limits = budget["limits"].as_object().cloned().unwrap_or_default();
            for period in items(&budget["periods"]) {
                for (class, limit) in &limits {
                    rows.push(json!({
                        "project": budget["project_id"], "period": budget["period"],
                        "from": period["start"], "class": class, "limit": limit,
                        "charged": period["charged_hours"][class],
                        "left": period["left_hours"][class],
                    }));
                }
            }
        }
        let hours = |v: &Value| {
            v.as_f64()
                .map_or_else(|| "0.00".to_owned(), |h| format!("{h:.2}"))
        };
        Table::of(
            &[
                "PROJECT",
                "PERIOD",
                "FROM",
                "CLASS",
                "LIMIT_H",
                "CHARGED_H",
                "LEFT_H",
            ],
            &rows,
            |r| {
                vec![
                    get(r, "project"),
                    get(r, "period"),
                    time::show(&get(r, "from")),
                    get(r, "class"),
                    get(r, "limit"),
                    hours(&r["charged"]),
                    hours(&r["left"]),
                ]
            },
        )
    })
}
