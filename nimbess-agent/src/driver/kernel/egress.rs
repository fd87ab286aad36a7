//! The pods' way out, rendered from [`EgressPolicy`] as one nftables table
//! (`ip nimbess`, replaced atomically like the ACL tables): a `forward`
//! chain that drops what one network's bridge would route into another's
//! or into a routed network's pod veth (pod networks stay isolated through
//! the host's gateways), and what a routed network's pod sends (through
//! its host veth, `nv…`) into another pod network's subnet (its
//! network's table lets that fall through to the other network's route,
//! see [`super::routed`]; the pod's own subnet stays accepted), unless the
//! model opens the path (a pod's packet whose source address the host
//! would not route back through the bridge or veth it came in on is
//! dropped first, so no pod borrows another network's addresses to get in)
//! ([`nephrite_pipeline::connection_allowed`]): it first accepts what
//! conntrack knows (`ct state established,related`: replies and the rest
//! of an allowed connection), what a Service translated (`ct status dnat`:
//! the path from every network to a Service's endpoints, for the
//! Service's connections only), and what a NetworkPolicy's ingress rule
//! let into the destination pod (the mark [`super::policy::CROSSING_MARK`]
//! the policy table, hooked before this chain, sets). And a
//! `postrouting` NAT chain that masquerades the pod subnets towards every
//! destination but the policy's exclusions.

use nephrite_pipeline::{EgressPolicy, Ipv4Cidr};

use super::acl::{
    Attrs, Batch, NF_ACCEPT, NF_DROP, NFT_MSG_DELTABLE, NFT_MSG_NEWCHAIN, NFT_MSG_NEWRULE,
    NFT_MSG_NEWTABLE, NFT_REG_1, NFT_REG_VERDICT, NLA_F_NESTED, NLM_F_APPEND, NLM_F_CREATE, expr,
    match_prefix, send_batch,
};
use crate::driver::DriverError;

/// The table's name.
pub const TABLE: &str = "nimbess";
const NFPROTO_IPV4: u8 = 2;
const NF_INET_FORWARD: u32 = 2;
const NF_INET_POST_ROUTING: u32 = 4;
/// The source-NAT priority (`srcnat`).
const NF_IP_PRI_NAT_SRC: u32 = 100;
const NFT_META_IIFNAME: u32 = 6;
const NFT_META_OIFNAME: u32 = 7;
const NFT_META_MARK: u32 = 3;
const NFT_FIB_RESULT_OIF: u32 = 1;
const NFTA_FIB_F_SADDR: u32 = 1;
const NFTA_FIB_F_IIF: u32 = 8;
const NFT_CT_STATE: u32 = 0;
const NFT_CT_STATUS: u32 = 2;
/// `ct state established,related` (the kernel's state bits).
const CT_ESTABLISHED_RELATED: u32 = (1 << 1) | (1 << 2);
/// `ct status dnat` (`IPS_DST_NAT`).
const IPS_DST_NAT: u32 = 1 << 5;
/// The forward chain's priority: after the policy table's
/// ([`super::policy::FORWARD_PRIORITY`]), whose mark it reads.
const FORWARD_PRIORITY: u32 = 10;
const NFT_CMP_EQ: u32 = 0;
const NFT_CMP_NEQ: u32 = 1;
/// Interface names as nf_tables compares them: NUL-padded to IFNAMSIZ.
const IFNAMSIZ: usize = 16;
/// What every bridge of a pod network is named after ([`crate::naming::bridge_name`]).
const BRIDGE_PREFIX: &str = "nb";
/// What every pod's host veth is named after ([`crate::naming::host_veth_name`]):
/// routed out of a bridge, only a routed network's pod is behind one.
const VETH_PREFIX: &str = "nv";

fn load_meta(list: &mut Attrs, key: u32) {
    expr(list, "meta", |d| {
        d.be32(2, key).be32(1, NFT_REG_1);
    });
}

/// Accept when the 32-bit host-order value `load` puts in register 1 has
/// any bit of `mask` set.
fn accept_when_any(batch: &mut Batch, load: impl FnOnce(&mut Attrs), mask: u32) {
    let mut e = Attrs::default();
    load(&mut e);
    expr(&mut e, "bitwise", |d| {
        d.be32(1, NFT_REG_1).be32(2, NFT_REG_1).be32(3, 4);
        d.nest(4, |v| {
            v.put(1, &mask.to_ne_bytes());
        });
        d.nest(5, |v| {
            v.put(1, &0u32.to_ne_bytes());
        });
    });
    cmp(&mut e, NFT_CMP_NEQ, &0u32.to_ne_bytes());
    verdict(&mut e, NF_ACCEPT);
    rule(batch, "forward", &e);
}

