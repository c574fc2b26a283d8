//! The simulator in `cargo test`: a few seeds of the real write path with crashes, every kept
//! seed that once failed, and the negative controls, which must be caught. CI also runs the
//! long campaign in release (`scripts/test.sh`: 1,000 seeds of 1,000 steps).

use berth_sim::store::Durability;
use berth_sim::{Config, Defect, run};

fn config(seed: u64, steps: usize) -> Config {
    Config {
        seed,
        steps,
        durability: Durability::Synced,
        defect: None,
        trace: false,
    }
}

#[test]
fn seeds_pass_with_crashes_at_every_boundary() {
    let (mut crashes, mut claims, mut jumps_back) = (0, 0, 0);
    for seed in 1..=12 {
        let report = run(&config(seed, 200)).unwrap_or_else(|failure| panic!("{failure}"));
        assert!(
            report.acked > 0 && report.refused > 0 && report.admissions > 0,
            "seed {seed}: {report:?}"
        );
        crashes += report.crashes;
        claims += report.claims;
        jumps_back += report.jumps_back;
    }
    assert!(crashes > 12, "the runs crashed only {crashes} times");
    assert!(claims > 12, "the runs granted only {claims} node claims");
    assert!(
        jumps_back > 12,
        "the clock moved back only {jumps_back} times"
    );
}

#[test]
fn a_seed_replays_bit_for_bit() {
    let first = run(&config(7, 150)).expect("passes");
    let again = run(&config(7, 150)).expect("passes");
    assert_eq!(first, again);
}

#[test]
fn every_kept_seed_passes() {
    let kept = include_str!("../seeds.txt");
    for line in kept
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
    {
        let mut words = line.split_whitespace();
        let seed: u64 = words.next().and_then(|w| w.parse().ok()).expect("a seed");
        let steps: usize = words
            .next()
            .and_then(|w| w.parse().ok())
            .expect("its steps");
        run(&config(seed, steps)).unwrap_or_else(|failure| panic!("kept seed: {failure}"));
    }
}

/// A disk that answers before it syncs loses acknowledged writes in a crash: the checker must
/// say so within a few seeds.
#[test]
fn an_unsynced_disk_is_caught() {
    let caught = (1..=20).find_map(|seed| {
        run(&Config {
            durability: Durability::Unsynced,
            ..config(seed, 300)
        })
        .err()
    });
    let failure = caught.expect("an unsynced disk was not caught in 20 seeds");
    assert!(failure.what.contains("were told"), "{failure}");
}

/// A recovery that drops the last commit loses an acknowledged write: caught too.
#[test]
fn a_torn_tail_is_caught() {
    let caught = (1..=20).find_map(|seed| {
        run(&Config {
            defect: Some(Defect::LoseLastCommit),
            ..config(seed, 300)
        })
        .err()
    });
    let failure = caught.expect("a lost last commit was not caught in 20 seeds");
    // A lost commit may show first as capacity promised beyond what is left, in no decision.
    assert!(
        failure.what.contains("were told") || failure.what.contains("capacity promised twice"),
        "{failure}"
    );
}
