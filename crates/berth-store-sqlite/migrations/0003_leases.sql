-- Leases, the floating IPs they may reserve, and the durable lifecycle record. Instants are
-- epoch microseconds.
--
-- leases: one row per lease. `document` is the whole lease (reservations, what each holds, the
-- lifecycle events) as JSON, written and read as one value; the other columns copy the fields
-- the database may filter on. No foreign keys to the hosts and floating IPs a lease holds: the
-- core checks those.
--
-- floating_ips: the addresses registered for reservation; an address is unique on its network.
--
-- lease_records: the append-only lifecycle record of every lease, the outbox notifications are
-- delivered from (by `seq`). No foreign key: the record of a lease outlives the lease. Writers
-- append under the catalog write lock, so entries commit in `seq` order.

CREATE TABLE leases (
    id TEXT NOT NULL CONSTRAINT leases_pkey PRIMARY KEY,
    project_id TEXT NOT NULL,
    status TEXT NOT NULL,
    start_at BIGINT NOT NULL,
    end_at BIGINT NOT NULL,
    document TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX leases_project_idx ON leases (project_id);
CREATE INDEX leases_end_idx ON leases (end_at);

CREATE TABLE floating_ips (
    id TEXT NOT NULL CONSTRAINT floating_ips_pkey PRIMARY KEY,
    network_id TEXT NOT NULL,
    subnet_id TEXT NULL,
    address TEXT NOT NULL,
    reservable BOOLEAN NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    CONSTRAINT floating_ips_address_key UNIQUE (network_id, address)
);

CREATE TABLE lease_records (
    seq INTEGER NOT NULL CONSTRAINT lease_records_pkey PRIMARY KEY AUTOINCREMENT,
    lease_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    at BIGINT NOT NULL,
    details TEXT NOT NULL
);
CREATE INDEX lease_records_lease_idx ON lease_records (lease_id, seq);
