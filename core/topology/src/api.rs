//! The resources of `topology.nephio.org/v1alpha1`: [`NFTopology`], [`NFClass`] and
//! [`NFDeployedTopology`], plus the `req.nephio.org/v1alpha1` [`Capacity`] a variant carries.
//!
//! Two spellings exist for the same intent. The seed design names a template's class `classRef`
//! (an object reference) and its attachment points `nfAttachments[].networkInstanceRef`; the
//! Nephio API names them `className` and `nfInterfaces[].networkInstanceName` (plain strings).
//! Reading accepts both (a reference may be a string or `{name: ..}`); writing always emits the
//! API's names. The deployed topology likewise reads the seed's lower-case keys (`nfinstances`,
//! `clustername`, `nftype`, …) and writes the API's camel case.

use std::fmt;

use indexmap::IndexMap;
use nephrite_krm::{Condition, LabelSelector, ObjectMeta};
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};

/// API group of the topology resources.
pub const GROUP: &str = "topology.nephio.org";
/// API version of the topology resources.
pub const VERSION: &str = "v1alpha1";
/// `apiVersion` of the topology resources.
pub const API_VERSION: &str = "topology.nephio.org/v1alpha1";
/// Kind of [`NFTopology`].
pub const NF_TOPOLOGY_KIND: &str = "NFTopology";
/// Kind of [`NFClass`].
pub const NF_CLASS_KIND: &str = "NFClass";
/// Kind of [`NFDeployedTopology`].
pub const NF_DEPLOYED_TOPOLOGY_KIND: &str = "NFDeployedTopology";
/// `apiVersion` of the [`Capacity`] resource carried into each package.
pub const CAPACITY_API_VERSION: &str = "req.nephio.org/v1alpha1";
/// Kind of the [`Capacity`] resource.
pub const CAPACITY_KIND: &str = "Capacity";

fn api_version() -> String {
    API_VERSION.to_owned()
}

/// The network-function topology intent: NF instances, each fanned out to the clusters its
/// selector matches, connected through the network instances their interfaces attach to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NFTopology {
    /// `topology.nephio.org/v1alpha1`.
    #[serde(default = "api_version")]
    pub api_version: String,
    /// `NFTopology`.
    #[serde(default = "nf_topology_kind")]
    pub kind: String,
    /// Object metadata; `name` names the topology (and the `nf-deployment-name` label).
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The intent.
    #[serde(default)]
    pub spec: NFTopologySpec,
    /// What the controller observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<NFTopologyStatus>,
}

fn nf_topology_kind() -> String {
    NF_TOPOLOGY_KIND.to_owned()
}

impl NFTopology {
    /// A topology named `name` with the given instances.
    pub fn new(name: impl Into<String>, nf_instances: Vec<NFInstance>) -> Self {
        NFTopology {
            api_version: api_version(),
            kind: nf_topology_kind(),
            metadata: ObjectMeta::named(name),
            spec: NFTopologySpec {
                nf_instances,
                deletion_policy: DeletionPolicy::default(),
            },
            status: None,
        }
    }

    /// The topology's name (empty when metadata has none).
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or("")
    }
}

/// `NFTopology.spec`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NFTopologySpec {
    /// The NF instances; names are unique within a topology.
    #[serde(default)]
    pub nf_instances: Vec<NFInstance>,
    /// What happens to a deployed instance the topology no longer wants (its instance removed,
    /// or its cluster no longer matching): deleted (the default, as Porch's) or left in place
    /// and flagged.
    #[serde(default, skip_serializing_if = "DeletionPolicy::is_default")]
    pub deletion_policy: DeletionPolicy,
}

/// The fate of a child (package or child deployment) the topology no longer wants, in
/// Porch's `PackageVariant` words: `delete` (the default) or `orphan`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeletionPolicy {
    /// Delete the child (Porch proposes the deletion of its package).
    #[default]
    Delete,
    /// Leave the child where it is, no longer managed, and flag it as orphaned.
    Orphan,
}

impl DeletionPolicy {
    /// `delete` or `orphan`, as Porch spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            DeletionPolicy::Delete => "delete",
            DeletionPolicy::Orphan => "orphan",
        }
    }

    /// Whether this is the default ([`DeletionPolicy::Delete`]).
    pub fn is_default(&self) -> bool {
        *self == DeletionPolicy::Delete
    }
}

impl fmt::Display for DeletionPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A deletion policy other than `delete` or `orphan`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown deletion policy {value:?}: expected `delete` or `orphan`")]
pub struct UnknownDeletionPolicy {
    /// The value as given.
    pub value: String,
}

impl std::str::FromStr for DeletionPolicy {
    type Err = UnknownDeletionPolicy;

