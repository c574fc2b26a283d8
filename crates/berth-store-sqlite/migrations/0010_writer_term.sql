-- The writer's term, where several replicas share a database: the one replica the others forward
-- their writes to. One process holds an SQLite database, so this table stays empty; it exists so
-- that both adapters have the same tables. `expires_at` is epoch microseconds.

CREATE TABLE writer_term (
    id INTEGER NOT NULL CONSTRAINT writer_term_pkey PRIMARY KEY CHECK (id = 1),
    holder TEXT NOT NULL,
    url TEXT NOT NULL,
    secret TEXT NOT NULL,
    expires_at BIGINT NOT NULL
);
