//! The world of the OpenStack driver tests: a project on the real Octavia and Neutron (a
//! service subnet, an external network, a router between them, as an operator's cloud has),
//! the in-memory Kubernetes API server, `kuryr.conf`, and the `kuryr-l7 controller` binary run
//! as an operator runs it; with what those tests check: object counts, the Node annotation,
//! the translation the controller must reach and the tree read back from Octavia.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use nephrite_kuryr_l7::kubernetes::watch::kinds;
use nephrite_kuryr_l7::openstack::neutron::Neutron;
use nephrite_kuryr_l7::openstack::observe::read_tree;
use nephrite_kuryr_l7::openstack::octavia::Octavia;
use nephrite_kuryr_l7::openstack::router_lb::{DEVICE_OWNER, ROUTER_NAME, device_id};
use nephrite_kuryr_l7::openstack::state::{ROUTER_STATE, RouterState};
use nephrite_l7::Translation;
use nephrite_l7::octavia::{Desired, Ownership, Tree, plan};
use nephrite_test_apiserver::TestApiServer;
use nephrite_test_services::OpenStack;
use serde_json::Value;

use super::cloud::project_clients;
use super::daemon::Daemon;

/// The `kuryr-l7` binary.
pub const BIN: &str = env!("CARGO_BIN_EXE_kuryr-l7");
/// The Route CRD the Kubernetes source watches.
pub const ROUTE_CRD: &str = include_str!("../../examples/kubernetes/route-crd.yaml");
/// The Node whose annotation holds the router state.
pub const NODE: &str = "node-1";
/// How long anything may take to happen under load.
pub const PATIENCE: Duration = Duration::from_secs(240);

/// A project in the cloud, an API server, and a `kuryr.conf` for both.
pub struct World {
    /// The project id.
    pub project: String,
    /// The controller's `--cluster-name`.
    pub cluster: String,
    /// The project's Octavia client.
    pub octavia: Octavia,
    /// The project's Neutron client.
    pub neutron: Neutron,
    /// The API server.
    pub server: TestApiServer,
    /// Its client.
    pub client: kube::Client,
    /// Logs, kubeconfig and `kuryr.conf`.
    pub dir: tempfile::TempDir,
    /// The kubeconfig file.
    pub kubeconfig: PathBuf,
    /// `kuryr.conf`.
    pub conf: PathBuf,
    neutron_url: String,
    service_subnet: String,
    external_subnet: String,
}

/// The API resource of `kind`.
pub fn resource_of(api_version: &str, kind: &str) -> ApiResource {
    match kind {
        "CustomResourceDefinition" => ApiResource {
            group: "apiextensions.k8s.io".into(),
            version: "v1".into(),
            api_version: api_version.into(),
            kind: kind.into(),
            plural: "customresourcedefinitions".into(),
        },
        "Node" => ApiResource {
            group: String::new(),
            version: "v1".into(),
            api_version: "v1".into(),
            kind: "Node".into(),
            plural: "nodes".into(),
        },
        "Lease" => ApiResource {
            group: "coordination.k8s.io".into(),
            version: "v1".into(),
            api_version: "coordination.k8s.io/v1".into(),
            kind: "Lease".into(),
            plural: "leases".into(),
        },
        _ => kinds()
            .into_iter()
            .map(|k| k.resource)
            .find(|r| r.api_version == api_version && r.kind == kind)
            .unwrap_or_else(|| panic!("no resource for {api_version} {kind}")),
    }
}

