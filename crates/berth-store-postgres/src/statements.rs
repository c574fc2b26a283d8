//! The PostgreSQL text of every statement berth's shared SQL code runs: numbered `$n`
//! placeholders, uuids as native `uuid`.

use berth_store::sql::{ChangeLogWrites, CommitWrites, Statements};

/// Every statement, in PostgreSQL's dialect.
pub(crate) const SQL: Statements = Statements {
    ping: "SELECT 1",
    catalog_seq: "SELECT catalog_seq FROM berth_meta WHERE id = 1",

    providers: "SELECT id, uuid, name, parent_uuid, root_uuid, generation, availability_zone, created_at, updated_at
        FROM resource_providers ORDER BY id",
    insert_provider: "INSERT INTO resource_providers
        (id, uuid, name, parent_uuid, root_uuid, generation, availability_zone, created_at, updated_at)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    update_provider: "UPDATE resource_providers
        SET name = $1, parent_uuid = $2, root_uuid = $3, generation = $4, availability_zone = $5, updated_at = $6
        WHERE uuid = $7",
    delete_provider: "DELETE FROM resource_providers WHERE uuid = $1",

    inventories: "SELECT provider_uuid, resource_class, total, reserved, min_unit, max_unit, step_size, allocation_ratio
        FROM inventories",
    delete_inventories: "DELETE FROM inventories WHERE provider_uuid = $1",
    insert_inventory: "INSERT INTO inventories
        (provider_uuid, resource_class, total, reserved, min_unit, max_unit, step_size, allocation_ratio,
         created_at, updated_at)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",

    provider_traits: "SELECT provider_uuid, trait FROM provider_traits",
    delete_provider_traits: "DELETE FROM provider_traits WHERE provider_uuid = $1",
    insert_provider_trait: "INSERT INTO provider_traits (provider_uuid, trait, created_at, updated_at)
        VALUES ($1, $2, $3, $4)",

    provider_aggregates: "SELECT provider_uuid, aggregate_uuid FROM provider_aggregates",
    delete_provider_aggregates: "DELETE FROM provider_aggregates WHERE provider_uuid = $1",
    insert_provider_aggregate: "INSERT INTO provider_aggregates
        (provider_uuid, aggregate_uuid, created_at, updated_at) VALUES ($1, $2, $3, $4)",

    provider_attributes: "SELECT provider_uuid, key, kind, value FROM provider_attributes",
    delete_provider_attributes: "DELETE FROM provider_attributes WHERE provider_uuid = $1",
    insert_provider_attribute: "INSERT INTO provider_attributes
        (provider_uuid, key, kind, value, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6)",

    hosts: "SELECT provider_uuid, hypervisor_type, service_name, reservable, created_at FROM hosts",
    upsert_host: "INSERT INTO hosts
        (provider_uuid, hypervisor_type, service_name, reservable, created_at, updated_at)
        VALUES ($1, $2, $3, $4, $5, $6)
        ON CONFLICT (provider_uuid) DO UPDATE SET hypervisor_type = excluded.hypervisor_type,
        service_name = excluded.service_name, reservable = excluded.reservable,
        updated_at = excluded.updated_at",
    delete_host: "DELETE FROM hosts WHERE provider_uuid = $1",

    resource_classes: "SELECT name FROM resource_classes",
    insert_resource_class: "INSERT INTO resource_classes (name, created_at, updated_at) VALUES ($1, $2, $3)",
    delete_resource_class: "DELETE FROM resource_classes WHERE name = $1",

    custom_traits: "SELECT name FROM traits",
    insert_custom_trait: "INSERT INTO traits (name, created_at, updated_at) VALUES ($1, $2, $3)",
    delete_custom_trait: "DELETE FROM traits WHERE name = $1",

    aggregates: "SELECT uuid, name FROM aggregates",
    aggregate_metadata: "SELECT aggregate_uuid, key, value FROM aggregate_metadata",
    delete_aggregate: "DELETE FROM aggregates WHERE uuid = $1",
    insert_aggregate: "INSERT INTO aggregates (uuid, name, created_at, updated_at) VALUES ($1, $2, $3, $4)",
    insert_aggregate_metadata: "INSERT INTO aggregate_metadata
        (aggregate_uuid, key, value, created_at, updated_at) VALUES ($1, $2, $3, $4, $5)",

    consumers: "SELECT uuid, project_id, user_id, consumer_type, reservation_id, generation, created_at, updated_at
        FROM consumers",
    allocations: "SELECT consumer_uuid, provider_uuid, resource_class, used FROM allocations",
    delete_consumer: "DELETE FROM consumers WHERE uuid = $1",
    insert_consumer: "INSERT INTO consumers
        (uuid, project_id, user_id, consumer_type, reservation_id, generation, created_at, updated_at)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    insert_allocation: "INSERT INTO allocations
        (consumer_uuid, provider_uuid, resource_class, used, created_at, updated_at)
        VALUES ($1, $2, $3, $4, $5, $6)",

    upsert_lease: "INSERT INTO leases
        (id, project_id, status, start_at, end_at, document, created_at, updated_at)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
        ON CONFLICT (id) DO UPDATE SET project_id = excluded.project_id,
        status = excluded.status, start_at = excluded.start_at, end_at = excluded.end_at,
        document = excluded.document, updated_at = excluded.updated_at",
    delete_lease: "DELETE FROM leases WHERE id = $1",

    floating_ips: "SELECT id, network_id, subnet_id, address, reservable, created_at, updated_at
        FROM floating_ips",
    upsert_floating_ip: "INSERT INTO floating_ips
        (id, network_id, subnet_id, address, reservable, created_at, updated_at)
        VALUES ($1, $2, $3, $4, $5, $6, $7)
        ON CONFLICT (id) DO UPDATE SET network_id = excluded.network_id,
        subnet_id = excluded.subnet_id, address = excluded.address,
        reservable = excluded.reservable, updated_at = excluded.updated_at",
    delete_floating_ip: "DELETE FROM floating_ips WHERE id = $1",

    append_record: "INSERT INTO lease_records (lease_id, kind, at, details) VALUES ($1, $2, $3, $4)",
    records_of: "SELECT seq, lease_id, kind, at, details FROM lease_records
        WHERE lease_id = $1 ORDER BY seq",
    records_after: "SELECT seq, lease_id, kind, at, details FROM lease_records
        WHERE seq > $1 ORDER BY seq LIMIT $2",

    private_properties: "SELECT name FROM resource_properties WHERE private",
    upsert_private_property: "INSERT INTO resource_properties (name, private, updated_at) VALUES ($1, TRUE, $2)
        ON CONFLICT (name) DO UPDATE SET private = TRUE, updated_at = excluded.updated_at",
    delete_private_property: "DELETE FROM resource_properties WHERE name = $1",

    documents: "SELECT kind, document FROM documents ORDER BY kind, id",
    upsert_document: "INSERT INTO documents (kind, id, document) VALUES ($1, $2, $3)
        ON CONFLICT (kind, id) DO UPDATE SET document = excluded.document",
    delete_document: "DELETE FROM documents WHERE kind = $1 AND id = $2",

    idempotency_keys_in: "SELECT i.project_id, i.route, i.idempotency_key, i.fingerprint,
            i.object_id, i.created_at
        FROM jsonb_array_elements($1::jsonb) AS k(e)
        JOIN idempotency_keys i ON i.project_id = k.e->>0 AND i.route = k.e->>1
            AND i.idempotency_key = k.e->>2",
    upsert_idempotency_key: "INSERT INTO idempotency_keys
        (project_id, route, idempotency_key, fingerprint, object_id, created_at)
        VALUES ($1, $2, $3, $4, $5, $6)
        ON CONFLICT (project_id, route, idempotency_key) DO UPDATE
        SET fingerprint = excluded.fingerprint, object_id = excluded.object_id,
            created_at = excluded.created_at",
    delete_idempotency_key: "DELETE FROM idempotency_keys
        WHERE project_id = $1 AND route = $2 AND idempotency_key = $3",
    prune_idempotency_keys: "DELETE FROM idempotency_keys
        WHERE (project_id, route, idempotency_key) IN (
            SELECT project_id, route, idempotency_key FROM idempotency_keys
            WHERE created_at < $1 ORDER BY created_at LIMIT $2)",

    usage_insert: "INSERT INTO usage_segments (source_kind, source, kind, project_id,
        reservation_id, provider_id, resource_class, amount, since, until, seq)
        SELECT k.e->>0, (k.e->>1)::uuid, k.e->>2, k.e->>3, (k.e->>4)::uuid, (k.e->>5)::uuid,
            k.e->>6, (k.e->>7)::bigint, (k.e->>8)::bigint, (k.e->>9)::bigint, $2
        FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS k(e, n) ORDER BY k.n",
    usage_prune: "DELETE FROM usage_segments WHERE id IN (
        SELECT id FROM usage_segments WHERE until < $1 ORDER BY until LIMIT $2)",
    usage_overlapping: "SELECT id, source_kind, source, kind, project_id, reservation_id,
        provider_id, resource_class, amount, since, until FROM usage_segments
        WHERE until > $2 AND since < $1 AND seq <= $3 LIMIT $4",
    commit: CommitWrites::Logged(ChangeLogWrites {
        // Announces the new sequence to the other replicas too (delivered at commit).
        append: "WITH bumped AS (
                UPDATE berth_meta SET catalog_seq = catalog_seq + 1 WHERE id = 1
                RETURNING catalog_seq, pg_notify('berth_catalog', CAST(catalog_seq AS TEXT)))
            INSERT INTO change_log (seq, format, changes, committed_at)
            SELECT catalog_seq, $1, $2, $3 FROM bumped
            RETURNING seq AS catalog_seq",
        prune: "DELETE FROM change_log WHERE seq <= $1",
    }),
    changes_after: "SELECT seq, format, changes FROM change_log WHERE seq > $1 ORDER BY seq LIMIT $2",
    oldest_change: "SELECT COALESCE(MIN(seq), 0) AS seq FROM change_log",
};
