//! Kernel device names: at most 15 bytes for any network name and any
//! container id, stable across restarts (so the agent can adopt what it
//! finds), derived from a 64-bit FNV-1a hash.

/// Longest Linux interface name, in bytes.
pub const IFNAMSIZ_MAX: usize = 15;

/// FNV-1a, 64 bits: stable across builds and platforms.
pub fn fnv1a(text: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// The bridge rendering a network's switches: `nb` + 10 hex digits (12 bytes).
pub fn bridge_name(network: &str) -> String {
    format!("nb{:010x}", fnv1a(network) & 0xff_ffff_ffff)
}

/// The FIB-miss sink of a network's bridge: one end of a veth pair, the only
/// bridge port unknown unicast is flooded to, so its TX counter counts the
/// frames no FIB knew: `nd` + 10 hex digits (12 bytes).
pub fn miss_sink_name(network: &str) -> String {
    format!("nd{:010x}", fnv1a(network) & 0xff_ffff_ffff)
}

/// The other end of the sink's veth pair (up, on no bridge: what reaches it
/// is dropped by the host's stack): `ne` + 10 hex digits.
pub fn miss_sink_peer_name(network: &str) -> String {
    format!("ne{:010x}", fnv1a(network) & 0xff_ffff_ffff)
}

/// The VXLAN device carrying a network's frames to the other hosts of the
/// fabric: `nx` + 10 hex digits (12 bytes).
pub fn vxlan_name(network: &str) -> String {
    format!("nx{:010x}", fnv1a(network) & 0xff_ffff_ffff)
}

/// The VXLAN network identifier of a network, the same on every host: its
/// `vlan` id when it has one, else a hash of its name above the VLAN range
/// (4096 ..= 2^24 - 1), so the two never meet.
pub fn vxlan_vni(spec: &nephrite_pipeline::NetworkSpec) -> u32 {
    match spec.vlan {
        Some(vlan) => u32::from(vlan),
        None => 4096 + (fnv1a(&spec.name) >> 40) as u32 % ((1 << 24) - 4096),
    }
}

/// The MAC of a routed (`kind: l3`) network's VXLAN device on the host with
/// `underlay`: derived, so every host knows where to send a routed packet
/// for that host without it being published (locally administered, unicast).
pub fn vxlan_mac(network: &str, underlay: std::net::Ipv4Addr) -> nephrite_pipeline::Mac {
    let h = fnv1a(&format!("{network}@{underlay}")).to_be_bytes();
    nephrite_pipeline::Mac([0x02, h[0], h[1], h[2], h[3], h[4]])
}

/// The host end of a port's veth pair: `nv` + 12 hex digits (14 bytes).
pub fn host_veth_name(port: &str) -> String {
    format!("nv{:012x}", fnv1a(port) & 0xffff_ffff_ffff)
}

/// True when `name` is one of ours.
pub fn is_agent_device(name: &str) -> bool {
    ["nb", "nv", "nd", "ne", "nx"]
        .iter()
        .any(|p| name.starts_with(p))
        && name.len() <= IFNAMSIZ_MAX
        && name[2..].bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests;
