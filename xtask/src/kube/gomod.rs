//! The wrapper Go module that builds kube-apiserver and etcd from the module proxy.
//!
//! `go install k8s.io/kubernetes/cmd/kube-apiserver@vX` is refused: Kubernetes' own `go.mod`
//! requires its staging modules (`k8s.io/api`, `k8s.io/apiserver`, …) at `v0.0.0` and
//! replaces them with `./staging/...` directories, and `go install` refuses a module with
//! replaces. A module of our own that requires `k8s.io/kubernetes vX` can build its
//! commands, once it replaces each staging module by its published release (`v0.<minor>.<patch>`
//! for `v1.<minor>.<patch>`). The list of staging modules is read from the release's own
//! `go.mod`, so moving the pin needs no hand-kept list.

use anyhow::bail;

/// The wrapper module's path (never published; only names the build).
const MODULE: &str = "nephrite.local/kube-build";

/// The Go language version the wrapper declares (Kubernetes 1.37's own `go` line).
pub const GO_VERSION: &str = "1.26.0";

/// The staging modules' release for Kubernetes `version`: `v1.37.2` → `v0.37.2`.
pub fn staging_version(kubernetes: &str) -> anyhow::Result<String> {
    match kubernetes.strip_prefix("v1.") {
        Some(rest) if rest.split('.').count() == 2 && !rest.contains('-') => {
            Ok(format!("v0.{rest}"))
        }
        _ => bail!(
            "`{kubernetes}` is not a Kubernetes release version (v1.MINOR.PATCH, no pre-release)"
        ),
    }
}

/// The modules Kubernetes' `go.mod` (`text`) replaces with its own `./staging/` directories.
pub fn staging_modules(text: &str) -> anyhow::Result<Vec<String>> {
    let mut modules = Vec::new();
    let mut in_block = false;
    for line in text.lines() {
        let line = line.split("//").next().unwrap_or_default().trim();
        let entry = if in_block {
            if line == ")" {
                in_block = false;
                continue;
            }
            line
        } else if line == "replace (" {
            in_block = true;
            continue;
        } else if let Some(single) = line.strip_prefix("replace ") {
            single
        } else {
            continue;
        };
        if let Some((old, new)) = entry.split_once("=>")
            && new.trim().starts_with("./staging/")
        {
            let old = old.split_whitespace().next().unwrap_or_default();
            modules.push(old.to_owned());
        }
    }
    if modules.is_empty() {
        bail!(
            "k8s.io/kubernetes' go.mod replaces no module with ./staging/ (not Kubernetes' go.mod?)"
        );
    }
    modules.sort();
    Ok(modules)
}

/// The wrapper's `go.mod`: requires `k8s.io/kubernetes` and etcd's server at the pinned
/// versions and maps every staging module to its published release.
pub fn wrapper_go_mod(kubernetes: &str, etcd: &str, staging: &[String]) -> anyhow::Result<String> {
    let staging_release = staging_version(kubernetes)?;
    let mut text = format!(
        "// Written by `cargo xtask kube build` (xtask/src/kube/gomod.rs); go.sum is xtask/kube/go.sum.\n\
         module {MODULE}\n\n\
         go {GO_VERSION}\n\n\
         require (\n\
         \tgo.etcd.io/etcd/server/v3 {etcd}\n\
         \tk8s.io/kubernetes {kubernetes}\n\
         )\n\n\
         replace (\n"
    );
    for module in staging {
        text.push_str(&format!("\t{module} => {module} {staging_release}\n"));
    }
    text.push_str(")\n");
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::{staging_modules, staging_version, wrapper_go_mod};

    const KUBERNETES_GO_MOD: &str = "module k8s.io/kubernetes

go 1.26.0

require (
\tgo.etcd.io/etcd/client/v3 v3.7.0
\tk8s.io/api v0.0.0
)

replace (
\tk8s.io/apiserver => ./staging/src/k8s.io/apiserver
\tk8s.io/api => ./staging/src/k8s.io/api // the types
\tgithub.com/example/fork => github.com/example/fork v1.2.3
)

replace k8s.io/kubectl => ./staging/src/k8s.io/kubectl
";

    #[test]
    fn staging_modules_are_the_ones_replaced_by_staging_directories() {
        assert_eq!(
            staging_modules(KUBERNETES_GO_MOD).unwrap(),
            ["k8s.io/api", "k8s.io/apiserver", "k8s.io/kubectl"]
        );
        let err = staging_modules("module example.com/x\n").unwrap_err();
        assert!(err.to_string().contains("./staging/"), "{err}");
    }

    #[test]
    fn a_kubernetes_release_maps_to_the_staging_release_of_the_same_minor_and_patch() {
        assert_eq!(staging_version("v1.37.2").unwrap(), "v0.37.2");
        for bad in ["1.37.2", "v1.37", "v2.0.1", "v1.37.0-rc.1"] {
            let err = staging_version(bad).unwrap_err();
            assert!(err.to_string().contains(bad), "{err}");
        }
    }

    #[test]
    fn the_wrapper_requires_both_releases_and_replaces_every_staging_module() {
        let staging = staging_modules(KUBERNETES_GO_MOD).unwrap();
        let text = wrapper_go_mod("v1.37.2", "v3.7.0", &staging).unwrap();
        assert!(text.contains("\tk8s.io/kubernetes v1.37.2\n"), "{text}");
        assert!(
            text.contains("\tgo.etcd.io/etcd/server/v3 v3.7.0\n"),
            "{text}"
        );
        for module in &staging {
            assert!(
                text.contains(&format!("\t{module} => {module} v0.37.2\n")),
                "{module} not replaced:\n{text}"
            );
        }
        assert!(!text.contains("github.com/example/fork"), "{text}");
    }
}
