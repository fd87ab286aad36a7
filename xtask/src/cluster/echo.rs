//! The Deployment `up` leaves in `DIR/echo.yaml` for a first try: three `nephrite/echo` pods,
//! the image taken from containerd only (`imagePullPolicy: Never`, there is no registry), each
//! answering its own name (the downward API's `metadata.name` in `POD_NAME`).

use super::config::echo_image;

/// The file name under the cluster's directory.
pub const FILE: &str = "echo.yaml";

/// The Deployment, as JSON (which kubectl reads as YAML).
pub fn deployment(replicas: u32) -> String {
    let labels = serde_json::json!({"app": "echo"});
    let manifest = serde_json::json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "echo", "namespace": "default", "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "terminationGracePeriodSeconds": 5,
                    "containers": [{
                        "name": "echo",
                        "image": echo_image(),
                        "imagePullPolicy": "Never",
                        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                        "env": [{
                            "name": "POD_NAME",
                            "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
                        }],
                        "readinessProbe": {
                            "httpGet": {"path": "/ready", "port": "http"},
                            "periodSeconds": 2,
                        },
                    }],
                },
            },
        },
    });
    format!("{manifest:#}\n")
}

#[cfg(test)]
mod tests {
    use super::deployment;

    #[test]
    fn the_echo_deployment_never_pulls_and_names_its_pods() {
        let value: serde_json::Value = serde_json::from_str(&deployment(3)).unwrap();
        let container = &value["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(value["spec"]["replicas"], 3);
        assert_eq!(container["imagePullPolicy"], "Never");
        assert_eq!(
            container["image"],
            format!("nephrite/echo:{}", env!("CARGO_PKG_VERSION"))
        );
        assert_eq!(
            container["env"][0]["valueFrom"]["fieldRef"]["fieldPath"],
            "metadata.name"
        );
    }
}
