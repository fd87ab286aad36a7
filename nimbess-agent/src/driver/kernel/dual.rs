//! The IPv6 half of a dual-stack network in the kernel: the pod's second
//! address and default route, the IPv6 gateway on the network's bridge, and
//! IPv6 forwarding. Addresses are added without duplicate address detection
//! (IPAM made them unique; DAD would hold them tentative for a second).

use std::net::{IpAddr, Ipv6Addr};

use nephrite_pipeline::{Ipv6Cidr, NetworkSpec};
use netlink_packet_route::address::AddressHeaderFlags;
use rtnetlink::{Handle, RouteMessageBuilder};

use super::nl;
use crate::driver::DriverError;

/// Add `address` to the link `index` (replacing one that is there), DAD off.
pub(super) async fn add_address6(
    h: &Handle,
    index: u32,
    address: Ipv6Cidr,
    what: impl FnOnce() -> String,
) -> Result<(), DriverError> {
    let mut req = h
        .address()
        .add(index, IpAddr::V6(address.addr), address.prefix)
        .replace();
    req.message_mut().header.flags |= AddressHeaderFlags::Nodad;
    req.execute().await.map_err(nl(what()))
}

/// Inside the pod: its IPv6 address on `ifname` and, with a way out, the
/// IPv6 default route through `gateway6`.
pub(super) async fn configure_pod(
    h: &Handle,
    index: u32,
    ifname: &str,
    address6: Ipv6Cidr,
    gateway6: Option<Ipv6Addr>,
) -> Result<(), DriverError> {
    add_address6(h, index, address6, || {
        format!("address {address6} on {ifname}")
    })
    .await?;
    if let Some(gateway6) = gateway6 {
        let default = RouteMessageBuilder::<Ipv6Addr>::new()
            .gateway(gateway6)
            .output_interface(index)
            .build();
        h.route()
            .add(default)
            .replace()
            .execute()
            .await
            .map_err(nl(format!("IPv6 default route via {gateway6} on {ifname}")))?;
    }
    Ok(())
}

/// The network's IPv6 gateway on its bridge (a dual-stack L2 network with a
/// way out), with the subnet's prefix: the host reaches its pods through it.
pub(super) async fn bridge_gateway6(
    h: &Handle,
    spec: &NetworkSpec,
    bridge: u32,
) -> Result<(), DriverError> {
    let (Some(subnet6), Some(gateway6)) = (spec.subnet6, spec.gateway6()) else {
        return Ok(());
    };
    let gateway = Ipv6Cidr {
        addr: gateway6,
        prefix: subnet6.prefix,
    };
    add_address6(h, bridge, gateway, || {
        format!(
            "IPv6 gateway {gateway} on the bridge of network {}",
            spec.name
        )
    })
    .await
}

/// Turn IPv6 forwarding on (a dual-stack network's pods reach beyond it
/// through the host).
///
/// # Errors
/// The sysctl cannot be written.
pub(super) fn enable_forwarding6() -> Result<(), DriverError> {
    const PATH: &str = "/proc/sys/net/ipv6/conf/all/forwarding";
    std::fs::write(PATH, b"1").map_err(|source| DriverError::Os {
        what: format!("write 1 to {PATH}"),
        source,
    })
}