    /// Reads `delete` or `orphan` (case-insensitive, surrounding spaces ignored).
    fn from_str(value: &str) -> Result<Self, Self::Err> {
        match value.trim().to_ascii_lowercase().as_str() {
            "delete" => Ok(DeletionPolicy::Delete),
            "orphan" => Ok(DeletionPolicy::Orphan),
            _ => Err(UnknownDeletionPolicy {
                value: value.to_owned(),
            }),
        }
    }
}

/// One NF instance of the intent: deployed once on every cluster its selector matches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NFInstance {
    /// Unique within the topology.
    pub name: String,
    /// Which clusters get this instance. An empty selector matches every cluster.
    #[serde(default)]
    pub cluster_selector: LabelSelector,
    /// What is deployed.
    pub nf_template: NFTemplate,
}

/// What an NF instance deploys.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NFTemplate {
    /// The NF type (`upf`, `smf`, `amf`, …), kept in lower case.
    pub nf_type: NfType,
    /// The [`NFClass`] the package comes from (seed spelling: `classRef`).
    #[serde(alias = "classRef", deserialize_with = "name_or_reference")]
    pub class_name: String,
    /// The capacity profile, carried into the package as a [`Capacity`] resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<CapacitySpec>,
    /// Attachment points (seed spelling: `nfAttachments`).
    #[serde(
        default,
        alias = "nfAttachments",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub nf_interfaces: Vec<NFInterface>,
}

/// One attachment point of an NF to a network instance. Two NF instances attached to the same
/// network instance are neighbours.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NFInterface {
    /// The attachment point's name (e.g. `n3`).
    pub name: String,
    /// The network instance (seed spelling: `networkInstanceRef`, an object reference).
    #[serde(alias = "networkInstanceRef", deserialize_with = "name_or_reference")]
    pub network_instance_name: String,
}

/// An NF type, normalised to lower case (`UPF` and `upf` are the same type).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct NfType(String);

impl NfType {
    /// The type `name`, lower-cased.
    pub fn new(name: &str) -> Self {
        NfType(name.to_ascii_lowercase())
    }

    /// The lower-case name.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The upper-case name used in gate conditions (`wait-for-UPF-…`).
    pub fn upper(&self) -> String {
        self.0.to_ascii_uppercase()
    }
}

impl fmt::Display for NfType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for NfType {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        if name.is_empty() {
            return Err(de::Error::custom("nfType must not be empty"));
        }
        Ok(NfType::new(&name))
    }
}

/// Reads either a plain string or an object reference `{name: .., ...}` as a name.
fn name_or_reference<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    struct NameOrReference;

    impl<'de> Visitor<'de> for NameOrReference {
        type Value = String;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a name or an object reference with a name")
        }

        fn visit_str<E: de::Error>(self, value: &str) -> Result<String, E> {
            Ok(value.to_owned())
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<String, A::Error> {
            let mut name = None;
            while let Some(key) = map.next_key::<String>()? {
                if key == "name" {
                    name = Some(map.next_value::<String>()?);
                } else {
                    map.next_value::<de::IgnoredAny>()?;
                }
            }
            name.ok_or_else(|| de::Error::missing_field("name"))
        }
    }

    let name = deserializer.deserialize_any(NameOrReference)?;
    if name.is_empty() {
        return Err(de::Error::custom("a reference needs a non-empty name"));
    }
    Ok(name)
}

/// A Kubernetes quantity (`10G`, `500M`), kept as written; numbers are accepted and written back
/// as strings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Quantity(pub String);

impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match serde_json::Value::deserialize(deserializer)? {
            serde_json::Value::String(s) => Ok(Quantity(s)),
            serde_json::Value::Number(n) => Ok(Quantity(n.to_string())),
            other => Err(de::Error::custom(format!(
                "a quantity is a string or a number, found {other}"
            ))),
        }
    }
}

/// The capacity profile of an NF instance (Nephio's `CapacitySpec`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CapacitySpec {
    /// Maximum uplink throughput.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_uplink_throughput: Option<Quantity>,
    /// Maximum downlink throughput.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_downlink_throughput: Option<Quantity>,
    /// Maximum number of sessions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_sessions: Option<u64>,
    /// Maximum number of subscribers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_subscribers: Option<u64>,
    /// Maximum number of NF connections.
    #[serde(
        default,
        rename = "maxNFConnections",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_nf_connections: Option<u64>,
}

/// `req.nephio.org/v1alpha1` `Capacity`: the capacity profile as a resource of the package.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Capacity {
    /// `req.nephio.org/v1alpha1`.
    pub api_version: String,
    /// `Capacity`.
    pub kind: String,
    /// Metadata (name, labels).
    pub metadata: ObjectMeta,
    /// The profile.
    pub spec: CapacitySpec,
}

/// `NFTopology.status`, in the API's names plus `packages`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NFTopologyStatus {
    /// How many deployed instances are published.
    #[serde(default, rename = "numNFDeployed")]
    pub num_nf_deployed: u32,
    /// `Ready` and friends.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The published deployed instances.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nf_instances: Vec<NFDeployedInstance>,
    /// Every package the topology fans out to, with its lifecycle and pending gates.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub packages: Vec<PackageStatus>,
}

