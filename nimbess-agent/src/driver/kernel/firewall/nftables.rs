//! Every nftables number and name the firewall uses, once: the tables'
//! and chains' names, the packet mark, the hook priorities that order the
//! tables, and the nf_tables netlink protocol's message types, flags and
//! attribute numbers (the kernel's `linux/netfilter/nf_tables.h` and
//! `linux/netfilter/nfnetlink.h`, named as there).
//!
//! The tables, by the hook priority they run at:
//!
//! | table | family | chains (hook, priority) |
//! |---|---|---|
//! | [`SERVICES_TABLE`] | `ip` and `ip6` (twins) | `prerouting`, `output` (nat, [`SERVICES_DNAT_PRIORITY`]); `refuse`, `local` (filter, [`SERVICES_REFUSE_PRIORITY`]) |
//! | [`POLICY_TABLE`] | `ip` | `forward` (filter, [`POLICY_FORWARD_PRIORITY`]) |
//! | [`EGRESS_TABLE`] | `ip` | `forward` (filter, [`EGRESS_FORWARD_PRIORITY`]), `postrouting` (nat, [`NF_IP_PRI_NAT_SRC`]) |
//! | a port's host veth | `netdev` | `acl` (filter, ingress of the veth, 0) |

// ---- the agent's names and numbers ----

/// The Services' table (`ip`; its IPv6 twin of the same name, `ip6`).
pub const SERVICES_TABLE: &str = "nimbess-svc";
/// The NetworkPolicies' table (`ip`).
pub const POLICY_TABLE: &str = "nimbess-policy";
/// The pods' way out: isolation between pod networks and masquerade (`ip`).
pub const EGRESS_TABLE: &str = "nimbess";
/// The chain of a port's ACL in its `netdev` table.
pub const ACL_CHAIN: &str = "acl";

/// The packet mark bit an ingress chain of the policy table sets on what
/// it lets in: the egress table lets such a connection into another pod
/// network.
pub const CROSSING_MARK: u32 = 0x0010_0000;

/// The policy table's forward chain: after the Services' DNAT (a policy
/// sees the backend pod), before the egress table's isolation.
pub const POLICY_FORWARD_PRIORITY: i32 = 5;
/// The egress table's forward chain: after the policy table's, whose
/// [`CROSSING_MARK`] it reads.
pub const EGRESS_FORWARD_PRIORITY: i32 = 10;
/// The Services' DNAT chains (`dstnat`).
pub const SERVICES_DNAT_PRIORITY: i32 = -100;
/// The Services' refusal of ports without a ready backend: before routing,
/// which may have no route for the Service CIDR.
pub const SERVICES_REFUSE_PRIORITY: i32 = -10;
/// The source-NAT priority (`srcnat`) of the egress table's masquerade.
pub const NF_IP_PRI_NAT_SRC: i32 = 100;

/// The seed of a ClientIP-affine Service's `jhash ip saddr`.
pub const JHASH_SEED: u32 = 0x6e69_6d62;

/// What every bridge of a pod network is named after ([`crate::naming::bridge_name`]).
pub const BRIDGE_PREFIX: &str = "nb";
/// What every pod's host veth is named after ([`crate::naming::host_veth_name`]).
pub const VETH_PREFIX: &str = "nv";
/// Interface names as nf_tables compares them: NUL-padded to `IFNAMSIZ`.
pub const IFNAMSIZ: usize = 16;

// ---- netlink and nfnetlink ----

/// `NLM_F_REQUEST`.
pub const NLM_F_REQUEST: u16 = 0x1;
/// `NLM_F_ACK`.
pub const NLM_F_ACK: u16 = 0x4;
/// `NLM_F_DUMP` (`NLM_F_ROOT | NLM_F_MATCH`).
pub const NLM_F_DUMP: u16 = 0x300;
/// `NLM_F_CREATE`.
pub const NLM_F_CREATE: u16 = 0x400;
/// `NLM_F_APPEND`.
pub const NLM_F_APPEND: u16 = 0x800;
/// `NLMSG_ERROR`.
pub const NLMSG_ERROR: u16 = 2;
/// `NLMSG_DONE`.
pub const NLMSG_DONE: u16 = 3;
/// `NLA_F_NESTED`.
pub const NLA_F_NESTED: u16 = 0x8000;
/// `NFNL_SUBSYS_NFTABLES`.
pub const NFNL_SUBSYS_NFTABLES: u16 = 10;
/// `NFNL_MSG_BATCH_BEGIN`.
pub const NFNL_MSG_BATCH_BEGIN: u16 = 16;
/// `NFNL_MSG_BATCH_END`.
pub const NFNL_MSG_BATCH_END: u16 = 17;

