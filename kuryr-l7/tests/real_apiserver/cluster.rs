//! What every scenario of `real_apiserver` does on the shared kube-apiserver: take the
//! daemon's credentials from its own `deploy/` manifests, create its namespace, apply objects
//! by their `apiVersion` and `kind` (resolved through the server's discovery, so CRDs resolve
//! too), read them back, and wait for something to become true.
//!
//! The daemons run as child processes with a kubeconfig holding only their ServiceAccount's
//! token, so every call they make meets the server's RBAC.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams};
use kube::discovery::Scope;
use nephrite_test_services::KubeApiServer;
use nephrite_test_services::kube_apiserver::Credentials;
use serde::Deserialize as _;
use serde_json::Value;

/// The daemon under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_kuryr-l7");
/// The field manager of this test's applies.
const MANAGER: &str = "kuryr-l7-real-apiserver-test";

/// The shared server, or None after saying (loudly) why the test is skipped.
pub fn server(test: &str) -> Option<&'static KubeApiServer> {
    match KubeApiServer::shared() {
        Ok(kube) => Some(kube),
        Err(e) => {
            e.skip(test);
            None
        }
    }
}

/// The text of `deploy/kubernetes/<file>`.
pub fn deploy(file: &str) -> anyhow::Result<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("deploy/kubernetes")
        .join(file);
    std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))
}

/// The documents of a multi-document YAML text, nulls (empty documents) left out.
pub fn documents(yaml: &str) -> anyhow::Result<Vec<Value>> {
    let mut out = Vec::new();
    for document in serde_norway::Deserializer::from_str(yaml) {
        let value = Value::deserialize(document)?;
        if !value.is_null() {
            out.push(value);
        }
    }
    Ok(out)
}

/// Applies the access objects of `files` (concatenated, as an operator applies them
/// together) and mints a token for `account` (`namespace/name`).
pub async fn credentials(
    kube: &KubeApiServer,
    files: &[&str],
    account: &str,
) -> anyhow::Result<Credentials> {
    let mut yaml = String::new();
    for file in files {
        yaml.push_str(&deploy(file)?);
        yaml.push_str("\n---\n");
    }
    Ok(kube
        .endpoint()
        .apply_access(&files.join(" + "), &yaml, account)
        .await?)
}

/// One scenario's namespace, admin client and scratch directory.
pub struct Scenario {
    /// The server.
    pub kube: &'static KubeApiServer,
    /// The admin's client.
    pub admin: kube::Client,
    /// This scenario's namespace.
    pub namespace: String,
    /// Logs and kubeconfigs.
    pub dir: tempfile::TempDir,
}

impl Scenario {
    /// Creates `namespace` with its `default` ServiceAccount (no controller-manager runs
    /// here to make it, and Pods need it).
    pub async fn new(kube: &'static KubeApiServer, namespace: &str) -> anyhow::Result<Self> {
        let scenario = Scenario {
            kube,
            admin: kube.endpoint().client()?,
            namespace: namespace.to_owned(),
            dir: tempfile::tempdir()?,
        };
        scenario
            .apply(&format!(
                "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {namespace}}}"
            ))
            .await?;
        let accounts: Api<ServiceAccount> = Api::namespaced(scenario.admin.clone(), namespace);
        if accounts.get_opt("default").await?.is_none() {
            scenario
                .apply("apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: default}")
                .await?;
        }
        Ok(scenario)
    }

    /// The API of `api_version`/`kind`, in this scenario's namespace when the kind is
    /// namespaced and `namespace` is None.
    pub async fn api(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
    ) -> anyhow::Result<Api<DynamicObject>> {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let (resource, capabilities) = kube::discovery::pinned_kind(&self.admin, &gvk)
            .await
            .with_context(|| format!("the server does not serve {api_version} {kind}"))?;
        Ok(match capabilities.scope {
            Scope::Cluster => Api::all_with(self.admin.clone(), &resource),
            Scope::Namespaced => Api::namespaced_with(
                self.admin.clone(),
                namespace.unwrap_or(&self.namespace),
                &resource,
            ),
        })
    }

