//! Named bounds. Every loop over user input and every stored collection is bounded by one of
//! these, and every bound of the core is here.

/// Largest amount an inventory field (`total`, `reserved`, `min_unit`, `max_unit`,
/// `step_size`) may carry: Placement's signed 32-bit integer.
pub const INVENTORY_AMOUNT_MAX: u64 = 2_147_483_647;
/// Longest provider name, as Placement.
pub const PROVIDER_NAME_LEN_MAX: usize = 200;
/// Longest resource class or trait name, as Placement.
pub const NAME_LEN_MAX: usize = 255;
/// Most traits on one provider in a single write.
pub const TRAITS_PER_PROVIDER_MAX: usize = 1_000;
/// Most aggregates one provider can belong to.
pub const AGGREGATES_PER_PROVIDER_MAX: usize = 1_000;
/// Most inventory records one provider can carry in a single write.
pub const INVENTORIES_PER_PROVIDER_MAX: usize = 256;
/// Deepest nesting of a provider tree.
pub const TREE_DEPTH_MAX: usize = 64;
/// Most typed attributes one provider carries.
pub const ATTRIBUTES_PER_PROVIDER_MAX: usize = 256;
/// Longest attribute key (Blazar refuses capability keys over 64 characters).
pub const ATTRIBUTE_KEY_LEN_MAX: usize = 64;
/// Longest attribute string value.
pub const ATTRIBUTE_VALUE_LEN_MAX: usize = 1_024;

/// Most metadata entries on one aggregate.
pub const AGGREGATE_METADATA_MAX: usize = 64;

/// The deepest nesting of a Blazar filter accepted; a lone comparison is at depth 1.
pub const FILTER_DEPTH_MAX: usize = 32;
/// The most nodes of a Blazar filter accepted: every clause counts one and every value of an
/// `in` list one more.
pub const FILTER_NODES_MAX: usize = 1_000;

/// Most allocation candidates one request returns; a request without `limit` that would produce
/// more is cut here and the answer says it was truncated.
pub const PLACEMENT_CANDIDATES_MAX: usize = 10_000;
/// Most group-option combinations one candidates request examines (the bound on product
/// explosion over wide trees with many suffixed groups).
pub const CANDIDATE_COMBINATIONS_MAX: usize = 1_000_000;

const _: () = assert!(PLACEMENT_CANDIDATES_MAX <= CANDIDATE_COMBINATIONS_MAX);
const _: () = assert!(NAME_LEN_MAX >= PROVIDER_NAME_LEN_MAX);
const _: () = assert!(ATTRIBUTE_KEY_LEN_MAX <= NAME_LEN_MAX);

/// Most reservations one lease (or one Promise reservation, once translated) may hold.
/// Admission and every search over a lease scale with it.
pub const RESERVATIONS_PER_LEASE_MAX: usize = 64;
/// Longest lease name, in characters.
pub const LEASE_NAME_LEN_MAX: usize = 255;
/// Largest count or size a request may name for one reservation, flavor or Promise ask: host
/// `min` and `max`, instance and address `amount`, `vcpus`, `memory_mb` and `disk_gb`, a
/// flavor's vcpus and disk (its memory, in MB, up to 1,024 times this). The per-reservation
/// limits below are tighter for host and instance counts.
pub const REQUEST_QUANTITY_MAX: u32 = 1_000_000;
/// Largest instance `amount` one reservation may ask for (Blazar `virtual:instance`, Promise
/// `numVcInstances` and volumes once translated into slots).
pub const INSTANCES_PER_RESERVATION_MAX: u32 = 10_000;
/// Largest host `max` one `physical:host` reservation may ask for.
pub const HOSTS_PER_RESERVATION_MAX: u32 = 10_000;
/// Longest `search_horizon_days` a counter-offer or availability search may be asked for.
pub const SEARCH_HORIZON_DAYS_MAX: u64 = 366;
/// Most steps of one search: start instants the earliest-start search tries, and admissions the
/// displacement search tries. A search cut here says its answer is truncated.
pub const SEARCH_STEPS_MAX: usize = 512;
/// Longest one search (counter-offer, availability, displacement, allocation candidates) may
/// run, in microseconds, measured by the application's clock (the core is given a probe).
pub const SEARCH_BUDGET_MICROS: i64 = 2_000_000;
/// Most request groups (`resources`, `resourcesN`) in one allocation-candidates request.
/// Nova sends a handful; Placement itself sets no bound.
pub const REQUEST_GROUPS_MAX: usize = 64;

