//! The statements the shared SQL code runs, by name. Each adapter supplies their text in its own
//! dialect; this module holds no SQL, only what each statement must bind and return.
//!
//! Parameters are bound in the order listed; a statement that returns rows names its columns,
//! which are read by name. Uuids are bound and read as the backend stores them
//! ([`SqlBackend::Uuid`](super::SqlBackend::Uuid)); instants and amounts as `i64`.

/// The text of every statement, in one dialect.
#[derive(Debug)]
pub struct Statements {
    /// Answers without touching a table.
    pub ping: &'static str,
    /// Returns `catalog_seq`.
    pub catalog_seq: &'static str,

    /// Returns every provider, oldest `id` first: `id, uuid, name, parent_uuid, root_uuid,
    /// generation, availability_zone, created_at, updated_at`.
    pub providers: &'static str,
    /// `(id, uuid, name, parent_uuid, root_uuid, generation, availability_zone, created_at,
    /// updated_at)`.
    pub insert_provider: &'static str,
    /// `(name, parent_uuid, root_uuid, generation, availability_zone, updated_at, uuid)`.
    pub update_provider: &'static str,
    /// `(uuid)`.
    pub delete_provider: &'static str,

    /// Returns `provider_uuid, resource_class, total, reserved, min_unit, max_unit, step_size,
    /// allocation_ratio`.
    pub inventories: &'static str,
    /// `(provider_uuid)`: all of a provider's inventories.
    pub delete_inventories: &'static str,
    /// `(provider_uuid, resource_class, total, reserved, min_unit, max_unit, step_size,
    /// allocation_ratio, created_at, updated_at)`.
    pub insert_inventory: &'static str,

    /// Returns `provider_uuid, trait`.
    pub provider_traits: &'static str,
    /// `(provider_uuid)`: all of a provider's traits.
    pub delete_provider_traits: &'static str,
    /// `(provider_uuid, trait, created_at, updated_at)`.
    pub insert_provider_trait: &'static str,

    /// Returns `provider_uuid, aggregate_uuid`.
    pub provider_aggregates: &'static str,
    /// `(provider_uuid)`: all of a provider's aggregates.
    pub delete_provider_aggregates: &'static str,
    /// `(provider_uuid, aggregate_uuid, created_at, updated_at)`.
    pub insert_provider_aggregate: &'static str,

    /// Returns `provider_uuid, key, kind, value`.
    pub provider_attributes: &'static str,
    /// `(provider_uuid)`: all of a provider's attributes.
    pub delete_provider_attributes: &'static str,
    /// `(provider_uuid, key, kind, value, created_at, updated_at)`.
    pub insert_provider_attribute: &'static str,

    /// Returns `provider_uuid, hypervisor_type, service_name, reservable, created_at`.
    pub hosts: &'static str,
    /// `(provider_uuid, hypervisor_type, service_name, reservable, created_at, updated_at)`;
    /// an existing host keeps its `created_at`.
    pub upsert_host: &'static str,
    /// `(provider_uuid)`.
    pub delete_host: &'static str,

    /// Returns the custom resource classes' `name`.
    pub resource_classes: &'static str,
    /// `(name, created_at, updated_at)`.
    pub insert_resource_class: &'static str,
    /// `(name)`.
    pub delete_resource_class: &'static str,

    /// Returns the custom traits' `name`.
    pub custom_traits: &'static str,
    /// `(name, created_at, updated_at)`.
    pub insert_custom_trait: &'static str,
    /// `(name)`.
    pub delete_custom_trait: &'static str,

    /// Returns the described aggregates: `uuid, name`.
    pub aggregates: &'static str,
    /// Returns `aggregate_uuid, key, value`.
    pub aggregate_metadata: &'static str,
    /// `(uuid)`: the aggregate with its metadata.
    pub delete_aggregate: &'static str,
    /// `(uuid, name, created_at, updated_at)`.
    pub insert_aggregate: &'static str,
    /// `(aggregate_uuid, key, value, created_at, updated_at)`.
    pub insert_aggregate_metadata: &'static str,

    /// Returns `uuid, project_id, user_id, consumer_type, reservation_id, generation, created_at,
    /// updated_at`.
    pub consumers: &'static str,
    /// Returns `consumer_uuid, provider_uuid, resource_class, used`.
    pub allocations: &'static str,
    /// `(uuid)`: the consumer with its allocations.
    pub delete_consumer: &'static str,
    /// `(uuid, project_id, user_id, consumer_type, reservation_id, generation, created_at,
    /// updated_at)`.
    pub insert_consumer: &'static str,
    /// `(consumer_uuid, provider_uuid, resource_class, used, created_at, updated_at)`.
    pub insert_allocation: &'static str,

