//! The O-RAN CU example of `examples/oran-cu` (the README walk-through), through the Data API.

mod support;

use nephrite_krm::Package;
use nephrite_proto::nephrite::preparer::data::v1 as pb;
use support::*;

fn example(path: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/examples/oran-cu/{path}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .expect("example file")
}

#[tokio::test]
async fn oran_cu_walk_through() {
    let mut daemon = TestDaemon::sqlite().await;
    let mut client = daemon.client().await;
    register_template(
        &mut client,
        "oran/cu-cp:v1",
        &example("templates/cu-cp.yaml"),
    )
    .await;
    register_template(
        &mut client,
        "oran/cu-up:v1",
        &example("templates/cu-up.yaml"),
    )
    .await;
    register_template(
        &mut client,
        "oran/cu-topology:v1",
        &example("topologies/cu.yaml"),
    )
    .await;
    for (id, file, region) in [
        ("paris/edge-1", "sites/edge.yaml", "paris"),
        ("paris/edge-2", "sites/edge.yaml", "paris"),
        ("paris/regional-1", "sites/regional.yaml", "paris"),
        ("lyon/edge-1", "sites/edge.yaml", "lyon"),
    ] {
        client
            .register_site(pb::RegisterSiteRequest {
                id: id.into(),
                package_yaml: example(file),
                metadata: [("Site.region".to_owned(), region.to_owned())].into(),
                ..Default::default()
            })
            .await
            .unwrap();
    }
    let topology = client
        .create_deployment(pb::CreateDeploymentRequest {
            template_id: "oran/cu-topology:v1".into(),
            merge_package_yaml: example("inputs/tuning.yaml"),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .deployment_id;
    wait_prepared(&mut client, &topology).await;
    let kids = children(&mut client, &topology).await;
    let mut placed: Vec<_> = kids
        .iter()
        .map(|k| (k.template_id.as_str(), k.site_id.as_str()))
        .collect();
    placed.sort();
    assert_eq!(
        placed,
        [
            ("oran/cu-cp:v1", "paris/regional-1"),
            ("oran/cu-up:v1", "paris/edge-1"),
            ("oran/cu-up:v1", "paris/edge-2"),
        ]
    );
    for kid in kids.iter().filter(|k| k.template_id == "oran/cu-up:v1") {
        let deployment = wait_prepared(&mut client, &kid.deployment_id).await;
        assert_eq!(
            deployment.info.as_ref().unwrap().metadata["NetworkFunction.type"],
            "CU-UP"
        );
        let package = Package::from_yaml(&deployment.package_yaml).unwrap();
        let config = package
            .iter()
            .find(|o| o.name() == Some("cu-up-config"))
            .unwrap();
        assert_eq!(
            config.body["data"]["workers"], "16",
            "input → topology → child"
        );
        assert_eq!(
            config.body["data"]["hugepages"], "1Gi",
            "Override keeps the template's keys"
        );
        let site = package
            .iter()
            .find(|o| o.kind == "Site" && o.name() == Some("control-plane"))
            .unwrap();
        assert_eq!(
            site.annotation("nephio.org/prepare"),
            Some("Here"),
            "Postpone became Here"
        );
        assert_eq!(site.status().unwrap()["siteId"], "paris/regional-1");
    }
    daemon.stop().await;
}
