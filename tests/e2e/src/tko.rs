//! Steps 1 and 4–5: the preparer (started first, so `bmm-provider` can register the clusters
//! as its Sites), `ntc serve --backend tko` registering as the NFTopology plugin, and the
//! free5GC-like topology becoming one child deployment per (NF instance × matching site), the
//! SMF held back until its UPFs are approved.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::Value;

use crate::bmm::CLUSTERS;
use crate::interrupt;
use crate::lab::{Lab, free_addr};
use crate::progress::Progress;

/// The example the demo deploys, relative to the workspace root.
const EXAMPLE: &str = "topology/examples/free5gc";

/// A child deployment of the topology.
#[derive(Debug, Clone)]
pub struct Child {
    /// The deployment's id.
    pub id: String,
    /// The NF type (`upf`, `smf`, `amf`), from its template `pkg-example-<type>-bp`.
    pub nf_type: String,
    /// The site (cluster) it is for.
    pub site: String,
    /// Whether it is prepared.
    pub prepared: bool,
    /// Whether it is approved.
    pub approved: bool,
    /// Its interfaces (name, network instance), from the `Interface` resources ntc put in its
    /// package; empty until [`child_interfaces`] read them.
    pub interfaces: Vec<(String, String)>,
}

/// What the topology step gave.
pub struct Deployed {
    /// The preparer's Data API.
    pub preparer: SocketAddr,
    /// ntc's plugin endpoint.
    pub ntc: SocketAddr,
    /// The topology's deployment.
    pub parent: String,
    /// Its children, all approved at the end.
    pub children: Vec<Child>,
    /// The UPFs were approved, and only then ntc approved the SMF.
    pub smf_after_upfs: bool,
    /// Instances in the NFDeployedTopology, and their connectivities.
    pub deployed_instances: usize,
    /// Connectivities (instance → neighbour) in the NFDeployedTopology.
    pub connectivities: usize,
}

/// The preparer's CLI against the daemon at `preparer`; its standard output.
pub fn preparer_cli(lab: &Lab, preparer: SocketAddr, args: &[&str]) -> anyhow::Result<String> {
    let server = lab.url(preparer);
    lab.run(
        "preparer-cli",
        "preparer",
        args,
        None,
        &[("PREPARER_SERVER", &server)],
    )
}

/// Starts `preparer serve` (SQLite in the lab's directory, nothing approved by itself).
pub fn start_preparer(lab: &mut Lab) -> anyhow::Result<SocketAddr> {
    let preparer = free_addr()?;
    let store = format!("sqlite:{}", lab.dir().join("preparer.db").display());
    lab.spawn(
        "preparer",
        "preparer",
        &[
            "serve",
            "--listen",
            &preparer.to_string(),
            "--store",
            &store,
            "--auto-approve",
            "false",
            "--interval",
            "500ms",
            // A crashed preparer's modification leases expire in 5 s, not the default 30 s.
            "--lease",
            "5s",
        ],
    )?;
    lab.wait_listening("preparer", preparer)?;
    Ok(preparer)
}

/// Registers each of [`CLUSTERS`] as a Site whose metadata are the cluster's labels.
pub fn register_sites(
    lab: &Lab,
    preparer: SocketAddr,
    mut news: impl FnMut(&str),
) -> anyhow::Result<()> {
    for cluster in CLUSTERS {
        let site = lab.write(
            &format!("sites/{}.yaml", cluster.name),
            &format!(
                "apiVersion: metadata.nephio.org/v1alpha1\nkind: Site\nmetadata:\n  name: {}\n\
                 spec:\n  nephio.org/site-type: {}\n  nephio.org/region: {}\n",
                cluster.name, cluster.site_type, cluster.region
            ),
        )?;
        let site = site.display().to_string();
        preparer_cli(
            lab,
            preparer,
            &["site", "register", cluster.name, "-f", &site],
        )?;
        news(&format!(
            "{} ({}, {})",
            cluster.name, cluster.site_type, cluster.region
        ));
    }
    Ok(())
}

/// Starts `ntc serve --backend tko` and waits until it is the preparer's NFTopology plugin.
pub fn start_ntc(lab: &mut Lab, preparer: SocketAddr) -> anyhow::Result<SocketAddr> {
    let ntc = free_addr()?;
    lab.spawn(
        "ntc",
        "ntc",
        &[
            "serve",
            "--backend",
            "tko",
            "--data",
            &lab.url(preparer),
            "--listen",
            &ntc.to_string(),
            // The endpoint the preparer dials, with the scheme of the lab's transport.
            "--advertise",
            &lab.url(ntc),
        ],
    )?;
    interrupt::wait_for(
        "ntc to register with the preparer",
        Duration::from_secs(60),
        || {
            lab.check_daemons()?;
            let plugins: Value = serde_json::from_str(&preparer_cli(
                lab,
                preparer,
                &["plugin", "list", "-o", "json"],
            )?)?;
            Ok(plugins
                .as_array()
                .is_some_and(|list| list.iter().any(|p| p["name"] == "ntc"))
                .then_some(()))
        },
    )?;
    Ok(ntc)
}

