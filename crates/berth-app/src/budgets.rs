//! Budgets (berth): setting, reading and removing a project's budget of resource-hours per
//! period. Leases are charged against it as they are decided (`service`'s batch, through
//! [`berth_core::decide::budget::charge`]).

use crate::error::AppError;
use crate::service::Berth;
use berth_core::ResourceClass;
use berth_core::decide::budget;
use berth_core::model::budget::{Budget, BudgetPeriod};
use std::collections::BTreeMap;

impl Berth {
    /// Sets `project`'s budget (replacing the one it has); the budget as set.
    pub async fn set_budget(
        &self,
        project: String,
        period: BudgetPeriod,
        limits: BTreeMap<ResourceClass, u64>,
    ) -> Result<Budget, AppError> {
        let asked = project.clone();
        self.write(move |catalog, now| {
            let changes = budget::set_budget(catalog, &project, period, limits.clone(), now);
            Ok((changes, ()))
        })
        .await?;
        self.read_local(|catalog| catalog.budget(&asked).cloned())
            .ok_or_else(|| AppError::Rejected(berth_core::Rejection::BudgetNotFound(asked)))
    }

    /// Removes `project`'s budget; whether it had one.
    pub async fn delete_budget(&self, project: String) -> Result<bool, AppError> {
        self.write(move |catalog, _| {
            let changes = budget::delete_budget(catalog, &project);
            let had = !changes.is_empty();
            Ok((changes, had))
        })
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
