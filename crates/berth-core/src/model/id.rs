//! Ids that say what they name: one newtype over [`Uuid`] per kind of object, so that a lease id
//! cannot be passed where a reservation id is expected.
//!
//! Each id is `#[repr(transparent)]` over its uuid and `#[serde(transparent)]`, so it costs
//! nothing at run time and is stored and sent exactly as the uuid was. Its `Display` is the
//! uuid's (hyphenated lower case). It is made from a uuid only by `new` and read back only by
//! `uuid`, so every place where one uuid is taken for another kind of thing says so.
//!
//! ```
//! use berth_core::model::id::{LeaseId, ReservationId};
//! fn reservation(id: ReservationId) -> ReservationId {
//!     id
//! }
//! let lease = LeaseId::from_u128(1);
//! assert_eq!(reservation(ReservationId::new(lease.uuid())).uuid(), lease.uuid());
//! ```
//!
//! ```compile_fail
//! use berth_core::model::id::{LeaseId, ReservationId};
//! fn reservation(id: ReservationId) -> ReservationId {
//!     id
//! }
//! let lease = LeaseId::from_u128(1);
//! reservation(lease);
//! ```

use std::fmt;
use uuid::Uuid;

/// Defines an id newtype over [`Uuid`] with the traits every id shares.
macro_rules! id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(
            Clone,
            Copy,
            Default,
            PartialEq,
            Eq,
            PartialOrd,
            Ord,
            Hash,
            serde::Serialize,
            serde::Deserialize,
        )]
        #[serde(transparent)]
        #[repr(transparent)]
        pub struct $name(Uuid);

        impl $name {
            /// The smallest id (the nil uuid), a bound for ranges over ids.
            pub const MIN: $name = $name(Uuid::nil());
            /// The largest id (the max uuid), a bound for ranges over ids.
            pub const MAX: $name = $name(Uuid::max());

            /// The id that `uuid` is.
            pub const fn new(uuid: Uuid) -> $name {
                $name(uuid)
            }

            /// The id made of a 128-bit number (constants and tests).
            pub const fn from_u128(n: u128) -> $name {
                $name(Uuid::from_u128(n))
            }

            /// The uuid it is.
            pub const fn uuid(self) -> Uuid {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($name), "({})"), self.0)
            }
        }
    };
}

id!(
    /// A lease.
    LeaseId
);
id!(
    /// A reservation of a lease. A host reservation's id is also the uuid of the aggregate
    /// that fences its hosts, and an instance reservation's names its resource class
    /// (`CUSTOM_RESERVATION_<ID>`).
    ReservationId
);
id!(
    /// A resource provider (a Blazar host and a bare-metal node are providers too).
    ProviderId
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_shows_and_serializes_as_its_uuid() {
        let uuid = Uuid::from_u128(0x0190_0000_0000_7000_8000_0000_0000_00ab);
        let id = LeaseId::new(uuid);
        assert_eq!(id.to_string(), uuid.to_string());
        assert_eq!(
            serde_json::to_string(&id).expect("serializes"),
            serde_json::to_string(&uuid).expect("serializes")
        );
        let back: LeaseId =
            serde_json::from_str(&serde_json::to_string(&uuid).expect("serializes"))
                .expect("parses");
        assert_eq!(back.uuid(), uuid);
        assert_eq!(std::mem::size_of::<LeaseId>(), std::mem::size_of::<Uuid>());
    }
}
