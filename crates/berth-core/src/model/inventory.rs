//! One inventory record: how much of one resource class a provider has, and the rules for using it.

use crate::limits::INVENTORY_AMOUNT_MAX;

/// An inventory record of one resource class on one provider.
///
/// Usable capacity is `(total - reserved) * allocation_ratio`. Fields are private; construct with
/// [`Inventory::new`], which checks every rule Placement checks.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Inventory {
    total: u64,
    reserved: u64,
    min_unit: u64,
    max_unit: u64,
    step_size: u64,
    allocation_ratio: f64,
}

/// Why an inventory record is invalid. The order is the order the checks run in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum InventoryError {
    /// `total` is outside 1..=2147483647.
    #[error("total must be between 1 and {INVENTORY_AMOUNT_MAX}")]
    TotalOutOfRange,
    /// A unit field is outside its range.
    #[error("{0} is out of range")]
    FieldOutOfRange(&'static str),
    /// `allocation_ratio` is not a positive finite number within f32 range.
    #[error("allocation_ratio must be a positive number no larger than 3.40282e38")]
    BadAllocationRatio,
    /// `reserved` exceeds `total`, or equals it where that is not allowed.
    #[error("reserved must not be greater than total")]
    ReservedExceedsTotal,
    /// `min_unit` exceeds `max_unit`.
    #[error("min_unit must not be greater than max_unit")]
    MinUnitExceedsMaxUnit,
}

/// Whether `reserved == total` is acceptable (Placement allows it from microversion 1.26).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FullReservation {
    /// `reserved` may equal `total` (zero usable capacity).
    Allowed,
    /// `reserved` must be strictly less than `total`.
    Refused,
}

impl Inventory {
    /// Builds a checked inventory record.
    pub fn new(
        total: u64,
        reserved: u64,
        units: [u64; 3],
        allocation_ratio: f64,
        full: FullReservation,
    ) -> Result<Inventory, InventoryError> {
        let [min_unit, max_unit, step_size] = units;
        if !(1..=INVENTORY_AMOUNT_MAX).contains(&total) {
            return Err(InventoryError::TotalOutOfRange);
        }
        if reserved > INVENTORY_AMOUNT_MAX {
            return Err(InventoryError::FieldOutOfRange("reserved"));
        }
        for (field, value) in [
            ("min_unit", min_unit),
            ("max_unit", max_unit),
            ("step_size", step_size),
        ] {
            if !(1..=INVENTORY_AMOUNT_MAX).contains(&value) {
                return Err(InventoryError::FieldOutOfRange(field));
            }
        }
        if !(allocation_ratio.is_finite()
            && allocation_ratio > 0.0
            && allocation_ratio <= f64::from(f32::MAX))
        {
            return Err(InventoryError::BadAllocationRatio);
        }
        match full {
            FullReservation::Allowed if reserved > total => {
                return Err(InventoryError::ReservedExceedsTotal);
            }
            FullReservation::Refused if reserved >= total => {
                return Err(InventoryError::ReservedExceedsTotal);
            }
            _ => {}
        }
        if min_unit > max_unit {
            return Err(InventoryError::MinUnitExceedsMaxUnit);
        }
        Ok(Inventory {
            total,
            reserved,
            min_unit,
            max_unit,
            step_size,
            allocation_ratio,
        })
    }

    /// A plain record with Placement's defaults (`min_unit` 1, `max_unit` total, `step_size` 1, ratio 1.0).
    pub fn simple(total: u64) -> Inventory {
        assert!(total >= 1, "a simple inventory has at least one unit");
        assert!(total <= INVENTORY_AMOUNT_MAX);
        Inventory {
            total,
            reserved: 0,
            min_unit: 1,
            max_unit: total,
            step_size: 1,
            allocation_ratio: 1.0,
        }
    }

