-- Consumers and what they hold now (Placement allocations). Provider usage is the sum of
-- allocations; a provider with allocations cannot be deleted (the foreign key restricts it).

CREATE TABLE consumers (
    uuid UUID NOT NULL CONSTRAINT consumers_pkey PRIMARY KEY,
    project_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    consumer_type TEXT NULL,
    generation BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX consumers_project_idx ON consumers (project_id, user_id);

CREATE TABLE allocations (
    consumer_uuid UUID NOT NULL CONSTRAINT allocations_consumer_fkey
        REFERENCES consumers (uuid) ON DELETE CASCADE,
    provider_uuid UUID NOT NULL CONSTRAINT allocations_provider_fkey
        REFERENCES resource_providers (uuid),
    resource_class TEXT NOT NULL,
    used BIGINT NOT NULL CONSTRAINT allocations_used_check CHECK (used > 0),
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    CONSTRAINT allocations_pkey PRIMARY KEY (consumer_uuid, provider_uuid, resource_class)
);
CREATE INDEX allocations_provider_idx ON allocations (provider_uuid, resource_class);
