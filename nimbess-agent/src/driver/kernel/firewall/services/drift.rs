//! The Services' table read back over netlink (chains, maps and their
//! elements dumped) and compared with the model: a missing chain or map, a
//! backend map whose slots differ, a Service port not dispatched.

use std::collections::BTreeMap;

use nephrite_pipeline::{LoadBalancer, LoadBalancerKey};

use super::super::netlink::{chain_names, set_elements, set_names};
use super::{
    NatFamily, SERVICES_MAP, TABLE, backends::backend_of, chain_name, map_name, service_element,
    service_key, slot_backends,
};
use crate::driver::DriverError;

/// Differences between `services` and the kernel's table, one line each
/// (a missing chain or map, a backend map whose elements differ, a Service
/// port with backends that is not dispatched).
pub fn verify<A: NatFamily>(services: &BTreeMap<LoadBalancerKey, LoadBalancer<A>>) -> Vec<String> {
    match drift(services) {
        Ok(drift) => drift,
        Err(e) => vec![format!(
            "services: table {} {TABLE} cannot be read: {e}",
            A::KEYWORD
        )],
    }
}

fn drift<A: NatFamily>(
    services: &BTreeMap<LoadBalancerKey, LoadBalancer<A>>,
) -> Result<Vec<String>, DriverError> {
    let chains = chain_names(A::NFPROTO, TABLE)?;
    if services.is_empty() {
        return Ok(match chains {
            Some(_) => vec![format!(
                "services: table {} {TABLE} exists with no Service",
                A::KEYWORD
            )],
            None => Vec::new(),
        });
    }
    let chains = chains.unwrap_or_default();
    let maps = set_names(A::NFPROTO, TABLE)?.unwrap_or_default();
    let dispatched: Vec<Vec<u8>> = set_elements(A::NFPROTO, TABLE, SERVICES_MAP)?
        .into_iter()
        .map(|(key, _)| key)
        .collect();
    let written = |slots: Vec<(A, u16)>| {
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
                set_elements(A::NFPROTO, TABLE, &map)?
                    .iter()
                    .filter_map(|(_, data)| data.as_deref().and_then(backend_of::<A>))
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
