//! The cost of the model's incremental derivation: N ports added and
//! rendered one after another on one network, then removed; prints the
//! time per change at the start and at the end (flat when each change
//! touches O(n), not the network's n² FIB entries).
//!
//! `cargo bench -p nephrite-pipeline --bench derive` (`NIMBESS_BENCH_PODS`, default 300).

use std::time::{Duration, Instant};

use nephrite_pipeline::{Ipam, Mac, Model, NetworkSpec, Owner, PortRequest, RenderFacts, port_id};

fn owner(k: usize) -> Owner {
    Owner {
        container_id: format!("{k:064x}"),
        ifname: "eth0".into(),
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let pods: usize = std::env::var("NIMBESS_BENCH_PODS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300)
        .max(40);
    let nets = [NetworkSpec::l2(
        "bench",
        "10.64.0.0/16".parse().expect("cidr"),
    )];
    let mut model = Model::new();
    model.apply_networks(&nets).expect("networks");
    let mut ipam = Ipam::new();
    ipam.sync_networks(&nets).expect("pools");
    let mut adds = Vec::with_capacity(pods);
    for k in 0..pods {
        let o = owner(k);
        let started = Instant::now();
        let address = ipam.allocate("bench", &o).expect("address");
        model
            .add_port(PortRequest {
                container_id: o.container_id.clone(),
                ifname: o.ifname.clone(),
                netns: format!("/run/netns/p{k}"),
                network: "bench".into(),
                address,
                address6: None,
                pod: None,
                mac: None,
            })
            .expect("add");
        let b = (k as u32).to_be_bytes();
        let facts = RenderFacts {
            mac: Mac([2, 0, b[0], b[1], b[2], b[3]]),
            ifindex: k as u32 + 100,
            modules: Default::default(),
        };
        model
            .record_facts(&port_id(&o.container_id, "eth0"), facts)
            .expect("facts");
        adds.push(started.elapsed());
    }
    let mut dels = Vec::with_capacity(pods);
    for k in (0..pods).rev() {
        let o = owner(k);
        let started = Instant::now();
        model
            .remove_port(&port_id(&o.container_id, "eth0"))
            .expect("remove");
        ipam.release("bench", &o);
        dels.push(started.elapsed());
    }
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let early = median(adds[10..20].to_vec());
    let late = median(adds[pods - 10..].to_vec());
    println!("model change cost over {pods} ports on one network:");
    println!(
        "  add+render: ports 11-20 median {:.1} us, last 10 median {:.1} us (ratio {:.2})",
        us(early),
        us(late),
        us(late) / us(early)
    );
    println!(
        "  remove: first 10 median {:.1} us, last 10 median {:.1} us",
        us(median(dels[..10].to_vec())),
        us(median(dels[pods - 10..].to_vec()))
    );
}
