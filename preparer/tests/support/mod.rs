//! Shared test support: an in-process daemon on loopback, a client, fixtures, and a bounded
//! wait for the loop's asynchronous work.
#![allow(dead_code)]

use std::future::Future;
use std::time::Duration;

use clap::Parser;
use nephrite_preparer::daemon::{RunningDaemon, ServeCommand, start};
use nephrite_proto::nephrite::preparer::data::v1 as pb;
use nephrite_proto::nephrite::preparer::data::v1::data_client::DataClient;
use nephrite_runtime::ServeArgs;
use tonic::transport::Channel;

pub mod binary;
pub mod plugin_process;
pub mod terminal_svg;
pub mod webdriver;

pub type Client = DataClient<Channel>;

pub struct TestDaemon {
    pub daemon: Option<RunningDaemon>,
    pub dir: tempfile::TempDir,
    pub store: String,
}

pub fn serve_command(store: &str) -> ServeCommand {
    ServeCommand {
        serve: ServeArgs::try_parse_from(["serve", "--listen", "127.0.0.1:0"]).expect("serve args"),
        store: store.to_owned(),
        auto_approve: true,
        interval: Duration::from_millis(200),
        plugin_timeout: Duration::from_secs(2),
        lease: Duration::from_secs(3),
        retry_backoff: Duration::from_millis(100),
        max_backoff: Duration::from_millis(500),
        concurrency: 4,
        revisions_kept: nephrite_preparer::store::DEFAULT_REVISIONS_KEPT,
        web: None,
        plugin_credentials: Default::default(),
    }
}

impl TestDaemon {
    pub async fn sqlite() -> TestDaemon {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = format!("sqlite:{}", dir.path().join("preparer.db").display());
        TestDaemon::with_store(dir, store).await
    }

    pub async fn with_store(dir: tempfile::TempDir, store: String) -> TestDaemon {
        let daemon = start(&serve_command(&store), false)
            .await
            .expect("daemon starts");
        TestDaemon {
            daemon: Some(daemon),
            dir,
            store,
        }
    }

    pub fn endpoint(&self) -> String {
        self.daemon.as_ref().expect("running").endpoint.to_string()
    }

    pub async fn client(&self) -> Client {
        let endpoint = self.daemon.as_ref().expect("running").endpoint.clone();
        DataClient::new(nephrite_runtime::dial(&endpoint).await.expect("dial"))
    }

    pub async fn stop(&mut self) {
        if let Some(daemon) = self.daemon.take() {
            daemon.stop().await.expect("clean stop");
        }
    }
}

/// Polls `check` until it returns Some (bounded: a hang fails the test, it never passes it).
pub async fn wait_for<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    for _ in 0..600 {
        if let Some(value) = check().await {
            return value;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}");
}

pub async fn register_template(client: &mut Client, id: &str, yaml: &str) {
    client
        .register_template(pb::RegisterTemplateRequest {
            id: id.into(),
            package_yaml: yaml.into(),
            ..Default::default()
        })
        .await
        .expect("register template");
}

pub async fn register_site(client: &mut Client, id: &str, region: &str) {
    client
        .register_site(pb::RegisterSiteRequest {
            id: id.into(),
            package_yaml: format!(
                "apiVersion: metadata.nephio.org/v1alpha1\nkind: Site\nmetadata: {{name: site}}\nspec: {{region: {region}}}\n"
            ),
            ..Default::default()
        })
        .await
        .expect("register site");
}

pub async fn create(client: &mut Client, template: &str, merge: &str) -> String {
    client
        .create_deployment(pb::CreateDeploymentRequest {
            template_id: template.into(),
            merge_package_yaml: merge.into(),
            ..Default::default()
        })
        .await
        .expect("create deployment")
        .into_inner()
        .deployment_id
}

pub async fn list(
    client: &mut Client,
    request: pb::ListDeploymentsRequest,
) -> Vec<pb::DeploymentInfo> {
    let mut out = Vec::new();
    let mut request = request;
    loop {
        let page = client
            .list_deployments(request.clone())
            .await
            .expect("list")
            .into_inner();
        out.extend(page.deployments);
        if page.next_after_id.is_empty() {
            return out;
        }
        request.window = Some(pb::Window {
            after_id: page.next_after_id,
            max_count: request.window.as_ref().map_or(0, |w| w.max_count),
            offset: 0,
        });
    }
}

pub async fn children(client: &mut Client, parent: &str) -> Vec<pb::DeploymentInfo> {
    list(
        client,
        pb::ListDeploymentsRequest {
            parent_deployment_id: parent.into(),
            ..Default::default()
        },
    )
    .await
}

pub async fn get(client: &mut Client, id: &str) -> pb::Deployment {
    client
        .get_deployment(pb::GetRequest { id: id.into() })
        .await
        .expect("get")
        .into_inner()
}

pub async fn wait_prepared(client: &mut Client, id: &str) -> pb::Deployment {
    let client = client.clone();
    let id = id.to_owned();
    wait_for(&format!("deployment {id} prepared"), || {
        let mut client = client.clone();
        let id = id.clone();
        async move {
            let d = get(&mut client, &id).await;
            d.info.as_ref().is_some_and(|i| i.prepared).then_some(d)
        }
    })
    .await
}

/// A plain network-function template: nothing preparable.
pub const GATEWAY: &str = "apiVersion: v1
kind: ConfigMap
metadata: {name: gateway}
data: {mode: fast, workers: '2'}
---
apiVersion: metadata.nephio.org/v1alpha1
kind: NetworkFunction
metadata: {name: nf}
spec: {type: gateway}
";

/// A topology template: one Placement of `template` on every site of `region`.
pub fn topology(template: &str, region: &str) -> String {
    format!(
        "apiVersion: topology.nephio.org/v1alpha1
kind: Placement
metadata: {{name: place}}
spec:
  templates:
  - template: nf
    sites: [region]
    merge:
    - {{apiVersion: v1, kind: ConfigMap, name: tuning}}
---
apiVersion: topology.nephio.org/v1alpha1
kind: Template
metadata: {{name: nf}}
spec: {{templateId: '{template}'}}
---
apiVersion: topology.nephio.org/v1alpha1
kind: Sites
metadata: {{name: region}}
spec: {{select: {{metadata: {{Site.region: {region}}}}}}}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: tuning
  annotations: {{nephio.org/rename: gateway, nephio.org/merge: Override}}
data: {{workers: '8'}}
"
    )
}

/// The sites of the placement (`PREPARER_DASHBOARD_SITES`, default 10,000).
pub fn dashboard_sites() -> usize {
    std::env::var("PREPARER_DASHBOARD_SITES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(10_000)
}

/// The sites go straight into the store: 10,000 registrations over gRPC would test only the
/// API's per-call cost.
pub async fn store_sites(store: &str, count: usize) {
    use nephrite_preparer::store::{self, SiteRecord};
    let sites = store::open(store).await.expect("store opens");
    for n in 0..count {
        sites
            .put_site(SiteRecord {
                id: format!("dc/{n:05}"),
                metadata: [("Site.region".to_owned(), "metro".to_owned())].into(),
                ..SiteRecord::default()
            })
            .await
            .expect("site");
    }
}
