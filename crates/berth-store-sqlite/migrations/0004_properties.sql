-- Host properties marked private: hidden from property listings unless an admin asks for all.
-- A property is public unless it has a row here.

CREATE TABLE resource_properties (
    name TEXT NOT NULL CONSTRAINT resource_properties_pkey PRIMARY KEY,
    private BOOLEAN NOT NULL,
    updated_at BIGINT NOT NULL
);
