//! ACL modules rendered as nftables: per port, a `netdev` table named
//! after the host veth with one base chain on the veth's ingress hook (what
//! the pod sends enters the data plane there) and one rule per ACL rule, in
//! order (first match wins), each with a counter; no rule matched → accept.
//!
//! nf_tables is spoken over netlink directly (`NETLINK_NETFILTER`, one
//! batch per change, "add table; delete table; add table …" so a change
//! replaces the old rules atomically); no `nft` process.

use std::os::fd::AsFd as _;

use nephrite_pipeline::{AclAction, AclProtocol, AclRule};
use netlink_sys::{Socket, protocols::NETLINK_NETFILTER};
use nix::sys::socket::{setsockopt, sockopt::ReceiveTimeout};
use nix::sys::time::TimeVal;

use crate::driver::DriverError;

const NFNL_SUBSYS_NFTABLES: u16 = 10;
const NFNL_MSG_BATCH_BEGIN: u16 = 16;
const NFNL_MSG_BATCH_END: u16 = 17;
pub(super) const NFT_MSG_NEWTABLE: u16 = 0;
pub(super) const NFT_MSG_DELTABLE: u16 = 2;
pub(super) const NFT_MSG_NEWCHAIN: u16 = 3;
pub(super) const NFT_MSG_NEWRULE: u16 = 6;
const NFT_MSG_GETRULE: u16 = 7;
const NFPROTO_NETDEV: u8 = 5;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
pub(super) const NLM_F_CREATE: u16 = 0x400;
pub(super) const NLM_F_APPEND: u16 = 0x800;
const NLM_F_DUMP: u16 = 0x300;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
pub(super) const NLA_F_NESTED: u16 = 0x8000;
pub(super) const NF_DROP: u32 = 0;
pub(super) const NF_ACCEPT: u32 = 1;
pub(super) const NFT_REG_VERDICT: u32 = 0;
pub(super) const NFT_REG_1: u32 = 1;

/// Netlink attributes being written.
#[derive(Default)]
pub(super) struct Attrs(pub(super) Vec<u8>);

impl Attrs {
    pub(super) fn put(&mut self, kind: u16, value: &[u8]) -> &mut Self {
        let len = 4 + value.len();
        self.0.extend_from_slice(&(len as u16).to_ne_bytes());
        self.0.extend_from_slice(&kind.to_ne_bytes());
        self.0.extend_from_slice(value);
        while !self.0.len().is_multiple_of(4) {
            self.0.push(0);
        }
        self
    }
    pub(super) fn str(&mut self, kind: u16, value: &str) -> &mut Self {
        let mut bytes = value.as_bytes().to_vec();
        bytes.push(0);
        self.put(kind, &bytes)
    }
    pub(super) fn be32(&mut self, kind: u16, value: u32) -> &mut Self {
        self.put(kind, &value.to_be_bytes())
    }
    pub(super) fn nest(&mut self, kind: u16, build: impl FnOnce(&mut Attrs)) -> &mut Self {
        let mut inner = Attrs::default();
        build(&mut inner);
        self.put(kind | NLA_F_NESTED, &inner.0)
    }
}

/// One expression of a rule.
pub(super) fn expr(list: &mut Attrs, name: &str, data: impl FnOnce(&mut Attrs)) {
    list.nest(1, |e| {
        e.str(1, name);
        e.nest(2, data);
    });
}

fn load_payload(list: &mut Attrs, base: u32, offset: u32, len: u32) {
    expr(list, "payload", |d| {
        d.be32(1, NFT_REG_1)
            .be32(2, base)
            .be32(3, offset)
            .be32(4, len);
    });
}

pub(super) fn compare(list: &mut Attrs, value: &[u8]) {
    expr(list, "cmp", |d| {
        d.be32(1, NFT_REG_1).be32(2, 0).nest(3, |v| {
            v.put(1, value);
        });
    });
}

pub(super) fn match_prefix(list: &mut Attrs, offset: u32, prefix: nephrite_pipeline::Ipv4Cidr) {
    load_payload(list, 1, offset, 4);
    expr(list, "bitwise", |d| {
        d.be32(1, NFT_REG_1).be32(2, NFT_REG_1).be32(3, 4);
        d.nest(4, |m| {
            m.put(1, &prefix.mask().to_be_bytes());
        });
        d.nest(5, |x| {
            x.put(1, &[0, 0, 0, 0]);
        });
    });
    compare(
        list,
        &(u32::from(prefix.addr) & prefix.mask()).to_be_bytes(),
    );
}

