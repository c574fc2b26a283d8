//! The `documents` table: objects kept whole as JSON, keyed by kind and id. Promise flavors, the
//! policy, budgets, instances and pools, subscriptions and deliveries, the outbox cursor, provider
//! conditions, node records, node claims and provider clouds (whose credentials are sealed
//! before they reach the store).

use super::backend::{Conn, SqlBackend, execute, fetch_all};
use super::driver::{Args as _, Columns as _};
use crate::codec::{corrupt, decode_object, encode_object};
use crate::port::StoreError;
use berth_core::Change;
use berth_core::catalog::CatalogRows;

/// A provider's condition as stored: the provider's uuid beside the condition.
#[derive(serde::Serialize, serde::Deserialize)]
struct ConditionDocument {
    provider: berth_core::ProviderId,
    #[serde(flatten)]
    condition: berth_core::ProviderCondition,
}

/// A node record as stored: the provider's uuid beside the record.
#[derive(serde::Serialize, serde::Deserialize)]
struct NodeDocument {
    provider: berth_core::ProviderId,
    #[serde(flatten)]
    node: berth_core::model::baremetal::NodeRecord,
}

/// The `(kind, id, document)` row a document change writes (`None` document: delete), or
/// `None` for other changes.
fn document_row(change: &Change) -> Option<(&'static str, String, Option<String>)> {
    match change {
        Change::FlavorSet { id, flavor } => {
            Some(("flavor", id.clone(), flavor.as_ref().map(encode_object)))
        }
        Change::ProviderCloudSet { id, cloud } => Some((
            "provider_cloud",
            id.to_string(),
            cloud.as_ref().map(encode_object),
        )),
        Change::BudgetSet { project, budget } => Some((
            "budget",
            project.clone(),
            budget.as_deref().map(encode_object),
        )),
        Change::PolicySet(policy) => Some((
            "policy",
            "reservation".to_owned(),
            Some(encode_object(policy)),
        )),
        Change::PoolSet { id, pool } => {
            Some(("pool", id.to_string(), pool.as_ref().map(encode_object)))
        }
        Change::InstanceSet { id, instance } => Some((
            "instance",
            id.to_string(),
            instance.as_ref().map(encode_object),
        )),
        Change::SubscriptionSet { id, subscription } => Some((
            "subscription",
            id.to_string(),
            subscription.as_ref().map(encode_object),
        )),
        Change::DeliverySet { id, delivery } => {
            Some(("delivery", id.clone(), delivery.as_ref().map(encode_object)))
        }
        Change::OutboxCursor(seq) => Some(("cursor", "outbox".to_owned(), Some(seq.to_string()))),
        Change::NodeSet { uuid, node } => Some((
            "node",
            uuid.to_string(),
            node.as_ref().map(|node| {
                encode_object(&NodeDocument {
                    provider: *uuid,
                    node: node.clone(),
                })
            }),
        )),
        Change::ClaimSet { uuid, claim } => {
            Some(("claim", uuid.to_string(), claim.as_ref().map(encode_object)))
        }
        Change::ProviderConditionSet { uuid, condition } => Some((
            "condition",
            uuid.to_string(),
            condition.as_ref().map(|condition| {
                encode_object(&ConditionDocument {
                    provider: *uuid,
                    condition: condition.clone(),
                })
            }),
        )),
        _ => None,
    }
}

/// Puts a stored document into `rows`.
fn load_document(rows: &mut CatalogRows, kind: &str, document: &str) -> Result<(), StoreError> {
    match kind {
        "flavor" => rows.flavors.push(decode_object(document)?),
        "policy" => rows.policy = Some(decode_object(document)?),
        "budget" => rows.budgets.push(decode_object(document)?),
        "provider_cloud" => rows.provider_clouds.push(decode_object(document)?),
        "instance" => rows.instances.push(decode_object(document)?),
        "pool" => rows.pools.push(decode_object(document)?),
        "subscription" => rows.subscriptions.push(decode_object(document)?),
        "delivery" => rows.deliveries.push(decode_object(document)?),
        "cursor" => rows.outbox_cursor = decode_object(document)?,
        "node" => {
            let stored: NodeDocument = decode_object(document)?;
            rows.nodes.push((stored.provider, stored.node));
        }
        "claim" => rows.claims.push(decode_object(document)?),
        "condition" => {
            let stored: ConditionDocument = decode_object(document)?;
            rows.conditions.push((stored.provider, stored.condition));
        }
        _ => return Err(corrupt("document kind")),
    }
    Ok(())
}

/// Reads every document into `rows`.
#[tracing::instrument(skip_all)]
pub(super) async fn load<B: SqlBackend>(
    conn: &mut Conn<B>,
    rows: &mut CatalogRows,
) -> Result<(), StoreError> {
    for row in fetch_all::<B>(conn, sqlx::query(B::SQL.documents)).await? {
        load_document(rows, row.text("kind")?, row.text("document")?)?;
    }
    Ok(())
}

/// Writes the document a change carries (an error for any other change: a store bug).
#[tracing::instrument(skip_all)]
pub(super) async fn persist<B: SqlBackend>(
    conn: &mut Conn<B>,
    change: &Change,
) -> Result<(), StoreError> {
    let Some((kind, id, document)) = document_row(change) else {
        return Err(StoreError::Backend(
            format!("invariant: no document row for {change:?}").into(),
        ));
    };
    let query = match document {
        Some(document) => sqlx::query(B::SQL.upsert_document)
            .arg(kind)
            .arg(id)
            .arg(document),
        None => sqlx::query(B::SQL.delete_document).arg(kind).arg(id),
    };
    execute::<B>(conn, query).await
}