/// `NFPROTO_IPV4`: the `ip` family.
pub const NFPROTO_IPV4: u8 = 2;
/// `NFPROTO_NETDEV`: the `netdev` family.
pub const NFPROTO_NETDEV: u8 = 5;
/// `NFPROTO_IPV6`: the `ip6` family.
pub const NFPROTO_IPV6: u8 = 10;

// message types (`enum nf_tables_msg_types`)
/// `NFT_MSG_NEWTABLE`.
pub const NFT_MSG_NEWTABLE: u16 = 0;
/// `NFT_MSG_DELTABLE`.
pub const NFT_MSG_DELTABLE: u16 = 2;
/// `NFT_MSG_GETTABLE`.
pub const NFT_MSG_GETTABLE: u16 = 1;
/// `NFT_MSG_NEWCHAIN`.
pub const NFT_MSG_NEWCHAIN: u16 = 3;
/// `NFT_MSG_GETCHAIN`.
pub const NFT_MSG_GETCHAIN: u16 = 4;
/// `NFT_MSG_DELCHAIN`.
pub const NFT_MSG_DELCHAIN: u16 = 5;
/// `NFT_MSG_NEWRULE`.
pub const NFT_MSG_NEWRULE: u16 = 6;
/// `NFT_MSG_GETRULE`.
pub const NFT_MSG_GETRULE: u16 = 7;
/// `NFT_MSG_DELRULE`.
pub const NFT_MSG_DELRULE: u16 = 8;
/// `NFT_MSG_NEWSET`.
pub const NFT_MSG_NEWSET: u16 = 9;
/// `NFT_MSG_GETSET`.
pub const NFT_MSG_GETSET: u16 = 10;
/// `NFT_MSG_DELSET`.
pub const NFT_MSG_DELSET: u16 = 11;
/// `NFT_MSG_GETSETELEM`.
pub const NFT_MSG_GETSETELEM: u16 = 13;
/// `NFT_MSG_NEWSETELEM`.
pub const NFT_MSG_NEWSETELEM: u16 = 12;
/// `NFT_MSG_DELSETELEM`.
pub const NFT_MSG_DELSETELEM: u16 = 14;

// hooks
/// `NF_NETDEV_INGRESS`.
pub const NF_NETDEV_INGRESS: u32 = 0;
/// `NF_INET_PRE_ROUTING`.
pub const NF_INET_PRE_ROUTING: u32 = 0;
/// `NF_INET_LOCAL_OUT`.
pub const NF_INET_LOCAL_OUT: u32 = 3;
/// `NF_INET_FORWARD`.
pub const NF_INET_FORWARD: u32 = 2;
/// `NF_INET_POST_ROUTING`.
pub const NF_INET_POST_ROUTING: u32 = 4;

// verdicts
/// `NF_DROP`.
pub const NF_DROP: u32 = 0;
/// `NF_ACCEPT`.
pub const NF_ACCEPT: u32 = 1;
/// `NFT_JUMP` (-3): to a chain, coming back after it.
pub const NFT_JUMP: u32 = -3i32 as u32;
/// `NFT_GOTO` (-4): to a chain, not coming back.
pub const NFT_GOTO: u32 = -4i32 as u32;
/// `NFT_RETURN` (-5): back to the chain that jumped.
pub const NFT_RETURN: u32 = -5i32 as u32;

