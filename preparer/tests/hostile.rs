//! Hostile requests (issue 30) as regression tests: a flow mapping nested ~70,000 deep in a
//! `*_yaml` field is refused as INVALID_ARGUMENT naming the field and the limit, read off the
//! runtime's threads so that the daemon answers other calls meanwhile; 100,000 patterns in a
//! list request are refused by count before any is read.

mod support;

use nephrite_proto::daemon_v1::GetInfoRequest;
use nephrite_proto::daemon_v1::daemon_client::DaemonClient;
use nephrite_proto::nephrite::preparer::data::v1 as pb;
use support::TestDaemon;
use tonic::Code;

/// `{a: {a: … 1 … }}`, `depth` mappings deep: 5 bytes a level.
fn nested_flow_mapping(depth: usize) -> String {
    let mut yaml = String::with_capacity(depth * 5 + 1);
    for _ in 0..depth {
        yaml.push_str("{a: ");
    }
    yaml.push('1');
    for _ in 0..depth {
        yaml.push('}');
    }
    yaml
}

/// A hang detector, not a timing assertion: the daemon answers in well under a second when
/// it is not blocked (the issue saw it blocked for 26–130 s).
const ANSWERS_WITHIN: std::time::Duration = std::time::Duration::from_secs(30);

// One runtime thread, shared by the test and the daemon: a handler that parsed on it would
// hold up every other call until it finished.
#[tokio::test(flavor = "current_thread")]
async fn deeply_nested_yaml_is_refused_naming_the_field_and_the_limit_while_the_daemon_answers() {
    let mut daemon = TestDaemon::sqlite().await;
    let client = daemon.client().await;
    let yaml = nested_flow_mapping(70_000);
    assert!((240_000..=400_000).contains(&yaml.len()), "{}", yaml.len());

    let hostile: Vec<_> = (0..4)
        .map(|n| {
            let mut client = client.clone();
            let yaml = yaml.clone();
            tokio::spawn(async move {
                client
                    .register_template(pb::RegisterTemplateRequest {
                        id: format!("deep-{n}"),
                        metadata: Default::default(),
                        package_yaml: yaml,
                    })
                    .await
            })
        })
        .collect();
    let endpoint = daemon.daemon.as_ref().expect("running").endpoint.clone();
    let mut info = DaemonClient::new(nephrite_runtime::dial(&endpoint).await.expect("dial"));
    let answered = tokio::time::timeout(ANSWERS_WITHIN, info.get_info(GetInfoRequest {})).await;
    assert!(
        matches!(answered, Ok(Ok(_))),
        "the daemon did not answer: {answered:?}"
    );
    for call in hostile {
        let err = call.await.expect("join").expect_err("refused");
        assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
        assert!(
            err.message().starts_with("template deep-")
                && err.message().contains("(package_yaml)")
                && err
                    .message()
                    .contains("deeper than the limit of 100 levels"),
            "{}",
            err.message()
        );
        assert!(err.message().len() < 2048, "{}", err.message().len());
    }

    let mut client = client.clone();
    let err = client
        .create_deployment(pb::CreateDeploymentRequest {
            merge_package_yaml: yaml,
            ..Default::default()
        })
        .await
        .expect_err("refused");
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert!(
        err.message().contains("(merge_package_yaml)")
            && err.message().contains("limit of 100 levels"),
        "{}",
        err.message()
    );
    // Nothing was stored.
    let err = client
        .get_template(pb::GetRequest {
            id: "deep-0".into(),
        })
        .await
        .expect_err("not stored");
    assert_eq!(err.code(), Code::NotFound, "{err:?}");
    daemon.stop().await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_hundred_thousand_patterns_are_refused_by_count() {
    let mut daemon = TestDaemon::sqlite().await;
    let mut client = daemon.client().await;
    let patterns: Vec<String> = (0..100_000).map(|n| format!("t{n}/**")).collect();
    let err = client
        .list_templates(pb::ListTemplatesRequest {
            id_patterns: patterns.clone(),
            ..Default::default()
        })
        .await
        .expect_err("refused");
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert_eq!(
        err.message(),
        "id patterns: 100000 patterns, more than the limit of 100 per request"
    );
    let err = client
        .list_sites(pb::ListSitesRequest {
            metadata_patterns: patterns
                .iter()
                .map(|p| (p.clone(), "*".to_owned()))
                .collect(),
            ..Default::default()
        })
        .await
        .expect_err("refused");
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert!(
        err.message()
            .contains("100000 patterns, more than the limit of 100 per request"),
        "{}",
        err.message()
    );
    // The daemon is still there.
    client
        .list_templates(pb::ListTemplatesRequest::default())
        .await
        .expect("list");
    daemon.stop().await;
}
