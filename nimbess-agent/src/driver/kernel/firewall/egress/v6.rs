//! The pods' IPv6 way out ([`Egress6Policy`]): the `ip6` twin of the
//! egress table (`ip6 nimbess`), replaced whole on every network change.
//! Its `forward` chain isolates the dual-stack networks' bridges from each
//! other as the `ip` table's does (by interface, so the same rules: a
//! source the host would not route back through the bridge it came in on
//! is dropped; established flows, a Service's DNAT and what a policy's
//! ingress chain marked are accepted; a bridge's packet routed into
//! another bridge or a routed pod veth is dropped). Its `postrouting` NAT
//! chain masquerades each `egress6: masquerade` network's IPv6 subnet
//! towards everything but the pod networks' IPv6 subnets; `egress6:
//! routed` networks leave with their own addresses. Without a dual-stack
//! network the table goes.

use nephrite_pipeline::Egress6Policy;

use super::super::expr::{self, Hook};
use super::super::netlink::{Attrs, Batch, chain_names, send_batch};
use super::super::nftables::{
    BRIDGE_PREFIX, CROSSING_MARK, CT_ESTABLISHED_RELATED, EGRESS_FORWARD_PRIORITY, EGRESS_TABLE,
    IPS_DST_NAT, IPV6_DADDR_OFFSET, IPV6_SADDR_OFFSET, NF_ACCEPT, NF_DROP, NF_INET_FORWARD,
    NF_INET_POST_ROUTING, NF_IP_PRI_NAT_SRC, NFPROTO_IPV6, NFT_CMP_EQ, NFT_CMP_NEQ, NFT_CT_STATE,
    NFT_CT_STATUS, NFT_FIB_RESULT_OIF, NFT_META_IIFNAME, NFT_META_MARK, NFT_META_OIFNAME,
    NFT_MSG_DELTABLE, NFT_MSG_NEWCHAIN, NFT_MSG_NEWRULE, NFT_MSG_NEWTABLE, NFTA_FIB_F_IIF,
    NFTA_FIB_F_SADDR, NLM_F_APPEND, NLM_F_CREATE, VETH_PREFIX,
};
use super::{FORWARD, POSTROUTING};
use crate::driver::DriverError;

fn rule_in(batch: &mut Batch, chain: &str, exprs: &Attrs) {
    let r = expr::rule(EGRESS_TABLE, chain, exprs);
    batch.nft(
        NFPROTO_IPV6,
        NFT_MSG_NEWRULE,
        NLM_F_CREATE | NLM_F_APPEND,
        &r,
    );
}

fn rule(batch: &mut Batch, exprs: &Attrs) {
    rule_in(batch, POSTROUTING, exprs);
}