// registers
/// `NFT_REG_VERDICT`.
pub const NFT_REG_VERDICT: u32 = 0;
/// `NFT_REG_1` (128 bits).
pub const NFT_REG_1: u32 = 1;
/// `NFT_REG_2` (128 bits).
pub const NFT_REG_2: u32 = 2;
/// `NFT_REG32_00`: [`NFT_REG_1`]'s first 32-bit word (a concatenation's
/// first field).
pub const NFT_REG32_00: u32 = 8;
/// `NFT_REG32_01`: the 32-bit register after [`NFT_REG_1`]'s first word.
pub const NFT_REG32_01: u32 = 9;
/// `NFT_REG32_02`: the one after it.
pub const NFT_REG32_02: u32 = 10;

/// `NFTA_TABLE_NAME`.
pub const NFTA_TABLE_NAME: u16 = 1;

/// `NFTA_CHAIN_TABLE`.
pub const NFTA_CHAIN_TABLE: u16 = 1;
/// `NFTA_CHAIN_NAME`.
pub const NFTA_CHAIN_NAME: u16 = 3;
/// `NFTA_CHAIN_HOOK`.
pub const NFTA_CHAIN_HOOK: u16 = 4;
/// `NFTA_CHAIN_POLICY`.
pub const NFTA_CHAIN_POLICY: u16 = 5;
/// `NFTA_CHAIN_TYPE`.
pub const NFTA_CHAIN_TYPE: u16 = 7;
/// `NFTA_HOOK_HOOKNUM`.
pub const NFTA_HOOK_HOOKNUM: u16 = 1;
/// `NFTA_HOOK_PRIORITY`.
pub const NFTA_HOOK_PRIORITY: u16 = 2;
/// `NFTA_HOOK_DEV`.
pub const NFTA_HOOK_DEV: u16 = 3;

/// `NFTA_RULE_TABLE`.
pub const NFTA_RULE_TABLE: u16 = 1;
/// `NFTA_RULE_CHAIN`.
pub const NFTA_RULE_CHAIN: u16 = 2;
/// `NFTA_RULE_EXPRESSIONS`.
pub const NFTA_RULE_EXPRESSIONS: u16 = 4;

/// `NFTA_SET_TABLE`.
pub const NFTA_SET_TABLE: u16 = 1;
/// `NFTA_SET_NAME`.
pub const NFTA_SET_NAME: u16 = 2;
/// `NFTA_SET_FLAGS`.
pub const NFTA_SET_FLAGS: u16 = 3;
/// `NFTA_SET_KEY_TYPE`.
pub const NFTA_SET_KEY_TYPE: u16 = 4;
/// `NFTA_SET_KEY_LEN`.
pub const NFTA_SET_KEY_LEN: u16 = 5;
/// `NFTA_SET_DATA_TYPE`.
pub const NFTA_SET_DATA_TYPE: u16 = 6;
/// `NFTA_SET_DATA_LEN`.
pub const NFTA_SET_DATA_LEN: u16 = 7;
/// `NFTA_SET_ID`.
pub const NFTA_SET_ID: u16 = 10;
/// `NFTA_SET_USERDATA`.
pub const NFTA_SET_USERDATA: u16 = 13;
/// `NFT_SET_MAP`: the set maps its keys to data.
pub const NFT_SET_MAP: u32 = 0x8;
/// `NFT_DATA_VERDICT`: a map's data are verdicts.
pub const NFT_DATA_VERDICT: u32 = 0xffff_ff00;
/// `NFTNL_UDATA_SET_KEYBYTEORDER` (libnftnl's user data, which only `nft`
/// reads, to print a set's keys).
pub const NFTNL_UDATA_SET_KEYBYTEORDER: u8 = 0;
/// `BYTEORDER_HOST_ENDIAN` (`nft`'s byte order of an integer key).
pub const BYTEORDER_HOST_ENDIAN: u32 = 1;

// `nft`'s data types, which it reads back from a set's key and data type
// to print the set (`concat` types: each field's type shifted left by 6
// bits, first field highest)
/// `TYPE_INTEGER`.
pub const TYPE_INTEGER: u32 = 4;
/// `TYPE_IPADDR`.
pub const TYPE_IPADDR: u32 = 7;
/// `TYPE_IP6ADDR`.
pub const TYPE_IP6ADDR: u32 = 8;
/// `TYPE_INET_PROTOCOL`.
pub const TYPE_INET_PROTOCOL: u32 = 12;
/// `TYPE_INET_SERVICE`.
pub const TYPE_INET_SERVICE: u32 = 13;
/// How far each field of a concatenated type is shifted (`TYPE_BITS`).
pub const TYPE_BITS: u32 = 6;

