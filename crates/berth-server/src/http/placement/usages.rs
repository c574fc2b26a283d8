//! `GET /usages` (1.9): what a project (and optionally a user) holds, grouped by consumer type
//! from 1.38.

use super::query;
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
use std::collections::BTreeMap;

pub(super) fn register(routes: &mut Routes) {
    routes
        .add(
            Method::GET,
            "/placement/usages",
            Rule::SERVICE,
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
    let user = last("user_id");
    let wanted_type = last("consumer_type");
    let body = state
        .berth
        .read(|catalog| {
            // type -> (class -> used, consumer count)
            let mut by_type: BTreeMap<String, (BTreeMap<String, u64>, u64)> = BTreeMap::new();
            for (_, consumer) in catalog.consumers() {
                let kind = consumer
                    .consumer_type
                    .clone()
                    .unwrap_or_else(|| "unknown".to_owned());
                let type_matches = match wanted_type.as_deref() {
                    None | Some("all") => true,
                    Some(wanted) => wanted == kind,
                };
                if consumer.project_id != project
                    || user.as_ref().is_some_and(|u| *u != consumer.user_id)
                    || !type_matches
                {
                    continue;
                }
                let (classes, count) = by_type.entry(kind).or_default();
                *count += 1;
                for (_, class, amount) in consumer.entries() {
                    *classes.entry(class.as_str().to_owned()).or_insert(0) += amount;
                }
            }
            if !mv.at_least(38) {
                let mut flat: BTreeMap<String, u64> = BTreeMap::new();
                for (classes, _) in by_type.values() {
                    for (class, amount) in classes {
                        *flat.entry(class.clone()).or_insert(0) += amount;
                    }
                }
                return Usages {
                    usages: UsagesBy::Class(flat),
                };
            }
            let grouped = by_type
                .into_iter()
                .map(|(kind, (classes, consumer_count))| {
                    let usage = ConsumerTypeUsage {
                        consumer_count,
                        classes,
                    };
                    (kind, usage)
                })
                .collect();
            Usages {
                usages: UsagesBy::ConsumerType(grouped),
            }
        })
        .await?;
    Ok(respond(mv, state.berth.now(), &body))
}
