//! The annotations read from fixture files: the seed's own Node annotation, Kuryr's route state
//! (version 1.0) and ours (1.1); an unknown version refused by name.

use super::*;

const SEED_ROUTER: &str = include_str!("fixtures/router-state-seed.json");
const ROUTE_1_0: &str = include_str!("fixtures/route-state-1.0.json");
const INGRESS_1_1: &str = include_str!("fixtures/ingress-state-1.1.json");
const INGRESS_2_0: &str = include_str!("fixtures/ingress-state-2.0.json");

#[test]
fn the_seeds_router_state_reads_and_writes_back_the_same_json() {
    let state = RouterState::from_annotation(SEED_ROUTER).unwrap();
    assert_eq!(state.fip, "172.24.4.14");
    assert_eq!(state.router_lb.id, "90732f0a-651a-4b17-a14e-9b0e01fbe774");
    assert_eq!(state.router_lb.ip, "10.0.0.154");
    assert_eq!(state.router_lb.name, "kuryr-l7-router");
    assert_eq!(
        state.router_lb.port_id,
        "5c71a29a-0dc1-461e-81ee-2258a7e3842d"
    );
    let written: Value = serde_json::from_str(&state.to_annotation()).unwrap();
    let seed: Value = serde_json::from_str(SEED_ROUTER).unwrap();
    assert_eq!(written, seed, "the seed's shape, field for field");
}

#[test]
fn version_1_1_round_trips() {
    let state = ObjectState::from_annotation("Ingress", INGRESS_1_1).unwrap();
    assert_eq!(state.l7_policies[0].rules, ["r1", "r2"]);
    assert_eq!(state.pools[0].name, "default/web:80");
    let again = ObjectState::from_annotation("Ingress", &state.to_annotation("Ingress")).unwrap();
    assert_eq!(again, state);
    let written: Value = serde_json::from_str(&state.to_annotation("Ingress")).unwrap();
    assert_eq!(written["versioned_object.version"], OBJECT_STATE_VERSION);
    assert_eq!(written["versioned_object.name"], "IngressState");
}

#[test]
fn a_reader_of_1_1_accepts_kuryrs_1_0_route_state() {
    let state = ObjectState::from_annotation("Route", ROUTE_1_0).unwrap();
    assert_eq!(
        state,
        ObjectState {
            load_balancer: "90732f0a-651a-4b17-a14e-9b0e01fbe774".to_owned(),
            l7_policies: vec![PolicyState {
                id: "7e1d9c52-1111-4c2a-8f00-0123456789ab".to_owned(),
                name: "default_cart".to_owned(),
                rules: vec!["5b0f0c2e-2222-4c2a-8f00-0123456789ab".to_owned()],
            }],
            pools: vec![Named {
                id: "0a5c3f8e-3a4b-4d52-9d7e-6a1b2c3d4e5f".to_owned(),
                name: "90732f0a-651a-4b17-a14e-9b0e01fbe774/default/web".to_owned(),
            }],
        }
    );
}

#[test]
fn an_unknown_version_or_a_wrong_object_is_refused_by_name() {
    let error = ObjectState::from_annotation("Ingress", INGRESS_2_0).unwrap_err();
    assert_eq!(
        error.to_string(),
        "openstack.org/kuryr-ingress-state: IngressState version 2.0 is not readable \
         (expected IngressState 1.1 or 1.0)"
    );
    let error = ObjectState::from_annotation("Ingress", SEED_ROUTER).unwrap_err();
    assert!(error.to_string().contains("L7RouterState"), "{error}");
    let error = RouterState::from_annotation("{not json").unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("openstack.org/kuryr-l7-router-state: "),
        "{error}"
    );
}
