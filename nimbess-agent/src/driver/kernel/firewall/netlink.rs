//! The nf_tables netlink protocol as the firewall speaks it (`NETLINK_NETFILTER`):
//! attributes written by hand ([`Attrs`]), changes sent as one batch (one
//! transaction: all of it applies or none, [`Batch`], [`send_batch`]), and the
//! one dump the firewall reads (a table's rule count, [`count_rules`]).
//!
//! Hand-written because no maintained crate speaks nf_tables without
//! linking libnftnl (a C library) or running `nft`; the numbers are named
//! in [`super::nftables`].

use std::os::fd::AsFd as _;

use netlink_sys::{Socket, protocols::NETLINK_NETFILTER};
use nix::sys::socket::{setsockopt, sockopt::ReceiveTimeout};
use nix::sys::time::TimeVal;

use super::nftables::{
    NFNL_MSG_BATCH_BEGIN, NFNL_MSG_BATCH_END, NFNL_SUBSYS_NFTABLES, NFT_MSG_GETRULE,
    NFT_MSG_NEWRULE, NFTA_TABLE_NAME, NLA_F_NESTED, NLM_F_ACK, NLM_F_DUMP, NLM_F_REQUEST,
    NLMSG_DONE, NLMSG_ERROR,
};
use crate::driver::DriverError;

/// The length of a netlink message header.
const NLMSG_HDRLEN: usize = 16;
/// The length of the nfnetlink header after it (`struct nfgenmsg`).
const NFGENMSG_LEN: usize = 4;

/// Netlink attributes being written.
#[derive(Default)]
pub(super) struct Attrs(pub(super) Vec<u8>);

impl Attrs {
    /// One attribute of `kind` holding `value`, padded to 4 bytes.
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

    /// A NUL-terminated string.
    pub(super) fn str(&mut self, kind: u16, value: &str) -> &mut Self {
        let mut bytes = value.as_bytes().to_vec();
        bytes.push(0);
        self.put(kind, &bytes)
    }

    /// A 32-bit number in network order.
    pub(super) fn be32(&mut self, kind: u16, value: u32) -> &mut Self {
        self.put(kind, &value.to_be_bytes())
    }

    /// A nested attribute whose content `build` writes.
    pub(super) fn nest(&mut self, kind: u16, build: impl FnOnce(&mut Attrs)) -> &mut Self {
        let mut inner = Attrs::default();
        build(&mut inner);
        self.put(kind | NLA_F_NESTED, &inner.0)
    }
}

/// One nf_tables transaction being written: messages between a batch's
/// begin and end, each acknowledged.
pub(super) struct Batch {
    buf: Vec<u8>,
    seq: u32,
    acked: Vec<u32>,
}

impl Batch {
    /// An empty transaction.
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
        self.buf
            .extend_from_slice(&header(kind, flags, self.seq, family, res_id, attrs));
        self.buf.extend_from_slice(&attrs.0);
        if flags & NLM_F_ACK != 0 {
            self.acked.push(self.seq);
        }
        self.seq += 1;
    }

    /// A nf_tables message `msg` for a table of `family`.
    pub(super) fn nft(&mut self, family: u8, msg: u16, flags: u16, attrs: &Attrs) {
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

/// The netlink and nfnetlink headers of a message carrying `attrs`.
fn header(kind: u16, flags: u16, seq: u32, family: u8, res_id: u16, attrs: &Attrs) -> Vec<u8> {
    let len = NLMSG_HDRLEN + NFGENMSG_LEN + attrs.0.len();
    let mut out = Vec::with_capacity(NLMSG_HDRLEN + NFGENMSG_LEN);
    out.extend_from_slice(&(len as u32).to_ne_bytes());
    out.extend_from_slice(&kind.to_ne_bytes());
    out.extend_from_slice(&flags.to_ne_bytes());
    out.extend_from_slice(&seq.to_ne_bytes());
    out.extend_from_slice(&0u32.to_ne_bytes());
    out.push(family);
    out.push(0);
    out.extend_from_slice(&res_id.to_be_bytes());
    out
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
    while at + NLMSG_HDRLEN <= data.len() {
        let len = u32::from_ne_bytes([data[at], data[at + 1], data[at + 2], data[at + 3]]) as usize;
        if len < NLMSG_HDRLEN || at + len > data.len() {
            break;
        }
        let kind = u16::from_ne_bytes([data[at + 4], data[at + 5]]);
        let seq = u32::from_ne_bytes([data[at + 8], data[at + 9], data[at + 10], data[at + 11]]);
        out.push((kind, seq, &data[at + NLMSG_HDRLEN..at + len]));
        at += (len + 3) & !3;
    }
    out
}

/// The error code an `NLMSG_ERROR` payload carries (0: an acknowledgement).
fn error_code(payload: &[u8]) -> i32 {
    payload
        .get(..4)
        .map_or(0, |b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
}

/// Send `batch` as one transaction and wait for every acknowledgement.
///
/// # Errors
/// The socket failed, or the kernel refused a message (then nothing of the
/// batch applied); `what` names the change.
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
                let code = error_code(payload);
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

/// How many rules the table `table` of `family` holds (a missing table
/// holds none).
///
/// # Errors
/// The dump failed.
pub(super) fn count_rules(family: u8, table: &str) -> Result<usize, DriverError> {
    let what = format!("dump the rules of table {table}");
    let socket = open()?;
    let mut attrs = Attrs::default();
    attrs.str(NFTA_TABLE_NAME, table);
    let mut req = header(
        (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_GETRULE,
        NLM_F_REQUEST | NLM_F_DUMP,
        1,
        family,
        0,
        &attrs,
    );
    req.extend_from_slice(&attrs.0);
    socket.send(&req, 0).map_err(os(what.clone()))?;
    let mut count = 0;
    loop {
        let (data, _) = socket.recv_from_full().map_err(os(what.clone()))?;
        for (kind, _, payload) in messages(&data) {
            match kind {
                NLMSG_DONE => return Ok(count),
                NLMSG_ERROR => {
                    let code = error_code(payload);
                    // ENOENT: no such table
                    if code == 0 || code == -2 {
                        return Ok(count);
                    }
                    return Err(DriverError::Os {
                        what,
                        source: std::io::Error::from_raw_os_error(-code),
                    });
                }
                k if k == (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWRULE => {
                    count += 1;
                }
                _ => {}
            }
        }
    }
}
