//! What the shared SQL code needs of an sqlx driver, named once: running a query on a
//! connection, binding a parameter and reading a column, each for the value types berth stores.
//!
//! Every sqlx database has these capabilities (the blanket impls below); the traits exist so that
//! [`SqlBackend`](super::SqlBackend) can require them of its database once, instead of every
//! generic function restating the driver's `Executor`, `Encode` and `Decode` bounds. Calls are
//! resolved at compile time: no dynamic dispatch per query or per row.

use crate::port::StoreError;
use sqlx::query::Query;
use sqlx::{ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Row, Type};
use std::future::Future;

/// A query on the database `DB` with its own arguments.
pub type SqlQuery<'q, DB> = Query<'q, DB, <DB as Database>::Arguments>;

/// Runs queries on a connection of the database.
pub trait Driver: Database {
    /// Runs `query`, discarding what it returns.
    fn run<'c>(
        conn: &'c mut Self::Connection,
        query: SqlQuery<'c, Self>,
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send + 'c;

    /// Runs `query` and returns every row.
    fn rows<'c>(
        conn: &'c mut Self::Connection,
        query: SqlQuery<'c, Self>,
    ) -> impl Future<Output = Result<Vec<Self::Row>, sqlx::Error>> + Send + 'c;

    /// Runs `query` and returns its one row.
    fn row<'c>(
        conn: &'c mut Self::Connection,
        query: SqlQuery<'c, Self>,
    ) -> impl Future<Output = Result<Self::Row, sqlx::Error>> + Send + 'c;
}

impl<DB> Driver for DB
where
    DB: Database,
    DB::Arguments: IntoArguments<DB>,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
{
    async fn run<'c>(
        conn: &'c mut Self::Connection,
        query: SqlQuery<'c, Self>,
    ) -> Result<(), sqlx::Error> {
        query.execute(conn).await.map(drop)
    }

    fn rows<'c>(
        conn: &'c mut Self::Connection,
        query: SqlQuery<'c, Self>,
    ) -> impl Future<Output = Result<Vec<Self::Row>, sqlx::Error>> + Send + 'c {
        query.fetch_all(conn)
    }

    fn row<'c>(
        conn: &'c mut Self::Connection,
        query: SqlQuery<'c, Self>,
    ) -> impl Future<Output = Result<Self::Row, sqlx::Error>> + Send + 'c {
        query.fetch_one(conn)
    }
}

/// Binds a `T` as a query parameter.
pub trait Bind<T>: Database {
    /// `query` with `value` bound as its next parameter.
    fn bind(query: SqlQuery<'_, Self>, value: T) -> SqlQuery<'_, Self>;
}

impl<'t, DB: Database, T> Bind<T> for DB
where
    T: Encode<'t, DB> + Type<DB>,
{
    fn bind(query: SqlQuery<'_, Self>, value: T) -> SqlQuery<'_, Self> {
        query.bind(value)
    }
}

/// Reads a `T` from a named column.
pub trait Read<T>: Database {
    /// The value of `column` in `row`.
    fn read(row: &Self::Row, column: &str) -> Result<T, sqlx::Error>;
}

impl<DB: Database, T> Read<T> for DB
where
    T: for<'r> Decode<'r, DB> + Type<DB>,
    for<'a> &'a str: ColumnIndex<DB::Row>,
{
    fn read(row: &Self::Row, column: &str) -> Result<T, sqlx::Error> {
        row.try_get(column)
    }
}

/// Reads text borrowed from a named column, without copying it.
pub trait ReadText: Database {
    /// The text in `column` of `row`.
    fn read_text<'r>(row: &'r Self::Row, column: &str) -> Result<&'r str, sqlx::Error>;
}

impl<DB: Database> ReadText for DB
where
    for<'r> &'r str: Decode<'r, DB> + Type<DB>,
    for<'a> &'a str: ColumnIndex<DB::Row>,
{
    fn read_text<'r>(row: &'r Self::Row, column: &str) -> Result<&'r str, sqlx::Error> {
        row.try_get(column)
    }
}

/// Binding parameters in a chain: `query.arg(a).arg(b)`.
pub trait Args: Sized {
    /// The database the query runs on.
    type Db: Database;

    /// The query with `value` bound as its next parameter.
    fn arg<T>(self, value: T) -> Self
    where
        Self::Db: Bind<T>;
}

impl<'q, DB: Database> Args for SqlQuery<'q, DB> {
    type Db = DB;

    fn arg<T>(self, value: T) -> Self
    where
        DB: Bind<T>,
    {
        DB::bind(self, value)
    }
}

/// Reading a row's columns by name: `row.column("name")?`, `row.text("name")?`.
pub trait Columns: Row {
    /// The value of `name`; a value the column type cannot hold is a backend error.
    fn column<T>(&self, name: &str) -> Result<T, StoreError>
    where
        Self::Database: Read<T>;

    /// The text in `name`, borrowed from the row.
    fn text(&self, name: &str) -> Result<&str, StoreError>
    where
        Self::Database: ReadText;
}

impl<R: Row> Columns for R {
    fn column<T>(&self, name: &str) -> Result<T, StoreError>
    where
        R::Database: Read<T>,
    {
        <R::Database as Read<T>>::read(self, name).map_err(|e| StoreError::Backend(e.into()))
    }

    fn text(&self, name: &str) -> Result<&str, StoreError>
    where
        R::Database: ReadText,
    {
        <R::Database as ReadText>::read_text(self, name).map_err(|e| StoreError::Backend(e.into()))
    }
}
