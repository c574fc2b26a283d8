//! Tests of the inventory decisions, applied to a catalog step by step.

use super::*;
use crate::catalog::Catalog;
use crate::model::inventory::FullReservation;
use crate::query::providers::{MemberOf, ProviderFilter};

const T0: Instant = Instant::from_micros(1_000);

fn uuid(n: u128) -> Uuid {
    Uuid::from_u128(n)
}

fn pid(n: u128) -> ProviderId {
    ProviderId::from_u128(n)
}

fn step(catalog: &mut Catalog, decision: impl FnOnce(&Catalog) -> Decision) -> Vec<Change> {
    let changes = decision(catalog).expect("decision accepted");
    catalog.apply(&changes);
    catalog.check_invariants().expect("invariants hold");
    changes
}

fn create(catalog: &mut Catalog, n: u128, name: &str, parent: Option<u128>) {
    let new = NewProvider {
        uuid: pid(n),
        name: name.into(),
        parent: parent.map(pid),
        availability_zone: None,
    };
    step(catalog, |c| create_provider(c, &new, T0));
}

fn vcpu(total: u64) -> BTreeMap<ResourceClass, Inventory> {
    let record =
        Inventory::new(total, 0, [1, total, 1], 1.0, FullReservation::Allowed).expect("valid");
    BTreeMap::from([(ResourceClass::parse("VCPU").expect("class"), record)])
}

#[test]
fn duplicate_names_and_uuids_are_refused() {
    let mut catalog = Catalog::new();
    create(&mut catalog, 1, "cn1", None);
    let same_name = NewProvider {
        uuid: pid(2),
        name: "cn1".into(),
        parent: None,
        availability_zone: None,
    };
    assert_eq!(
        create_provider(&catalog, &same_name, T0),
        Err(Rejection::DuplicateName("cn1".into()))
    );
    let same_uuid = NewProvider {
        uuid: pid(1),
        name: "cn2".into(),
        parent: None,
        availability_zone: None,
    };
    assert_eq!(
        create_provider(&catalog, &same_uuid, T0),
        Err(Rejection::DuplicateUuid(pid(1)))
    );
    let orphan = NewProvider {
        uuid: pid(3),
        name: "c".into(),
        parent: Some(pid(9)),
        availability_zone: None,
    };
    assert_eq!(
        create_provider(&catalog, &orphan, T0),
        Err(Rejection::ParentNotFound(pid(9)))
    );
}

#[test]
fn nested_trees_track_their_root_and_refuse_cycles() {
    let mut catalog = Catalog::new();
    create(&mut catalog, 1, "cn1", None);
    create(&mut catalog, 2, "numa0", Some(1));
    create(&mut catalog, 3, "pf0", Some(2));
    assert_eq!(catalog.provider(pid(3)).map(Provider::root), Some(pid(1)));
    assert_eq!(
        update_provider(
            &catalog,
            pid(1),
            "cn1",
            Some(pid(3)),
            Reparenting::Allowed,
            T0
        ),
        Err(Rejection::ParentCycle)
    );
    assert_eq!(
        update_provider(&catalog, pid(2), "numa0", None, Reparenting::Refused, T0),
        Err(Rejection::UnparentNotAllowed)
    );
    // Un-parenting at 1.37 moves the whole subtree to the new root.
    step(&mut catalog, |c| {
        update_provider(c, pid(2), "numa0", None, Reparenting::Allowed, T0)
    });
    assert_eq!(catalog.provider(pid(3)).map(Provider::root), Some(pid(2)));
    assert_eq!(
        delete_provider(&catalog, pid(2)),
        Err(Rejection::ProviderHasChildren(pid(2)))
    );
}

#[test]
fn generations_guard_every_provider_write() {
    let mut catalog = Catalog::new();
    create(&mut catalog, 1, "cn1", None);
    step(&mut catalog, |c| {
        set_inventories(c, pid(1), Some(0), vcpu(8), T0)
    });
    assert_eq!(catalog.provider(pid(1)).map(Provider::generation), Some(1));
    let stale = set_inventories(&catalog, pid(1), Some(0), vcpu(16), T0);
    assert_eq!(
        stale,
        Err(Rejection::GenerationConflict {
            uuid: pid(1),
            expected: 0,
            actual: 1
        })
    );
    let unknown = TraitName::parse("CUSTOM_NOPE").expect("shape");
    assert!(matches!(
        set_traits(&catalog, pid(1), Some(1), BTreeSet::from([unknown]), T0),
        Err(Rejection::UnknownTraits(_))
    ));
}

