-- `promise_objects` became the home of every object kept whole as a JSON document, keyed by kind
-- and id: Promise flavors, the policy, instances and pools, subscriptions and deliveries, the
-- outbox cursor, provider conditions, node records and node claims. It is now named for what it
-- holds. SQLite cannot rename a constraint, so the table is made anew and its rows copied.

CREATE TABLE documents (
    kind TEXT NOT NULL,
    id TEXT NOT NULL,
    document TEXT NOT NULL,
    CONSTRAINT documents_pkey PRIMARY KEY (kind, id)
);
INSERT INTO documents (kind, id, document) SELECT kind, id, document FROM promise_objects;
DROP TABLE promise_objects;
