-- The writer's term: the one replica the others forward their writes to, while its term lasts.
-- A replica bids for the term when nobody holds an unexpired one and renews it while it holds
-- it; the others read it to learn where to forward writes, and present `secret` when they do.
-- `expires_at` is epoch microseconds of the database's clock, so replicas never compare their
-- own clocks. Safety never rests on it: the `berth_meta` row lock serializes every writer.
--
-- The PostgreSQL dialect of the SQLite adapter's schema: the same table, columns and constraint
-- names.

CREATE TABLE writer_term (
    id INTEGER NOT NULL CONSTRAINT writer_term_pkey PRIMARY KEY CHECK (id = 1),
    holder TEXT NOT NULL,
    url TEXT NOT NULL,
    secret TEXT NOT NULL,
    expires_at BIGINT NOT NULL
);