/// The expressions of one ACL rule.
fn rule_expressions(rule: &AclRule) -> Attrs {
    let mut list = Attrs::default();
    // meta protocol == ip
    expr(&mut list, "meta", |d| {
        d.be32(2, 1).be32(1, NFT_REG_1);
    });
    compare(&mut list, &0x0800u16.to_be_bytes());
    if let Some(src) = rule.src {
        match_prefix(&mut list, 12, src);
    }
    if let Some(dst) = rule.dst {
        match_prefix(&mut list, 16, dst);
    }
    if let Some(p) = rule.protocol {
        let number = match p {
            AclProtocol::Icmp => 1u8,
            AclProtocol::Tcp => 6,
            AclProtocol::Udp => 17,
        };
        load_payload(&mut list, 1, 9, 1);
        compare(&mut list, &[number]);
    }
    if let Some(port) = rule.port {
        load_payload(&mut list, 2, 2, 2);
        compare(&mut list, &port.to_be_bytes());
    }
    expr(&mut list, "counter", |_| {});
    let verdict = match rule.action {
        AclAction::Allow => NF_ACCEPT,
        AclAction::Deny => NF_DROP,
    };
    expr(&mut list, "immediate", |d| {
        d.be32(1, NFT_REG_VERDICT).nest(2, |data| {
            data.nest(2, |v| {
                v.be32(1, verdict);
            });
        });
    });
    list
}

pub(super) struct Batch {
    buf: Vec<u8>,
    seq: u32,
    acked: Vec<u32>,
}

impl Batch {
    pub(super) fn new() -> Self {
        let mut b = Batch {
            buf: Vec::new(),
            seq: 1,
            acked: Vec::new(),
        };
        b.message(
            NFNL_MSG_BATCH_BEGIN,
            NLM_F_REQUEST,
            0,
            NFNL_SUBSYS_NFTABLES,
            &Attrs::default(),
        );
        b
    }

    fn message(&mut self, kind: u16, flags: u16, family: u8, res_id: u16, attrs: &Attrs) {
        let len = 16 + 4 + attrs.0.len();
        self.buf.extend_from_slice(&(len as u32).to_ne_bytes());
        self.buf.extend_from_slice(&kind.to_ne_bytes());
        self.buf.extend_from_slice(&flags.to_ne_bytes());
        self.buf.extend_from_slice(&self.seq.to_ne_bytes());
        self.buf.extend_from_slice(&0u32.to_ne_bytes());
        self.buf.push(family);
        self.buf.push(0);
        self.buf.extend_from_slice(&res_id.to_be_bytes());
        self.buf.extend_from_slice(&attrs.0);
        if flags & NLM_F_ACK != 0 {
            self.acked.push(self.seq);
        }
        self.seq += 1;
    }

    fn nft(&mut self, msg: u16, flags: u16, attrs: &Attrs) {
        self.nft_in(NFPROTO_NETDEV, msg, flags, attrs);
    }

    /// A nf_tables message for a table of `family`.
    pub(super) fn nft_in(&mut self, family: u8, msg: u16, flags: u16, attrs: &Attrs) {
        self.message(
            (NFNL_SUBSYS_NFTABLES << 8) | msg,
            NLM_F_REQUEST | NLM_F_ACK | flags,
            family,
            0,
            attrs,
        );
    }

    fn finish(mut self) -> (Vec<u8>, Vec<u32>) {
        self.message(
            NFNL_MSG_BATCH_END,
            NLM_F_REQUEST,
            0,
            NFNL_SUBSYS_NFTABLES,
            &Attrs::default(),
        );
        (self.buf, self.acked)
    }
}

fn os(what: String) -> impl FnOnce(std::io::Error) -> DriverError {
    move |source| DriverError::Os { what, source }
}

fn open() -> Result<Socket, DriverError> {
    let mut socket =
        Socket::new(NETLINK_NETFILTER).map_err(os("open a nf_tables socket".into()))?;
    socket
        .bind_auto()
        .map_err(os("bind a nf_tables socket".into()))?;
    setsockopt(&socket.as_fd(), ReceiveTimeout, &TimeVal::new(2, 0)).map_err(|e| {
        DriverError::Os {
            what: "set the nf_tables socket timeout".into(),
            source: std::io::Error::from(e),
        }
    })?;
    Ok(socket)
}

