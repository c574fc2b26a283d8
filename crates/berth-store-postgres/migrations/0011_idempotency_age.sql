-- Idempotency records by age: a commit that records keys prunes the oldest expired records
-- through this index (the records are read by key and never loaded whole).

CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);