impl World {
    /// A new project (networks, subnets, a router to the external network), a new API server
    /// with the Route CRD and Node [`NODE`], and `kuryr.conf` naming both.
    pub async fn setup(cloud: &OpenStack) -> anyhow::Result<World> {
        let (project, octavia, neutron) = project_clients(cloud, Duration::from_millis(50))?;
        let cluster = format!("test-{}", &project[..8]);
        let network = neutron.create_network("services", None).await?;
        let subnet = neutron
            .create_subnet("services", &network.id, "10.0.0.0/24")
            .await?;
        let physnet = format!("ext-{}", &project[..12]);
        let external = neutron.create_network("public", Some(&physnet)).await?;
        let external_subnet = neutron
            .create_subnet("public", &external.id, "172.24.4.0/24")
            .await?;
        let router = neutron.create_router("edge", &external.id).await?;
        neutron.add_router_interface(&router.id, &subnet.id).await?;

        let server = TestApiServer::start().await?;
        let client = server.client()?;
        let dir = tempfile::tempdir()?;
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(&kubeconfig, server.kubeconfig())?;
        let world = World {
            project,
            cluster,
            octavia,
            neutron,
            server,
            client,
            kubeconfig,
            conf: dir.path().join("kuryr.conf"),
            dir,
            neutron_url: cloud.neutron_url(),
            service_subnet: subnet.id,
            external_subnet: external_subnet.id,
        };
        world.write_conf(&cloud.octavia_url())?;
        world.apply(ROUTE_CRD).await?;
        world
            .apply(&format!(
                "apiVersion: v1\nkind: Node\nmetadata: {{name: {NODE}}}\n"
            ))
            .await?;
        Ok(world)
    }

    /// (Re)writes `kuryr.conf` with Octavia at `octavia_url`.
    pub fn write_conf(&self, octavia_url: &str) -> anyhow::Result<()> {
        std::fs::write(
            &self.conf,
            format!(
                "[kubernetes]\nl7_router_driver = neutron_l7_policy\n\
                 [neutron]\nauth_type = noauth\nendpoint_override = {}\n\
                 [octavia]\nendpoint_override = {octavia_url}\n\
                 [neutron_defaults]\nproject = {}\nservice_subnet = {}\n\
                 external_svc_subnet = {}\n\
                 [ingress]\nl7_router_uuid =    # empty: create the Router LB\n",
                self.neutron_url, self.project, self.service_subnet, self.external_subnet,
            ),
        )?;
        Ok(())
    }

    /// Server-side applies every document of `yaml`.
    pub async fn apply(&self, yaml: &str) -> anyhow::Result<()> {
        for document in yaml.split("\n---\n") {
            let value: Value = serde_norway::from_str(document)?;
            let object: DynamicObject = serde_json::from_value(value.clone())?;
            let types = object.types.clone().context("apiVersion and kind")?;
            let resource = resource_of(&types.api_version, &types.kind);
            let name = object.metadata.name.clone().context("name")?;
            let api: Api<DynamicObject> = match &object.metadata.namespace {
                Some(ns) => Api::namespaced_with(self.client.clone(), ns, &resource),
                None => Api::all_with(self.client.clone(), &resource),
            };
            api.patch(
                &name,
                &PatchParams::apply("test").force(),
                &Patch::Apply(&value),
            )
            .await
            .with_context(|| format!("applying {name}"))?;
        }
        Ok(())
    }

    /// The API of `kind` (namespace `default` for namespaced kinds).
    pub fn api(&self, kind: &str) -> Api<DynamicObject> {
        let resource = match kind {
            "Ingress" => resource_of("networking.k8s.io/v1", kind),
            "Route" => resource_of("route.openshift.io/v1", kind),
            "Lease" => resource_of("coordination.k8s.io/v1", kind),
            _ => resource_of("v1", kind),
        };
        if kind == "Node" {
            Api::all_with(self.client.clone(), &resource)
        } else {
            Api::namespaced_with(self.client.clone(), "default", &resource)
        }
    }

    /// Object `name` of `kind`, as JSON.
    pub async fn get(&self, kind: &str, name: &str) -> anyhow::Result<Value> {
        Ok(serde_json::to_value(self.api(kind).get(name).await?)?)
    }

    /// The translation of what the API server holds (what the controller must reach).
    pub async fn translation(&self) -> anyhow::Result<Translation> {
        super::cluster::translation(&self.client).await
    }

    /// `kuryr-l7 controller --source kube` with `kuryr.conf`, as `identity` in the Lease,
    /// logging to `<identity>.log`.
    pub fn controller(&self, identity: &str) -> anyhow::Result<(Daemon, PathBuf)> {
        self.controller_logging(identity, identity)
    }

