//! The nf_tables netlink protocol as the firewall speaks it (`NETLINK_NETFILTER`):
//! attributes written by hand ([`Attrs`]) and read back ([`attributes`]),
//! changes sent as one batch (one transaction: all of it applies or none,
//! [`Batch`], [`send_batch`]), and the dumps drift is read with ([`dump`],
//! [`table_exists`], [`count_rules`]).
//!
//! Hand-written because no maintained crate speaks nf_tables without
//! linking libnftnl (a C library) or running `nft`; the numbers are named
//! in [`super::nftables`].

use std::os::fd::AsFd as _;

use netlink_sys::{Socket, protocols::NETLINK_NETFILTER};
use nix::sys::socket::{
    setsockopt,
    sockopt::{ReceiveTimeout, SndBufForce},
};
use nix::sys::time::TimeVal;

use super::nftables::{
    NFNL_MSG_BATCH_BEGIN, NFNL_MSG_BATCH_END, NFNL_SUBSYS_NFTABLES, NFT_MSG_GETCHAIN,
    NFT_MSG_GETRULE, NFT_MSG_GETSET, NFT_MSG_GETSETELEM, NFT_MSG_GETTABLE, NFTA_CHAIN_NAME,
    NFTA_DATA_VALUE, NFTA_LIST_ELEM, NFTA_RULE_CHAIN, NFTA_SET_ELEM_DATA, NFTA_SET_ELEM_KEY,
    NFTA_SET_ELEM_LIST_ELEMENTS, NFTA_SET_ELEM_LIST_SET, NFTA_SET_ELEM_LIST_TABLE, NFTA_SET_NAME,
    NFTA_TABLE_NAME, NLA_F_NESTED, NLM_F_ACK, NLM_F_DUMP, NLM_F_REQUEST, NLMSG_DONE, NLMSG_ERROR,
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
/// begin and end. Only the last is acknowledged (the kernel reports every
/// refused message anyway): a full render of a thousand Services is tens
/// of thousands of messages, whose acknowledgements would overflow the
/// socket's receive buffer.
pub(super) struct Batch {
    buf: Vec<u8>,
    seq: u32,
    /// Where the last nf_tables message starts, and its sequence number.
    last: Option<(usize, u32)>,
    /// Messages in the batch.
    messages: usize,
    /// The last number [`Batch::next_id`] gave.
    ids: u32,
}

impl Batch {
    /// An empty transaction.
    pub(super) fn new() -> Self {
        let mut b = Batch {
            buf: Vec::new(),
            seq: 1,
            last: None,
            messages: 0,
            ids: 0,
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
        self.seq += 1;
    }

    /// A nf_tables message `msg` for a table of `family`.
    pub(super) fn nft(&mut self, family: u8, msg: u16, flags: u16, attrs: &Attrs) {
        self.last = Some((self.buf.len(), self.seq));
        self.messages += 1;
        self.message(
            (NFNL_SUBSYS_NFTABLES << 8) | msg,
            NLM_F_REQUEST | flags,
            family,
            0,
            attrs,
        );
    }

    /// A number for an object the batch creates (a set's `NFTA_SET_ID`),
    /// unique within the batch.
    pub(super) fn next_id(&mut self) -> u32 {
        self.ids += 1;
        self.ids
    }

    /// How many nf_tables messages the batch holds.
    pub(super) fn len(&self) -> usize {
        self.messages
    }

    /// The bytes to send, and the sequence number whose acknowledgement
    /// ends the transaction (`None`: an empty batch).
    pub(super) fn finish(mut self) -> (Vec<u8>, Option<u32>) {
        let acked = self.last.map(|(at, seq)| {
            // the flags follow the length and the type
            let flags = at + 6;
            let was = u16::from_ne_bytes([self.buf[flags], self.buf[flags + 1]]);
            self.buf[flags..flags + 2].copy_from_slice(&(was | NLM_F_ACK).to_ne_bytes());
            seq
        });
        self.message(
            NFNL_MSG_BATCH_END,
            NLM_F_REQUEST,
            0,
            NFNL_SUBSYS_NFTABLES,
            &Attrs::default(),
        );
        (self.buf, acked)
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
    let (buf, acked) = batch.finish();
    let Some(acked) = acked else {
        return Ok(());
    };
    let socket = open()?;
    // the whole transaction is one datagram: the send buffer must hold it
    // (the kernel refuses a datagram larger than the buffer)
    if buf.len() > SMALL_BATCH {
        let size = usize::try_from(i32::MAX).map_or(buf.len(), |max| (buf.len() * 2).min(max));
        setsockopt(&socket.as_fd(), SndBufForce, &size).map_err(|e| DriverError::Os {
            what: format!(
                "size the nf_tables send buffer for {} bytes: {what}",
                buf.len()
            ),
            source: std::io::Error::from(e),
        })?;
    }
    socket
        .send(&buf, 0)
        .map_err(os(format!("send nf_tables batch: {what}")))?;
    loop {
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
                if seq == acked {
                    return Ok(());
                }
            }
        }
    }
}

/// A batch up to this size fits any socket's default send buffer.
const SMALL_BATCH: usize = 64 * 1024;

/// The attributes of a message's payload (after its nfnetlink header), or
/// of a nested attribute: (kind without flags, value).
pub(super) fn attributes(data: &[u8]) -> Vec<(u16, &[u8])> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 4 <= data.len() {
        let len = usize::from(u16::from_ne_bytes([data[at], data[at + 1]]));
        let kind = u16::from_ne_bytes([data[at + 2], data[at + 3]]) & !NLA_F_NESTED;
        if len < 4 || at + len > data.len() {
            break;
        }
        out.push((kind, &data[at + 4..at + len]));
        at += (len + 3) & !3;
    }
    out
}

