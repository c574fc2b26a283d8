-- The inventory catalog: providers, their inventories, traits, aggregates, attributes and hosts,
-- plus custom resource classes and traits. Instants are epoch microseconds.

CREATE TABLE berth_meta (
    id INTEGER NOT NULL CONSTRAINT berth_meta_pkey PRIMARY KEY CHECK (id = 1),
    catalog_seq BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
INSERT INTO berth_meta (id, catalog_seq, created_at, updated_at) VALUES (1, 0, 0, 0);

CREATE TABLE resource_classes (
    name TEXT NOT NULL CONSTRAINT resource_classes_pkey PRIMARY KEY,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

CREATE TABLE traits (
    name TEXT NOT NULL CONSTRAINT traits_pkey PRIMARY KEY,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

CREATE TABLE resource_providers (
    id BIGINT NOT NULL CONSTRAINT resource_providers_pkey PRIMARY KEY,
    uuid TEXT NOT NULL CONSTRAINT resource_providers_uuid_key UNIQUE,
    name TEXT NOT NULL CONSTRAINT resource_providers_name_key UNIQUE,
    parent_uuid TEXT NULL,
    root_uuid TEXT NOT NULL,
    generation BIGINT NOT NULL,
    availability_zone TEXT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX resource_providers_root_idx ON resource_providers (root_uuid);

CREATE TABLE inventories (
    provider_uuid TEXT NOT NULL CONSTRAINT inventories_provider_fkey
        REFERENCES resource_providers (uuid) ON DELETE CASCADE,
    resource_class TEXT NOT NULL,
    total BIGINT NOT NULL,
    reserved BIGINT NOT NULL,
    min_unit BIGINT NOT NULL,
    max_unit BIGINT NOT NULL,
    step_size BIGINT NOT NULL,
    allocation_ratio DOUBLE PRECISION NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    CONSTRAINT inventories_pkey PRIMARY KEY (provider_uuid, resource_class)
);

CREATE TABLE provider_traits (
    provider_uuid TEXT NOT NULL CONSTRAINT provider_traits_provider_fkey
        REFERENCES resource_providers (uuid) ON DELETE CASCADE,
    trait TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    CONSTRAINT provider_traits_pkey PRIMARY KEY (provider_uuid, trait)
);

CREATE TABLE provider_aggregates (
    provider_uuid TEXT NOT NULL CONSTRAINT provider_aggregates_provider_fkey
        REFERENCES resource_providers (uuid) ON DELETE CASCADE,
    aggregate_uuid TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    CONSTRAINT provider_aggregates_pkey PRIMARY KEY (provider_uuid, aggregate_uuid)
);
CREATE INDEX provider_aggregates_aggregate_idx ON provider_aggregates (aggregate_uuid);

CREATE TABLE provider_attributes (
    provider_uuid TEXT NOT NULL CONSTRAINT provider_attributes_provider_fkey
        REFERENCES resource_providers (uuid) ON DELETE CASCADE,
    key TEXT NOT NULL,
    kind TEXT NOT NULL CONSTRAINT provider_attributes_kind_check CHECK (kind IN ('string', 'number', 'bool')),
    value TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    CONSTRAINT provider_attributes_pkey PRIMARY KEY (provider_uuid, key)
);

CREATE TABLE hosts (
    provider_uuid TEXT NOT NULL CONSTRAINT hosts_pkey PRIMARY KEY
        CONSTRAINT hosts_provider_fkey REFERENCES resource_providers (uuid) ON DELETE CASCADE,
    hypervisor_type TEXT NULL,
    service_name TEXT NULL,
    reservable BOOLEAN NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

CREATE TABLE aggregates (
    uuid TEXT NOT NULL CONSTRAINT aggregates_pkey PRIMARY KEY,
    name TEXT NULL CONSTRAINT aggregates_name_key UNIQUE,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

CREATE TABLE aggregate_metadata (
    aggregate_uuid TEXT NOT NULL CONSTRAINT aggregate_metadata_aggregate_fkey
        REFERENCES aggregates (uuid) ON DELETE CASCADE,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    CONSTRAINT aggregate_metadata_pkey PRIMARY KEY (aggregate_uuid, key)
);