/// One package's progress, for display.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PackageStatus {
    /// The deployed instance id.
    pub name: String,
    /// `Draft`, `Proposed`, `Published`, `DeletionProposed` or `Pending` (no revision yet).
    pub lifecycle: String,
    /// Readiness conditions that are not yet True.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending_conditions: Vec<String>,
}

/// `NFClass`: where an NF type's package comes from, and who makes it (cluster scoped).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NFClass {
    /// `topology.nephio.org/v1alpha1`.
    #[serde(default = "api_version")]
    pub api_version: String,
    /// `NFClass`.
    #[serde(default = "nf_class_kind")]
    pub kind: String,
    /// Metadata; `name` is what templates refer to.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The class.
    pub spec: NFClassSpec,
}

fn nf_class_kind() -> String {
    NF_CLASS_KIND.to_owned()
}

impl NFClass {
    /// A class named `name`.
    pub fn new(name: impl Into<String>, spec: NFClassSpec) -> Self {
        NFClass {
            api_version: api_version(),
            kind: nf_class_kind(),
            metadata: ObjectMeta::named(name),
            spec,
        }
    }

    /// The class's name (empty when metadata has none).
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or("")
    }
}

/// `NFClass.spec`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NFClassSpec {
    /// The NF's vendor.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub vendor: String,
    /// The NF's software version.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub version: String,
    /// The flavor (`small`, `medium`, `large`), optional.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flavor: Option<String>,
    /// The upstream package.
    pub package_ref: PackageRevisionReference,
}

/// Which upstream package revision a class deploys.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PackageRevisionReference {
    /// Namespace of the repository and revision.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// The repository holding the package.
    #[serde(alias = "repositoryName")]
    pub repository: String,
    /// The package.
    pub package_name: String,
    /// The revision; empty means the latest published one.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub revision: String,
}

/// A cluster (or site) packages can be deployed to: a name and its labels.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cluster {
    /// The cluster's name; also its deployment repository's name.
    pub name: String,
    /// Its labels.
    #[serde(default)]
    pub labels: IndexMap<String, String>,
}

impl Cluster {
    /// A cluster with labels.
    pub fn new<I, K, V>(name: impl Into<String>, labels: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        Cluster {
            name: name.into(),
            labels: labels
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        }
    }
}

/// `NFDeployedTopology`: the published NF instances and who they are connected to, for the
/// Edge Status Aggregator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NFDeployedTopology {
    /// `topology.nephio.org/v1alpha1`.
    #[serde(default = "api_version")]
    pub api_version: String,
    /// `NFDeployedTopology`.
    #[serde(default = "nf_deployed_topology_kind")]
    pub kind: String,
    /// Metadata; named after the NFTopology.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The published instances.
    #[serde(default)]
    pub spec: NFDeployedTopologySpec,
}

fn nf_deployed_topology_kind() -> String {
    NF_DEPLOYED_TOPOLOGY_KIND.to_owned()
}

impl NFDeployedTopology {
    /// A deployed topology named `name`.
    pub fn new(name: impl Into<String>, spec: NFDeployedTopologySpec) -> Self {
        NFDeployedTopology {
            api_version: api_version(),
            kind: nf_deployed_topology_kind(),
            metadata: ObjectMeta::named(name),
            spec,
        }
    }
}

/// `NFDeployedTopology.spec`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NFDeployedTopologySpec {
    /// The published deployed instances, ordered by id.
    #[serde(default, alias = "nfinstances")]
    pub nf_instances: Vec<NFDeployedInstance>,
}

/// One deployed NF instance (NF instance × cluster).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NFDeployedInstance {
    /// Unique id, `<instance>-<cluster>` unless that would collide.
    pub id: String,
    /// The NFTopology instance it comes from.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub nf_instance_name: String,
    /// The cluster it runs on.
    #[serde(default, alias = "clustername")]
    pub cluster_name: String,
    /// NF type.
    #[serde(default, alias = "nftype")]
    pub nf_type: String,
    /// Flavor.
    #[serde(default, alias = "nfflavor", skip_serializing_if = "String::is_empty")]
    pub nf_flavor: String,
    /// Vendor.
    #[serde(default, alias = "nfvendor", skip_serializing_if = "String::is_empty")]
    pub nf_vendor: String,
    /// Software version.
    #[serde(default, alias = "nfversion", skip_serializing_if = "String::is_empty")]
    pub nf_version: String,
    /// Published neighbours, by id, without duplicates, never itself.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub connectivities: Vec<NFConnectivity>,
}

/// A connection to a neighbour.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NFConnectivity {
    /// The neighbour's deployed id.
    #[serde(alias = "neighborname")]
    pub neighbor_name: String,
}

#[cfg(test)]
mod tests;