/// Walk the netlink messages of one datagram: (type, seq, payload).
fn messages(data: &[u8]) -> Vec<(u16, u32, &[u8])> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 16 <= data.len() {
        let len = u32::from_ne_bytes([data[at], data[at + 1], data[at + 2], data[at + 3]]) as usize;
        if len < 16 || at + len > data.len() {
            break;
        }
        let kind = u16::from_ne_bytes([data[at + 4], data[at + 5]]);
        let seq = u32::from_ne_bytes([data[at + 8], data[at + 9], data[at + 10], data[at + 11]]);
        out.push((kind, seq, &data[at + 16..at + len]));
        at += (len + 3) & !3;
    }
    out
}

pub(super) fn send_batch(batch: Batch, what: &str) -> Result<(), DriverError> {
    let socket = open()?;
    let (buf, mut waiting) = batch.finish();
    socket
        .send(&buf, 0)
        .map_err(os(format!("send nf_tables batch: {what}")))?;
    while !waiting.is_empty() {
        let (data, _) = socket
            .recv_from_full()
            .map_err(os(format!("read nf_tables answers: {what}")))?;
        for (kind, seq, payload) in messages(&data) {
            if kind == NLMSG_ERROR && payload.len() >= 4 {
                let code = i32::from_ne_bytes([payload[0], payload[1], payload[2], payload[3]]);
                if code != 0 {
                    return Err(DriverError::Os {
                        what: format!("nf_tables: {what}"),
                        source: std::io::Error::from_raw_os_error(-code),
                    });
                }
                waiting.retain(|s| *s != seq);
            }
        }
    }
    Ok(())
}

fn table_attrs(table: &str) -> Attrs {
    let mut a = Attrs::default();
    a.str(1, table);
    a
}

/// Replace the ACL of the port whose host veth is `device` with `rules`
/// (no rules: the table goes away).
///
/// # Errors
/// The kernel refused the batch.
pub fn render(device: &str, rules: &[AclRule]) -> Result<(), DriverError> {
    let mut batch = Batch::new();
    let table = table_attrs(device);
    batch.nft(NFT_MSG_NEWTABLE, NLM_F_CREATE, &table);
    batch.nft(NFT_MSG_DELTABLE, 0, &table);
    if !rules.is_empty() {
        batch.nft(NFT_MSG_NEWTABLE, NLM_F_CREATE, &table);
        let mut chain = Attrs::default();
        chain.str(1, device).str(3, "acl").str(7, "filter");
        chain.nest(4, |h| {
            h.be32(1, 0).be32(2, 0).str(3, device);
        });
        chain.be32(5, NF_ACCEPT);
        batch.nft(NFT_MSG_NEWCHAIN, NLM_F_CREATE, &chain);
        for rule in rules {
            let mut r = Attrs::default();
            r.str(1, device).str(2, "acl");
            let exprs = rule_expressions(rule);
            r.put(4 | NLA_F_NESTED, &exprs.0);
            batch.nft(NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND, &r);
        }
    }
    send_batch(batch, &format!("ACL of {device} ({} rules)", rules.len()))
}

/// Remove the ACL table of `device` if it exists.
///
/// # Errors
/// The kernel refused.
pub fn remove(device: &str) -> Result<(), DriverError> {
    render(device, &[])
}

/// How many ACL rules the kernel holds for `device`.
///
/// # Errors
/// The dump failed (a missing table counts as zero rules).
pub fn rendered_rules(device: &str) -> Result<usize, DriverError> {
    let socket = open()?;
    let mut req = Vec::new();
    let attrs = table_attrs(device);
    let len = 16 + 4 + attrs.0.len();
    req.extend_from_slice(&(len as u32).to_ne_bytes());
    req.extend_from_slice(&((NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_GETRULE).to_ne_bytes());
    req.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    req.extend_from_slice(&1u32.to_ne_bytes());
    req.extend_from_slice(&0u32.to_ne_bytes());
    req.extend_from_slice(&[NFPROTO_NETDEV, 0, 0, 0]);
    req.extend_from_slice(&attrs.0);
    socket
        .send(&req, 0)
        .map_err(os(format!("dump the ACL rules of {device}")))?;
    let mut count = 0;
    loop {
        let (data, _) = socket
            .recv_from_full()
            .map_err(os(format!("read the ACL rules of {device}")))?;
        for (kind, _, payload) in messages(&data) {
            match kind {
                NLMSG_DONE => return Ok(count),
                NLMSG_ERROR => {
                    let code = payload
                        .get(..4)
                        .map_or(0, |b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
                    if code == 0 || code == -2 {
                        return Ok(count);
                    }
                    return Err(DriverError::Os {
                        what: format!("dump the ACL rules of {device}"),
                        source: std::io::Error::from_raw_os_error(-code),
                    });
                }
                k if k == (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWRULE => count += 1,
                _ => {}
            }
        }
    }
}