/// The first attribute `kind` among `data`'s.
pub(super) fn attribute(data: &[u8], kind: u16) -> Option<&[u8]> {
    attributes(data)
        .into_iter()
        .find_map(|(k, v)| (k == kind).then_some(v))
}

/// A string attribute's text (its NUL cut off).
pub(super) fn text(value: &[u8]) -> String {
    let end = value.iter().position(|b| *b == 0).unwrap_or(value.len());
    String::from_utf8_lossy(&value[..end]).into_owned()
}

/// Send one request and collect the attributes of every answer of type
/// `answer` until the kernel is done. `ENOENT` (no such table or set)
/// answers nothing.
fn request(
    family: u8,
    msg: u16,
    flags: u16,
    attrs: &Attrs,
    answer: u16,
    what: &str,
) -> Result<Vec<Vec<u8>>, DriverError> {
    let socket = open()?;
    let mut req = header(
        (NFNL_SUBSYS_NFTABLES << 8) | msg,
        NLM_F_REQUEST | flags,
        1,
        family,
        0,
        attrs,
    );
    req.extend_from_slice(&attrs.0);
    socket.send(&req, 0).map_err(os(what.to_string()))?;
    let mut found = Vec::new();
    loop {
        let (data, _) = socket.recv_from_full().map_err(os(what.to_string()))?;
        for (kind, _, payload) in messages(&data) {
            match kind {
                NLMSG_DONE => return Ok(found),
                NLMSG_ERROR => {
                    let code = error_code(payload);
                    // ENOENT: nothing of that name
                    if code == 0 || code == -2 {
                        return Ok(found);
                    }
                    return Err(DriverError::Os {
                        what: what.to_string(),
                        source: std::io::Error::from_raw_os_error(-code),
                    });
                }
                k if k == (NFNL_SUBSYS_NFTABLES << 8) | answer => {
                    found.push(payload.get(NFGENMSG_LEN..).unwrap_or_default().to_vec());
                    // a request that is not a dump gets one answer
                    if flags & NLM_F_DUMP == 0 {
                        return Ok(found);
                    }
                }
                _ => {}
            }
        }
    }
}

/// Dump the objects `msg` (`NFT_MSG_GETCHAIN`, `GETSET`, `GETSETELEM`, …)
/// that `filter` selects: each answer's attributes. `what` names the dump
/// in an error.
///
/// # Errors
/// The socket failed or the kernel refused the dump.
pub(super) fn dump(
    family: u8,
    msg: u16,
    filter: &Attrs,
    what: &str,
) -> Result<Vec<Vec<u8>>, DriverError> {
    // the answers are of the type that creates the object
    request(family, msg, NLM_F_DUMP, filter, msg - 1, what)
}

/// Whether the table `table` of `family` exists.
///
/// # Errors
/// The socket failed or the kernel refused the question.
pub(super) fn table_exists(family: u8, table: &str) -> Result<bool, DriverError> {
    let mut attrs = Attrs::default();
    attrs.str(NFTA_TABLE_NAME, table);
    let what = format!("look up table {table}");
    Ok(!request(
        family,
        NFT_MSG_GETTABLE,
        NLM_F_ACK,
        &attrs,
        NFT_MSG_GETTABLE - 1,
        &what,
    )?
    .is_empty())
}

