//! Shared leases (berth): a lease's owner lets named projects consume its reservations, each
//! within a cap per resource class. Their consumers present the reservations as the owner's do
//! (Placement allocations, Promise `create-instance`); the cap is checked with every write
//! that presents them ([`crate::query::presentation`]). Revoking a share stops new consumption;
//! what the project already holds stays until it is released. Sharing and revoking are
//! recorded for both projects, so each hears of it in its event feed.

use super::checks::bad;
use crate::catalog::Catalog;
use crate::change::{Change, record, record_for};
use crate::limits;
use crate::model::id::LeaseId;
use crate::model::lease::{Lease, LeaseStatus, Share, Shares};
use crate::model::name::ResourceClass;
use crate::model::time::Instant;
use crate::rejection::Rejection;
use std::collections::BTreeMap;

/// The lease `id` as `owner` (the caller's project; `None`: an admin) may share it.
fn shareable<'c>(
    catalog: &'c Catalog,
    id: LeaseId,
    owner: Option<&str>,
) -> Result<&'c Lease, Rejection> {
    catalog
        .lease(id)
        .filter(|l| owner.is_none_or(|p| p == &*l.project_id))
        .ok_or(Rejection::LeaseNotFound(id))
}

/// `cap` from the wire (class names and amounts), checked: at least one class, at most
/// [`limits::SHARE_CAP_CLASSES_MAX`], each a class the catalog knows, each amount at least 1.
fn parse_cap(
    catalog: &Catalog,
    cap: &BTreeMap<String, i64>,
) -> Result<BTreeMap<ResourceClass, u64>, Rejection> {
    crate::decide::class_amounts(
        catalog,
        "cap",
        cap,
        1..=limits::INVENTORY_AMOUNT_MAX,
        limits::SHARE_CAP_CLASSES_MAX,
    )
    .map_err(bad)
}

/// The record of a share's change addressed to the project it names, which also says whose
/// lease it is (the lease's own record goes to the owner).
fn told(
    lease: &Lease,
    kind: &str,
    project: &str,
    at: Instant,
    mut details: serde_json::Value,
) -> Change {
    if let serde_json::Value::Object(map) = &mut details {
        map.insert("owner_project_id".into(), (*lease.project_id).into());
    }
    record_for(lease, kind, at, details, project)
}

/// Shares lease `id` with `project` within `cap`, or changes the cap of its share. Only the
/// lease's project (`owner`; `None`: an admin) may; not with the lease's own project; only a
/// lease that still holds capacity (neither ended nor a hold or a waitlisted lease); at most
/// [`limits::SHARES_PER_LEASE_MAX`] projects per lease. A lower cap than the project already
/// uses is kept: its consumers keep what they hold and may add nothing until under it.
pub fn share_lease(
    catalog: &Catalog,
    id: LeaseId,
    owner: Option<&str>,
    project: &str,
    cap: &BTreeMap<String, i64>,
    now: Instant,
) -> Result<(Vec<Change>, Share), Rejection> {
    let lease = shareable(catalog, id, owner)?;
    let project = project.trim();
    if !(1..=limits::PROJECT_ID_LEN_MAX).contains(&project.chars().count()) {
        return Err(bad(format!(
            "project_id: must be between 1 and {} characters",
            limits::PROJECT_ID_LEN_MAX
        )));
    }
    if project == &*lease.project_id {
        return Err(bad(
            "project_id: a lease is not shared with its own project",
        ));
    }
    let cap = parse_cap(catalog, cap)?;
    if !lease.holds_capacity() || matches!(lease.status, LeaseStatus::Held) || now >= lease.end {
        return Err(Rejection::CantUpdate(format!(
            "Lease {id} holds no capacity to share (status {})",
            lease.status.as_str()
        )));
    }
    let mut shares = lease.shares().cloned().unwrap_or_default();
    let share = Share {
        project_id: project.to_owned(),
        cap,
        updated_at: now,
    };
    let full = shares.0.len() >= limits::SHARES_PER_LEASE_MAX;
    match shares.0.iter_mut().find(|s| s.project_id == project) {
        Some(existing) => *existing = share.clone(),
        None if full => {
            return Err(Rejection::CantUpdate(format!(
                "Lease {id} is already shared with {} projects (SHARES_PER_LEASE_MAX)",
                limits::SHARES_PER_LEASE_MAX
            )));
        }
        None => shares.0.push(share.clone()),
    }
    let details = serde_json::json!({
        "shared_with": project,
        "cap": share.cap.iter().map(|(c, n)| (c.as_str().to_owned(), *n)).collect::<BTreeMap<_, _>>(),
    });
    let mut updated = lease.clone();
    updated.set_shares(Some(shares));
    updated.updated_at = now;
    let changes = vec![
        record(lease, "lease.share", now, details.clone()),
        told(lease, "lease.share", project, now, details),
        Change::LeaseSet {
            id,
            lease: Some(Box::new(updated)),
        },
    ];
    Ok((changes, share))
}

/// Revokes the share of `project` in lease `id`: its consumers may present the lease's
/// reservations no more (what they hold stays until released). Only the lease's project
/// (`owner`; `None`: an admin) may.
pub fn revoke_share(
    catalog: &Catalog,
    id: LeaseId,
    owner: Option<&str>,
    project: &str,
    now: Instant,
) -> Result<Vec<Change>, Rejection> {
    let lease = shareable(catalog, id, owner)?;
    if lease.share_of(project).is_none() {
        return Err(Rejection::ShareNotFound {
            lease: id,
            project: project.to_owned(),
        });
    }
    let kept: Vec<Share> = lease
        .shares()
        .into_iter()
        .flat_map(|s| s.0.iter())
        .filter(|s| s.project_id != project)
        .cloned()
        .collect();
    let mut updated = lease.clone();
    updated.set_shares((!kept.is_empty()).then_some(Shares(kept)));
    updated.updated_at = now;
    let details = serde_json::json!({ "shared_with": project });
    Ok(vec![
        record(lease, "lease.share.revoked", now, details.clone()),
        told(lease, "lease.share.revoked", project, now, details),
        Change::LeaseSet {
            id,
            lease: Some(Box::new(updated)),
        },
    ])
}
