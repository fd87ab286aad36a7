//! The pods' way out, rendered from [`EgressPolicy`] as one nftables table
//! (`ip nimbess`, replaced atomically like the ACL tables): a `forward`
//! chain that drops what one network's bridge would route into another's
//! or into a routed network's pod veth (pod networks stay isolated through
//! the host's gateways), and what a routed network's pod sends (through
//! its host veth, `nv…`) into another pod network's subnet (its
//! network's table lets that fall through to the other network's route,
//! see [`crate::driver::kernel::routed`]; the pod's own subnet stays accepted), unless the
//! model opens the path (a pod's packet whose source address the host
//! would not route back through the bridge or veth it came in on is
//! dropped first, so no pod borrows another network's addresses to get in)
//! ([`nephrite_pipeline::connection_allowed`]): it first accepts what
//! conntrack knows (`ct state established,related`: replies and the rest
//! of an allowed connection), what a Service translated (`ct status dnat`:
//! the path from every network to a Service's endpoints, for the
//! Service's connections only), and what a NetworkPolicy's ingress rule
//! let into the destination pod (the mark [`CROSSING_MARK`]
//! the policy table, hooked before this chain, sets). And a
//! `postrouting` NAT chain that masquerades the pod subnets towards every
//! destination but the policy's exclusions. The pods' IPv6 masquerade is
//! the `ip6` twin's ([`render6`]).

use nephrite_pipeline::{EgressPolicy, Ipv4Cidr};

use super::expr::{self, Hook};
use super::netlink::{Attrs, Batch, chain_names, send_batch};
use super::nftables::{
    BRIDGE_PREFIX, CROSSING_MARK, CT_ESTABLISHED_RELATED, EGRESS_FORWARD_PRIORITY, EGRESS_TABLE,
    IPS_DST_NAT, IPV4_DADDR_OFFSET, IPV4_SADDR_OFFSET, NF_ACCEPT, NF_DROP, NF_INET_FORWARD,
    NF_INET_POST_ROUTING, NF_IP_PRI_NAT_SRC, NFPROTO_IPV4, NFT_CMP_EQ, NFT_CMP_NEQ, NFT_CT_STATE,
    NFT_CT_STATUS, NFT_FIB_RESULT_OIF, NFT_META_IIFNAME, NFT_META_MARK, NFT_META_OIFNAME,
    NFT_MSG_DELTABLE, NFT_MSG_NEWCHAIN, NFT_MSG_NEWRULE, NFT_MSG_NEWTABLE, NFTA_FIB_F_IIF,
    NFTA_FIB_F_SADDR, NLM_F_APPEND, NLM_F_CREATE, VETH_PREFIX,
};
use crate::driver::DriverError;

mod v6;

pub use v6::{render6, verify6};

/// The forward chain's name.
const FORWARD: &str = "forward";
/// The masquerade chain's name.
const POSTROUTING: &str = "postrouting";

/// Accept when the 32-bit host-order value `load` puts in register 1 has
/// any bit of `mask` set.
fn accept_when_any(batch: &mut Batch, load: impl FnOnce(&mut Attrs), mask: u32) {
    let mut e = Attrs::default();
    load(&mut e);
    expr::any_bit(&mut e, mask);
    expr::verdict(&mut e, NF_ACCEPT);
    rule(batch, FORWARD, &e);
}

fn chain(batch: &mut Batch, name: &str, kind: &str, hook: u32, priority: i32) {
    let hook = Hook {
        number: hook,
        priority,
        device: None,
    };
    let c = expr::base_chain(EGRESS_TABLE, name, kind, &hook);
    batch.nft(NFPROTO_IPV4, NFT_MSG_NEWCHAIN, NLM_F_CREATE, &c);
}

fn rule(batch: &mut Batch, chain: &str, exprs: &Attrs) {
    let r = expr::rule(EGRESS_TABLE, chain, exprs);
    batch.nft(
        NFPROTO_IPV4,
        NFT_MSG_NEWRULE,
        NLM_F_CREATE | NLM_F_APPEND,
        &r,
    );
}

