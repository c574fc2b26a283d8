//! `GET /usages` (1.9): what a project (and optionally a user) holds, grouped by consumer type
//! from 1.38.

use super::query;
use super::schema::USAGES_QUERY;
use super::wire::respond;
use crate::http::error::ApiError;
use crate::http::routes::Routes;
use crate::http::state::AppState;
use crate::http::surface::Microversion;
use crate::policy::Rule;
use axum::extract::{RawQuery, State};
use axum::http::Method;
use axum::response::Response;
use berth_api::placement::{ConsumerTypeUsage, Usages, UsagesBy};
use berth_core::ResourceClass;
use berth_core::query::consumers::{TypeUsage, Usage, UsageQuery};
use std::collections::BTreeMap;

pub(super) fn register(routes: &mut Routes) {
    routes
        .add(
            Method::GET,
            "/placement/usages",
            Rule::PROJECT_USAGES,
            "Usages of a project and user (1.9)",
            usages,
        )
        .answers::<Usages>(200);
}

async fn usages(
    State(state): State<AppState>,
    mv: Microversion,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    mv.require(9)?;
    let pairs = query::pairs(raw.as_deref())?;
    USAGES_QUERY.check_query(mv.minor(), &pairs, &[])?;
    let allowed: &[&str] = if mv.at_least(38) {
        &["project_id", "user_id", "consumer_type"]
    } else {
        &["project_id", "user_id"]
    };
    query::only(&pairs, allowed)?;
    let last = |key| query::values(&pairs, key).last().map(str::to_owned);
    let project = last("project_id").ok_or_else(|| {
        ApiError::bad_request(
            "Invalid query string parameters: 'project_id' is a required property",
        )
    })?;
    let kind = last("consumer_type");
    let all = kind.as_deref() == Some("all");
    let consumer_type = kind.filter(|_| !all);
    let query = UsageQuery {
        project,
        user: last("user_id"),
        consumer_type,
    };
    let mut usage = state.berth.usage(query).await?;
    if all {
        // `consumer_type=all` sums every type under the one name `all`.
        let total = TypeUsage {
            consumers: usage.by_type.values().map(|u| u.consumers).sum(),
            classes: usage.total(),
        };
        usage.by_type = BTreeMap::from([("all".to_owned(), total)]);
    }
    Ok(respond(mv, state.berth.now(), &body(&usage, mv)))
}

/// The usages body: totals by class before 1.38, by consumer type from it.
fn body(usage: &Usage, mv: Microversion) -> Usages {
    let amounts = |classes: &BTreeMap<ResourceClass, u64>| -> BTreeMap<String, u64> {
        classes
            .iter()
            .map(|(class, amount)| (class.as_str().to_owned(), *amount))
            .collect()
    };
    if !mv.at_least(38) {
        return Usages {
            usages: UsagesBy::Class(amounts(&usage.total())),
        };
    }
    let grouped = usage
        .by_type
        .iter()
        .map(|(kind, by_type)| {
            let usage = ConsumerTypeUsage {
                consumer_count: by_type.consumers,
                classes: amounts(&by_type.classes),
            };
            (kind.clone(), usage)
        })
        .collect();
    Usages {
        usages: UsagesBy::ConsumerType(grouped),
    }
}