    /// Server-side applies every document of `yaml` as admin (namespaced objects without a
    /// namespace go to this scenario's).
    pub async fn apply(&self, yaml: &str) -> anyhow::Result<()> {
        for value in documents(yaml)? {
            let api_version = value["apiVersion"].as_str().context("no apiVersion")?;
            let kind = value["kind"].as_str().context("no kind")?;
            let name = value["metadata"]["name"].as_str().context("no name")?;
            let api = self
                .api(api_version, kind, value["metadata"]["namespace"].as_str())
                .await?;
            api.patch(
                name,
                &PatchParams::apply(MANAGER).force(),
                &Patch::Apply(&value),
            )
            .await
            .with_context(|| format!("applying {kind} {name}"))?;
        }
        Ok(())
    }

    /// Applies the CRDs of `yaml` and waits until each is Established.
    pub async fn apply_crds(&self, yaml: &str) -> anyhow::Result<()> {
        self.apply(yaml).await?;
        let crds: Api<CustomResourceDefinition> = Api::all(self.admin.clone());
        for value in documents(yaml)? {
            let name = value["metadata"]["name"].as_str().context("no name")?;
            eventually(
                &format!("CRD {name} Established"),
                Duration::from_secs(30),
                async || {
                    let crd = crds.get(name).await?;
                    Ok(crd
                        .status
                        .and_then(|s| s.conditions)
                        .unwrap_or_default()
                        .iter()
                        .any(|c| c.type_ == "Established" && c.status == "True")
                        .then_some(()))
                },
            )
            .await?;
        }
        Ok(())
    }

    /// An object of this scenario's namespace.
    pub async fn get(&self, api_version: &str, kind: &str, name: &str) -> anyhow::Result<Value> {
        let object = self.api(api_version, kind, None).await?.get(name).await?;
        Ok(serde_json::to_value(object)?)
    }

    /// The `events.k8s.io/v1` Events of this scenario's namespace.
    pub async fn events(&self) -> anyhow::Result<Vec<Value>> {
        let list = self
            .api("events.k8s.io/v1", "Event", None)
            .await?
            .list(&ListParams::default())
            .await?;
        Ok(list
            .items
            .into_iter()
            .map(serde_json::to_value)
            .collect::<Result<_, _>>()?)
    }

    /// Writes the credentials' kubeconfig (owner-only) and returns its path.
    pub fn kubeconfig(&self, credentials: &Credentials) -> anyhow::Result<PathBuf> {
        use std::os::unix::fs::PermissionsExt as _;
        let path = self
            .dir
            .path()
            .join(format!("{}.kubeconfig", credentials.name));
        std::fs::write(&path, &credentials.kubeconfig)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
        Ok(path)
    }

    /// The path of the log of daemon `name`.
    pub fn log(&self, name: &str) -> PathBuf {
        self.dir.path().join(format!("{name}.log"))
    }
}

/// The text of a daemon's log (empty when unreadable), to name what went wrong.
pub fn log_text(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// Waits (`limit` at most) until `check` returns Some; its errors end the wait.
pub async fn eventually<T>(
    what: &str,
    limit: Duration,
    mut check: impl AsyncFnMut() -> anyhow::Result<Option<T>>,
) -> anyhow::Result<T> {
    let start = Instant::now();
    loop {
        if let Some(value) = check().await? {
            return Ok(value);
        }
        if start.elapsed() > limit {
            bail!("not within {limit:?}: {what}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A spawned daemon, killed (SIGKILL) and reaped when dropped.
pub struct Daemon(pub Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Daemon {
    /// Spawns `command` with its stderr (the log) into `log`.
    pub fn spawn(mut command: Command, log: &Path) -> anyhow::Result<Self> {
        let child = command
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(log)?)
            .spawn()
            .with_context(|| format!("spawning {command:?}"))?;
        Ok(Daemon(child))
    }
}