/// The `forward` chain isolating the dual-stack networks' `bridges`.
fn forward(batch: &mut Batch, bridges: &[String]) {
    let hook = Hook {
        number: NF_INET_FORWARD,
        priority: EGRESS_FORWARD_PRIORITY,
        device: None,
    };
    let chain = expr::base_chain(EGRESS_TABLE, FORWARD, "filter", &hook);
    batch.nft(NFPROTO_IPV6, NFT_MSG_NEWCHAIN, NLM_F_CREATE, &chain);
    for bridge in bridges {
        // iifname <bridge> fib saddr . iif oif 0 drop
        let mut e = Attrs::default();
        expr::meta(&mut e, NFT_META_IIFNAME);
        expr::cmp(&mut e, NFT_CMP_EQ, &expr::ifname(bridge));
        expr::fib(
            &mut e,
            NFT_FIB_RESULT_OIF,
            NFTA_FIB_F_SADDR | NFTA_FIB_F_IIF,
        );
        expr::cmp(&mut e, NFT_CMP_EQ, &0u32.to_ne_bytes());
        expr::verdict(&mut e, NF_DROP);
        rule_in(batch, FORWARD, &e);
    }
    // ct state established,related / ct status dnat / the policy's mark: accept
    for (load, mask) in [
        (NFT_CT_STATE, CT_ESTABLISHED_RELATED),
        (NFT_CT_STATUS, IPS_DST_NAT),
        (NFT_META_MARK, CROSSING_MARK),
    ] {
        let mut e = Attrs::default();
        if load == NFT_META_MARK {
            expr::meta(&mut e, load);
        } else {
            expr::ct(&mut e, load);
        }
        expr::any_bit(&mut e, mask);
        expr::verdict(&mut e, NF_ACCEPT);
        rule_in(batch, FORWARD, &e);
    }
    for bridge in bridges {
        // iifname <bridge> oifname "nb*" oifname != <bridge> drop
        let mut e = Attrs::default();
        expr::meta(&mut e, NFT_META_IIFNAME);
        expr::cmp(&mut e, NFT_CMP_EQ, &expr::ifname(bridge));
        expr::meta(&mut e, NFT_META_OIFNAME);
        expr::cmp(&mut e, NFT_CMP_EQ, BRIDGE_PREFIX.as_bytes());
        expr::cmp(&mut e, NFT_CMP_NEQ, &expr::ifname(bridge));
        expr::verdict(&mut e, NF_DROP);
        rule_in(batch, FORWARD, &e);
        // iifname <bridge> oifname "nv*" drop
        let mut e = Attrs::default();
        expr::meta(&mut e, NFT_META_IIFNAME);
        expr::cmp(&mut e, NFT_CMP_EQ, &expr::ifname(bridge));
        expr::meta(&mut e, NFT_META_OIFNAME);
        expr::cmp(&mut e, NFT_CMP_EQ, VETH_PREFIX.as_bytes());
        expr::verdict(&mut e, NF_DROP);
        rule_in(batch, FORWARD, &e);
    }
}

/// The batch replacing the `ip6` table with what `policy` says for the
/// dual-stack networks whose bridges are `bridges`.
fn batch(policy: &Egress6Policy, bridges: &[String]) -> Batch {
    let mut batch = Batch::new();
    let table = expr::table(EGRESS_TABLE);
    batch.nft(NFPROTO_IPV6, NFT_MSG_NEWTABLE, NLM_F_CREATE, &table);
    batch.nft(NFPROTO_IPV6, NFT_MSG_DELTABLE, 0, &table);
    if policy.exclusions().is_empty() {
        return batch;
    }
    batch.nft(NFPROTO_IPV6, NFT_MSG_NEWTABLE, NLM_F_CREATE, &table);
    forward(&mut batch, bridges);
    if !policy.masquerades() {
        return batch;
    }
    let hook = Hook {
        number: NF_INET_POST_ROUTING,
        priority: NF_IP_PRI_NAT_SRC,
        device: None,
    };
    let chain = expr::base_chain(EGRESS_TABLE, POSTROUTING, "nat", &hook);
    batch.nft(NFPROTO_IPV6, NFT_MSG_NEWCHAIN, NLM_F_CREATE, &chain);
    let exclusions = policy.exclusions();
    for subnet in policy.masqueraded() {
        for excluded in &exclusions {
            // ip6 saddr <subnet> ip6 daddr <excluded> accept (no NAT)
            let mut e = Attrs::default();
            expr::prefix6(&mut e, IPV6_SADDR_OFFSET, subnet, false);
            expr::prefix6(&mut e, IPV6_DADDR_OFFSET, *excluded, false);
            expr::verdict(&mut e, NF_ACCEPT);
            rule(&mut batch, &e);
        }
        // ip6 saddr <subnet> masquerade
        let mut e = Attrs::default();
        expr::prefix6(&mut e, IPV6_SADDR_OFFSET, subnet, false);
        expr::expr(&mut e, "masq", |_| {});
        rule(&mut batch, &e);
    }
    batch
}

/// Replace the `ip6` table with what `policy` says for the dual-stack
/// networks whose bridges are `bridges` (no dual-stack network: the table
/// goes).
///
/// # Errors
/// The kernel refused the batch.
pub fn render6(policy: &Egress6Policy, bridges: &[String]) -> Result<(), DriverError> {
    send_batch(batch(policy, bridges), "the pods' IPv6 egress table")
}

