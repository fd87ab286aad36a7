//! The management cluster as the real-server scenarios need it: the shared kube-apiserver with
//! ntc's CRDs (from `deploy/crds.yaml`, as an operator applies them) and Porch's and Nephio's
//! (the test fixtures), a namespace per scenario holding the free5GC example, and the test
//! acting as Porch on PackageRevisions. Everything here runs as the admin; only ntc runs with
//! its own token (see `ntc.rs`).

use std::future::Future;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, ObjectMeta, Patch, PatchParams, PostParams};
use nephrite_krm::{Object, Package};
use nephrite_ntc::porch::resources;
use nephrite_test_services::KubeApiServer;
use serde_json::{Value, json};

/// The field manager of the test's own applies.
const MANAGER: &str = "ntc-real-apiserver-test";

/// How long any one expected change may take to show (a loaded machine shares two cores).
const PATIENCE: Duration = Duration::from_secs(90);

/// The shared server, or `None` after saying loudly why the test is skipped.
pub fn server(test: &str) -> Option<&'static KubeApiServer> {
    match KubeApiServer::shared() {
        Ok(kube) => Some(kube),
        Err(e) => {
            e.skip(test);
            None
        }
    }
}

/// A file of the `topology/` crate.
pub fn crate_file(path: &str) -> anyhow::Result<String> {
    let full = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&full).with_context(|| format!("reading {}", full.display()))
}

/// Applies ntc's CRDs and the Porch/Nephio fixtures, and waits until each is Established.
pub async fn install_crds(admin: &kube::Client) -> anyhow::Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    let mut names = Vec::new();
    for file in ["deploy/crds.yaml", "tests/porch-crds.yaml"] {
        let yaml = crate_file(file)?;
        for object in Package::from_yaml(&yaml)
            .with_context(|| format!("parsing {file}"))?
            .into_objects()
        {
            let crd: CustomResourceDefinition = serde_json::from_value(object.to_json())
                .with_context(|| format!("a CRD of {file}"))?;
            let name = crd.metadata.name.clone().unwrap_or_default();
            crds.patch(
                &name,
                &PatchParams::apply(MANAGER).force(),
                &Patch::Apply(&crd),
            )
            .await
            .with_context(|| format!("applying CRD {name} from {file}"))?;
            names.push(name);
        }
    }
    for name in names {
        eventually(&format!("CRD {name} Established"), || async {
            let crd = crds.get(&name).await?;
            let established = crd
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True");
            Ok(established.then_some(()))
        })
        .await?;
    }
    Ok(())
}

/// Creates namespace `ns` with the example's WorkloadClusters in it, and the example's
/// (cluster-scoped) NFClasses.
pub async fn example_namespace(admin: &kube::Client, ns: &str) -> anyhow::Result<()> {
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(ns.to_owned()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    namespaces
        .patch(
            ns,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&namespace),
        )
        .await
        .with_context(|| format!("creating namespace {ns}"))?;
    for object in example_objects("classes.yaml", ns)? {
        apply(admin, &object).await?;
    }
    for object in example_objects("clusters.yaml", ns)? {
        apply(admin, &object).await?;
    }
    Ok(())
}

/// The objects of `examples/free5gc/<file>`, the namespaced ones moved into `ns`.
pub fn example_objects(file: &str, ns: &str) -> anyhow::Result<Vec<Object>> {
    let yaml = crate_file(&format!("examples/free5gc/{file}"))?;
    let mut objects = Package::from_yaml(&yaml)
        .with_context(|| format!("parsing examples/free5gc/{file}"))?
        .into_objects();
    for object in &mut objects {
        if object.namespace().is_some() {
            object.set_namespace(Some(ns.to_owned()));
        }
    }
    Ok(objects)
}

fn resource_of(object: &Object) -> anyhow::Result<ApiResource> {
    Ok(match object.kind.as_str() {
        "NFTopology" => resources::nf_topology(),
        "NFClass" => resources::nf_class(),
        "WorkloadCluster" => resources::workload_cluster(),
        other => bail!("the test has no resource for kind {other}"),
    })
}

/// The admin's API of `resource` in `ns`.
pub fn api(admin: &kube::Client, ns: &str, resource: &ApiResource) -> Api<DynamicObject> {
    Api::namespaced_with(admin.clone(), ns, resource)
}

