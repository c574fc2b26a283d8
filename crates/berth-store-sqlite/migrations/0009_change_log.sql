-- The replication log: every committed catalog write appends the changes it applied, keyed by
-- the catalog sequence it committed as, in the same transaction. A replica that is behind reads
-- the entries after its own sequence and applies them instead of reloading the catalog. `format`
-- is the version of the changes' encoding (JSON); writers prune the oldest entries beyond the
-- retained count, and a replica that finds its next entry gone reloads. Instants are epoch
-- microseconds.
--
-- One process holds an SQLite database, so nothing follows its commits: SQLite's commits leave
-- this table empty. It exists so that both adapters have the same tables.

CREATE TABLE change_log (
    seq BIGINT NOT NULL CONSTRAINT change_log_pkey PRIMARY KEY,
    format BIGINT NOT NULL,
    changes TEXT NOT NULL,
    committed_at BIGINT NOT NULL
);
