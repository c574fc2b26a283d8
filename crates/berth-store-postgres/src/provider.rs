//! Providers' updates PostgreSQL's way: a batch's updated providers written in one statement
//! whatever their number, the columns bound as arrays and unnested.

use berth_core::model::provider::ProviderRow;
use berth_store::codec::{encode_instant, encode_u64};
use sqlx::Postgres;
use sqlx::postgres::PgArguments;
use sqlx::query::Query;
use std::collections::HashSet;

/// Binds the columns of each provider's last row in `rows` (the order they were decided in) as
/// the next seven parameters, for `UPDATE resource_providers ... FROM UNNEST(...)`. The names'
/// uniqueness is checked once the statement has written every row (the constraint is
/// deferrable), so rows that swap names are written together.
pub(crate) fn bind_updates<'q>(
    query: Query<'q, Postgres, PgArguments>,
    rows: &[&'q ProviderRow],
) -> Query<'q, Postgres, PgArguments> {
    let mut seen = HashSet::with_capacity(rows.len());
    let last: Vec<&ProviderRow> = rows
        .iter()
        .rev()
        .filter(|row| seen.insert(row.uuid))
        .copied()
        .collect();
    query
        .bind(last.iter().map(|row| row.uuid.uuid()).collect::<Vec<_>>())
        .bind(last.iter().map(|row| row.name.as_str()).collect::<Vec<_>>())
        .bind(
            last.iter()
                .map(|row| row.parent.map(|p| p.uuid()))
                .collect::<Vec<_>>(),
        )
        .bind(last.iter().map(|row| row.root.uuid()).collect::<Vec<_>>())
        .bind(
            last.iter()
                .map(|row| encode_u64(row.generation))
                .collect::<Vec<_>>(),
        )
        .bind(
            last.iter()
                .map(|row| row.availability_zone.as_deref())
                .collect::<Vec<_>>(),
        )
        .bind(
            last.iter()
                .map(|row| encode_instant(row.updated_at))
                .collect::<Vec<_>>(),
        )
}