    /// Total units.
    pub fn total(&self) -> u64 {
        self.total
    }
    /// Units held back from use.
    pub fn reserved(&self) -> u64 {
        self.reserved
    }
    /// Smallest amount one allocation may take.
    pub fn min_unit(&self) -> u64 {
        self.min_unit
    }
    /// Largest amount one allocation may take.
    pub fn max_unit(&self) -> u64 {
        self.max_unit
    }
    /// Allocations are multiples of this.
    pub fn step_size(&self) -> u64 {
        self.step_size
    }
    /// Overcommit factor.
    pub fn allocation_ratio(&self) -> f64 {
        self.allocation_ratio
    }

    /// Usable capacity, un-truncated: `(total - reserved) * allocation_ratio`.
    pub fn capacity_exact(&self) -> f64 {
        (self.total - self.reserved) as f64 * self.allocation_ratio
    }

    /// Usable capacity truncated to whole units, as Placement reports it.
    pub fn capacity(&self) -> u64 {
        self.capacity_exact() as u64
    }

    /// Whether one allocation of `amount` respects `min_unit`, `max_unit` and `step_size`.
    pub fn fits_unit_rules(&self, amount: u64) -> bool {
        self.min_unit <= amount && amount <= self.max_unit && amount.is_multiple_of(self.step_size)
    }

    /// Whether `amount` more units fit on top of `used`, under every rule Placement applies.
    pub fn admits(&self, used: u64, amount: u64) -> bool {
        self.fits_unit_rules(amount) && (used + amount) as f64 <= self.capacity_exact()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn inv(
        total: u64,
        reserved: u64,
        units: [u64; 3],
        ratio: f64,
    ) -> Result<Inventory, InventoryError> {
        Inventory::new(total, reserved, units, ratio, FullReservation::Allowed)
    }

    #[test]
    fn rejects_each_bad_field() {
        assert_eq!(
            inv(0, 0, [1, 1, 1], 1.0),
            Err(InventoryError::TotalOutOfRange)
        );
        assert_eq!(
            inv(4, 5, [1, 4, 1], 1.0),
            Err(InventoryError::ReservedExceedsTotal)
        );
        assert_eq!(
            inv(4, 0, [3, 2, 1], 1.0),
            Err(InventoryError::MinUnitExceedsMaxUnit)
        );
        assert_eq!(
            inv(4, 0, [1, 4, 0], 1.0),
            Err(InventoryError::FieldOutOfRange("step_size"))
        );
        assert_eq!(
            inv(4, 0, [1, 4, 1], 0.0),
            Err(InventoryError::BadAllocationRatio)
        );
        assert_eq!(
            inv(4, 0, [1, 4, 1], f64::NAN),
            Err(InventoryError::BadAllocationRatio)
        );
        assert_eq!(
            Inventory::new(4, 4, [1, 4, 1], 1.0, FullReservation::Refused),
            Err(InventoryError::ReservedExceedsTotal)
        );
        assert!(inv(4, 4, [1, 4, 1], 1.0).is_ok());
    }

    #[test]
    fn capacity_honours_reserved_and_ratio() {
        let record = inv(8, 2, [1, 8, 1], 4.0).expect("valid");
        assert_eq!(record.capacity(), 24);
        assert!(record.admits(20, 4));
        assert!(!record.admits(21, 4));
        let stepped = inv(1024, 0, [256, 1024, 256], 1.0).expect("valid");
        assert!(stepped.admits(0, 512));
        assert!(!stepped.admits(0, 300));
        assert!(!stepped.admits(0, 128));
    }

    proptest! {
        #[test]
        fn admitted_amounts_never_exceed_capacity(total in 1u64..10_000, reserved in 0u64..10_000,
                                                  ratio in 0.1f64..16.0, used in 0u64..200_000,
                                                  amount in 1u64..10_000) {
            prop_assume!(reserved <= total);
            let record = inv(total, reserved, [1, INVENTORY_AMOUNT_MAX, 1], ratio).expect("valid");
            if record.admits(used, amount) {
                prop_assert!((used + amount) as f64 <= (total - reserved) as f64 * ratio);
            }
        }
    }
}