/// Registers the NF packages and the topology as templates and creates the topology's
/// deployment; its id.
pub fn create_topology(lab: &Lab, preparer: SocketAddr, root: &Path) -> anyhow::Result<String> {
    let example = root.join(EXAMPLE);
    let package = example.join("tko/nf-package.yaml").display().to_string();
    for nf in ["upf", "smf", "amf"] {
        let template = format!("pkg-example-{nf}-bp");
        preparer_cli(
            lab,
            preparer,
            &["template", "register", &template, "-f", &package],
        )?;
    }
    let topology = format!(
        "{}---\n{}",
        std::fs::read_to_string(example.join("topology.yaml"))?,
        std::fs::read_to_string(example.join("classes.yaml"))?
    );
    let topology = lab
        .write("free5gc-topology.yaml", &topology)?
        .display()
        .to_string();
    preparer_cli(
        lab,
        preparer,
        &["template", "register", "free5gc-topology", "-f", &topology],
    )?;
    Ok(preparer_cli(
        lab,
        preparer,
        &["deployment", "create", "--template", "free5gc-topology"],
    )?
    .trim()
    .to_owned())
}

/// The children of `parent`, by site and NF type (ntc creates them concurrently, so the
/// preparer's creation order is not theirs to keep).
pub fn list_children(lab: &Lab, preparer: SocketAddr, parent: &str) -> anyhow::Result<Vec<Child>> {
    let mut children = parse_children(&preparer_cli(
        lab,
        preparer,
        &["deployment", "list", "--parent", parent, "-o", "json"],
    )?)?;
    children.sort_by(|a, b| (&a.site, &a.nf_type).cmp(&(&b.site, &b.nf_type)));
    Ok(children)
}

/// The children of the free5GC topology on [`CLUSTERS`]: upf-west on edge01, upf-east on
/// edge02, the SMF and the AMF on regional.
pub const EXPECTED_CHILDREN: usize = 4;

/// Waits until `parent` has [`EXPECTED_CHILDREN`] prepared children (never more).
pub fn wait_children(
    lab: &mut Lab,
    preparer: SocketAddr,
    parent: &str,
    mut news: impl FnMut(&str),
) -> anyhow::Result<Vec<Child>> {
    interrupt::wait_for(
        "the topology's children to be prepared",
        Duration::from_secs(60),
        || {
            lab.check_daemons()?;
            let children = list_children(lab, preparer, parent)?;
            if children.len() > EXPECTED_CHILDREN {
                bail!(
                    "{} children, {EXPECTED_CHILDREN} expected: {children:?}",
                    children.len()
                );
            }
            news(&format!("{}/{EXPECTED_CHILDREN} children", children.len()));
            Ok(
                (children.len() == EXPECTED_CHILDREN && children.iter().all(|c| c.prepared))
                    .then_some(children),
            )
        },
    )
}

/// The interfaces (name, network instance) ntc asked for in child `id`'s package: its
/// `req.nephio.org` `Interface` resources.
pub fn child_interfaces(
    lab: &Lab,
    preparer: SocketAddr,
    id: &str,
) -> anyhow::Result<Vec<(String, String)>> {
    let deployment: Value = serde_json::from_str(&preparer_cli(
        lab,
        preparer,
        &["deployment", "get", id, "-o", "json"],
    )?)
    .with_context(|| format!("reading deployment get {id} -o json"))?;
    let mut objects = Vec::new();
    find_all_kind(&deployment, "Interface", &mut objects);
    let interfaces: Vec<(String, String)> = objects
        .into_iter()
        .filter_map(|object| {
            let name = object["metadata"]["name"].as_str()?;
            let network = object["spec"]["networkInstance"]["name"].as_str()?;
            Some((name.to_owned(), network.to_owned()))
        })
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    if interfaces.is_empty() {
        bail!("child deployment {id} has no Interface resources with a network instance");
    }
    Ok(interfaces)
}

/// Instances and connectivities of the NFDeployedTopology in `parent`'s package.
pub fn deployed_topology(
    lab: &Lab,
    preparer: SocketAddr,
    parent: &str,
) -> anyhow::Result<(usize, usize)> {
    let deployment: Value = serde_json::from_str(&preparer_cli(
        lab,
        preparer,
        &["deployment", "get", parent, "-o", "json"],
    )?)?;
    Ok(count_deployed(&deployment))
}

/// Starts the preparer, the deployment store every later step uses.
pub fn store(lab: &mut Lab, progress: &Progress) -> anyhow::Result<SocketAddr> {
    let step = progress.step("preparer: deployment store");
    let preparer = start_preparer(lab)?;
    step.done(&format!(
        "Data API on {preparer}, SQLite in the demo's directory"
    ));
    Ok(preparer)
}