/// `NFTA_SET_ELEM_LIST_TABLE`.
pub const NFTA_SET_ELEM_LIST_TABLE: u16 = 1;
/// `NFTA_SET_ELEM_LIST_SET`.
pub const NFTA_SET_ELEM_LIST_SET: u16 = 2;
/// `NFTA_SET_ELEM_LIST_ELEMENTS`.
pub const NFTA_SET_ELEM_LIST_ELEMENTS: u16 = 3;
/// `NFTA_SET_ELEM_KEY`.
pub const NFTA_SET_ELEM_KEY: u16 = 1;
/// `NFTA_SET_ELEM_DATA`.
pub const NFTA_SET_ELEM_DATA: u16 = 2;

/// `NFTA_LIST_ELEM`: one item of a nested list (expressions, elements).
pub const NFTA_LIST_ELEM: u16 = 1;
/// `NFTA_EXPR_NAME`.
pub const NFTA_EXPR_NAME: u16 = 1;
/// `NFTA_EXPR_DATA`.
pub const NFTA_EXPR_DATA: u16 = 2;
/// `NFTA_DATA_VALUE`.
pub const NFTA_DATA_VALUE: u16 = 1;
/// `NFTA_DATA_VERDICT`.
pub const NFTA_DATA_VERDICT: u16 = 2;
/// `NFTA_VERDICT_CODE`.
pub const NFTA_VERDICT_CODE: u16 = 1;
/// `NFTA_VERDICT_CHAIN`.
pub const NFTA_VERDICT_CHAIN: u16 = 2;

// expression attributes
/// `NFTA_PAYLOAD_DREG`.
pub const NFTA_PAYLOAD_DREG: u16 = 1;
/// `NFTA_PAYLOAD_BASE`.
pub const NFTA_PAYLOAD_BASE: u16 = 2;
/// `NFTA_PAYLOAD_OFFSET`.
pub const NFTA_PAYLOAD_OFFSET: u16 = 3;
/// `NFTA_PAYLOAD_LEN`.
pub const NFTA_PAYLOAD_LEN: u16 = 4;
/// `NFT_PAYLOAD_NETWORK_HEADER`.
pub const NFT_PAYLOAD_NETWORK_HEADER: u32 = 1;
/// `NFT_PAYLOAD_TRANSPORT_HEADER`.
pub const NFT_PAYLOAD_TRANSPORT_HEADER: u32 = 2;
/// The offset of the source address in the IPv4 header.
pub const IPV4_SADDR_OFFSET: u32 = 12;
/// The offset of the destination address in the IPv4 header.
pub const IPV4_DADDR_OFFSET: u32 = 16;
/// The offset of the protocol in the IPv4 header.
pub const IPV4_PROTOCOL_OFFSET: u32 = 9;
/// The offset of the source address in the IPv6 header.
pub const IPV6_SADDR_OFFSET: u32 = 8;
/// The offset of the destination address in the IPv6 header.
pub const IPV6_DADDR_OFFSET: u32 = 24;
/// The offset of the destination port in a TCP or UDP header.
pub const TRANSPORT_DPORT_OFFSET: u32 = 2;

/// `NFTA_CMP_SREG`.
pub const NFTA_CMP_SREG: u16 = 1;
/// `NFTA_CMP_OP`.
pub const NFTA_CMP_OP: u16 = 2;
/// `NFTA_CMP_DATA`.
pub const NFTA_CMP_DATA: u16 = 3;
/// `NFT_CMP_EQ`.
pub const NFT_CMP_EQ: u32 = 0;
/// `NFT_CMP_NEQ`.
pub const NFT_CMP_NEQ: u32 = 1;

/// `NFTA_BITWISE_SREG`.
pub const NFTA_BITWISE_SREG: u16 = 1;
/// `NFTA_BITWISE_DREG`.
pub const NFTA_BITWISE_DREG: u16 = 2;
/// `NFTA_BITWISE_LEN`.
pub const NFTA_BITWISE_LEN: u16 = 3;
/// `NFTA_BITWISE_MASK`.
pub const NFTA_BITWISE_MASK: u16 = 4;
/// `NFTA_BITWISE_XOR`.
pub const NFTA_BITWISE_XOR: u16 = 5;