/// Replace the table with what `policy` says for the pod networks whose
/// bridges are `bridges` and the routed networks whose subnets are
/// `routed`.
///
/// # Errors
/// The kernel refused the batch.
pub fn render(
    policy: &EgressPolicy,
    bridges: &[String],
    routed: &[Ipv4Cidr],
) -> Result<(), DriverError> {
    let mut batch = Batch::new();
    let table = expr::table(EGRESS_TABLE);
    batch.nft(NFPROTO_IPV4, NFT_MSG_NEWTABLE, NLM_F_CREATE, &table);
    batch.nft(NFPROTO_IPV4, NFT_MSG_DELTABLE, 0, &table);
    batch.nft(NFPROTO_IPV4, NFT_MSG_NEWTABLE, NLM_F_CREATE, &table);
    chain(
        &mut batch,
        FORWARD,
        "filter",
        NF_INET_FORWARD,
        EGRESS_FORWARD_PRIORITY,
    );
    // A bridge by its own name (a table left behind by another agent on
    // the host must not judge this agent's bridges), routed veths by
    // their prefix (one rule for all of them).
    let sources = bridges
        .iter()
        .map(|bridge| expr::ifname(bridge))
        .chain((!routed.is_empty()).then(|| VETH_PREFIX.as_bytes().to_vec()));
    for source in sources {
        // iifname <bridge> | "nv*" fib saddr . iif oif 0 drop: a pod's
        // packet whose source the host would not route back through the
        // bridge or veth it came in on (a pod claiming another
        // network's address) is dropped before anything accepts it
        let mut e = Attrs::default();
        expr::meta(&mut e, NFT_META_IIFNAME);
        expr::cmp(&mut e, NFT_CMP_EQ, &source);
        expr::fib(
            &mut e,
            NFT_FIB_RESULT_OIF,
            NFTA_FIB_F_SADDR | NFTA_FIB_F_IIF,
        );
        expr::cmp(&mut e, NFT_CMP_EQ, &0u32.to_ne_bytes());
        expr::verdict(&mut e, NF_DROP);
        rule(&mut batch, FORWARD, &e);
    }
    // ct state established,related accept
    accept_when_any(
        &mut batch,
        |e| expr::ct(e, NFT_CT_STATE),
        CT_ESTABLISHED_RELATED,
    );
    // ct status dnat accept
    accept_when_any(&mut batch, |e| expr::ct(e, NFT_CT_STATUS), IPS_DST_NAT);
    // meta mark & CROSSING_MARK != 0 accept
    accept_when_any(&mut batch, |e| expr::meta(e, NFT_META_MARK), CROSSING_MARK);
    for bridge in bridges {
        // iifname <bridge> oifname "nb*" oifname != <bridge> drop
        let mut e = Attrs::default();
        expr::meta(&mut e, NFT_META_IIFNAME);
        expr::cmp(&mut e, NFT_CMP_EQ, &expr::ifname(bridge));
        expr::meta(&mut e, NFT_META_OIFNAME);
        expr::cmp(&mut e, NFT_CMP_EQ, BRIDGE_PREFIX.as_bytes());
        expr::cmp(&mut e, NFT_CMP_NEQ, &expr::ifname(bridge));
        expr::verdict(&mut e, NF_DROP);
        rule(&mut batch, FORWARD, &e);
        // iifname <bridge> oifname "nv*" drop
        let mut e = Attrs::default();
        expr::meta(&mut e, NFT_META_IIFNAME);
        expr::cmp(&mut e, NFT_CMP_EQ, &expr::ifname(bridge));
        expr::meta(&mut e, NFT_META_OIFNAME);
        expr::cmp(&mut e, NFT_CMP_EQ, VETH_PREFIX.as_bytes());
        expr::verdict(&mut e, NF_DROP);
        rule(&mut batch, FORWARD, &e);
    }
    for subnet in routed {
        // iifname "nv*" ip saddr <subnet> ip daddr <subnet> accept
        let mut e = Attrs::default();
        expr::meta(&mut e, NFT_META_IIFNAME);
        expr::cmp(&mut e, NFT_CMP_EQ, VETH_PREFIX.as_bytes());
        expr::match_prefix(&mut e, IPV4_SADDR_OFFSET, *subnet);
        expr::match_prefix(&mut e, IPV4_DADDR_OFFSET, *subnet);
        expr::verdict(&mut e, NF_ACCEPT);
        rule(&mut batch, FORWARD, &e);
    }
    if !routed.is_empty() {
        for subnet in policy.pod_subnets() {
            // iifname "nv*" ip daddr <pod subnet> drop
            let mut e = Attrs::default();
            expr::meta(&mut e, NFT_META_IIFNAME);
            expr::cmp(&mut e, NFT_CMP_EQ, VETH_PREFIX.as_bytes());
            expr::match_prefix(&mut e, IPV4_DADDR_OFFSET, subnet);
            expr::verdict(&mut e, NF_DROP);
            rule(&mut batch, FORWARD, &e);
        }
    }
    if policy.masquerades() {
        chain(
            &mut batch,
            POSTROUTING,
            "nat",
            NF_INET_POST_ROUTING,
            NF_IP_PRI_NAT_SRC,
        );
        let exclusions = policy.masquerade_exclusions();
        for subnet in policy.pod_subnets() {
            for excluded in &exclusions {
                // ip saddr <subnet> ip daddr <excluded> accept (no NAT)
                let mut e = Attrs::default();
                expr::match_prefix(&mut e, IPV4_SADDR_OFFSET, subnet);
                expr::match_prefix(&mut e, IPV4_DADDR_OFFSET, *excluded);
                expr::verdict(&mut e, NF_ACCEPT);
                rule(&mut batch, POSTROUTING, &e);
            }
            // ip saddr <subnet> masquerade
            let mut e = Attrs::default();
            expr::match_prefix(&mut e, IPV4_SADDR_OFFSET, subnet);
            expr::expr(&mut e, "masq", |_| {});
            rule(&mut batch, POSTROUTING, &e);
        }
    }
    send_batch(batch, "the pods' egress table")
}

/// Differences between what [`render`] makes of `policy` and the kernel's
/// table (its chains dumped over netlink), one line each: a missing table
/// or chain. Rules are not counted: the table is one per network
/// namespace, and agents sharing one (the tests run several in the
/// host's) each replace it whole.
pub fn verify(policy: &EgressPolicy) -> Vec<String> {
    let have = match chain_names(NFPROTO_IPV4, EGRESS_TABLE) {
        Ok(Some(have)) => have,
        Ok(None) => return vec![format!("egress: table ip {EGRESS_TABLE} is missing")],
        Err(e) => {
            return vec![format!(
                "egress: table ip {EGRESS_TABLE} cannot be read: {e}"
            )];
        }
    };
    let mut wanted = vec![FORWARD];
    if policy.masquerades() {
        wanted.push(POSTROUTING);
    }
    wanted
        .into_iter()
        .filter(|chain| !have.contains(*chain))
        .map(|chain| format!("egress: chain {chain} of table ip {EGRESS_TABLE} is missing"))
        .collect()
}
