//! Providers' updates PostgreSQL's way: a batch's updated providers written in one statement
//! whatever their number, the columns bound as arrays and unnested.

use berth_core::model::provider::ProviderRow;
use berth_store::codec::{encode_instant, encode_u64};
use sqlx::Postgres;
use sqlx::postgres::PgArguments;
use sqlx::query::Query;
use std::collections::HashSet;
use uuid::Uuid;

/// The text of the update, binding the columns as `$1` to `$7`: a macro, so that a statement
/// that also does something else can be written around it as one literal.
macro_rules! update_providers {
    () => {
        "UPDATE resource_providers AS p
        SET name = u.name, parent_uuid = u.parent_uuid, root_uuid = u.root_uuid,
            generation = u.generation, availability_zone = u.availability_zone,
            updated_at = u.updated_at
        FROM UNNEST($1::uuid[], $2::text[], $3::uuid[], $4::uuid[], $5::int8[], $6::text[],
            $7::int8[]) AS u (uuid, name, parent_uuid, root_uuid, generation, availability_zone,
            updated_at)
        WHERE p.uuid = u.uuid"
    };
}
pub(crate) use update_providers;

/// The columns of each provider's last row in a batch's rows (in the order they were decided),
/// as the update binds them. The names' uniqueness is checked once the statement has written
/// every row (the constraint is deferrable), so rows that swap names are written together.
pub(crate) struct Updates<'a> {
    uuids: Vec<Uuid>,
    names: Vec<&'a str>,
    parents: Vec<Option<Uuid>>,
    roots: Vec<Uuid>,
    generations: Vec<i64>,
    zones: Vec<Option<&'a str>>,
    updated: Vec<i64>,
}

impl<'a> Updates<'a> {
    /// The columns of `rows`' last row of each provider.
    pub(crate) fn of(rows: &[&'a ProviderRow]) -> Updates<'a> {
        let mut seen = HashSet::with_capacity(rows.len());
        let last: Vec<&ProviderRow> = rows
            .iter()
            .rev()
            .filter(|row| seen.insert(row.uuid))
            .copied()
            .collect();
        let n = last.len();
        let mut updates = Updates {
            uuids: Vec::with_capacity(n),
            names: Vec::with_capacity(n),
            parents: Vec::with_capacity(n),
            roots: Vec::with_capacity(n),
            generations: Vec::with_capacity(n),
            zones: Vec::with_capacity(n),
            updated: Vec::with_capacity(n),
        };
        for row in last {
            updates.uuids.push(row.uuid.uuid());
            updates.names.push(row.name.as_str());
            updates.parents.push(row.parent.map(|parent| parent.uuid()));
            updates.roots.push(row.root.uuid());
            updates.generations.push(encode_u64(row.generation));
            updates.zones.push(row.availability_zone.as_deref());
            updates.updated.push(encode_instant(row.updated_at));
        }
        updates
    }

    /// Binds the columns to `query`, as `$1` to `$7` of [`update_providers`].
    pub(crate) fn bind<'q>(
        self,
        query: Query<'q, Postgres, PgArguments>,
    ) -> Query<'q, Postgres, PgArguments>
    where
        'a: 'q,
    {
        query
            .bind(self.uuids)
            .bind(self.names)
            .bind(self.parents)
            .bind(self.roots)
            .bind(self.generations)
            .bind(self.zones)
            .bind(self.updated)
    }
}