    /// [`World::controller`] logging to `<log>.log`.
    pub fn controller_logging(
        &self,
        identity: &str,
        log: &str,
    ) -> anyhow::Result<(Daemon, PathBuf)> {
        self.controller_with(identity, log, &[])
    }

    /// [`World::controller_logging`] with `extra` flags.
    pub fn controller_with(
        &self,
        identity: &str,
        log: &str,
        extra: &[&str],
    ) -> anyhow::Result<(Daemon, PathBuf)> {
        let log = self.dir.path().join(format!("{log}.log"));
        let daemon = Command::new(BIN)
            .args(["controller", "--source", "kube", "--listen", "127.0.0.1:0"])
            .arg("--config-file")
            .arg(&self.conf)
            .args(["--cluster-name", &self.cluster, "--identity", identity])
            .args(extra)
            .env("KURYR_NODE_NAME", NODE)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()?;
        Ok((Daemon(daemon), log))
    }

    /// (load balancers named as the router, VIP ports, floating IPs, listeners) in the project.
    pub async fn counts(&self) -> anyhow::Result<(usize, usize, usize, usize)> {
        let lbs = self
            .octavia
            .load_balancers(&[("name", ROUTER_NAME), ("project_id", &self.project)])
            .await?;
        let device = device_id(&self.cluster);
        let ports = self
            .neutron
            .ports(&[("device_id", &device), ("device_owner", DEVICE_OWNER)])
            .await?;
        let fips = self
            .neutron
            .floating_ips(&[("project_id", &self.project)])
            .await?;
        let mut listeners = 0;
        for lb in &lbs {
            listeners += self
                .octavia
                .listeners(&[("loadbalancer_id", &lb.id)])
                .await?
                .len();
        }
        Ok((lbs.len(), ports.len(), fips.len(), listeners))
    }

    /// The Node annotation's router state, if written.
    pub async fn router_state(&self) -> anyhow::Result<Option<RouterState>> {
        let node = self.get("Node", NODE).await?;
        match node["metadata"]["annotations"][ROUTER_STATE].as_str() {
            Some(text) => Ok(Some(RouterState::from_annotation(text)?)),
            None => Ok(None),
        }
    }

    /// Waits until Octavia's tree is the translation's: the plan from it is empty.
    pub async fn converged(&self, lb_id: &str, what: &str) -> anyhow::Result<(Tree, Translation)> {
        let owner = Ownership::new(self.cluster.clone());
        let began = Instant::now();
        loop {
            let translation = self.translation().await?;
            let tree = read_tree(&self.octavia, lb_id).await?;
            let calls = plan(&Desired::from_config(&translation.config), &tree, &owner)?;
            if calls.is_empty() {
                return Ok((tree, translation));
            }
            if began.elapsed() > PATIENCE {
                bail!("{what}: never converged; still to do: {calls:#?}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// Polls `check` until it gives a value (every 200 ms, for up to [`PATIENCE`]).
pub async fn eventually<T>(
    what: &str,
    mut check: impl AsyncFnMut() -> anyhow::Result<Option<T>>,
) -> anyhow::Result<T> {
    let began = Instant::now();
    loop {
        if let Some(value) = check().await? {
            return Ok(value);
        }
        if began.elapsed() > PATIENCE {
            bail!("never: {what}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The API server's Events.
pub async fn events(world: &World) -> anyhow::Result<Vec<Value>> {
    let resource = ApiResource {
        group: "events.k8s.io".into(),
        version: "v1".into(),
        api_version: "events.k8s.io/v1".into(),
        kind: "Event".into(),
        plural: "events".into(),
    };
    let api: Api<DynamicObject> = Api::all_with(world.client.clone(), &resource);
    Ok(api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .map(serde_json::to_value)
        .collect::<Result<_, _>>()?)
}

/// A log file's text so far.
pub fn log_text(log: &Path) -> String {
    std::fs::read_to_string(log).unwrap_or_default()
}