/// Most group mappings (candidates times request groups) one candidates answer carries, so that
/// a request with many groups cannot ask for an answer of tens of megabytes: with more than
/// four groups, fewer than [`PLACEMENT_CANDIDATES_MAX`] candidates are returned (and the
/// answer says it was truncated).
pub const CANDIDATE_MAPPINGS_MAX: usize = 40_000;

const _: () = assert!(CANDIDATE_MAPPINGS_MAX / REQUEST_GROUPS_MAX > 0);
const _: () = assert!(INSTANCES_PER_RESERVATION_MAX as u64 <= INVENTORY_AMOUNT_MAX);
const _: () = assert!(HOSTS_PER_RESERVATION_MAX as u64 <= INVENTORY_AMOUNT_MAX);
const _: () = assert!(INSTANCES_PER_RESERVATION_MAX <= REQUEST_QUANTITY_MAX);
const _: () = assert!(HOSTS_PER_RESERVATION_MAX <= REQUEST_QUANTITY_MAX);
const _: () = assert!(SEARCH_STEPS_MAX > 0);
const _: () = assert!(SEARCH_BUDGET_MICROS > 0);

/// The most hosts, instance slots and addresses a new lease may ask for in all and still be
/// decided directly under the writer lock (its admission as asked is then as cheap as any
/// write); a heavier request is first admitted over a snapshot, off the lock, and reaches the
/// lock only if it fits there.
pub const ADMISSION_IN_PLACE_MAX: u64 = 256;

/// Most reservations one request may displace.
pub const DISPLACED_MAX: usize = 64;
/// Most lower-priority reservations looked at when searching what to displace.
pub const DISPLACEMENT_CANDIDATES_MAX: usize = 256;

const _: () = assert!(DISPLACED_MAX <= DISPLACEMENT_CANDIDATES_MAX);

/// Longest reason an admin or monitor may give when taking a provider out of service, in
/// characters.
pub const STATUS_REASON_LEN_MAX: usize = 255;

/// Longest Ironic resource class name, in characters.
pub const RESOURCE_CLASS_LEN_MAX: usize = 80;
/// Most nodes one claim request may list.
pub const CLAIM_CANDIDATES_MAX: usize = 1_000;

/// Most subscriptions one project may hold.
pub const SUBSCRIPTIONS_PER_PROJECT_MAX: usize = 256;
/// Failed attempts after which a delivery is dead.
pub const DELIVERY_ATTEMPTS_MAX: u32 = 8;

/// The longest idempotency key accepted, in bytes.
pub const IDEMPOTENCY_KEY_LEN_MAX: usize = 255;
/// Most expired idempotency records a commit removes for each key it records (so pruning never
/// makes a commit slow, yet outpaces recording).
pub const IDEMPOTENCY_PRUNE_MAX: usize = 16;

const _: () = assert!(IDEMPOTENCY_PRUNE_MAX > 1, "pruning outpaces recording");

/// Longest a hold (`hold_minutes` of an availability search) may last, in minutes.
pub const HOLD_MINUTES_MAX: u32 = 60;
/// How long a hold lasts when the search asks for one without `hold_minutes`, in minutes.
pub const HOLD_MINUTES_DEFAULT: u32 = 10;
/// Most open holds (leases in `HELD`) one project may keep at once.
pub const HOLDS_PER_PROJECT_MAX: u32 = 16;
/// Latest a waitlisted lease may wait (`wait_until`) past its requested start, in minutes
/// (7 days).
pub const WAIT_PAST_START_MAX_MINUTES: i64 = 7 * 24 * 60;
/// Most waitlisted leases tried for admission (each admission as asked, no search) after one
/// batch of writes that may have freed capacity: the work per freed unit is bounded.
pub const WAITLIST_ATTEMPTS_MAX: usize = 32;
/// Most waitlisted leases looked at, from the head of the list, in one pass for one admission:
/// a long waitlist whose head does not fit costs the writer lock no more than this.
pub const WAITLIST_SCAN_MAX: usize = 256;