/// `NFTA_META_DREG`.
pub const NFTA_META_DREG: u16 = 1;
/// `NFTA_META_KEY`.
pub const NFTA_META_KEY: u16 = 2;
/// `NFTA_META_SREG`.
pub const NFTA_META_SREG: u16 = 3;
/// `NFT_META_PROTOCOL`: the link layer's protocol (ethertype).
pub const NFT_META_PROTOCOL: u32 = 1;
/// `NFT_META_MARK`.
pub const NFT_META_MARK: u32 = 3;
/// `NFT_META_IIFNAME`.
pub const NFT_META_IIFNAME: u32 = 6;
/// `NFT_META_OIFNAME`.
pub const NFT_META_OIFNAME: u32 = 7;
/// `NFT_META_L4PROTO`.
pub const NFT_META_L4PROTO: u32 = 16;
/// The IPv4 ethertype, as [`NFT_META_PROTOCOL`] holds it.
pub const ETH_P_IP: u16 = 0x0800;

/// `NFTA_CT_DREG`.
pub const NFTA_CT_DREG: u16 = 1;
/// `NFTA_CT_KEY`.
pub const NFTA_CT_KEY: u16 = 2;
/// `NFT_CT_STATE`.
pub const NFT_CT_STATE: u32 = 0;
/// `NFT_CT_STATUS`.
pub const NFT_CT_STATUS: u32 = 2;
/// `ct state established,related` (the kernel's state bits).
pub const CT_ESTABLISHED_RELATED: u32 = (1 << 1) | (1 << 2);
/// `ct status dnat` (`IPS_DST_NAT`).
pub const IPS_DST_NAT: u32 = 1 << 5;

/// `NFTA_FIB_DREG`.
pub const NFTA_FIB_DREG: u16 = 1;
/// `NFTA_FIB_RESULT`.
pub const NFTA_FIB_RESULT: u16 = 2;
/// `NFTA_FIB_FLAGS`.
pub const NFTA_FIB_FLAGS: u16 = 3;
/// `NFT_FIB_RESULT_OIF`.
pub const NFT_FIB_RESULT_OIF: u32 = 1;
/// `NFT_FIB_RESULT_ADDRTYPE`.
pub const NFT_FIB_RESULT_ADDRTYPE: u32 = 3;
/// `RTN_LOCAL`: an address of the host (`fib … type local`).
pub const RTN_LOCAL: u32 = 2;
/// `NFTA_FIB_F_SADDR`.
pub const NFTA_FIB_F_SADDR: u32 = 1;
/// `NFTA_FIB_F_DADDR`.
pub const NFTA_FIB_F_DADDR: u32 = 2;
/// `NFTA_FIB_F_IIF`.
pub const NFTA_FIB_F_IIF: u32 = 8;

/// `NFTA_REJECT_TYPE`.
pub const NFTA_REJECT_TYPE: u16 = 1;
/// `NFTA_REJECT_ICMP_CODE`.
pub const NFTA_REJECT_ICMP_CODE: u16 = 2;
/// `NFT_REJECT_ICMP_UNREACH`.
pub const NFT_REJECT_ICMP_UNREACH: u32 = 0;
/// `NFT_REJECT_TCP_RST`.
pub const NFT_REJECT_TCP_RST: u32 = 1;
/// `ICMP_PORT_UNREACH`: what `nft`'s plain `reject` answers in the `ip` family.
pub const ICMP_PORT_UNREACH: u8 = 3;
/// `ICMPV6_PORT_UNREACH`: what `nft`'s plain `reject` answers in the `ip6` family.
pub const ICMPV6_PORT_UNREACH: u8 = 4;

