-- Idempotency keys of create requests (Blazar leases, Promise reservations, node claims): per
-- project and route, the key, a fingerprint of the first request with it, the object it created
-- and when. A row is written in the same transaction as the object it names, and deleted by a
-- later write once it is older than the keys' lifetime (24 hours). Instants are epoch
-- microseconds.
--
-- The PostgreSQL dialect of the SQLite adapter's schema: the same table, columns and constraint
-- names, with a native `uuid` column.

CREATE TABLE idempotency_keys (
    project_id TEXT NOT NULL,
    route TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    object_id UUID NOT NULL,
    created_at BIGINT NOT NULL,
    CONSTRAINT idempotency_keys_pkey PRIMARY KEY (project_id, route, idempotency_key)
);
