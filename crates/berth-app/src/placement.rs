//! Placement's reads: allocation candidates, usages, the provider list, a provider's
//! allocations, resource classes and traits. Each asks a core query over a current catalog; an
//! answer that borrows the catalog is handed to the caller's `render` while the catalog is
//! still borrowed, so it is written once, not copied first.
//!
//! Allocation candidates are the one read that may search long: a request of one group visits
//! each tree once (what Nova sends most) and is answered in place; a request of several groups
//! combines options and is searched over a snapshot, off the runtime threads, within the search
//! budget (see [`crate::search`]).

use crate::error::AppError;
use crate::service::Berth;
use berth_core::Catalog;
use berth_core::ProviderId;
use berth_core::model::provider::Provider;
use berth_core::query::candidate_request::{self, CandidateRequest, Unanswerable};
use berth_core::query::candidates::{self, CandidateQuery, Candidates};
use berth_core::query::consumers::{self, ProviderAllocations, Usage, UsageQuery};
use berth_core::query::names::{self, Names, TraitQuery};
use berth_core::query::providers::ProviderFilter;

impl Berth {
    /// Answers an allocation-candidates request and hands the query it resolved to and the
    /// candidates found to `render`, with the catalog they were found in; `Ok(Err(_))` when the
    /// request cannot be answered as asked.
    pub async fn allocation_candidates<T: Send + 'static>(
        &self,
        request: CandidateRequest,
        render: impl FnOnce(&Catalog, &CandidateQuery, &Candidates) -> T + Send + 'static,
    ) -> Result<Result<T, Unanswerable>, AppError> {
        let groups = request.groups.len();
        let policy = self.fence_policy();
        let now = self.now();
        let answer = move |catalog: &Catalog, stop: &dyn Fn() -> bool| {
            let query = candidate_request::resolve(catalog, request, policy, now)?;
            let found = candidates::allocation_candidates_within(catalog, &query, stop);
            Ok::<_, Unanswerable>(render(catalog, &query, &found))
        };
        match groups {
            0 | 1 => self.read(move |catalog| answer(catalog, &|| false)).await,
            _ => self.search(answer).await,
        }
    }

    /// What the consumers `query` names hold, by consumer type.
    pub async fn usage(&self, query: UsageQuery) -> Result<Usage, AppError> {
        self.read(|catalog| consumers::usage(catalog, &query)).await
    }

    /// The providers `filter` keeps, in creation order, each rendered with `render`; refused
    /// when the request names a resource class or trait the catalog does not know (`names`,
    /// see [`Names::check`]).
    pub async fn resource_providers<T>(
        &self,
        filter: ProviderFilter,
        names: Names,
        render: impl FnMut(&Provider) -> T,
    ) -> Result<Vec<T>, AppError> {
        let found = self
            .read(move |catalog| {
                names.check(catalog)?;
                Ok::<_, berth_core::Rejection>(filter.select(catalog).map(render).collect())
            })
            .await??;
        Ok(found)
    }

    /// What each consumer holds on `provider`, rendered with `render`; `None` when there is no
    /// such provider.
    pub async fn provider_allocations<T>(
        &self,
        provider: ProviderId,
        render: impl FnOnce(&ProviderAllocations<'_>) -> T,
    ) -> Result<Option<T>, AppError> {
        self.read(|catalog| consumers::on_provider(catalog, provider).map(|found| render(&found)))
            .await
    }

    /// Every resource class: the standard ones, then the custom ones.
    pub async fn resource_classes(&self) -> Result<Vec<String>, AppError> {
        self.read(|catalog| {
            names::resource_classes(catalog)
                .into_iter()
                .map(str::to_owned)
                .collect()
        })
        .await
    }

    /// The traits `query` keeps, sorted.
    pub async fn traits(&self, query: TraitQuery) -> Result<Vec<String>, AppError> {
        self.read(|catalog| {
            names::traits(catalog, &query)
                .into_iter()
                .map(str::to_owned)
                .collect()
        })
        .await
    }
}
