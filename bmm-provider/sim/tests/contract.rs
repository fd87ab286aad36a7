//! The contract proxy is a judge that can say no: a request the document refuses, a path it
//! does not have and a crash after an operation are all seen; a good exchange is not flagged.

mod support;

use reqwest::Method;
use serde_json::json;
use support::{Harness, ORG, fast_config, token_for};

#[tokio::test]
async fn a_request_the_document_refuses_and_an_unknown_path_are_recorded() {
    let h = Harness::start(fast_config()).await;
    let token = token_for(ORG);
    let http = reqwest::Client::new();
    let base = format!("{}/v2/org/{ORG}/carbide", h.proxy.url());
    let bad = http
        .post(format!("{base}/vpc"))
        .bearer_auth(&token)
        .json(&json!({"siteId": "not-a-uuid"}))
        .send()
        .await
        .expect("send");
    assert_eq!(bad.status().as_u16(), 400, "answered as the simulator did");
    http.get(format!("{base}/no-such-thing"))
        .bearer_auth(&token)
        .send()
        .await
        .expect("send");
    let violations = h.proxy.violations();
    assert!(
        violations
            .iter()
            .any(|v| v.starts_with("request POST vpc:")),
        "{violations:?}"
    );
    assert!(
        violations
            .iter()
            .any(|v| v.contains("/no-such-thing: not an operation of openapi.yaml")),
        "{violations:?}"
    );
    assert_eq!(h.proxy.operations_seen(), ["POST vpc"]);
}

#[tokio::test]
async fn good_exchanges_pass_and_a_crash_holds_the_answer_back() {
    let h = Harness::start(fast_config()).await;
    h.acme(Method::GET, "tenant/current", None, 200).await;
    let crashed = h.proxy.crash_after("POST vpc");
    let site = h.sim.site_id();
    let proxy = h.proxy.url().to_string();
    let call = tokio::spawn(async move {
        reqwest::Client::new()
            .post(format!("{proxy}/v2/org/{ORG}/carbide/vpc"))
            .bearer_auth(token_for(ORG))
            .json(&json!({"name": "held", "siteId": site}))
            .send()
            .await
    });
    crashed.await.expect("the crash signal fires");
    assert!(!call.is_finished(), "the answer is held back");
    assert_eq!(
        h.sim.created(nephrite_bmm_sim::Kind::Vpc),
        1,
        "the simulator acted"
    );
    call.abort();
    h.assert_contract_held();
}
