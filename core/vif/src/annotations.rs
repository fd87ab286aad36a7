//! The annotations the drivers read, each parsed into a typed request or refused with the
//! annotation's name and what is wrong with it.
//!
//! Kuryr's lists are JSON (`'["id1", "id2"]'`). The seed's own `spec-ports` example writes a
//! `.` between the two ids, which is not JSON: it is refused like any other invalid value, with
//! serde's line and column, rather than guessed at. Ids end up in Neutron URLs, so only
//! `[A-Za-z0-9._-]` is accepted in them.

use serde::Deserialize;

use crate::VifError;

/// `openstack.org/kuryr-additional-subnets`: JSON list of subnet ids.
pub const ADDITIONAL_SUBNETS: &str = "openstack.org/kuryr-additional-subnets";
/// `spec-ports`: JSON list of pre-created port ids.
pub const SPEC_PORTS: &str = "spec-ports";
/// `k8s.v1.cni.cncf.io/networks`: the NPWG network selection.
pub const NETWORKS: &str = "k8s.v1.cni.cncf.io/networks";
/// `openstack.org/kuryr-config` on a NetworkAttachmentDefinition: `{subnetId, driverType}`.
pub const KURYR_CONFIG: &str = "openstack.org/kuryr-config";
/// The seed's SR-IOV resource: `pod.alpha.kubernetes.io/opaque-int-resource-sriov-vf-<physnet>`.
pub const OPAQUE_SRIOV_PREFIX: &str = "pod.alpha.kubernetes.io/opaque-int-resource-sriov-vf-";

/// The longest id accepted (Neutron's are 36-character UUIDs; names are at most 255).
const MAX_ID: usize = 255;
/// The most VIFs one annotation or resource may ask for: a bound on what one pod can make
/// the handler allocate.
pub const MAX_REQUESTS: usize = 32;
/// Linux's interface name limit (IFNAMSIZ - 1).
const MAX_IFNAME: usize = 15;

fn invalid(annotation: &str, error: impl Into<String>) -> VifError {
    VifError::Annotation {
        annotation: annotation.to_owned(),
        error: error.into(),
    }
}

/// Whether `id` is a usable object id: non-empty, at most 255 of `[A-Za-z0-9._-]`.
pub fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_ID
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// A JSON list of ids (`additional-subnets`, `spec-ports`).
pub fn parse_id_list(annotation: &str, value: &str) -> Result<Vec<String>, VifError> {
    let ids: Vec<String> = serde_json::from_str(value)
        .map_err(|e| invalid(annotation, format!("not a JSON list of ids: {e}")))?;
    if ids.len() > MAX_REQUESTS {
        return Err(invalid(
            annotation,
            format!("{} ids (at most {MAX_REQUESTS})", ids.len()),
        ));
    }
    for id in &ids {
        if !valid_id(id) {
            return Err(invalid(
                annotation,
                format!("{id:?} is not an id (1-{MAX_ID} of A-Z a-z 0-9 . _ -)"),
            ));
        }
    }
    Ok(ids)
}

/// One network of `k8s.v1.cni.cncf.io/networks`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkSelection {
    /// The NetworkAttachmentDefinition's namespace (the pod's when not given).
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The interface name asked for (`@ifname` or `"interface"`), if any.
    pub interface: Option<String>,
}

#[derive(Deserialize)]
struct JsonSelection {
    name: String,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    interface: Option<String>,
}

/// Whether `name` can be a Kubernetes object name (DNS-1123 subdomain: lowercase
/// alphanumerics, `-` and `.`, starting and ending alphanumeric, at most 253).
fn valid_object_name(name: &str) -> bool {
    let edge = |b: Option<&u8>| b.is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    !name.is_empty()
        && name.len() <= 253
        && edge(name.as_bytes().first())
        && edge(name.as_bytes().last())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'.'))
}

/// Whether `name` can name a Linux interface: 1-15 bytes, no `/`, `:`, whitespace or control
/// characters, not `.` or `..`.
pub fn valid_ifname(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_IFNAME
        && name != "."
        && name != ".."
        && name
            .chars()
            .all(|c| !c.is_whitespace() && !c.is_control() && c != '/' && c != ':')
}