/// How many rules each chain of table `table` of `family` holds, by chain,
/// chains without rules included (`None`: no such table).
///
/// # Errors
/// A dump failed.
pub(super) fn rules_by_chain(
    family: u8,
    table: &str,
) -> Result<Option<std::collections::BTreeMap<String, usize>>, DriverError> {
    let Some(chains) = chain_names(family, table)? else {
        return Ok(None);
    };
    let mut counts: std::collections::BTreeMap<String, usize> =
        chains.into_iter().map(|c| (c, 0)).collect();
    for chain in rule_chains(family, table)? {
        *counts.entry(chain).or_insert(0) += 1;
    }
    Ok(Some(counts))
}

/// The chain of every rule of table `table` of `family`.
fn rule_chains(family: u8, table: &str) -> Result<Vec<String>, DriverError> {
    let mut attrs = Attrs::default();
    attrs.str(NFTA_TABLE_NAME, table);
    let what = format!("dump the rules of table {table}");
    Ok(dump(family, NFT_MSG_GETRULE, &attrs, &what)?
        .iter()
        .filter(|rule| of_table(rule, table))
        .filter_map(|rule| attribute(rule, NFTA_RULE_CHAIN).map(text))
        .collect())
}

/// Whether a dumped table object (a chain, set or rule, whose attribute 1
/// names its table) is of `table`: a kernel may answer a dump with every
/// table's objects, whatever the filter.
fn of_table(object: &[u8], table: &str) -> bool {
    attribute(object, NFTA_TABLE_NAME).is_some_and(|name| text(name) == table)
}

/// How many rules the table `table` of `family` holds (a missing table
/// holds none).
///
/// # Errors
/// The dump failed.
pub(super) fn count_rules(family: u8, table: &str) -> Result<usize, DriverError> {
    Ok(rule_chains(family, table)?.len())
}

/// The names of the objects a dump of `msg` answers with, each named by
/// its attribute `name_attr`, in table `table` of `family` (`None`: no
/// such table).
fn names(
    family: u8,
    table: &str,
    msg: u16,
    name_attr: u16,
    what: &str,
) -> Result<Option<std::collections::BTreeSet<String>>, DriverError> {
    if !table_exists(family, table)? {
        return Ok(None);
    }
    let mut attrs = Attrs::default();
    attrs.str(NFTA_TABLE_NAME, table);
    Ok(Some(
        dump(family, msg, &attrs, what)?
            .iter()
            .filter(|object| of_table(object, table))
            .filter_map(|object| attribute(object, name_attr).map(text))
            .collect(),
    ))
}

/// The chains of table `table` of `family` (`None`: no such table).
///
/// # Errors
/// The dump failed.
pub(super) fn chain_names(
    family: u8,
    table: &str,
) -> Result<Option<std::collections::BTreeSet<String>>, DriverError> {
    let what = format!("dump the chains of table {table}");
    names(family, table, NFT_MSG_GETCHAIN, NFTA_CHAIN_NAME, &what)
}

/// The sets and maps of table `table` of `family` (`None`: no such table).
///
/// # Errors
/// The dump failed.
pub(super) fn set_names(
    family: u8,
    table: &str,
) -> Result<Option<std::collections::BTreeSet<String>>, DriverError> {
    let what = format!("dump the sets of table {table}");
    names(family, table, NFT_MSG_GETSET, NFTA_SET_NAME, &what)
}

/// A set element as the kernel holds it: its key's bytes and, in a map,
/// its data's (a verdict's are not read: `None`).
pub(super) type Element = (Vec<u8>, Option<Vec<u8>>);

/// The elements of the set `set` of table `table` of `family` (a missing
/// set has none).
///
/// # Errors
/// The dump failed.
pub(super) fn set_elements(
    family: u8,
    table: &str,
    set: &str,
) -> Result<Vec<Element>, DriverError> {
    let mut attrs = Attrs::default();
    attrs
        .str(NFTA_SET_ELEM_LIST_TABLE, table)
        .str(NFTA_SET_ELEM_LIST_SET, set);
    let what = format!("dump the elements of set {set} of table {table}");
    let value = |nested: &[u8]| attribute(nested, NFTA_DATA_VALUE).map(<[u8]>::to_vec);
    let mut out = Vec::new();
    for answer in dump(family, NFT_MSG_GETSETELEM, &attrs, &what)? {
        let Some(list) = attribute(&answer, NFTA_SET_ELEM_LIST_ELEMENTS) else {
            continue;
        };
        for (kind, element) in attributes(list) {
            if kind != NFTA_LIST_ELEM {
                continue;
            }
            let Some(key) = attribute(element, NFTA_SET_ELEM_KEY).and_then(value) else {
                continue;
            };
            let data = attribute(element, NFTA_SET_ELEM_DATA).and_then(value);
            out.push((key, data));
        }
    }
    Ok(out)
}
