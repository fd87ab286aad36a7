use super::nft::{AddressField, RuleVerdict, parse_table};
use super::parse_port;
use nephrite_pipeline::{Ipv4Cidr, Protocol};

#[test]
fn a_port_takes_an_optional_protocol_and_bad_ones_are_named() {
    assert_eq!(parse_port("8080").unwrap(), (8080, None));
    assert_eq!(parse_port("53/UDP").unwrap(), (53, Some(Protocol::Udp)));
    let e = parse_port("53/icmp").unwrap_err().to_string();
    assert!(e.contains("\"icmp\""), "{e}");
    let e = parse_port("0").unwrap_err().to_string();
    assert!(e.contains("PORT \"0\""), "{e}");
}

/// What `nft -j list table` prints for a pod's chain (nft 1.0.6).
const TABLE: &str = r#"{"nftables": [{"metainfo": {"version": "1.0.6"}},
 {"table": {"family": "ip", "name": "t", "handle": 1}},
 {"chain": {"family": "ip", "table": "t", "name": "in.10.0.0.2", "handle": 2}},
 {"rule": {"family": "ip", "table": "t", "chain": "forward", "handle": 4, "expr": [
   {"match": {"op": "==", "left": {"payload": {"protocol": "ip", "field": "daddr"}}, "right": "10.0.0.2"}},
   {"jump": {"target": "in.10.0.0.2"}}]}},
 {"rule": {"family": "ip", "table": "t", "chain": "in.10.0.0.2", "handle": 5, "expr": [
   {"match": {"op": "==", "left": {"payload": {"protocol": "ip", "field": "saddr"}}, "right": "10.0.0.3"}},
   {"match": {"op": "==", "left": {"payload": {"protocol": "tcp", "field": "dport"}}, "right": 80}},
   {"counter": {"packets": 7, "bytes": 420}}, {"drop": null}]}},
 {"rule": {"family": "ip", "table": "t", "chain": "in.10.0.0.2.pass", "handle": 7, "expr": [
   {"match": {"op": "==", "left": {"payload": {"protocol": "ip", "field": "saddr"}}, "right": {"prefix": {"addr": "10.0.0.0", "len": 24}}}},
   {"match": {"op": "!=", "left": {"payload": {"protocol": "ip", "field": "saddr"}}, "right": "10.0.0.9"}},
   {"match": {"op": "==", "left": {"meta": {"key": "l4proto"}}, "right": "udp"}},
   {"match": {"op": "==", "left": {"payload": {"protocol": "th", "field": "dport"}}, "right": {"range": [80, 90]}}},
   {"return": null}]}}]}"#;

#[test]
fn every_spelling_of_a_rule_lands_in_the_same_fields() {
    let t = parse_table(TABLE).expect("parses");
    assert_eq!(t.chains, ["in.10.0.0.2"]);
    let jump = &t.rules[0];
    assert_eq!(
        jump.peer,
        Some((AddressField::Destination, "10.0.0.2/32".parse().unwrap()))
    );
    assert_eq!(jump.verdict, Some(RuleVerdict::Jump("in.10.0.0.2".into())));
    let drop = &t.rules[1];
    assert_eq!((drop.handle, drop.packets), (5, Some(7)));
    assert_eq!(drop.protocol, Some(Protocol::Tcp));
    assert_eq!(drop.ports, Some((80, 80)));
    assert_eq!(drop.verdict, Some(RuleVerdict::Drop));
    let allow = &t.rules[2];
    let net: Ipv4Cidr = "10.0.0.0/24".parse().unwrap();
    assert_eq!(allow.peer, Some((AddressField::Source, net)));
    assert_eq!(allow.except, ["10.0.0.9/32".parse::<Ipv4Cidr>().unwrap()]);
    assert_eq!(
        (allow.protocol, allow.ports),
        (Some(Protocol::Udp), Some((80, 90)))
    );
    assert_eq!(allow.verdict, Some(RuleVerdict::Return));
}