/// Runs ntc on the preparer at `preparer` (whose sites `bmm-provider apply --register-sites`
/// registered) and deploys the topology.
pub fn deploy(
    lab: &mut Lab,
    progress: &Progress,
    root: &Path,
    preparer: SocketAddr,
) -> anyhow::Result<Deployed> {
    let step = progress.step("ntc: NFTopology plugin");
    let ntc = start_ntc(lab, preparer)?;
    step.done(&format!(
        "registered for topology.nephio.org NFTopology, serving on {ntc}"
    ));

    let step = progress.step("ntc: deploy the free5GC topology");
    let parent = create_topology(lab, preparer, root)?;
    let children = wait_children(lab, preparer, &parent, |news| step.message(news))?;
    if children.iter().any(|c| c.approved) {
        bail!("a child was approved before anyone approved it: {children:?}");
    }
    step.done(&format!(
        "{} child deployments: {}",
        children.len(),
        children
            .iter()
            .map(|c| format!("{} on {}", c.nf_type, c.site))
            .collect::<Vec<_>>()
            .join(", ")
    ));

    let step = progress.step("ntc: SMF waits for its UPFs");
    for upf in children.iter().filter(|c| c.nf_type == "upf") {
        step.message(&format!("approving the UPF on {}", upf.site));
        preparer_cli(lab, preparer, &["deployment", "approve", &upf.id])?;
    }
    let children = interrupt::wait_for("ntc to approve the SMF", Duration::from_secs(30), || {
        lab.check_daemons()?;
        let children = list_children(lab, preparer, &parent)?;
        let smf_approved = children.iter().any(|c| c.nf_type == "smf" && c.approved);
        Ok(smf_approved.then_some(children))
    })?;
    let upfs_approved = children
        .iter()
        .filter(|c| c.nf_type == "upf")
        .all(|c| c.approved);
    for amf in children
        .iter()
        .filter(|c| c.nf_type == "amf" && !c.approved)
    {
        preparer_cli(lab, preparer, &["deployment", "approve", &amf.id])?;
    }
    let (deployed_instances, connectivities) = interrupt::wait_for(
        "the NFDeployedTopology to list every instance",
        Duration::from_secs(30),
        || {
            let counts = deployed_topology(lab, preparer, &parent)?;
            Ok((counts.0 == EXPECTED_CHILDREN).then_some(counts))
        },
    )?;
    step.done(&format!(
        "SMF approved by ntc after {} UPFs; NFDeployedTopology: {deployed_instances} instances, \
         {connectivities} connectivities",
        children.iter().filter(|c| c.nf_type == "upf").count()
    ));
    let children = children
        .into_iter()
        .map(|c| {
            Ok(Child {
                approved: true,
                interfaces: child_interfaces(lab, preparer, &c.id)?,
                ..c
            })
        })
        .collect::<anyhow::Result<_>>()?;
    Ok(Deployed {
        preparer,
        ntc,
        parent,
        children,
        smf_after_upfs: upfs_approved,
        deployed_instances,
        connectivities,
    })
}

/// The children in `preparer deployment list -o json`.
fn parse_children(json: &str) -> anyhow::Result<Vec<Child>> {
    let list: Value = serde_json::from_str(json).context("reading deployment list -o json")?;
    let mut children = Vec::new();
    for entry in list.as_array().context("deployment list is not an array")? {
        let template = entry["templateId"].as_str().unwrap_or_default();
        let nf_type = template
            .strip_prefix("pkg-example-")
            .and_then(|t| t.strip_suffix("-bp"))
            .unwrap_or(template);
        children.push(Child {
            id: entry["deploymentId"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            nf_type: nf_type.to_owned(),
            site: entry["siteId"].as_str().unwrap_or_default().to_owned(),
            prepared: entry["prepared"] == Value::Bool(true),
            approved: entry["approved"] == Value::Bool(true),
            interfaces: Vec::new(),
        });
    }
    if children
        .iter()
        .any(|c| !c.id.is_empty() && c.site.is_empty())
    {
        bail!("a child without a site: {children:?}");
    }
    Ok(children)
}

/// Instances and connectivities of the NFDeployedTopology in a `deployment get -o json`.
fn count_deployed(deployment: &Value) -> (usize, usize) {
    let Some(topology) = find_kind(deployment, "NFDeployedTopology") else {
        return (0, 0);
    };
    let instances = topology["spec"]["nfInstances"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let connectivities = instances
        .iter()
        .map(|i| i["connectivities"].as_array().map_or(0, Vec::len))
        .sum();
    (instances.len(), connectivities)
}

/// The first object of `kind` anywhere in `value`.
/// Every object of `kind` anywhere in `value`.
fn find_all_kind<'a>(value: &'a Value, kind: &str, found: &mut Vec<&'a Value>) {
    match value {
        Value::Object(map) if map.get("kind").and_then(Value::as_str) == Some(kind) => {
            found.push(value);
        }
        Value::Object(map) => map.values().for_each(|v| find_all_kind(v, kind, found)),
        Value::Array(items) => items.iter().for_each(|v| find_all_kind(v, kind, found)),
        _ => {}
    }
}

fn find_kind<'a>(value: &'a Value, kind: &str) -> Option<&'a Value> {
    match value {
        Value::Object(map) if map.get("kind").and_then(Value::as_str) == Some(kind) => Some(value),
        Value::Object(map) => map.values().find_map(|v| find_kind(v, kind)),
        Value::Array(items) => items.iter().find_map(|v| find_kind(v, kind)),
        _ => None,
    }
}
