//! `kind: l3` networks in the kernel: a VRF made of its own routing table
//! plus ip rules (this kernel has no VRF device).
//!
//! | model | kernel object |
//! |---|---|
//! | the network | routing table `route_table(name)` holding an `unreachable default` (a lookup never falls through to another table) |
//! | `router.<port>` | the rule `iif <host veth> lookup <table>` (priority [`RULE_PRIORITY`]); forwarding on for that veth only |
//! | FIB entry IP → egress of Q | the route `IP/32 dev <Q's veth>` in the table, with a permanent neighbour entry (Q's MAC), shared by every router copy that holds it |
//!
//! The pod holds its address as a /32, a link route to the gateway, the
//! subnet via the gateway, and a permanent neighbour entry for the gateway
//! (the host veth's MAC): no ARP towards the host, no proxy ARP.
//!
//! With a way out (the driver's egress, see [`super::firewall::egress`]) the VRF is
//! the network's L3 edge too: the gateway is the host side of every port
//! (`gateway/32` on the host veth), the pod routes `default via gateway`,
//! the table holds `unreachable <subnet>` for its own subnet instead of
//! `unreachable default`, so what is for no pod of its own falls through
//! to the host's `main` table (and is masqueraded there) or, for another
//! pod network, to that network's route, where the egress table's
//! `forward` chain keeps the networks apart unless a Service or a policy
//! opens the path (see [`super::firewall::egress`]), and the rule `to <subnet> lookup <table>` (priority
//! [`HOST_RULE_PRIORITY`]) lets the host, and replies from the outside,
//! reach the pods.

use std::net::{IpAddr, Ipv4Addr};

use futures::TryStreamExt as _;
use nephrite_pipeline::{Ipv4Cidr, Mac, NetworkSpec};
use netlink_packet_route::neighbour::NeighbourState;
use netlink_packet_route::route::{RouteScope, RouteType};
use netlink_packet_route::rule::RuleAction;
use rtnetlink::{Handle, RouteMessageBuilder};

use super::{DriverError, is_not_found, nl};

/// Priority of the per-port rules: after `local` (0), before `main` (32766).
pub const RULE_PRIORITY: u32 = 1000;

/// Priority of a network's `to <subnet>` rule: after the ports' rules, so
/// a pod's packet is decided by its own network's table first.
pub const HOST_RULE_PRIORITY: u32 = 1001;

/// The routing table of an L3 network: stable, never one of the kernel's own.
pub fn route_table(network: &str) -> u32 {
    0x1000_0000 | (crate::naming::fnv1a(network) as u32 & 0x0fff_ffff)
}

/// "File exists": the object is there already.
pub(super) fn is_exists(e: &rtnetlink::Error) -> bool {
    matches!(e, rtnetlink::Error::NetlinkError(m) if m.code.is_some_and(|c| -c.get() == 17))
}

/// "No such process": the kernel's answer for a route that is not there.
fn is_no_route(e: &rtnetlink::Error) -> bool {
    is_not_found(e)
        || matches!(e, rtnetlink::Error::NetlinkError(m) if m.code.is_some_and(|c| -c.get() == 3))
}

/// Make the network's table exist: its `unreachable default` (without a
/// way out; with one, [`open_table`] shapes the table).
pub async fn ensure_table(
    handle: &Handle,
    spec: &NetworkSpec,
    way_out: bool,
) -> Result<(), DriverError> {
    if way_out {
        return Ok(());
    }
    let table = route_table(&spec.name);
    let msg = RouteMessageBuilder::<Ipv4Addr>::new()
        .destination_prefix(Ipv4Addr::UNSPECIFIED, 0)
        .table_id(table)
        .kind(RouteType::Unreachable)
        .build();
    handle
        .route()
        .add(msg)
        .replace()
        .execute()
        .await
        .map_err(nl(format!(
            "unreachable default in table {table} of network {}",
            spec.name
        )))
}

