//! Budgets (berth): setting, reading and removing a project's budget of resource-hours per
//! period. Leases are charged against it as they are decided (`service`'s batch, through
//! [`berth_core::decide::budget::charge`]).

use crate::error::AppError;
use crate::service::Berth;
use berth_core::decide::budget;
use berth_core::model::budget::{Budget, BudgetPeriod};
use std::collections::BTreeMap;

impl Berth {
    /// Sets `project`'s budget (replacing the one it has): the most unit-hours of each class
    /// named in `limits` per `period`, checked by [`budget::set_budget`]; the budget as set.
    pub async fn set_budget(
        &self,
        project: String,
        period: BudgetPeriod,
        limits: BTreeMap<String, i64>,
    ) -> Result<Budget, AppError> {
        self.write(move |catalog, now| budget::set_budget(catalog, &project, period, &limits, now))
            .await
    }

    /// Removes `project`'s budget (refused when it has none).
    pub async fn delete_budget(&self, project: String) -> Result<(), AppError> {
        self.write(move |catalog, _| budget::delete_budget(catalog, &project).map(|c| (c, ())))
            .await
    }

    /// The budgets `project` sees: its own (any, for `None`).
    pub async fn budgets(&self, project: Option<&str>) -> Result<Vec<Budget>, AppError> {
        self.read(|catalog| {
            catalog
                .budgets()
                .filter(|b| project.is_none_or(|p| b.project_id == p))
                .cloned()
                .collect()
        })
        .await
    }
}
