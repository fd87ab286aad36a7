//! bmm-sim's tenancy, as the platform's: every by-id operation refuses an object of another
//! org (403, never a 404 that a caller could take for "gone"), the org is compared after
//! percent-decoding, unserved operations are authorised before they are routed, and there is
//! no well-known signing secret.

mod support;

use std::time::Duration;

use nephrite_bmm_sim::{SimConfig, auth};
use reqwest::Method;
use serde_json::{Value, json};
use support::{Harness, ORG, fast_config, token_for};

async fn call(
    h: &Harness,
    method: Method,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> u16 {
    h.call(method, path, token, body).await.0
}

/// The id at `field` of an object, as a string.
fn id(object: &Value, field: &str) -> String {
    object[field].as_str().expect(field).to_string()
}

#[tokio::test]
async fn another_org_can_neither_read_change_nor_delete_any_object_by_id() {
    let h = Harness::start(fast_config()).await;
    let instance = h.ready_instance("acme-0", "10.60.0.0").await;
    let instance_id = id(&instance, "id");
    let vpc = id(&instance, "vpcId");
    let subnet = id(&instance["interfaces"][0], "subnetId");
    let site = id(&instance, "siteId");
    let blocks = h
        .acme(Method::GET, &format!("ipblock?siteId={site}"), None, 200)
        .await;
    let block = blocks
        .as_array()
        .and_then(|all| all.iter().find(|b| b["name"] == "acme-0-block"))
        .map(|b| id(b, "id"))
        .expect("the IP block is listed");
    let acme = token_for(ORG);
    let nsg = h
        .acme(
            Method::POST,
            "network-security-group",
            Some(json!({"name": "acme-nsg", "siteId": site, "rules": []})),
            201,
        )
        .await;
    let nsg = id(&nsg, "id");

    let evil = token_for("evil");
    let objects = [
        ("ipblock", block.as_str()),
        ("vpc", vpc.as_str()),
        ("subnet", subnet.as_str()),
        ("network-security-group", nsg.as_str()),
        ("instance", instance_id.as_str()),
    ];
    for (path, id) in objects {
        let at = format!("/v2/org/evil/carbide/{path}/{id}");
        assert_eq!(
            call(&h, Method::GET, &at, Some(&evil), None).await,
            403,
            "GET {path}"
        );
        assert_eq!(
            call(&h, Method::DELETE, &at, Some(&evil), None).await,
            403,
            "DELETE {path}"
        );
    }
    let at = format!("/v2/org/evil/carbide/vpc/{vpc}");
    assert_eq!(
        call(
            &h,
            Method::PATCH,
            &at,
            Some(&evil),
            Some(json!({"name": "stolen"}))
        )
        .await,
        403
    );
    let at = format!("/v2/org/evil/carbide/instance/{instance_id}");
    assert_eq!(
        call(
            &h,
            Method::PATCH,
            &at,
            Some(&evil),
            Some(json!({"triggerReboot": true}))
        )
        .await,
        403
    );
    for sub in ["status-history", "interface"] {
        let at = format!("/v2/org/evil/carbide/instance/{instance_id}/{sub}");
        assert_eq!(
            call(&h, Method::GET, &at, Some(&evil), None).await,
            403,
            "{sub}"
        );
    }
    // The owner still has everything, unchanged.
    for (path, id) in objects {
        let at = format!("/v2/org/{ORG}/carbide/{path}/{id}");
        assert_eq!(
            call(&h, Method::GET, &at, Some(&acme), None).await,
            200,
            "{path}"
        );
    }
    let unchanged = h.acme(Method::GET, &format!("vpc/{vpc}"), None, 200).await;
    assert_eq!(unchanged["name"], "acme-0-vpc");
    assert_eq!(
        h.sim.instance_status(&instance_id).as_deref(),
        Some("Ready")
    );
    h.assert_contract_held();
}

#[tokio::test]
async fn the_org_is_compared_after_percent_decoding() {
    let h = Harness::start(fast_config()).await;
    let instance = h.ready_instance("acme-1", "10.61.0.0").await;
    let instance_id = id(&instance, "id");
    let at = format!("/v2/org/acm%65/carbide/instance/{instance_id}");
    // `acm%65` is `acme`: another org's token is refused, acme's own is served.
    assert_eq!(
        call(&h, Method::GET, &at, Some(&token_for("evil")), None).await,
        403
    );
    assert_eq!(
        call(&h, Method::GET, &at, Some(&token_for("acm%65")), None).await,
        403
    );
    assert_eq!(
        call(&h, Method::GET, &at, Some(&token_for(ORG)), None).await,
        200
    );
    let bad = format!("/v2/org/acm%6/carbide/instance/{instance_id}");
    assert_eq!(
        call(&h, Method::GET, &bad, Some(&token_for(ORG)), None).await,
        400
    );
}

#[tokio::test]
async fn unserved_operations_are_authorised_before_they_are_routed() {
    let h = Harness::start(fast_config()).await;
    let unserved = format!("/v2/org/{ORG}/carbide/allocation");
    assert_eq!(call(&h, Method::GET, &unserved, None, None).await, 401);
    assert_eq!(
        call(&h, Method::GET, &unserved, Some(&token_for("evil")), None).await,
        403
    );
    assert_eq!(
        call(&h, Method::GET, &unserved, Some(&token_for(ORG)), None).await,
        404
    );
    assert_eq!(call(&h, Method::GET, "/somewhere", None, None).await, 401);
    // Metrics stay open to scrapers.
    assert_eq!(call(&h, Method::GET, "/metrics", None, None).await, 200);
}

#[test]
fn there_is_no_well_known_secret() {
    let (a, b) = (SimConfig::default(), SimConfig::default());
    assert_ne!(a.jwt_secret, b.jwt_secret);
    assert!(a.jwt_secret.len() >= 32);
    // A token signed with the old well-known secret is refused.
    let now = jiff::Timestamp::now().as_second() as u64;
    let forged = auth::issue("bmm-sim-secret", ORG, now, Duration::from_secs(60)).expect("token");
    let header = format!("Bearer {forged}");
    assert!(auth::check(&a.jwt_secret, Some(&header), ORG).is_err());
}