/// `NFTA_RANGE_SREG`.
pub const NFTA_RANGE_SREG: u16 = 1;
/// `NFTA_RANGE_OP`.
pub const NFTA_RANGE_OP: u16 = 2;
/// `NFTA_RANGE_FROM_DATA`.
pub const NFTA_RANGE_FROM_DATA: u16 = 3;
/// `NFTA_RANGE_TO_DATA`.
pub const NFTA_RANGE_TO_DATA: u16 = 4;
/// `NFT_RANGE_EQ`.
pub const NFT_RANGE_EQ: u32 = 0;

/// `NFTA_IMMEDIATE_DREG`.
pub const NFTA_IMMEDIATE_DREG: u16 = 1;
/// `NFTA_IMMEDIATE_DATA`.
pub const NFTA_IMMEDIATE_DATA: u16 = 2;

/// `NFTA_NG_DREG`.
pub const NFTA_NG_DREG: u16 = 1;
/// `NFTA_NG_MODULUS`.
pub const NFTA_NG_MODULUS: u16 = 2;
/// `NFTA_NG_TYPE`.
pub const NFTA_NG_TYPE: u16 = 3;
/// `NFTA_NG_OFFSET`.
pub const NFTA_NG_OFFSET: u16 = 4;
/// `NFT_NG_RANDOM`.
pub const NFT_NG_RANDOM: u32 = 1;

/// `NFTA_HASH_SREG`.
pub const NFTA_HASH_SREG: u16 = 1;
/// `NFTA_HASH_DREG`.
pub const NFTA_HASH_DREG: u16 = 2;
/// `NFTA_HASH_LEN`.
pub const NFTA_HASH_LEN: u16 = 3;
/// `NFTA_HASH_MODULUS`.
pub const NFTA_HASH_MODULUS: u16 = 4;
/// `NFTA_HASH_SEED`.
pub const NFTA_HASH_SEED: u16 = 5;
/// `NFTA_HASH_OFFSET`.
pub const NFTA_HASH_OFFSET: u16 = 6;
/// `NFTA_HASH_TYPE`.
pub const NFTA_HASH_TYPE: u16 = 7;
/// `NFT_HASH_JENKINS`.
pub const NFT_HASH_JENKINS: u32 = 0;

/// `NFTA_LOOKUP_SET`.
pub const NFTA_LOOKUP_SET: u16 = 1;
/// `NFTA_LOOKUP_SREG`.
pub const NFTA_LOOKUP_SREG: u16 = 2;
/// `NFTA_LOOKUP_DREG`.
pub const NFTA_LOOKUP_DREG: u16 = 3;

/// `NFTA_NAT_TYPE`.
pub const NFTA_NAT_TYPE: u16 = 1;
/// `NFTA_NAT_FAMILY`.
pub const NFTA_NAT_FAMILY: u16 = 2;
/// `NFTA_NAT_REG_ADDR_MIN`.
pub const NFTA_NAT_REG_ADDR_MIN: u16 = 3;
/// `NFTA_NAT_REG_PROTO_MIN`.
pub const NFTA_NAT_REG_PROTO_MIN: u16 = 5;
/// `NFT_NAT_DNAT`.
pub const NFT_NAT_DNAT: u32 = 1;

/// IP protocol numbers.
pub const IPPROTO_ICMP: u8 = 1;
/// `IPPROTO_TCP`.
pub const IPPROTO_TCP: u8 = 6;
/// `IPPROTO_UDP`.
pub const IPPROTO_UDP: u8 = 17;
/// `IPPROTO_SCTP`.
pub const IPPROTO_SCTP: u8 = 132;

/// A transport protocol's `nft` keyword (`tcp`, `udp`, `sctp`).
pub fn protocol_keyword(p: nephrite_pipeline::Protocol) -> &'static str {
    match p {
        nephrite_pipeline::Protocol::Tcp => "tcp",
        nephrite_pipeline::Protocol::Udp => "udp",
        nephrite_pipeline::Protocol::Sctp => "sctp",
    }
}

/// A transport protocol's IP protocol number.
pub fn protocol_number(p: nephrite_pipeline::Protocol) -> u8 {
    match p {
        nephrite_pipeline::Protocol::Tcp => IPPROTO_TCP,
        nephrite_pipeline::Protocol::Udp => IPPROTO_UDP,
        nephrite_pipeline::Protocol::Sctp => IPPROTO_SCTP,
    }
}
