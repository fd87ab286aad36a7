//! The pods' IPv6 way out ([`Egress6Policy`]): the `ip6` twin of the
//! egress table (`ip6 nimbess`), replaced whole on every network change,
//! with a `postrouting` NAT chain masquerading each `egress6: masquerade`
//! network's IPv6 subnet towards everything but the pod networks' IPv6
//! subnets. `egress6: routed` networks leave with their own addresses.
//! Without a masquerading network the table goes.

use nephrite_pipeline::Egress6Policy;

use super::super::expr::{self, Hook};
use super::super::netlink::{Attrs, Batch, chain_names, send_batch};
use super::super::nftables::{
    EGRESS_TABLE, IPV6_DADDR_OFFSET, IPV6_SADDR_OFFSET, NF_ACCEPT, NF_INET_POST_ROUTING,
    NF_IP_PRI_NAT_SRC, NFPROTO_IPV6, NFT_MSG_DELTABLE, NFT_MSG_NEWCHAIN, NFT_MSG_NEWRULE,
    NFT_MSG_NEWTABLE, NLM_F_APPEND, NLM_F_CREATE,
};
use super::POSTROUTING;
use crate::driver::DriverError;

fn rule(batch: &mut Batch, exprs: &Attrs) {
    let r = expr::rule(EGRESS_TABLE, POSTROUTING, exprs);
    batch.nft(
        NFPROTO_IPV6,
        NFT_MSG_NEWRULE,
        NLM_F_CREATE | NLM_F_APPEND,
        &r,
    );
}

/// The batch replacing the `ip6` table with what `policy` says.
fn batch(policy: &Egress6Policy) -> Batch {
    let mut batch = Batch::new();
    let table = expr::table(EGRESS_TABLE);
    batch.nft(NFPROTO_IPV6, NFT_MSG_NEWTABLE, NLM_F_CREATE, &table);
    batch.nft(NFPROTO_IPV6, NFT_MSG_DELTABLE, 0, &table);
    if !policy.masquerades() {
        return batch;
    }
    batch.nft(NFPROTO_IPV6, NFT_MSG_NEWTABLE, NLM_F_CREATE, &table);
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

/// Replace the `ip6` table with what `policy` says (no masquerading
/// network: the table goes).
///
/// # Errors
/// The kernel refused the batch.
pub fn render6(policy: &Egress6Policy) -> Result<(), DriverError> {
    send_batch(batch(policy), "the pods' IPv6 egress table")
}

/// A missing `ip6` table or chain where `policy` masquerades, or a table
/// where it does not, one line each.
pub fn verify6(policy: &Egress6Policy) -> Vec<String> {
    let have = match chain_names(NFPROTO_IPV6, EGRESS_TABLE) {
        Ok(have) => have,
        Err(e) => {
            return vec![format!(
                "egress: table ip6 {EGRESS_TABLE} cannot be read: {e}"
            )];
        }
    };
    match (policy.masquerades(), have) {
        (true, None) => vec![format!("egress: table ip6 {EGRESS_TABLE} is missing")],
        (true, Some(have)) if !have.iter().any(|c| c == POSTROUTING) => vec![format!(
            "egress: chain {POSTROUTING} of table ip6 {EGRESS_TABLE} is missing"
        )],
        (false, Some(_)) => vec![format!(
            "egress: table ip6 {EGRESS_TABLE} exists with no masquerading network"
        )],
        _ => Vec::new(),
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
        // table add, delete, add; the chain; two exclusions and the masquerade
        assert_eq!(batch(&policy).len(), 3 + 1 + 2 + 1);
        let routed_only = Egress6Policy::new(&networks()[1..]);
        assert_eq!(batch(&routed_only).len(), 2, "the table goes");
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
            render6(&policy).expect("the kernel takes the table");
            assert_eq!(verify6(&policy), Vec::<String>::new());
            let none = Egress6Policy::new(&[]);
            assert_eq!(
                verify6(&none),
                ["egress: table ip6 nimbess exists with no masquerading network"]
            );
            render6(&none).expect("the table goes");
            assert_eq!(verify6(&none), Vec::<String>::new());
        })
        .join()
        .expect("the test's thread");
    }
}
