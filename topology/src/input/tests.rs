use super::*;
use std::io::Write as _;

fn file(text: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    f.write_all(text.as_bytes()).unwrap();
    f
}

#[test]
fn clusters_as_a_list_or_as_workload_clusters() {
    let list = file("# clusters\n- name: a\n  labels: {role: edge}\n- name: b\n");
    let clusters = read_clusters(list.path()).unwrap();
    assert_eq!(
        clusters,
        [
            Cluster::new("a", [("role", "edge")]),
            Cluster::new("b", Vec::<(String, String)>::new())
        ]
    );
    let objects = file(
        "apiVersion: infra.nephio.org/v1alpha1\nkind: WorkloadCluster\nmetadata: {name: a, labels: {role: edge}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: other}\n",
    );
    assert_eq!(
        read_clusters(objects.path()).unwrap(),
        [Cluster::new("a", [("role", "edge")])]
    );
}

#[test]
fn errors_name_the_file_and_line() {
    let bad = file("- name: a\n  labels: [x\n");
    let err = read_clusters(bad.path()).unwrap_err().to_string();
    assert!(err.starts_with(&bad.path().display().to_string()), "{err}");
    assert!(err.contains("line"), "{err}");

    let bad = file(
        "apiVersion: topology.nephio.org/v1alpha1\nkind: NFTopology\nmetadata: {name: t}\nspec:\n  nfInstances: [\n",
    );
    let err = read_topology(bad.path()).unwrap_err().to_string();
    assert!(err.starts_with(&bad.path().display().to_string()), "{err}");
    assert!(err.contains("line"), "{err}");

    let missing_template = file(
        "apiVersion: topology.nephio.org/v1alpha1\nkind: NFTopology\nmetadata: {name: t}\nspec:\n  nfInstances:\n  - name: a\n",
    );
    let err = read_topology(missing_template.path())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("document 0 (starting at line 1, NFTopology \"t\")")
            && err.contains("nfTemplate"),
        "{err}"
    );
    let second = file(concat!(
        "# classes\n",
        "apiVersion: topology.nephio.org/v1alpha1\nkind: NFClass\nmetadata: {name: a}\n",
        "spec: {packageRef: {repository: r, packageName: p}}\n",
        "---\n\n# broken\n",
        "apiVersion: topology.nephio.org/v1alpha1\nkind: NFClass\nmetadata: {name: b}\n",
        "spec: {vendor: x}\n",
    ));
    let err = read_classes(second.path()).unwrap_err().to_string();
    assert!(
        err.contains("document 1 (starting at line 9, NFClass \"b\")")
            && err.contains("packageRef"),
        "{err}"
    );

    let none = file("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n");
    assert!(
        read_topology(none.path())
            .unwrap_err()
            .to_string()
            .ends_with("no NFTopology object found")
    );
    let err = read_classes(Path::new("/nonexistent/classes.yaml"))
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("/nonexistent/classes.yaml: "), "{err}");
}
