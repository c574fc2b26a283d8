-- `promise_objects` became the home of every object kept whole as a JSON document, keyed by kind
-- and id: Promise flavors, the policy, instances and pools, subscriptions and deliveries, the
-- outbox cursor, provider conditions, node records and node claims. It is now named for what it
-- holds, and so is its primary key (and the key's index).

ALTER TABLE promise_objects RENAME TO documents;
ALTER TABLE documents RENAME CONSTRAINT promise_objects_pkey TO documents_pkey;
