//! The negative controls of the defects planted in berth itself (`--features planted`), in a
//! process of their own: a planted defect is process-wide, so they run one after the other here
//! and never beside the seeds that must pass.
#![cfg(feature = "planted")]

use berth_sim::store::Durability;
use berth_sim::{Config, Defect, Failure, run};

/// The first failure of `defect` in 20 seeds of 300 steps.
fn caught(defect: Defect) -> Option<Failure> {
    (1..=20).find_map(|seed| {
        run(&Config {
            seed,
            steps: 300,
            durability: Durability::Synced,
            defect: Some(defect),
            trace: false,
        })
        .err()
    })
}

/// Floating IPs given without looking at the leases that hold them: an address is promised
/// twice. A node claim that ends but leaves its allocation: the node is held by no claim.
#[test]
fn the_controls_of_floating_ips_and_node_claims_are_caught() {
    let failure =
        caught(Defect::SkipFloatingIpCheck).expect("addresses given twice were not caught");
    assert!(failure.what.contains("promised twice"), "{failure}");
    let failure =
        caught(Defect::ClaimKeepsNode).expect("a claim that keeps its node was not caught");
    assert!(
        failure.what.contains("holds a node but the claim is gone"),
        "{failure}"
    );
}
