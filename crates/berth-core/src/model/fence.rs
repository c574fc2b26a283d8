//! The fence's figures and names: what leases keep from consumers that present no reservation,
//! per provider ([`Fence`], derived from the ledger), and how Placement sees a reservation (its
//! class `CUSTOM_RESERVATION_<ID>`, its aggregate, the freepool aggregate). The rules that
//! raise, lower and enforce the fence are decisions ([`crate::decide::fence`]).

use crate::model::consumer::Allocations;
use crate::model::id::{ProviderId, ReservationId};
use crate::model::ledger::{Ledger, Window};
use crate::model::name::ResourceClass;
use uuid::Uuid;

/// The aggregate of every reservable host (Blazar's freepool).
pub const FREEPOOL_AGGREGATE: Uuid = Uuid::from_u128(0x0000_0000_6265_7274_6800_0000_0000_0001);

/// What leases keep from consumers that present no reservation, on one provider: the whole
/// provider when a host reservation holds it now or later, and otherwise, per class, the most
/// that instance reservations hold at any instant from now on. Derived from the ledger.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Fence {
    /// A host reservation holds the whole provider, now or later.
    pub whole: bool,
    /// Per class, the peak amount instance reservations hold, now or later.
    pub amounts: Vec<(ResourceClass, u64)>,
}

impl Fence {
    /// A provider's fence, from the ledger: everything its remaining holds keep.
    pub fn of(ledger: &Ledger, provider: ProviderId) -> Fence {
        let peak = ledger.peak(provider, Window::ALWAYS, &[]);
        Fence {
            whole: peak.exclusive > 0,
            amounts: peak.amounts,
        }
    }

    /// Whether nothing is fenced.
    pub fn is_empty(&self) -> bool {
        !self.whole && self.amounts.is_empty()
    }

    /// The fenced amount of an interned class, found by pointer.
    pub fn amount_interned(&self, class: &ResourceClass) -> u64 {
        self.amounts
            .iter()
            .find(|(c, _)| c.is_same(class))
            .map_or(0, |(_, n)| *n)
    }

    /// The fenced amount of a class.
    pub fn amount(&self, class: &ResourceClass) -> u64 {
        self.amounts
            .iter()
            .find(|(c, _)| c == class)
            .map_or(0, |(_, n)| *n)
    }
}

/// The aggregate that fences a reservation's hosts in Placement: its uuid is the reservation's
/// id, so that a consumer may present the reservation with `member_of=<id>`.
pub fn reservation_aggregate(reservation: ReservationId) -> Uuid {
    reservation.uuid()
}

/// The resource class of an instance reservation: `CUSTOM_RESERVATION_<ID>`, the id in upper
/// case with `-` as `_`.
pub fn reservation_class(reservation: ReservationId) -> ResourceClass {
    let id = reservation
        .uuid()
        .hyphenated()
        .to_string()
        .to_uppercase()
        .replace('-', "_");
    ResourceClass::parse(&format!("CUSTOM_RESERVATION_{id}"))
        .expect("invariant: reservation class names are valid custom names")
}

/// The reservation a `CUSTOM_RESERVATION_<ID>` class stands for.
pub fn reservation_of_class(class: &ResourceClass) -> Option<ReservationId> {
    let id = class.as_str().strip_prefix("CUSTOM_RESERVATION_")?;
    Uuid::parse_str(&id.replace('_', "-"))
        .ok()
        .map(ReservationId::new)
}

/// The reservation a consumer's allocations name through a reservation class, if any.
pub fn reservation_in(allocations: &Allocations) -> Option<ReservationId> {
    allocations
        .values()
        .flat_map(|by_class| by_class.keys())
        .find_map(reservation_of_class)
}
