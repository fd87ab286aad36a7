//! The Services' table read back over netlink (chains, maps and their
//! elements dumped) and compared with the model: a missing chain or map, a
//! backend map whose slots differ, a Service port not dispatched.

use std::collections::BTreeMap;

use nephrite_pipeline::{LoadBalancer, LoadBalancerKey};

use super::super::netlink::{chain_names, set_elements, set_names};
use super::super::nftables::NFPROTO_IPV4;
use super::{
    SERVICES_MAP, TABLE, backends::backend_of, chain_name, map_name, service_element, service_key,
    slot_backends,
};
use crate::driver::DriverError;

/// Differences between `services` and the kernel's table, one line each
/// (a missing chain or map, a backend map whose elements differ, a Service
/// port with backends that is not dispatched).
pub fn verify(services: &BTreeMap<LoadBalancerKey, LoadBalancer>) -> Vec<String> {
    match drift(services) {
        Ok(drift) => drift,
        Err(e) => vec![format!("services: table ip {TABLE} cannot be read: {e}")],
    }
}

fn drift(services: &BTreeMap<LoadBalancerKey, LoadBalancer>) -> Result<Vec<String>, DriverError> {
    let chains = chain_names(NFPROTO_IPV4, TABLE)?;
    if services.is_empty() {
        return Ok(match chains {
            Some(_) => vec![format!("services: table ip {TABLE} exists with no Service")],
            None => Vec::new(),
        });
    }
    let chains = chains.unwrap_or_default();
    let maps = set_names(NFPROTO_IPV4, TABLE)?.unwrap_or_default();
    let dispatched: Vec<Vec<u8>> = set_elements(NFPROTO_IPV4, TABLE, SERVICES_MAP)?
        .into_iter()
        .map(|(key, _)| key)
        .collect();
    let written = |slots: Vec<(std::net::Ipv4Addr, u16)>| {
        let mut s: Vec<String> = slots.iter().map(|(a, p)| format!("{a} . {p}")).collect();
        s.sort();
        s
    };
    let mut drift = Vec::new();
    for (key, lb) in services {
        let (chain, map) = (chain_name(key), map_name(key));
        if !chains.contains(&chain) {
            drift.push(format!("service {chain}: chain is missing"));
        }
        let want = written(slot_backends(lb));
        if maps.contains(&map) {
            let have = written(
                set_elements(NFPROTO_IPV4, TABLE, &map)?
                    .iter()
                    .filter_map(|(_, data)| data.as_deref().and_then(backend_of))
                    .collect(),
            );
            if have != want {
                drift.push(format!(
                    "service {map}: backends are [{}], the model has [{}]",
                    have.join(", "),
                    want.join(", ")
                ));
            }
        } else {
            drift.push(format!("service {map}: backend map is missing"));
        }
        if !want.is_empty() && !dispatched.contains(&service_key(key, lb)) {
            drift.push(format!(
                "service {chain}: {} is not dispatched",
                service_element(key, lb)
            ));
        }
    }
    Ok(drift)
}
