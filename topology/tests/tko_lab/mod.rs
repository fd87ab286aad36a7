//! What the TKO backend's tests (`tko_backend.rs`, `tko_auth.rs`, `tko_follow.rs`,
//! `tko_election.rs`) share: the example topology's files, `preparer serve` flags parsed as the
//! binary parses them, and the example registered in a preparer.

use std::path::Path;

use nephrite_preparer::daemon::ServeCommand;
use nephrite_preparer_client::{DataApi, Site, SiteInfo, Template, TemplateInfo};

/// A file of `examples/free5gc`.
pub fn example(file: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/free5gc")
        .join(file);
    std::fs::read_to_string(path).expect("example file")
}

/// `preparer serve` flags, parsed as the binary parses them (so a new flag needs no edit here).
#[derive(clap::Parser)]
pub struct PreparerFlags {
    /// The `serve` command.
    #[command(flatten)]
    pub serve: ServeCommand,
}

/// Registers a site with the labels the example topology selects on (site type and region).
#[allow(
    dead_code,
    reason = "tko_backend and tko_auth share this module without registering"
)]
pub async fn register_site(
    data: &impl DataApi,
    id: &str,
    kind: &str,
    region: &str,
) -> anyhow::Result<()> {
    let config =
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: site-config}\ndata: {mode: demo}\n";
    data.register_site(Site {
        info: SiteInfo {
            id: id.into(),
            metadata: [
                ("Site.nephio.org/site-type".to_owned(), kind.to_owned()),
                ("Site.nephio.org/region".to_owned(), region.to_owned()),
            ]
            .into(),
            ..Default::default()
        },
        package_yaml: config.into(),
    })
    .await?;
    Ok(())
}

/// Registers the example in a preparer: the NFs' blueprints, `sites` (id, site type, region)
/// and the topology's template (the NFTopology with its classes).
#[allow(
    dead_code,
    reason = "tko_backend and tko_auth share this module without registering"
)]
pub async fn register_example(
    data: &impl DataApi,
    sites: &[(&str, &str, &str)],
) -> anyhow::Result<()> {
    let config =
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: nf-config}\ndata: {mode: demo}\n";
    for template in [
        "pkg-example-upf-bp",
        "pkg-example-smf-bp",
        "pkg-example-amf-bp",
    ] {
        data.register_template(Template {
            info: TemplateInfo {
                id: template.into(),
                metadata: Default::default(),
            },
            package_yaml: config.into(),
        })
        .await?;
    }
    for (id, kind, region) in sites {
        register_site(data, id, kind, region).await?;
    }
    data.register_template(Template {
        info: TemplateInfo {
            id: "free5gc-topology".into(),
            metadata: Default::default(),
        },
        package_yaml: format!(
            "{}---\n{}",
            example("topology.yaml"),
            example("classes.yaml")
        ),
    })
    .await?;
    Ok(())
}