/// A missing `ip6` table or chain where `policy` has dual-stack networks,
/// or a table where it has none, one line each.
pub fn verify6(policy: &Egress6Policy) -> Vec<String> {
    let have = match chain_names(NFPROTO_IPV6, EGRESS_TABLE) {
        Ok(have) => have,
        Err(e) => {
            return vec![format!(
                "egress: table ip6 {EGRESS_TABLE} cannot be read: {e}"
            )];
        }
    };
    let dual = !policy.exclusions().is_empty();
    match (dual, have) {
        (true, None) => vec![format!("egress: table ip6 {EGRESS_TABLE} is missing")],
        (true, Some(have)) => {
            let mut wanted = vec![FORWARD];
            if policy.masquerades() {
                wanted.push(POSTROUTING);
            }
            wanted
                .into_iter()
                .filter(|chain| !have.iter().any(|c| c == chain))
                .map(|chain| {
                    format!("egress: chain {chain} of table ip6 {EGRESS_TABLE} is missing")
                })
                .collect()
        }
        (false, Some(_)) => vec![format!(
            "egress: table ip6 {EGRESS_TABLE} exists with no dual-stack network"
        )],
        (false, None) => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use nephrite_pipeline::{Egress6, NetworkSpec};

    use super::*;

    fn networks() -> Vec<NetworkSpec> {
        let n = |name: &str, i: u8, egress6| {
            let mut n = NetworkSpec::l2(name, format!("10.{i}.0.0/24").parse().expect("v4"))
                .with_v6(format!("fd00:{i}::/64").parse().expect("v6"));
            n.egress6 = egress6;
            n
        };
        vec![
            n("masq", 1, Egress6::Masquerade),
            n("routed", 2, Egress6::Routed),
        ]
    }

    #[test]
    fn a_masquerading_network_skips_every_pod_subnet_then_masquerades() {
        let policy = Egress6Policy::new(&networks());
        let bridges = ["nb1".to_string(), "nb2".to_string()];
        // table add, delete, add; forward: its chain, a source check per
        // bridge, three accepts, two drops per bridge; postrouting: its
        // chain, two exclusions and the masquerade
        assert_eq!(
            batch(&policy, &bridges).len(),
            3 + (1 + 2 + 3 + 4) + (1 + 2 + 1)
        );
        let routed_only = Egress6Policy::new(&networks()[1..]);
        assert_eq!(
            batch(&routed_only, &bridges[1..]).len(),
            3 + (1 + 1 + 3 + 2),
            "no masquerade, the isolation stays"
        );
        assert_eq!(
            batch(&Egress6Policy::new(&[]), &[]).len(),
            2,
            "the table goes"
        );
    }

    #[test]
    fn the_kernel_takes_the_ipv6_egress_table_and_verify_reads_it_back() {
        let test = "the_kernel_takes_the_ipv6_egress_table_and_verify_reads_it_back";
        if let Err(e) =
            nephrite_test_services::require_root("creates a network namespace and nftables tables")
        {
            e.skip(test);
            return;
        }
        std::thread::spawn(|| {
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET)
                .expect("unshare(CLONE_NEWNET)");
            let policy = Egress6Policy::new(&networks());
            assert_eq!(verify6(&policy), ["egress: table ip6 nimbess is missing"]);
            render6(&policy, &["nb1".to_string()]).expect("the kernel takes the table");
            assert_eq!(verify6(&policy), Vec::<String>::new());
            let none = Egress6Policy::new(&[]);
            assert_eq!(
                verify6(&none),
                ["egress: table ip6 nimbess exists with no dual-stack network"]
            );
            render6(&none, &[]).expect("the table goes");
            assert_eq!(verify6(&none), Vec::<String>::new());
        })
        .join()
        .expect("the test's thread");
    }
}
