-- The usage history (berth's usage reports): spans of what each project reserved and
-- consumed, by provider and resource class. A commit that changes a consumer's allocations or
-- a lease's holds ends the source's running spans at that instant, drops those that had not
-- begun, and adds its new ones (`until` NULL while a span runs). Kept here alone: never loaded
-- with the catalog. Instants are epoch microseconds.

CREATE TABLE usage_segments (
    id INTEGER PRIMARY KEY,
    source_kind TEXT NOT NULL,
    source TEXT NOT NULL,
    kind TEXT NOT NULL,
    project_id TEXT NOT NULL,
    reservation_id TEXT,
    provider_id TEXT NOT NULL,
    resource_class TEXT NOT NULL,
    amount BIGINT NOT NULL,
    since BIGINT NOT NULL,
    until BIGINT
);

CREATE INDEX usage_segments_source ON usage_segments (source_kind, source);
CREATE INDEX usage_segments_since ON usage_segments (since);