#[test]
fn output_that_is_not_nftables_json_is_refused() {
    assert!(parse_table("{}").unwrap_err().contains("nftables"));
    assert!(parse_table("table ip t {").is_err());
}

mod judged {
    use std::net::{Ipv4Addr, SocketAddrV4};

    use nephrite_pipeline::{NetworkSpec, PodName, Verdict};

    use crate::explain::cluster::{AgentCluster, Cluster, PortAt};
    use crate::explain::live::{self, Tables};
    use crate::explain::nft::{KernelRule, KernelTable};
    use crate::explain::probe::{ProbeOutcome, judge};
    use crate::explain::query;
    use crate::northbound::{Objects, resources::parse_into};

    use super::{AddressField, RuleVerdict};

    const OBJECTS: &str = "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop, labels: {tier: shop}}\n---\n\
apiVersion: v1\nkind: Namespace\nmetadata: {name: other, labels: {tier: other}}\n---\n\
apiVersion: v1\nkind: Pod\nmetadata: {name: server, namespace: shop, labels: {app: server}}\nspec: {containers: [{name: c, image: x}]}\n---\n\
apiVersion: v1\nkind: Pod\nmetadata: {name: outsider, namespace: other, labels: {app: client}}\nspec: {containers: [{name: c, image: x}]}\n---\n\
apiVersion: policy.networking.k8s.io/v1alpha1\nkind: AdminNetworkPolicy\nmetadata: {name: guard}\nspec:\n  priority: 10\n  subject: {namespaces: {matchLabels: {tier: shop}}}\n  ingress:\n  - name: no-other\n    action: Deny\n    from: [{namespaces: {matchLabels: {tier: other}}}]\n";