/// Server-side applies `object` as the admin (idempotent: scenarios share cluster objects).
pub async fn apply(admin: &kube::Client, object: &Object) -> anyhow::Result<()> {
    let resource = resource_of(object)?;
    let dynamic: DynamicObject = serde_json::from_value(object.to_json())?;
    let api: Api<DynamicObject> = match object.namespace() {
        Some(ns) => Api::namespaced_with(admin.clone(), ns, &resource),
        None => Api::all_with(admin.clone(), &resource),
    };
    let name = object.name().unwrap_or_default();
    api.patch(
        name,
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(&dynamic),
    )
    .await
    .with_context(|| format!("applying {} {name}", object.kind))?;
    Ok(())
}

/// Polls `check` until it gives `Some`, for up to [`PATIENCE`].
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Option<T>>>,
{
    let deadline = Instant::now() + PATIENCE;
    let mut last_error = None;
    loop {
        match check().await {
            Ok(Some(value)) => return Ok(value),
            Ok(None) => {}
            Err(e) => last_error = Some(e),
        }
        if Instant::now() > deadline {
            bail!("timed out waiting for {what} (last error: {last_error:?})");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The names of `api`'s objects, sorted.
pub async fn names(api: &Api<DynamicObject>) -> anyhow::Result<Vec<String>> {
    let mut names: Vec<String> = api
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .filter_map(|o| o.metadata.name)
        .collect();
    names.sort();
    Ok(names)
}

/// The test standing in for Porch on the PackageRevisions of topology `free5gc` in one
/// namespace.
pub struct Porch {
    /// The admin's PackageRevision API in the scenario's namespace.
    pub revisions: Api<DynamicObject>,
}

impl Porch {
    /// Porch in namespace `ns`.
    pub fn new(admin: &kube::Client, ns: &str) -> Porch {
        Porch {
            revisions: api(admin, ns, &resources::package_revision()),
        }
    }

    /// A revision of `package` in `repo` (the cluster), labelled as Porch labels it from the
    /// PackageVariantSet's template.
    pub async fn create(
        &self,
        name: &str,
        repo: &str,
        package: &str,
        revision: &str,
        lifecycle: &str,
    ) -> anyhow::Result<()> {
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "porch.kpt.dev/v1alpha1",
            "kind": "PackageRevision",
            "metadata": {"name": name, "labels": {"nf-deployment-name": "free5gc"}},
            "spec": {"packageName": package, "repository": repo,
                     "workspaceName": format!("ws-{revision}"),
                     "revision": revision, "lifecycle": lifecycle},
        }))?;
        self.revisions
            .create(&PostParams::default(), &object)
            .await
            .with_context(|| format!("creating PackageRevision {name}"))?;
        Ok(())
    }

    /// Moves a revision to `lifecycle`, as Porch does when it is proposed and approved.
    pub async fn set_lifecycle(&self, name: &str, lifecycle: &str) -> anyhow::Result<()> {
        self.revisions
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"lifecycle": lifecycle}})),
            )
            .await
            .with_context(|| format!("moving PackageRevision {name} to {lifecycle}"))?;
        Ok(())
    }

    /// A revision's readiness gates (condition types) and its conditions (type, status).
    pub async fn gates(&self, name: &str) -> anyhow::Result<Gates> {
        let revision = self.revisions.get(name).await?;
        let strings = |value: &Value, field: &str| -> Vec<String> {
            value
                .as_array()
                .into_iter()
                .flatten()
                .map(|g| g[field].as_str().unwrap_or_default().to_owned())
                .collect()
        };
        let conditions = &revision.data["status"]["conditions"];
        Ok(Gates {
            gates: strings(&revision.data["spec"]["readinessGates"], "conditionType"),
            conditions: strings(conditions, "type")
                .into_iter()
                .zip(strings(conditions, "status"))
                .collect(),
        })
    }
}

/// What a PackageRevision waits for.
#[derive(Debug)]
pub struct Gates {
    /// `spec.readinessGates[].conditionType`.
    pub gates: Vec<String>,
    /// `status.conditions[]` as (type, status).
    pub conditions: Vec<(String, String)>,
}

impl Gates {
    /// The status of condition `kind`, if present.
    pub fn status(&self, kind: &str) -> Option<&str> {
        self.conditions
            .iter()
            .find(|(t, _)| t == kind)
            .map(|(_, s)| s.as_str())
    }
}