#[test]
fn forbidden_aggregates_exclude_members() {
    let mut catalog = Catalog::new();
    for n in 1..=4 {
        create(&mut catalog, n, &format!("cn{n}"), None);
        step(&mut catalog, |c| {
            set_inventories(c, pid(n), None, vcpu(8), T0)
        });
    }
    step(&mut catalog, |c| {
        set_aggregates(c, pid(1), None, BTreeSet::from([uuid(100)]), T0)
    });
    step(&mut catalog, |c| {
        set_aggregates(c, pid(2), None, BTreeSet::from([uuid(101)]), T0)
    });
    let filter = ProviderFilter {
        member_of: MemberOf {
            required: vec![],
            forbidden: BTreeSet::from([uuid(100), uuid(101)]),
        },
        resources: vec![(ResourceClass::parse("VCPU").expect("class"), 2)],
        ..ProviderFilter::default()
    };
    let names: Vec<&str> = filter.select(&catalog).map(Provider::name).collect();
    assert_eq!(names, ["cn3", "cn4"]);
}

#[test]
fn hosts_adopt_existing_root_providers() {
    let mut catalog = Catalog::new();
    create(&mut catalog, 1, "compute-1", None);
    let host = NewHost {
        reservable: true,
        name: "compute-1".into(),
        uuid: pid(7),
        vcpus: Some(16),
        memory_mb: Some(65_536),
        local_gb: None,
        availability_zone: Some("az1".into()),
        hypervisor_type: None,
        service_name: None,
        attributes: Attributes::from([("gpu".into(), AttrValue::Bool(true))]),
    };
    step(&mut catalog, |c| enroll_host(c, &host, T0));
    assert_eq!(catalog.len(), 1);
    let adopted = catalog.provider(pid(1)).expect("adopted");
    assert_eq!(adopted.availability_zone(), Some("az1"));
    assert_eq!(adopted.inventories().len(), 2);
    assert_eq!(
        enroll_host(&catalog, &host, T0),
        Err(Rejection::HostExists("compute-1".into()))
    );
    let id = adopted.id();
    let reserved = [("id".to_owned(), Some(AttrValue::Bool(true)))];
    assert!(matches!(
        update_host(&catalog, id, &reserved, T0),
        Err(Rejection::BadAttribute { .. })
    ));
    step(&mut catalog, |c| {
        update_host(c, id, &[("gpu".into(), None)], T0)
    });
    assert!(
        catalog
            .provider(pid(1))
            .expect("host")
            .attributes()
            .is_empty()
    );
    step(&mut catalog, |c| delete_host(c, id));
    assert!(catalog.is_empty());
}

#[test]
fn custom_classes_and_traits_follow_their_rules() {
    let mut catalog = Catalog::new();
    assert_eq!(
        create_resource_class(&catalog, "GOLD"),
        Err(Rejection::NotCustomName("GOLD".into()))
    );
    step(&mut catalog, |c| create_resource_class(c, "CUSTOM_GOLD"));
    assert_eq!(
        create_resource_class(&catalog, "CUSTOM_GOLD"),
        Err(Rejection::ResourceClassExists("CUSTOM_GOLD".into()))
    );
    assert_eq!(
        delete_resource_class(&catalog, "VCPU"),
        Err(Rejection::ResourceClassStandard("VCPU".into()))
    );
    assert_eq!(
        create_trait(&catalog, "CUSTOM_FAST").map(|c| c.len()),
        Ok(1)
    );
    step(&mut catalog, |c| create_trait(c, "CUSTOM_FAST"));
    assert_eq!(create_trait(&catalog, "CUSTOM_FAST"), Ok(vec![]));
    assert_eq!(
        delete_trait(&catalog, "HW_CPU_X86_AVX2"),
        Err(Rejection::TraitStandard("HW_CPU_X86_AVX2".into()))
    );
    step(&mut catalog, |c| delete_trait(c, "CUSTOM_FAST"));
    assert_eq!(
        delete_trait(&catalog, "CUSTOM_FAST"),
        Err(Rejection::TraitNotFound("CUSTOM_FAST".into()))
    );
}

#[test]
fn aggregates_can_be_described_with_unique_names() {
    let mut catalog = Catalog::new();
    let record = |name: &str| AggregateRecord {
        name: Some(name.to_owned()),
        metadata: BTreeMap::from([("availability_zone".to_owned(), "az1".to_owned())]),
    };
    step(&mut catalog, |c| {
        describe_aggregate(c, uuid(100), Some(record("az1")))
    });
    assert_eq!(
        catalog.aggregate_by_name("az1").map(|(u, _)| u),
        Some(uuid(100))
    );
    assert_eq!(
        describe_aggregate(&catalog, uuid(101), Some(record("az1"))),
        Err(Rejection::DuplicateAggregateName("az1".into()))
    );
    let bad_key = AggregateRecord {
        name: None,
        metadata: BTreeMap::from([("bad key".to_owned(), "v".to_owned())]),
    };
    assert!(matches!(
        describe_aggregate(&catalog, uuid(101), Some(bad_key)),
        Err(Rejection::BadAttribute { .. })
    ));
    step(&mut catalog, |c| describe_aggregate(c, uuid(100), None));
    assert!(catalog.aggregate(uuid(100)).is_none());
}