fn rule(handle: &Handle, host: &str, table: u32) -> rtnetlink::RuleAddRequest<Ipv4Addr> {
    handle
        .rule()
        .add()
        .v4()
        .input_interface(host)
        .table_id(table)
        .priority(RULE_PRIORITY)
        .action(RuleAction::ToTable)
}

/// Steer what enters from the port's host veth into the network's table,
/// and let the kernel forward what arrives on that veth (that veth only:
/// `net.ipv4.ip_forward` is never touched).
pub async fn attach(handle: &Handle, host: &str, spec: &NetworkSpec) -> Result<(), DriverError> {
    let table = route_table(&spec.name);
    match rule(handle, host, table).execute().await {
        Ok(()) => {}
        Err(e) if is_exists(&e) => {}
        Err(e) => return Err(nl(format!("rule iif {host} lookup {table}"))(e)),
    }
    let path = format!("/proc/sys/net/ipv4/conf/{host}/forwarding");
    std::fs::write(&path, b"1").map_err(|source| DriverError::Os {
        what: format!("turn forwarding on for {host}"),
        source,
    })
}

/// Remove the port's rule (its routes and neighbours go with its veth).
pub async fn detach(handle: &Handle, host: &str, network: &str) -> Result<(), DriverError> {
    let table = route_table(network);
    let mut req = rule(handle, host, table);
    let msg = req.message_mut().clone();
    match handle.rule().del(msg).execute().await {
        Ok(()) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(nl(format!("remove rule iif {host} lookup {table}"))(e)),
    }
}