    const SERVER: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 2);
    const OUTSIDER: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 3);

    fn agent(tiers: bool) -> (AgentCluster, Objects) {
        let mut objects = Objects::default();
        let mut warnings = Vec::new();
        parse_into(OBJECTS, "test", &mut objects, &mut warnings);
        assert!(warnings.is_empty(), "{warnings:?}");
        let port = |ns: &str, name: &str, address| PortAt {
            pod: Some(PodName {
                namespace: ns.into(),
                name: name.into(),
            }),
            address,
            network: "blue".into(),
            netns: None,
        };
        let mut agent = AgentCluster {
            networks: vec![
                serde_json::from_value::<NetworkSpec>(
                    serde_json::json!({"name": "blue", "subnet": "10.1.0.0/24"}),
                )
                .expect("a network"),
            ],
            ports: vec![
                port("shop", "server", SERVER),
                port("other", "outsider", OUTSIDER),
            ],
            ..AgentCluster::default()
        };
        if tiers {
            // what the agent renders for these objects
            let c = Cluster::assemble(agent.clone(), &objects, "10.96.0.0/12".parse().unwrap())
                .expect("assembles");
            agent.tiers = nephrite_pipeline::translate_tiers(&c.policies, &c.pods, &c.namespaces);
        }
        (agent, objects)
    }

    fn rule(
        chain: &str,
        peer: Option<(super::AddressField, Ipv4Addr)>,
        verdict: RuleVerdict,
    ) -> KernelRule {
        KernelRule {
            chain: chain.into(),
            handle: 1,
            peer: peer.map(|(f, a)| {
                (
                    f,
                    nephrite_pipeline::Ipv4Cidr {
                        addr: a,
                        prefix: 32,
                    },
                )
            }),
            verdict: Some(verdict),
            ..KernelRule::default()
        }
    }

    #[test]
    fn tiers_the_agent_has_not_rendered_are_named_out_of_sync() {
        let (agent, objects) = agent(false);
        let c = Cluster::assemble(agent, &objects, "10.96.0.0/12".parse().unwrap()).unwrap();
        assert_eq!(c.out_of_sync, [SERVER]);
        let (agent, objects) = agent_rendered();
        let c = Cluster::assemble(agent, &objects, "10.96.0.0/12".parse().unwrap()).unwrap();
        assert!(c.out_of_sync.is_empty());
    }

    fn agent_rendered() -> (AgentCluster, Objects) {
        agent(true)
    }

    #[test]
    fn live_finds_the_deciding_drop_and_names_it_missing_when_gone() {
        let (agent, objects) = agent_rendered();
        let networks = agent.networks.clone();
        let c = Cluster::assemble(agent, &objects, "10.96.0.0/12".parse().unwrap()).unwrap();
        let q = query(&c, "other/outsider", "shop/server", Some("8080")).expect("a query");
        let e = nephrite_pipeline::explain(&c.view(), &q).expect("explained");
        assert_eq!(e.verdict(), Verdict::Denied);
        let (expected, disagreements) = live::expected_rules(&e, &c.tiers, &networks);
        assert!(disagreements.is_empty(), "{disagreements:?}");
        let chain = format!("in.{SERVER}");
        let jump = rule(
            "forward",
            Some((AddressField::Destination, SERVER)),
            RuleVerdict::Jump(chain.clone()),
        );
        let mut drop = rule(
            &chain,
            Some((AddressField::Source, OUTSIDER)),
            RuleVerdict::Drop,
        );
        drop.packets = Some(0);
        let tables = |rules: Vec<KernelRule>| -> Tables {
            let mut t = Tables::new();
            t.insert(
                "nimbess-policy".into(),
                Some(KernelTable {
                    rules,
                    ..KernelTable::default()
                }),
            );
            t
        };
        let report = live::check(
            &e,
            expected.clone(),
            Vec::new(),
            &tables(vec![jump.clone(), drop.clone()]),
        );
        assert!(report.agrees, "{report}");
        let gone = live::check(&e, expected.clone(), Vec::new(), &tables(vec![jump]));
        assert!(!gone.agrees);
        assert_eq!(
            gone.disagreements,
            [format!(
                "model and kernel disagree: ip nimbess-policy {chain}: ip saddr {OUTSIDER} drop missing"
            )]
        );

        // the probe: dropped and counted agrees; dropped elsewhere or let through does not
        let to = SocketAddrV4::new(SERVER, 8080);
        let mut counted = report.clone();
        for c in &mut counted.checks {
            if let Some(f) = &mut c.found
                && f.packets.is_some()
            {
                f.packets = Some(2);
            }
        }
        assert!(
            judge(
                &e,
                to,
                ProbeOutcome::TimedOut,
                &report.checks,
                &counted.checks
            )
            .agrees
        );
        let elsewhere = judge(
            &e,
            to,
            ProbeOutcome::TimedOut,
            &report.checks,
            &report.checks,
        );
        assert!(!elsewhere.agrees);
        assert!(elsewhere.disagreements[0].contains("not by the rule the model names"));
        let through = judge(
            &e,
            to,
            ProbeOutcome::Connected,
            &report.checks,
            &report.checks,
        );
        assert_eq!(
            through.disagreements,
            ["model and kernel disagree: the model says denied, the probe met connected"]
        );
    }

    #[test]
    fn a_destination_is_a_pod_an_address_or_a_service_and_else_named() {
        let (agent, objects) = agent_rendered();
        let c = Cluster::assemble(agent, &objects, "10.96.0.0/12".parse().unwrap()).unwrap();
        let q = query(&c, "other/outsider", "10.1.0.2:80", None).unwrap();
        assert_eq!(q.port, 80);
        let e = query(&c, "other/outsider", "shop/none", Some("80")).unwrap_err();
        assert!(
            format!("{e:#}").contains("no pod and no Service shop/none"),
            "{e:#}"
        );
        let e = query(&c, "other/outsider", "shop/server", None).unwrap_err();
        assert!(format!("{e:#}").contains("give PORT[/PROTO]"), "{e:#}");
    }
}
