//! The CustomResourceDefinitions of `topology.nephio.org/v1alpha1` that `ntc crds` prints:
//! NFTopology (namespaced, status subresource), NFClass (cluster scoped) and NFDeployedTopology
//! (namespaced). The schemas check the structure the controller relies on and keep unknown
//! fields inside `nfTemplate` and `capacity`, so the seed's spellings (`classRef`,
//! `nfAttachments`) are accepted too.

use nephrite_krm::{Object, Package};
use serde_json::{Value, json};

fn crd(kind: &str, plural: &str, scope: &str, schema: Value, status: bool) -> Value {
    let mut version = json!({
        "name": "v1alpha1",
        "served": true,
        "storage": true,
        "schema": {"openAPIV3Schema": schema},
    });
    if status {
        version["subresources"] = json!({"status": {}});
    }
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.topology.nephio.org")},
        "spec": {
            "group": "topology.nephio.org",
            "names": {
                "kind": kind,
                "listKind": format!("{kind}List"),
                "plural": plural,
                "singular": kind.to_ascii_lowercase(),
            },
            "scope": scope,
            "versions": [version],
        }
    })
}

fn preserved() -> Value {
    json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
}

fn selector() -> Value {
    json!({
        "type": "object",
        "properties": {
            "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}},
            "matchExpressions": {"type": "array", "items": {
                "type": "object",
                "required": ["key", "operator"],
                "properties": {
                    "key": {"type": "string"},
                    "operator": {"type": "string", "enum": ["In", "NotIn", "Exists", "DoesNotExist"]},
                    "values": {"type": "array", "items": {"type": "string"}},
                },
            }},
        },
    })
}

fn nf_topology() -> Value {
    let template = json!({
        "type": "object",
        "required": ["nfType"],
        "x-kubernetes-preserve-unknown-fields": true,
        "properties": {
            "nfType": {"type": "string"},
            "className": {"type": "string"},
            "capacity": preserved(),
            "nfInterfaces": {"type": "array", "items": {
                "type": "object",
                "required": ["name", "networkInstanceName"],
                "properties": {"name": {"type": "string"}, "networkInstanceName": {"type": "string"}},
            }},
        },
    });
    let schema = json!({
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": {
                "type": "object",
                "required": ["nfInstances"],
                "properties": {"nfInstances": {"type": "array", "items": {
                    "type": "object",
                    "required": ["name", "nfTemplate"],
                    "properties": {
                        "name": {"type": "string"},
                        "clusterSelector": selector(),
                        "nfTemplate": template,
                    },
                }}},
            },
            "status": preserved(),
        },
    });
    crd("NFTopology", "nftopologies", "Namespaced", schema, true)
}

fn nf_class() -> Value {
    let schema = json!({
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": {
                "type": "object",
                "required": ["packageRef"],
                "properties": {
                    "vendor": {"type": "string"},
                    "version": {"type": "string"},
                    "flavor": {"type": "string"},
                    "packageRef": {
                        "type": "object",
                        "required": ["repository", "packageName"],
                        "properties": {
                            "namespace": {"type": "string"},
                            "repository": {"type": "string"},
                            "packageName": {"type": "string"},
                            "revision": {"type": "string"},
                        },
                    },
                },
            },
        },
    });
    crd("NFClass", "nfclasses", "Cluster", schema, false)
}

fn nf_deployed_topology() -> Value {
    let schema = json!({
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": {
                "type": "object",
                "properties": {"nfInstances": {"type": "array", "items": {
                    "type": "object",
                    "required": ["id"],
                    "properties": {
                        "id": {"type": "string"},
                        "nfInstanceName": {"type": "string"},
                        "clusterName": {"type": "string"},
                        "nfType": {"type": "string"},
                        "nfFlavor": {"type": "string"},
                        "nfVendor": {"type": "string"},
                        "nfVersion": {"type": "string"},
                        "connectivities": {"type": "array", "items": {
                            "type": "object",
                            "required": ["neighborName"],
                            "properties": {"neighborName": {"type": "string"}},
                        }},
                    },
                }}},
            },
        },
    });
    crd(
        "NFDeployedTopology",
        "nfdeployedtopologies",
        "Namespaced",
        schema,
        false,
    )
}

/// The three CRDs, in install order.
pub fn crds() -> Vec<Object> {
    [nf_class(), nf_topology(), nf_deployed_topology()]
        .into_iter()
        .filter_map(|v| Object::from_json(v).ok())
        .collect()
}

/// The CRDs as one multi-document YAML stream.
pub fn crds_yaml() -> String {
    let mut package = Package::new();
    for crd in crds() {
        package.push(crd);
    }
    package.to_yaml()
}