fn load_ct(list: &mut Attrs, key: u32) {
    expr(list, "ct", |d| {
        d.be32(2, key).be32(1, NFT_REG_1);
    });
}

fn cmp(list: &mut Attrs, op: u32, value: &[u8]) {
    expr(list, "cmp", |d| {
        d.be32(1, NFT_REG_1).be32(2, op).nest(3, |v| {
            v.put(1, value);
        });
    });
}

fn ifname(name: &str) -> Vec<u8> {
    let mut bytes = name.as_bytes().to_vec();
    bytes.resize(IFNAMSIZ, 0);
    bytes
}

fn verdict(list: &mut Attrs, code: u32) {
    expr(list, "immediate", |d| {
        d.be32(1, NFT_REG_VERDICT).nest(2, |data| {
            data.nest(2, |v| {
                v.be32(1, code);
            });
        });
    });
}

fn chain(batch: &mut Batch, name: &str, kind: &str, hook: u32, priority: u32) {
    let mut c = Attrs::default();
    c.str(1, TABLE).str(3, name).str(7, kind);
    c.nest(4, |h| {
        h.be32(1, hook).be32(2, priority);
    });
    c.be32(5, NF_ACCEPT);
    batch.nft_in(NFPROTO_IPV4, NFT_MSG_NEWCHAIN, NLM_F_CREATE, &c);
}

fn rule(batch: &mut Batch, chain: &str, exprs: &Attrs) {
    let mut r = Attrs::default();
    r.str(1, TABLE).str(2, chain);
    r.put(4 | NLA_F_NESTED, &exprs.0);
    batch.nft_in(
        NFPROTO_IPV4,
        NFT_MSG_NEWRULE,
        NLM_F_CREATE | NLM_F_APPEND,
        &r,
    );
}

/// Replace the table with what `policy` says for the pod networks whose
/// bridges are `bridges` and the routed networks whose subnets are
/// `routed` (`None`: remove the table).
///
/// # Errors
/// The kernel refused the batch.
pub fn render(
    policy: Option<&EgressPolicy>,
    bridges: &[String],
    routed: &[Ipv4Cidr],
) -> Result<(), DriverError> {
    let mut batch = Batch::new();
    let mut table = Attrs::default();
    table.str(1, TABLE);
    batch.nft_in(NFPROTO_IPV4, NFT_MSG_NEWTABLE, NLM_F_CREATE, &table);
    batch.nft_in(NFPROTO_IPV4, NFT_MSG_DELTABLE, 0, &table);
    if let Some(policy) = policy {
        batch.nft_in(NFPROTO_IPV4, NFT_MSG_NEWTABLE, NLM_F_CREATE, &table);
        chain(
            &mut batch,
            "forward",
            "filter",
            NF_INET_FORWARD,
            FORWARD_PRIORITY,
        );
        // A bridge by its own name (a table left behind by another agent on
        // the host must not judge this agent's bridges), routed veths by
        // their prefix (one rule for all of them).
        let sources = bridges
            .iter()
            .map(|bridge| ifname(bridge))
            .chain((!routed.is_empty()).then(|| VETH_PREFIX.as_bytes().to_vec()));
        for source in sources {
            // iifname <bridge> | "nv*" fib saddr . iif oif 0 drop: a pod's
            // packet whose source the host would not route back through the
            // bridge or veth it came in on (a pod claiming another
            // network's address) is dropped before anything accepts it
            let mut e = Attrs::default();
            load_meta(&mut e, NFT_META_IIFNAME);
            cmp(&mut e, NFT_CMP_EQ, &source);
            expr(&mut e, "fib", |d| {
                d.be32(1, NFT_REG_1)
                    .be32(2, NFT_FIB_RESULT_OIF)
                    .be32(3, NFTA_FIB_F_SADDR | NFTA_FIB_F_IIF);
            });
            cmp(&mut e, NFT_CMP_EQ, &0u32.to_ne_bytes());
            verdict(&mut e, NF_DROP);
            rule(&mut batch, "forward", &e);
        }
        // ct state established,related accept
        accept_when_any(
            &mut batch,
            |e| load_ct(e, NFT_CT_STATE),
            CT_ESTABLISHED_RELATED,
        );
        // ct status dnat accept
        accept_when_any(&mut batch, |e| load_ct(e, NFT_CT_STATUS), IPS_DST_NAT);
        // meta mark & CROSSING_MARK != 0 accept
        accept_when_any(
            &mut batch,
            |e| load_meta(e, NFT_META_MARK),
            super::policy::CROSSING_MARK,
        );
        for bridge in bridges {
            // iifname <bridge> oifname "nb*" oifname != <bridge> drop
            let mut e = Attrs::default();
            load_meta(&mut e, NFT_META_IIFNAME);
            cmp(&mut e, NFT_CMP_EQ, &ifname(bridge));
            load_meta(&mut e, NFT_META_OIFNAME);
            cmp(&mut e, NFT_CMP_EQ, BRIDGE_PREFIX.as_bytes());
            cmp(&mut e, NFT_CMP_NEQ, &ifname(bridge));
            verdict(&mut e, NF_DROP);
            rule(&mut batch, "forward", &e);
            // iifname <bridge> oifname "nv*" drop
            let mut e = Attrs::default();
            load_meta(&mut e, NFT_META_IIFNAME);
            cmp(&mut e, NFT_CMP_EQ, &ifname(bridge));
            load_meta(&mut e, NFT_META_OIFNAME);
            cmp(&mut e, NFT_CMP_EQ, VETH_PREFIX.as_bytes());
            verdict(&mut e, NF_DROP);
            rule(&mut batch, "forward", &e);
        }
        for subnet in routed {
            // iifname "nv*" ip saddr <subnet> ip daddr <subnet> accept
            let mut e = Attrs::default();
            load_meta(&mut e, NFT_META_IIFNAME);
            cmp(&mut e, NFT_CMP_EQ, VETH_PREFIX.as_bytes());
            match_prefix(&mut e, 12, *subnet);
            match_prefix(&mut e, 16, *subnet);
            verdict(&mut e, NF_ACCEPT);
            rule(&mut batch, "forward", &e);
        }
        if !routed.is_empty() {
            for subnet in policy.pod_subnets() {
                // iifname "nv*" ip daddr <pod subnet> drop
                let mut e = Attrs::default();
                load_meta(&mut e, NFT_META_IIFNAME);
                cmp(&mut e, NFT_CMP_EQ, VETH_PREFIX.as_bytes());
                match_prefix(&mut e, 16, subnet);
                verdict(&mut e, NF_DROP);
                rule(&mut batch, "forward", &e);
            }
        }
        if policy.masquerades() {
            chain(
                &mut batch,
                "postrouting",
                "nat",
                NF_INET_POST_ROUTING,
                NF_IP_PRI_NAT_SRC,
            );
            let exclusions = policy.masquerade_exclusions();
            for subnet in policy.pod_subnets() {
                for excluded in &exclusions {
                    // ip saddr <subnet> ip daddr <excluded> accept (no NAT)
                    let mut e = Attrs::default();
                    match_prefix(&mut e, 12, subnet);
                    match_prefix(&mut e, 16, *excluded);
                    verdict(&mut e, NF_ACCEPT);
                    rule(&mut batch, "postrouting", &e);
                }
                // ip saddr <subnet> masquerade
                let mut e = Attrs::default();
                match_prefix(&mut e, 12, subnet);
                expr(&mut e, "masq", |_| {});
                rule(&mut batch, "postrouting", &e);
            }
        }
    }
    send_batch(batch, "the pods' egress table")
}