/// `k8s.v1.cni.cncf.io/networks`: a JSON list of `{name, namespace?, interface?}` (other keys
/// such as `ips` and `mac` are not used by this handler and ignored) or the text form
/// `ns/name@ifname, name`. Namespaces default to `pod_namespace`; two networks asking for the
/// same interface name are refused.
pub fn parse_networks(pod_namespace: &str, value: &str) -> Result<Vec<NetworkSelection>, VifError> {
    let trimmed = value.trim();
    let selections = if trimmed.starts_with('[') {
        let list: Vec<JsonSelection> = serde_json::from_str(trimmed)
            .map_err(|e| invalid(NETWORKS, format!("not a JSON list of networks: {e}")))?;
        list.into_iter()
            .map(|s| NetworkSelection {
                namespace: s.namespace.unwrap_or_else(|| pod_namespace.to_owned()),
                name: s.name,
                interface: s.interface,
            })
            .collect()
    } else {
        let mut out = Vec::new();
        for entry in trimmed.split(',').map(str::trim) {
            if entry.is_empty() {
                if trimmed.is_empty() {
                    break;
                }
                return Err(invalid(NETWORKS, format!("empty entry in {trimmed:?}")));
            }
            let (reference, interface) = match entry.split_once('@') {
                Some((r, i)) => (r, Some(i.to_owned())),
                None => (entry, None),
            };
            let (namespace, name) = match reference.split_once('/') {
                Some((ns, name)) => (ns.to_owned(), name.to_owned()),
                None => (pod_namespace.to_owned(), reference.to_owned()),
            };
            out.push(NetworkSelection {
                namespace,
                name,
                interface,
            });
        }
        out
    };
    if selections.len() > MAX_REQUESTS {
        return Err(invalid(
            NETWORKS,
            format!("{} networks (at most {MAX_REQUESTS})", selections.len()),
        ));
    }
    let mut interfaces: Vec<&str> = Vec::new();
    for s in &selections {
        if !valid_object_name(&s.namespace) || !valid_object_name(&s.name) {
            return Err(invalid(
                NETWORKS,
                format!(
                    "{:?} is not a namespace/name of a NetworkAttachmentDefinition",
                    format!("{}/{}", s.namespace, s.name)
                ),
            ));
        }
        if let Some(ifname) = &s.interface {
            if !valid_ifname(ifname) {
                return Err(invalid(
                    NETWORKS,
                    format!("{ifname:?} is not an interface name (1-15 bytes, no / : or spaces)"),
                ));
            }
            if ifname == crate::MAIN_IFNAME {
                return Err(invalid(
                    NETWORKS,
                    format!("interface {ifname} is the pod's main VIF"),
                ));
            }
            if interfaces.contains(&ifname.as_str()) {
                return Err(invalid(
                    NETWORKS,
                    format!("interface {ifname} is asked for twice"),
                ));
            }
            interfaces.push(ifname);
        }
    }
    Ok(selections)
}

/// What Kuryr's `openstack.org/kuryr-config` says about a network: its subnet and whether its
/// ports are SR-IOV (`driverType: sriov`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KuryrNetworkConfig {
    /// `subnetId`.
    pub subnet_id: String,
    /// `driverType` is `sriov`.
    pub sriov: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct JsonKuryrConfig {
    subnet_id: String,
    #[serde(default)]
    driver_type: Option<String>,
}

/// Parse `openstack.org/kuryr-config` of NetworkAttachmentDefinition `nad` (`ns/name`).
pub fn parse_kuryr_config(nad: &str, value: &str) -> Result<KuryrNetworkConfig, VifError> {
    let refused = |error: String| VifError::Attachment {
        attachment: nad.to_owned(),
        error: format!("{KURYR_CONFIG}: {error}"),
    };
    let config: JsonKuryrConfig =
        serde_json::from_str(value).map_err(|e| refused(format!("not {{subnetId}}: {e}")))?;
    if !valid_id(&config.subnet_id) {
        return Err(refused(format!(
            "subnetId {:?} is not an id",
            config.subnet_id
        )));
    }
    let sriov = match config.driver_type.as_deref() {
        None | Some("") | Some("kuryr-kubernetes") | Some("neutron") => false,
        Some("sriov") => true,
        Some(other) => {
            return Err(refused(format!(
                "driverType {other:?} (expected kuryr-kubernetes or sriov)"
            )));
        }
    };
    Ok(KuryrNetworkConfig {
        subnet_id: config.subnet_id,
        sriov,
    })
}

/// The network name of a nimbess-cni configuration (`spec.config`'s `name`).
pub fn parse_nimbess_config(nad: &str, config: &str) -> Result<String, VifError> {
    #[derive(Deserialize)]
    struct CniConfig {
        name: String,
    }
    let refused = |error: String| VifError::Attachment {
        attachment: nad.to_owned(),
        error: format!("spec.config: {error}"),
    };
    let parsed: CniConfig = serde_json::from_str(config)
        .map_err(|e| refused(format!("not a CNI configuration with a name: {e}")))?;
    if !valid_id(&parsed.name) {
        return Err(refused(format!(
            "network name {:?} is not a name (1-255 of A-Z a-z 0-9 . _ -)",
            parsed.name
        )));
    }
    Ok(parsed.name)
}

/// A VF count: a non-negative decimal integer quantity, at most [`MAX_REQUESTS`].
pub fn parse_vf_count(container: &str, resource: &str, quantity: &str) -> Result<usize, VifError> {
    let refused = |error: String| VifError::Resource {
        container: container.to_owned(),
        resource: resource.to_owned(),
        error,
    };
    let text = quantity.trim();
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(refused(format!(
            "quantity {quantity:?} is not a whole number of VFs"
        )));
    }
    match text.parse::<usize>() {
        Ok(n) if n <= MAX_REQUESTS => Ok(n),
        _ => Err(refused(format!(
            "quantity {quantity:?} (at most {MAX_REQUESTS} VFs)"
        ))),
    }
}

#[cfg(test)]
#[path = "annotations/tests.rs"]
mod tests;