/// True when the port's rule exists.
pub async fn has_rule(handle: &Handle, host: &str, network: &str) -> Result<bool, DriverError> {
    let table = route_table(network);
    let mut rules = handle.rule().get(rtnetlink::IpVersion::V4).execute();
    while let Some(msg) = rules.try_next().await.map_err(nl("dump ip rules"))? {
        use netlink_packet_route::rule::RuleAttribute as A;
        let iif = msg
            .attributes
            .iter()
            .any(|a| matches!(a, A::Iifname(n) if n == host));
        let in_table = msg
            .attributes
            .iter()
            .any(|a| matches!(a, A::Table(t) if *t == table));
        if iif && in_table {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Inside the pod: the address as a /32, the gateway on the link with a
/// permanent neighbour entry (`host_mac`), the subnet via the gateway, and
/// with `default_route` everything else via the gateway too.
pub async fn configure_pod(
    h: &Handle,
    index: u32,
    ifname: &str,
    address: Ipv4Cidr,
    spec: &NetworkSpec,
    host_mac: Mac,
    default_route: bool,
) -> Result<(), DriverError> {
    let gateway = spec
        .gateway()
        .ok_or_else(|| DriverError::State(format!("network {} has no gateway", spec.name)))?;
    h.address()
        .add(index, IpAddr::V4(address.addr), 32)
        .execute()
        .await
        .map_err(nl(format!("address {}/32 on {ifname}", address.addr)))?;
    h.link()
        .set(rtnetlink::LinkUnspec::new_with_index(index).up().build())
        .execute()
        .await
        .map_err(nl(format!("set {ifname} up")))?;
    h.neighbours()
        .add(index, IpAddr::V4(gateway))
        .link_layer_address(&host_mac.0)
        .state(NeighbourState::Permanent)
        .replace()
        .execute()
        .await
        .map_err(nl(format!("neighbour {gateway} on {ifname}")))?;
    let link_route = RouteMessageBuilder::<Ipv4Addr>::new()
        .destination_prefix(gateway, 32)
        .output_interface(index)
        .scope(RouteScope::Link)
        .build();
    h.route()
        .add(link_route)
        .replace()
        .execute()
        .await
        .map_err(nl(format!("route {gateway} dev {ifname}")))?;
    let subnet = RouteMessageBuilder::<Ipv4Addr>::new()
        .destination_prefix(spec.subnet.network(), spec.subnet.prefix)
        .gateway(gateway)
        .output_interface(index)
        .build();
    h.route()
        .add(subnet)
        .replace()
        .execute()
        .await
        .map_err(nl(format!("route {} via {gateway}", spec.subnet)))?;
    if default_route {
        let default = RouteMessageBuilder::<Ipv4Addr>::new()
            .gateway(gateway)
            .output_interface(index)
            .build();
        h.route()
            .add(default)
            .replace()
            .execute()
            .await
            .map_err(nl(format!("default route via {gateway} on {ifname}")))?;
    }
    Ok(())
}

/// The gateway as the host side of a port: `gateway/32` on its host veth
/// `index` (`host`), the source of what the host sends its pod.
pub async fn host_gateway(
    handle: &Handle,
    index: u32,
    host: &str,
    spec: &NetworkSpec,
) -> Result<(), DriverError> {
    let Some(gateway) = spec.gateway() else {
        return Ok(());
    };
    handle
        .address()
        .add(index, IpAddr::V4(gateway), 32)
        .replace()
        .execute()
        .await
        .map_err(nl(format!("gateway {gateway}/32 on {host}")))
}

fn host_rule(handle: &Handle, spec: &NetworkSpec) -> rtnetlink::RuleAddRequest<Ipv4Addr> {
    handle
        .rule()
        .add()
        .v4()
        .destination_prefix(spec.subnet.network(), spec.subnet.prefix)
        .table_id(route_table(&spec.name))
        .priority(HOST_RULE_PRIORITY)
        .action(RuleAction::ToTable)
}

fn unreachable(table: u32, cidr: Ipv4Cidr) -> netlink_packet_route::route::RouteMessage {
    RouteMessageBuilder::<Ipv4Addr>::new()
        .destination_prefix(cidr.network(), cidr.prefix)
        .table_id(table)
        .kind(RouteType::Unreachable)
        .build()
}

/// The routes of the network's table (the kernel's dump filtered to that table).
async fn table_routes(
    handle: &Handle,
    network: &str,
) -> Result<Vec<netlink_packet_route::route::RouteMessage>, DriverError> {
    use netlink_packet_route::route::RouteAttribute;
    let table = route_table(network);
    let filter = RouteMessageBuilder::<Ipv4Addr>::new()
        .table_id(table)
        .build();
    let mut out = Vec::new();
    let mut stream = handle.route().get(filter).execute();
    while let Some(msg) = stream
        .try_next()
        .await
        .map_err(nl(format!("dump table {table}")))?
    {
        if msg
            .attributes
            .iter()
            .any(|a| matches!(a, RouteAttribute::Table(t) if *t == table))
        {
            out.push(msg);
        }
    }
    Ok(out)
}

/// A route's destination address (unspecified for a default route).
fn destination(msg: &netlink_packet_route::route::RouteMessage) -> Ipv4Addr {
    use netlink_packet_route::route::{RouteAddress, RouteAttribute};
    msg.attributes
        .iter()
        .find_map(|a| match a {
            RouteAttribute::Destination(RouteAddress::Inet(ip)) => Some(*ip),
            _ => None,
        })
        .unwrap_or(Ipv4Addr::UNSPECIFIED)
}

/// The `unreachable` routes of the network's table, by prefix.
async fn unreachables(
    handle: &Handle,
    network: &str,
) -> Result<std::collections::BTreeSet<Ipv4Cidr>, DriverError> {
    Ok(table_routes(handle, network)
        .await?
        .iter()
        .filter(|msg| msg.header.kind == RouteType::Unreachable)
        .map(|msg| Ipv4Cidr {
            addr: destination(msg),
            prefix: msg.header.destination_prefix_length,
        })
        .collect())
}

/// The `unreachable` routes of a routed network's table with a way out:
/// its own subnet's (its pods' `/32` routes win over it).
fn own_unreachable(spec: &NetworkSpec) -> Ipv4Cidr {
    spec.subnet.with_addr(spec.subnet.network())
}

/// Give the network's VRF its way out: `unreachable` for exactly its own
/// subnet (the `unreachable default` and any other leftover, such as the
/// other pod networks' subnets an older agent put there, removed), and
/// the rule `to <subnet> lookup <table>`.
///
/// # Errors
/// The kernel refused a route or the rule.
pub async fn open_table(handle: &Handle, spec: &NetworkSpec) -> Result<(), DriverError> {
    let table = route_table(&spec.name);
    let wanted = std::collections::BTreeSet::from([own_unreachable(spec)]);
    for cidr in &wanted {
        handle
            .route()
            .add(unreachable(table, *cidr))
            .replace()
            .execute()
            .await
            .map_err(nl(format!("unreachable {cidr} in table {table}")))?;
    }
    for cidr in unreachables(handle, &spec.name).await? {
        if wanted.contains(&cidr) {
            continue;
        }
        match handle.route().del(unreachable(table, cidr)).execute().await {
            Ok(()) => {}
            Err(e) if is_no_route(&e) => {}
            Err(e) => {
                return Err(nl(format!("remove unreachable {cidr} from table {table}"))(
                    e,
                ));
            }
        }
    }
    match host_rule(handle, spec).execute().await {
        Ok(()) => Ok(()),
        Err(e) if is_exists(&e) => Ok(()),
        Err(e) => Err(nl(format!("rule to {} lookup {table}", spec.subnet))(e)),
    }
}

/// Remove what [`open_table`] added for a network that goes away.
pub async fn close_table(handle: &Handle, spec: &NetworkSpec) -> Result<(), DriverError> {
    let table = route_table(&spec.name);
    let mut req = host_rule(handle, spec);
    let msg = req.message_mut().clone();
    match handle.rule().del(msg).execute().await {
        Ok(()) => {}
        Err(e) if is_not_found(&e) => {}
        Err(e) => return Err(nl(format!("remove rule to {} lookup {table}", spec.subnet))(e)),
    }
    for cidr in unreachables(handle, &spec.name).await? {
        match handle.route().del(unreachable(table, cidr)).execute().await {
            Ok(()) => {}
            Err(e) if is_no_route(&e) => {}
            Err(e) => {
                return Err(nl(format!("remove unreachable {cidr} from table {table}"))(
                    e,
                ));
            }
        }
    }
    Ok(())
}

/// What of [`open_table`]'s work is missing, one line each.
pub async fn way_out_drift(
    handle: &Handle,
    spec: &NetworkSpec,
) -> Result<Vec<String>, DriverError> {
    use netlink_packet_route::rule::RuleAttribute as A;
    let table = route_table(&spec.name);
    let subnet = spec.subnet.with_addr(spec.subnet.network());
    let mut found = false;
    let mut rules = handle.rule().get(rtnetlink::IpVersion::V4).execute();
    while let Some(msg) = rules.try_next().await.map_err(nl("dump ip rules"))? {
        let to_subnet = msg.header.dst_len == subnet.prefix
            && msg
                .attributes
                .iter()
                .any(|a| matches!(a, A::Destination(IpAddr::V4(ip)) if *ip == subnet.addr));
        let in_table = msg
            .attributes
            .iter()
            .any(|a| matches!(a, A::Table(t) if *t == table));
        found |= to_subnet && in_table;
    }
    let mut drift = Vec::new();
    if !found {
        drift.push(format!(
            "network {}: rule to {subnet} lookup table {table} is missing",
            spec.name
        ));
    }
    let have = unreachables(handle, &spec.name).await?;
    for cidr in [own_unreachable(spec)] {
        if !have.contains(&cidr) {
            drift.push(format!(
                "network {}: unreachable {cidr} in table {table} is missing",
                spec.name
            ));
        }
    }
    Ok(drift)
}

/// Install (or withdraw) the FIB entry `ip` → the veth `index` (`mac` behind it).
pub async fn fib(
    handle: &Handle,
    network: &str,
    ip: Ipv4Addr,
    mac: Option<Mac>,
    index: u32,
    add: bool,
) -> Result<(), DriverError> {
    let table = route_table(network);
    let route = RouteMessageBuilder::<Ipv4Addr>::new()
        .destination_prefix(ip, 32)
        .output_interface(index)
        .table_id(table)
        .scope(RouteScope::Link)
        .build();
    if !add {
        // whoever installed it (a leftover may not be ours): any protocol
        let mut route = route;
        route.header.protocol = netlink_packet_route::route::RouteProtocol::Unspec;
        match handle.route().del(route).execute().await {
            Ok(()) => {}
            Err(e) if is_no_route(&e) => {}
            Err(e) => return Err(nl(format!("remove route {ip} from table {table}"))(e)),
        }
        // the neighbour entry goes with a pod's veth, not with a shared device
        let mut neighbour = netlink_packet_route::neighbour::NeighbourMessage::default();
        neighbour.header.family = netlink_packet_route::AddressFamily::Inet;
        neighbour.header.ifindex = index;
        neighbour.attributes.push(
            netlink_packet_route::neighbour::NeighbourAttribute::Destination(
                netlink_packet_route::neighbour::NeighbourAddress::Inet(ip),
            ),
        );
        return match handle.neighbours().del(neighbour).execute().await {
            Ok(()) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(nl(format!("remove neighbour {ip}"))(e)),
        };
    }
    if let Some(mac) = mac {
        handle
            .neighbours()
            .add(index, IpAddr::V4(ip))
            .link_layer_address(&mac.0)
            .state(NeighbourState::Permanent)
            .replace()
            .execute()
            .await
            .map_err(nl(format!("neighbour {ip} -> {mac}")))?;
    }
    handle
        .route()
        .add(route)
        .replace()
        .execute()
        .await
        .map_err(nl(format!("route {ip} in table {table}")))
}

/// The host routes of a table (`IP/32 → ifindex`), for `verify`.
pub async fn routes(
    handle: &Handle,
    network: &str,
) -> Result<std::collections::BTreeSet<(Ipv4Addr, u32)>, DriverError> {
    use netlink_packet_route::route::RouteAttribute;
    Ok(table_routes(handle, network)
        .await?
        .iter()
        .filter(|msg| msg.header.destination_prefix_length == 32)
        .filter_map(|msg| {
            let oif = msg.attributes.iter().find_map(|a| match a {
                RouteAttribute::Oif(i) => Some(*i),
                _ => None,
            })?;
            Some((destination(msg), oif))
        })
        .collect())
}

/// Differences between the routers' FIBs and the networks' tables.
pub async fn route_drift(
    handle: &Handle,
    model: &nephrite_pipeline::Model,
    veths: &std::collections::BTreeMap<String, u32>,
    desired: &std::collections::BTreeMap<(Ipv4Addr, String), usize>,
) -> Result<Vec<String>, DriverError> {
    let mut drift = Vec::new();
    for net in model.networks().values() {
        if net.spec.kind != nephrite_pipeline::NetworkKind::L3 {
            continue;
        }
        let have = routes(handle, &net.spec.name).await?;
        let table = route_table(&net.spec.name);
        let mut wanted = std::collections::BTreeSet::new();
        for (ip, egress) in desired.keys() {
            let on_net = model
                .port(egress)
                .is_some_and(|p| p.network == net.spec.name);
            let Some(index) = veths.get(egress).filter(|_| on_net) else {
                continue;
            };
            wanted.insert((*ip, *index));
            if !have.contains(&(*ip, *index)) {
                drift.push(format!(
                    "FIB entry {ip} -> {egress}: route in table {table} is missing"
                ));
            }
        }
        for (ip, index) in have.difference(&wanted) {
            drift.push(format!(
                "route {ip} via ifindex {index} in table {table} is in no FIB of the model"
            ));
        }
    }
    Ok(drift)
}
