use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use nephrite_l7::{Member, Pool};
use proptest::prelude::*;

use super::*;

fn pool(weights: &[u32]) -> Pool {
    Pool {
        id: "p".into(),
        members: weights
            .iter()
            .enumerate()
            .map(|(i, w)| Member {
                address: SocketAddr::from(([127, 0, 0, 1], 1000 + i as u16)),
                weight: *w,
            })
            .collect(),
        ..Pool::default()
    }
}

fn registry(after: u32) -> Arc<HealthRegistry> {
    Arc::new(HealthRegistry::new(Ejection {
        eject_after: after,
        eject_for: Duration::from_secs(60),
    }))
}

proptest! {
    #[test]
    fn round_robin_gives_each_member_its_weight_share(weights in prop::collection::vec(0u32..20, 1..6)) {
        let pool = pool(&weights);
        let balancer = Balancer::new(&pool, registry(3));
        let total: u32 = weights.iter().sum();
        let mut counts = vec![0u32; weights.len()];
        for _ in 0..total * 3 {
            let picked = balancer.pick();
            prop_assert_eq!(picked.is_some(), total > 0);
            if let Some(address) = picked {
                counts[(address.port() - 1000) as usize] += 1;
            }
        }
        for (count, weight) in counts.iter().zip(&weights) {
            prop_assert_eq!(*count, weight * 3);
        }
    }
}

#[test]
fn consecutive_failures_eject_but_never_more_than_half_the_pool() {
    let pool = pool(&[1, 1, 1, 1]);
    let balancer = Balancer::new(&pool, registry(2));
    let a = pool.members[0].address;
    assert!(!balancer.failure(a));
    balancer.success(a);
    assert!(!balancer.failure(a), "a success resets the count");
    assert!(balancer.failure(a));
    for _ in 0..8 {
        assert_ne!(balancer.pick(), Some(a));
    }
    let b = pool.members[1].address;
    balancer.failure(b);
    assert!(balancer.failure(b));
    let c = pool.members[2].address;
    balancer.failure(c);
    assert!(
        !balancer.failure(c),
        "a third of four would be more than half"
    );
}

#[test]
fn health_is_shared_across_table_versions() {
    let registry = registry(1);
    let first = Balancer::new(&pool(&[1, 1]), registry.clone());
    let a = pool(&[1, 1]).members[0].address;
    assert!(first.failure(a));
    let second = Balancer::new(&pool(&[1, 1]), registry);
    for _ in 0..4 {
        assert_ne!(second.pick(), Some(a));
    }
}

proptest! {
    #[test]
    fn the_unavailable_share_is_picked_as_often_as_its_weight_says(
        weights in prop::collection::vec(0u32..20, 0..5),
        unavailable in 1u32..20,
    ) {
        let mut pool = pool(&weights);
        pool.unavailable_weight = unavailable;
        let balancer = Balancer::new(&pool, registry(3));
        let total: u32 = weights.iter().sum::<u32>() + unavailable;
        let mut counts = vec![0u32; weights.len()];
        let mut unavailable_count = 0;
        for _ in 0..total * 3 {
            match balancer.pick_share() {
                Pick::Member(address) => counts[(address.port() - 1000) as usize] += 1,
                Pick::Unavailable => unavailable_count += 1,
                Pick::None => prop_assert!(false, "a pool with a share never picks none"),
            }
        }
        prop_assert_eq!(unavailable_count, unavailable * 3);
        for (count, weight) in counts.iter().zip(&weights) {
            prop_assert_eq!(*count, weight * 3);
        }
    }
}

#[test]
fn an_ejected_member_passes_its_turn_to_a_member_not_to_the_unavailable_share() {
    let mut pool = pool(&[1, 1]);
    pool.unavailable_weight = 1;
    let balancer = Balancer::new(&pool, registry(1));
    let a = pool.members[0].address;
    assert!(balancer.failure(a));
    let mut unavailable = 0;
    for _ in 0..30 {
        match balancer.pick_share() {
            Pick::Member(address) => assert_ne!(address, a),
            Pick::Unavailable => unavailable += 1,
            Pick::None => panic!("a live member is left"),
        }
    }
    assert_eq!(
        unavailable, 10,
        "one pick in three stays the unavailable share"
    );
}
