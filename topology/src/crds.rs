//! The CustomResourceDefinitions of `topology.nephio.org/v1alpha1` that `ntc crds` prints:
//! NFTopology (namespaced, status subresource), NFClass (cluster scoped) and NFDeployedTopology
//! (namespaced). The schemas check the structure the controller relies on and keep unknown
//! fields inside `nfTemplate` and `capacity`, so the seed's spellings (`classRef`,
//! `nfAttachments`) are accepted too. Each carries printer columns, so `kubectl get` shows
//! what an operator looks for (deployed count and readiness, a class's vendor and package, the
//! deployed instances) rather than only a name and an age.

use nephrite_krm::{Object, Package};
use nephrite_topology::api::DeletionPolicy;
use serde_json::{Value, json};

/// A printer column: its header, type and the JSONPath `kubectl get` reads.
struct Column {
    name: &'static str,
    kind: &'static str,
    path: &'static str,
}

const fn column(name: &'static str, kind: &'static str, path: &'static str) -> Column {
    Column { name, kind, path }
}

fn crd(
    kind: &str,
    plural: &str,
    scope: &str,
    schema: Value,
    status: bool,
    columns: &[Column],
) -> Value {
    let mut printer_columns: Vec<Value> = columns
        .iter()
        .map(|c| json!({"name": c.name, "type": c.kind, "jsonPath": c.path}))
        .collect();
    printer_columns
        .push(json!({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}));
    let mut version = json!({
        "name": "v1alpha1",
        "served": true,
        "storage": true,
        "schema": {"openAPIV3Schema": schema},
        "additionalPrinterColumns": printer_columns,
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

/// `spec.deletionPolicy`'s values, as `nephrite_topology` reads them.
fn deletion_policies() -> Vec<&'static str> {
    [DeletionPolicy::Delete, DeletionPolicy::Orphan]
        .iter()
        .map(|p| p.as_str())
        .collect()
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
                "properties": {
                    "nfInstances": {"type": "array", "items": {
                        "type": "object",
                        "required": ["name", "nfTemplate"],
                        "properties": {
                            "name": {"type": "string"},
                            "clusterSelector": selector(),
                            "nfTemplate": template,
                        },
                    }},
                    // Without it in the schema the API server would prune the field silently,
                    // and every topology would run with the default.
                    "deletionPolicy": {
                        "type": "string",
                        "enum": deletion_policies(),
                    },
                },
            },
            "status": preserved(),
        },
    });
    crd(
        "NFTopology",
        "nftopologies",
        "Namespaced",
        schema,
        true,
        &[
            column("Deployed", "integer", ".status.numNFDeployed"),
            column(
                "Ready",
                "string",
                ".status.conditions[?(@.type==\"Ready\")].status",
            ),
            column("Instances", "string", ".spec.nfInstances[*].name"),
        ],
    )
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
    crd(
        "NFClass",
        "nfclasses",
        "Cluster",
        schema,
        false,
        &[
            column("Vendor", "string", ".spec.vendor"),
            column("Version", "string", ".spec.version"),
            column("Flavor", "string", ".spec.flavor"),
            column("Package", "string", ".spec.packageRef.packageName"),
        ],
    )
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
        &[
            column("Instances", "string", ".spec.nfInstances[*].id"),
            column("Clusters", "string", ".spec.nfInstances[*].clusterName"),
        ],
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The schema node a printer column's JSONPath reaches, following `properties` for fields
    /// and `items` for `[*]` and filters; `None` when the path leaves the schema.
    fn schema_at<'a>(schema: &'a Value, path: &str) -> Option<&'a Value> {
        let mut node = schema;
        for segment in path.trim_start_matches('.').split('.') {
            let (field, indexed) = match segment.find('[') {
                Some(at) => (&segment[..at], true),
                None => (segment, false),
            };
            node = node.get("properties")?.get(field)?;
            if indexed {
                node = node.get("items")?;
            }
        }
        Some(node)
    }

    #[test]
    fn every_printer_column_reads_a_field_of_the_schema() {
        for crd in [nf_class(), nf_topology(), nf_deployed_topology()] {
            let version = &crd["spec"]["versions"][0];
            let schema = &version["schema"]["openAPIV3Schema"];
            let columns = version["additionalPrinterColumns"].as_array().unwrap();
            assert!(
                columns.len() >= 3,
                "{}: {columns:?}",
                crd["metadata"]["name"]
            );
            for column in columns {
                let path = column["jsonPath"].as_str().unwrap();
                if path == ".metadata.creationTimestamp" {
                    continue;
                }
                // `.status` is preserved as a whole (no properties): a column reading it is
                // checked against the typed status instead.
                if path.starts_with(".status.") {
                    let field = path.trim_start_matches(".status.");
                    let field = field.split(['.', '[']).next().unwrap();
                    let status = serde_json::to_value(nephrite_topology::api::NFTopologyStatus {
                        num_nf_deployed: 1,
                        conditions: vec![nephrite_krm::Condition::new(
                            "Ready",
                            nephrite_krm::ConditionStatus::True,
                        )],
                        ..Default::default()
                    })
                    .unwrap();
                    assert!(
                        status.get(field).is_some(),
                        "{path}: not in NFTopologyStatus"
                    );
                    continue;
                }
                assert!(
                    schema_at(schema, path).is_some(),
                    "{}: column {} reads {path}, which the schema does not have",
                    crd["metadata"]["name"],
                    column["name"]
                );
            }
        }
    }
}
