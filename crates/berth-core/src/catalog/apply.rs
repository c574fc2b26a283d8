//! Applying committed changes: the only way the catalog changes.

use super::providers::is_sharing;
use super::state::Catalog;
use crate::change::Change;

impl Catalog {
    /// Applies committed changes, in order.
    pub fn apply(&mut self, changes: &[Change]) {
        for change in changes {
            self.apply_one(change);
        }
    }

    fn apply_one(&mut self, change: &Change) {
        match change {
            Change::ProviderCreated(row) => self.insert_provider(row.clone()),
            Change::ProviderUpdated(row) => self.update_provider(row),
            Change::ProviderDeleted(uuid) => self.delete_provider(*uuid),
            Change::InventoriesReplaced { uuid, inventories } => {
                let interned = inventories
                    .iter()
                    .map(|(class, record)| (self.intern(class), *record))
                    .collect();
                self.provider_mut(*uuid).inventories = interned;
            }
            Change::TraitsReplaced { uuid, traits } => {
                let provider = self.provider_mut(*uuid);
                provider.traits = traits.clone();
                match is_sharing(provider) {
                    true => self.sharing.insert(*uuid),
                    false => self.sharing.remove(uuid),
                };
            }
            Change::AggregatesReplaced { uuid, aggregates } => {
                self.provider_mut(*uuid).aggregates = aggregates.clone();
            }
            Change::AttributesReplaced { uuid, attributes } => {
                self.provider_mut(*uuid).attributes = attributes.clone();
            }
            Change::HostSet { uuid, host } => self.provider_mut(*uuid).host = host.clone(),
            Change::AggregateDescribed {
                uuid,
                record: Some(record),
            } => {
                self.aggregates.insert(*uuid, record.clone());
            }
            Change::AggregateDescribed { uuid, record: None } => {
                self.aggregates.remove(uuid);
            }
            Change::ConsumerSet { uuid, consumer } => {
                self.remove_consumer(*uuid);
                if let Some(consumer) = consumer {
                    self.insert_consumer(*uuid, consumer.clone());
                }
            }
            Change::ResourceClassCreated(class) => {
                self.custom_classes.insert(class.clone());
            }
            Change::ResourceClassDeleted(class) => {
                self.custom_classes.remove(class);
            }
            Change::TraitCreated(name) => {
                self.custom_traits.insert(name.clone());
            }
            Change::TraitDeleted(name) => {
                self.custom_traits.remove(name);
            }
            Change::LeaseSet { id, lease } => {
                self.remove_lease(*id);
                if let Some(lease) = lease {
                    self.insert_lease((**lease).clone());
                }
            }
            Change::FloatingIpSet { id, fip: Some(fip) } => {
                self.floating_ips.insert(*id, fip.clone());
            }
            Change::FloatingIpSet { id, fip: None } => {
                self.floating_ips.shift_remove(id);
            }
            Change::LeaseRecorded(_) => {}
            Change::NodeSet { .. }
            | Change::ClaimSet { .. }
            | Change::ProviderConditionSet { .. } => self.apply_health(change),
            Change::FlavorSet { .. }
            | Change::ProviderCloudSet { .. }
            | Change::PolicySet(_)
            | Change::BudgetSet { .. }
            | Change::PoolSet { .. }
            | Change::InstanceSet { .. }
            | Change::SubscriptionSet { .. }
            | Change::DeliverySet { .. }
            | Change::OutboxCursor(_) => self.apply_promise(change),
            // Kept by the store alone, read under the writer lock when a request names its key.
            Change::IdempotencySet { .. } => {}
            Change::PropertyPrivacy { name, private } => {
                match private {
                    true => self.private_properties.insert(name.clone()),
                    false => self.private_properties.remove(name),
                };
            }
        }
    }

    /// Applies a change to providers' conditions, node records or node claims.
    fn apply_health(&mut self, change: &Change) {
        match change {
            Change::NodeSet { uuid, node } => {
                // Removing the record of a provider deleted in the same decision is a no-op.
                if let Some(provider) = self.providers.get_mut(uuid) {
                    provider.node.clone_from(node);
                }
            }
            Change::ClaimSet { uuid, claim } => {
                self.remove_claim(*uuid);
                if let Some(claim) = claim {
                    self.insert_claim(claim.clone());
                }
            }
            Change::ProviderConditionSet { uuid, condition } => {
                // Removing the condition of a provider deleted in the same decision is a no-op.
                if let Some(provider) = self.providers.get_mut(uuid) {
                    provider.condition.clone_from(condition);
                }
            }
            _ => {}
        }
    }

    /// Applies a change to the Promise objects (flavors, provider clouds, policy, pools,
    /// instances, subscriptions, deliveries, the outbox cursor).
    fn apply_promise(&mut self, change: &Change) {
        match change {
            Change::FlavorSet { id, flavor } => match flavor {
                Some(flavor) => {
                    self.flavors.insert(id.clone(), flavor.clone());
                }
                None => {
                    self.flavors.remove(id);
                }
            },
            Change::ProviderCloudSet { id, cloud } => match cloud {
                Some(cloud) => {
                    self.clouds.insert(*id, cloud.clone());
                }
                None => {
                    self.clouds.remove(id);
                }
            },
            Change::PolicySet(policy) => self.policy = Some(policy.clone()),
            Change::BudgetSet { project, budget } => match budget {
                Some(budget) => {
                    self.budgets
                        .insert(project.clone(), budget.as_ref().clone());
                }
                None => {
                    self.budgets.remove(project);
                }
            },
            Change::PoolSet { id, pool } => {
                self.remove_pool(*id);
                if let Some(pool) = pool {
                    self.insert_pool(pool.clone());
                }
            }
            Change::InstanceSet { id, instance } => match instance {
                Some(instance) => {
                    self.instances.insert(*id, instance.clone());
                }
                None => {
                    self.instances.remove(id);
                }
            },
            Change::SubscriptionSet { id, subscription } => match subscription {
                Some(s) => {
                    self.subscriptions.insert(*id, s.clone());
                }
                None => {
                    self.subscriptions.remove(id);
                }
            },
            Change::DeliverySet { id, delivery } => match delivery {
                Some(d) => {
                    self.deliveries.insert(id.clone(), d.clone());
                }
                None => {
                    self.deliveries.remove(id);
                }
            },
            Change::OutboxCursor(seq) => self.outbox_cursor = self.outbox_cursor.max(*seq),
            _ => {}
        }
    }
}
