//! The admin kubeconfig of a server: what `kubectl --kubeconfig` and every kube-rs client
//! read.
//!
//! Written as JSON, which every kubeconfig reader accepts (it is YAML), so no value needs
//! YAML quoting. The CA is embedded (`certificate-authority-data`), so the file stands alone.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::json;

/// The cluster, user and context name in the file.
pub(crate) const CONTEXT: &str = "nephrite";

/// A kubeconfig for `url` trusting `ca_pem`, authenticating as `user` with `token`.
pub(crate) fn kubeconfig(url: &str, ca_pem: &str, user: &str, token: &str) -> String {
    let config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{
            "name": CONTEXT,
            "cluster": {
                "server": url,
                "certificate-authority-data": BASE64.encode(ca_pem),
            },
        }],
        "users": [{ "name": user, "user": { "token": token } }],
        "contexts": [{
            "name": CONTEXT,
            "context": { "cluster": CONTEXT, "user": user, "namespace": "default" },
        }],
        "current-context": CONTEXT,
    });
    // `{:#}` is serde_json's pretty form.
    format!("{config:#}\n")
}
