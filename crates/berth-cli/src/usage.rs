//! `berth usage` (`GET /reservation/v1/usage`): unit-hours by project and resource class over
//! a period — reserved, consumed, lent, idle, on demand and preemptible — as a table, berth's
//! JSON or YAML, or CSV.

use crate::client::query;
use crate::connection::{Connection, Ctx};
use crate::error::CliError;
use crate::output::{Table, emit_text, get, items, print};
use crate::time::{self, When, parse_when};
use clap::Args;

/// `berth usage`.
#[derive(Debug, Args)]
pub struct UsageArgs {
    /// Connection and output.
    #[command(flatten)]
    pub connection: Connection,
    /// Start of the period: an absolute time, or `-7d` and the like.
    #[arg(long, value_parser = parse_when, allow_hyphen_values = true)]
    pub from: When,
    /// End of the period [default: now]; usage is counted as far as now.
    #[arg(long, value_parser = parse_when, allow_hyphen_values = true)]
    pub to: Option<When>,
    /// Only this project (an admin's choice; others read their own project's usage).
    #[arg(long)]
    pub project: Option<String>,
    /// Print berth's CSV instead (a header, then a line per project and class).
    #[arg(long)]
    pub csv: bool,
}

/// The columns of the table, with the fields they show.
const COLUMNS: [(&str, &str); 8] = [
    ("PROJECT", "project_id"),
    ("CLASS", "resource_class"),
    ("RESERVED_H", "reserved_hours"),
    ("CONSUMED_H", "consumed_hours"),
    ("LENT_H", "lent_hours"),
    ("IDLE_H", "idle_hours"),
    ("ON_DEMAND_H", "on_demand_hours"),
    ("PREEMPTIBLE_H", "preemptible_hours"),
];

/// Runs `berth usage`.
pub(crate) async fn run(ctx: &Ctx, args: &UsageArgs) -> Result<(), CliError> {
    let path = format!(
        "/reservation/v1/usage{}",
        query(&[
            ("start", Some(args.from.wire())),
            ("end", args.to.map(When::wire)),
            ("project_id", args.project.clone()),
            ("format", args.csv.then(|| "csv".to_owned())),
        ])
    );
    let answer = ctx.client.get(&path).await?;
    if args.csv {
        print(answer.as_str().unwrap_or_default());
        return Ok(());
    }
    emit_text(ctx.format, &answer, |a| {
        let usage = &a["usage"];
        let headers: Vec<&str> = COLUMNS.iter().map(|(h, _)| *h).collect();
        let table = Table::of(&headers, items(&usage["rows"]), |row| {
            COLUMNS
                .iter()
                .map(|(_, field)| {
                    row[*field]
                        .as_f64()
                        .map_or_else(|| get(row, field), |hours| format!("{hours:.2}"))
                })
                .collect()
        });
        format!(
            "Usage from {} to {} UTC (counted until {})\n\n{}",
            time::show(&get(usage, "start")),
            time::show(&get(usage, "end")),
            time::show(&get(usage, "counted_until")),
            table.render()
        )
    })
}