/// Longest project id a share names (as Placement's consumer `project_id`).
pub const PROJECT_ID_LEN_MAX: usize = 255;
/// Most projects one lease may be shared with (berth).
pub const SHARES_PER_LEASE_MAX: usize = 32;
/// Most resource classes one share's cap may name.
pub const SHARE_CAP_CLASSES_MAX: usize = 16;

const _: () = assert!(HOLD_MINUTES_DEFAULT >= 1 && HOLD_MINUTES_DEFAULT <= HOLD_MINUTES_MAX);
const _: () = assert!(HOLDS_PER_PROJECT_MAX > 0);
const _: () = assert!(WAITLIST_ATTEMPTS_MAX > 0);
const _: () = assert!(WAITLIST_SCAN_MAX >= WAITLIST_ATTEMPTS_MAX);

/// Most occurrences one recurring lease (a series) may have: a rule that gives more, by its
/// `COUNT` or its `UNTIL`, is refused. A series is admitted in one decision, so admission under
/// the writer lock scales with this.
pub const RECURRENCE_OCCURRENCES_MAX: u32 = 100;
/// Largest `INTERVAL` of a recurrence rule (days or weeks between periods).
pub const RECURRENCE_INTERVAL_MAX: u32 = 366;
/// Most conflicting occurrences of a refused series for which the nearest window that fits is
/// searched (off the writer lock); the others are listed without one.
pub const RECURRENCE_ALTERNATIVES_MAX: usize = 16;

/// Farthest a whole series may be moved at once (`shift_minutes`), in days either way.
pub const RECURRENCE_SHIFT_DAYS_MAX: i64 = 366;

const _: () = assert!(RECURRENCE_OCCURRENCES_MAX >= 2);
const _: () = assert!(RECURRENCE_ALTERNATIVES_MAX as u64 <= RECURRENCE_OCCURRENCES_MAX as u64);

/// Most provider clouds registered at once: a capacity query answers per cloud, so this bounds
/// its work.
pub const PROVIDER_CLOUDS_MAX: usize = 64;
/// Most resource providers berth imports from one provider cloud: a larger listing from its
/// Placement fails the synchronisation (the cloud's capacity is then unknown).
pub const PROVIDER_CLOUD_PROVIDERS_MAX: usize = 4096;
/// Most bytes berth reads of one answer of a provider cloud's Keystone or Placement.
pub const PROVIDER_CLOUD_ANSWER_BYTES_MAX: usize = 8 * 1024 * 1024;
/// Most characters of a provider cloud's last error berth keeps.
pub const PROVIDER_CLOUD_ERROR_LEN_MAX: usize = 512;

/// Most resource classes one budget limits.
pub const BUDGET_CLASSES_MAX: usize = 16;
/// The largest limit of a budget, in unit-hours per period: a trillion.
pub const BUDGET_HOURS_MAX: u64 = 1_000_000_000_000;

/// Longest period of one usage report, in days (a report of a longer one is refused).
pub const USAGE_PERIOD_DAYS_MAX: i64 = 366;
/// Most usage-history segments one report adds up: a period whose history holds more is
/// refused, and a shorter one must be asked.
pub const USAGE_SEGMENTS_MAX: usize = 200_000;
/// How long the usage history keeps a segment after it ends, in days: a year's report and a
/// month to spare. A report of a period that begins earlier is refused.
pub const USAGE_RETENTION_DAYS: i64 = 400;
/// Fewest expired usage segments a commit that writes the history prunes (it prunes up to
/// twice the segments it writes, when that is more), so that the history never outgrows the
/// retention by more than what was there before.
pub const USAGE_PRUNE_MIN: usize = 16;

const _: () = assert!(USAGE_RETENTION_DAYS > USAGE_PERIOD_DAYS_MAX);

const _: () = assert!(PROVIDER_CLOUD_PROVIDERS_MAX > 0);
const _: () = assert!(PROVIDER_CLOUDS_MAX > 0);