/// Turn IPv4 forwarding on: pods reach beyond their networks through the host.
///
/// # Errors
/// The sysctl cannot be written.
pub fn enable_forwarding() -> Result<(), DriverError> {
    const PATH: &str = "/proc/sys/net/ipv4/ip_forward";
    std::fs::write(PATH, b"1").map_err(|source| DriverError::Os {
        what: format!("write 1 to {PATH}"),
        source,
    })
}

/// The rules each chain of `table` (family `ip`) holds, by chain, as `nft`
/// lists them (`None`: no such table).
pub fn listed_rules(table: &str) -> Option<std::collections::BTreeMap<String, usize>> {
    let out = std::process::Command::new("nft")
        .args(["-j", "list", "table", "ip", table])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    let mut chains = std::collections::BTreeMap::new();
    for item in json["nftables"].as_array().into_iter().flatten() {
        if let Some(name) = item["chain"]["name"].as_str() {
            chains.entry(name.to_string()).or_insert(0);
        }
        if let Some(name) = item["rule"]["chain"].as_str() {
            *chains.entry(name.to_string()).or_insert(0) += 1;
        }
    }
    Some(chains)
}

/// Differences between what [`render`] makes of `policy` and the kernel's
/// table, one line each: a missing table or chain. Rules are not counted:
/// the table is one per network namespace, and agents sharing one (the
/// tests run several in the host's) each replace it whole.
pub fn verify(policy: &EgressPolicy) -> Vec<String> {
    let Some(have) = listed_rules(TABLE) else {
        return vec![format!("egress: table ip {TABLE} is missing")];
    };
    let mut wanted = vec!["forward"];
    if policy.masquerades() {
        wanted.push("postrouting");
    }
    wanted
        .into_iter()
        .filter(|chain| !have.contains_key(*chain))
        .map(|chain| format!("egress: chain {chain} of table ip {TABLE} is missing"))
        .collect()
}