    /// `(id, project_id, status, start_at, end_at, document, created_at, updated_at)`; an
    /// existing lease keeps its `created_at`.
    pub upsert_lease: &'static str,
    /// `(id)`.
    pub delete_lease: &'static str,

    /// Returns `id, network_id, subnet_id, address, reservable, created_at, updated_at`.
    pub floating_ips: &'static str,
    /// `(id, network_id, subnet_id, address, reservable, created_at, updated_at)`; an existing
    /// address keeps its `created_at`.
    pub upsert_floating_ip: &'static str,
    /// `(id)`.
    pub delete_floating_ip: &'static str,

    /// `(lease_id, kind, at, details)`: appends to the lifecycle record.
    pub append_record: &'static str,
    /// `(lease_id)`: returns `seq, lease_id, kind, at, details` of one lease, by `seq`.
    pub records_of: &'static str,
    /// `(seq, limit)`: returns `seq, lease_id, kind, at, details` after `seq`, by `seq`.
    pub records_after: &'static str,

    /// Returns the private properties' `name`.
    pub private_properties: &'static str,
    /// `(name, updated_at)`: marks a property private.
    pub upsert_private_property: &'static str,
    /// `(name)`: makes a property public.
    pub delete_private_property: &'static str,

    /// Returns every document: `kind, document`, by kind and id.
    pub documents: &'static str,
    /// `(kind, id, document)`: writes a document, replacing one of the same kind and id.
    pub upsert_document: &'static str,
    /// `(kind, id)`.
    pub delete_document: &'static str,

    /// `(keys)`, a JSON array of `[project_id, route, idempotency_key]` triples: returns
    /// `project_id, route, idempotency_key, fingerprint, object_id, created_at` of the keys
    /// that have a record, looking each up by the primary key.
    pub idempotency_keys_in: &'static str,
    /// `(project_id, route, idempotency_key, fingerprint, object_id, created_at)`, replacing
    /// the record of the same key.
    pub upsert_idempotency_key: &'static str,
    /// `(project_id, route, idempotency_key)`.
    pub delete_idempotency_key: &'static str,
    /// `(before, limit)`: deletes at most `limit` records created before `before`, oldest
    /// first, through the `created_at` index.
    pub prune_idempotency_keys: &'static str,

    /// `(segments, seq)`, a JSON array of `[source_kind, source, kind, project_id,
    /// reservation_id, provider_id, resource_class, amount, since, until]` rows and the
    /// commit's sequence: adds them in array order.
    pub usage_insert: &'static str,
    /// `(before, limit)`: deletes at most `limit` usage segments that ended before `before`,
    /// those that ended first first, through the `until` index.
    pub usage_prune: &'static str,
    /// `(end, start, seq, limit)`: returns `id, source_kind, source, kind, project_id,
    /// reservation_id, provider_id, resource_class, amount, since, until` of at most `limit`
    /// usage segments written by the commits up to `seq` that begin before `end` and end after
    /// `start` (through the `until` index), in no order.
    pub usage_overlapping: &'static str,

    /// How a commit takes the next catalog sequence, and whether it writes the replication log.
    pub commit: CommitWrites,
    /// `(seq, limit)`: returns `seq, format, changes` of the log entries after `seq`, by `seq`.
    pub changes_after: &'static str,
    /// Returns `seq`: the oldest entry the log holds, 0 when it is empty.
    pub oldest_change: &'static str,
}

/// The statement that ends a commit by taking the next catalog sequence.
#[derive(Debug)]
pub enum CommitWrites {
    /// One process holds the database, so no other follows it and the log stays empty:
    /// `bump_seq` adds one to the catalog sequence and returns the new `catalog_seq`.
    Unlogged { bump_seq: &'static str },
    /// Commits write the replication log, whose `append` takes the sequence.
    Logged(ChangeLogWrites),
}

impl CommitWrites {
    /// The replication log's statements, where commits write it.
    pub fn log(&self) -> Option<&ChangeLogWrites> {
        match self {
            CommitWrites::Unlogged { .. } => None,
            CommitWrites::Logged(writes) => Some(writes),
        }
    }
}

/// The statements a commit runs to write the replication log.
#[derive(Debug)]
pub struct ChangeLogWrites {
    /// `(format, changes, committed_at)`: adds one to the catalog sequence, tells the other
    /// replicas the new one (sent at commit) and appends one commit's changes to the log as
    /// its entry, in one statement; returns the new `catalog_seq`.
    pub append: &'static str,
    /// `(seq)`: removes the log entries up to and including `seq`.
    pub prune: &'static str,
}
