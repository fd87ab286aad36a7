//! Running the client subcommands against a Data API.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{Context, anyhow, bail};
use nephrite_krm::Package;
use nephrite_proto::nephrite::krm::v1::GroupVersionKind;
use nephrite_proto::nephrite::preparer::data::v1 as pb;
use nephrite_proto::nephrite::preparer::data::v1::data_client::DataClient;
use nephrite_runtime::{AuthChannel, Endpoint};
use serde_json::{Value, json};

use nephrite_runtime::table::Table;

use super::output::{deployment_json, instance, listing, pairs, render};
use super::{CatalogCommand, Cli, Command, DeploymentCommand, GetFormat, Listing, PluginCommand};

/// Runs a client subcommand (not `serve`), printing to stdout.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    let endpoint: Endpoint = cli
        .server
        .parse()
        .with_context(|| format!("--server {}", cli.server))?;
    if matches!(cli.command, Command::Dashboard) {
        return crate::tui::run(&cli.server, &cli.credentials).await;
    }
    let channel = cli.credentials.dial(&endpoint).await?;
    let mut client = DataClient::new(channel);
    let text = match cli.command {
        Command::Serve(_) | Command::Dashboard => {
            bail!("serve and dashboard are not one-shot client commands")
        }
        Command::Template(command) => catalog(&mut client, Catalog::Templates, command).await?,
        Command::Site(command) => catalog(&mut client, Catalog::Sites, command).await?,
        Command::Plugin(command) => plugin(&mut client, command).await?,
        Command::Deployment(command) => deployment(&mut client, command).await?,
    };
    print!("{text}");
    Ok(())
}

/// A failed call as a person reads it: the status message, then what caused it when the call
/// never reached the server (a refused connection, a TLS handshake the server ended).
fn status(status: tonic::Status) -> anyhow::Error {
    let message = status.message();
    match std::error::Error::source(&status).map(nephrite_runtime::report::error_chain) {
        Some(causes) if causes.starts_with(message) => anyhow!("{causes}"),
        Some(causes) => anyhow!("{message}: {causes}"),
        None => anyhow!("{message}"),
    }
}

/// `k=v` arguments as a map.
fn key_values(what: &str, items: &[String]) -> anyhow::Result<HashMap<String, String>> {
    items
        .iter()
        .map(|item| {
            item.split_once('=')
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .filter(|(k, _)| !k.is_empty())
                .ok_or_else(|| anyhow!("{what} {item:?}: expected KEY=VALUE"))
        })
        .collect()
}

/// Reads a package file, checking it is valid YAML / KRM (errors name the file and line).
fn read_package_file(path: &Path) -> anyhow::Result<Package> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    Package::from_yaml(&text).map_err(|e| anyhow!("{}: {e}", path.display()))
}

/// Templates or sites: the two catalogs, whose commands differ only in the calls they make.
#[derive(Clone, Copy)]
enum Catalog {
    Templates,
    Sites,
}

impl Catalog {
    fn noun(self) -> &'static str {
        match self {
            Catalog::Templates => "template",
            Catalog::Sites => "site",
        }
    }

    /// Registers (or replaces) an entry; whether it was new.
    async fn register(
        self,
        client: &mut DataClient<AuthChannel>,
        id: String,
        metadata: HashMap<String, String>,
        package_yaml: String,
    ) -> Result<bool, tonic::Status> {
        Ok(match self {
            Catalog::Templates => {
                client
                    .register_template(pb::RegisterTemplateRequest {
                        id,
                        metadata,
                        package_yaml,
                    })
                    .await?
                    .into_inner()
                    .created
            }
            Catalog::Sites => {
                client
                    .register_site(pb::RegisterSiteRequest {
                        id,
                        metadata,
                        package_yaml,
                        ..Default::default()
                    })
                    .await?
                    .into_inner()
                    .created
            }
        })
    }

    /// One page of (id, metadata).
    async fn page(
        self,
        client: &mut DataClient<AuthChannel>,
        id_patterns: Vec<String>,
        metadata_patterns: HashMap<String, String>,
        window: pb::Window,
    ) -> Result<Vec<(String, HashMap<String, String>)>, tonic::Status> {
        let window = Some(window);
        let mut page = Vec::new();
        match self {
            Catalog::Templates => {
                let request = pb::ListTemplatesRequest {
                    id_patterns,
                    metadata_patterns,
                    window,
                };
                let mut stream = client.list_templates(request).await?.into_inner();
                while let Some(item) = stream.message().await? {
                    page.push((item.id, item.metadata));
                }
            }
            Catalog::Sites => {
                let request = pb::ListSitesRequest {
                    id_patterns,
                    metadata_patterns,
                    window,
                };
                let mut stream = client.list_sites(request).await?.into_inner();
                while let Some(item) = stream.message().await? {
                    page.push((item.id, item.metadata));
                }
            }
        }
        Ok(page)
    }

    /// An entry's metadata and package.
    async fn get(
        self,
        client: &mut DataClient<AuthChannel>,
        id: String,
    ) -> Result<(HashMap<String, String>, String), tonic::Status> {
        let request = pb::GetRequest { id };
        Ok(match self {
            Catalog::Templates => {
                let t = client.get_template(request).await?.into_inner();
                (t.info.unwrap_or_default().metadata, t.package_yaml)
            }
            Catalog::Sites => {
                let s = client.get_site(request).await?.into_inner();
                (s.info.unwrap_or_default().metadata, s.package_yaml)
            }
        })
    }

    /// Deletes an entry; whether it existed.
    async fn delete(
        self,
        client: &mut DataClient<AuthChannel>,
        id: String,
    ) -> Result<bool, tonic::Status> {
        let request = pb::DeleteRequest { id };
        let response = match self {
            Catalog::Templates => client.delete_template(request).await?,
            Catalog::Sites => client.delete_site(request).await?,
        };
        Ok(response.into_inner().deleted)
    }
}

/// Rows per page when a command fetches every page.
const PAGE: u32 = 1000;

async fn catalog(
    client: &mut DataClient<AuthChannel>,
    kind: Catalog,
    command: CatalogCommand,
) -> anyhow::Result<String> {
    let noun = kind.noun();
    match command {
        CatalogCommand::Register { id, file, metadata } => {
            let package = read_package_file(&file)?;
            let metadata = key_values("--metadata", &metadata)?;
            let created = kind
                .register(client, id.clone(), metadata, package.to_yaml())
                .await
                .map_err(status)?;
            tracing::info!(
                "{noun} {id} {}",
                if created { "registered" } else { "replaced" }
            );
            Ok(format!("{id}\n"))
        }
        CatalogCommand::List {
            ids,
            listing: Listing { metadata, output },
        } => {
            let metadata_patterns = key_values("--metadata", &metadata)?;
            let mut rows: Vec<(String, HashMap<String, String>)> = Vec::new();
            let mut after_id = String::new();
            loop {
                let window = pb::Window {
                    offset: 0,
                    max_count: PAGE,
                    after_id: after_id.clone(),
                };
                let page = kind
                    .page(client, ids.clone(), metadata_patterns.clone(), window)
                    .await
                    .map_err(status)?;
                let done = page.len() < PAGE as usize;
                if let Some((last, _)) = page.last() {
                    after_id = last.clone();
                }
                rows.extend(page);
                if done {
                    break;
                }
            }
            let mut table = Table::new(["ID", "METADATA"]);
            for (id, metadata) in &rows {
                table.row([id.clone(), pairs(metadata)]);
            }
            let ids: Vec<String> = rows.iter().map(|(id, _)| id.clone()).collect();
            let items = rows
                .iter()
                .map(|(id, m)| {
                    let m: std::collections::BTreeMap<_, _> = m.iter().collect();
                    json!({ "id": id, "metadata": m })
                })
                .collect();
            listing(&output, noun, &table, &ids, items)
        }
        CatalogCommand::Get { id, output } => {
            let (metadata, package_yaml) = kind.get(client, id.clone()).await.map_err(status)?;
            match output {
                GetFormat::Yaml => Ok(package_yaml),
                GetFormat::Json => {
                    let package = Package::from_yaml(&package_yaml)?;
                    let m: std::collections::BTreeMap<_, _> = metadata.iter().collect();
                    render(
                        &json!({ "id": id, "metadata": m, "package": package.objects() }),
                        false,
                    )
                }
            }
        }
        CatalogCommand::Delete { id } => {
            if !kind.delete(client, id.clone()).await.map_err(status)? {
                bail!("{noun} not found: {id}");
            }
            Ok(String::new())
        }
    }
}

fn parse_trigger(text: &str) -> anyhow::Result<GroupVersionKind> {
    let parts: Vec<&str> = text.split('/').collect();
    let (group, version, kind) = match parts.as_slice() {
        [group, version, kind] => (*group, *version, *kind),
        [version, kind] => ("", *version, *kind),
        _ => bail!("--trigger {text:?}: expected GROUP/VERSION/KIND"),
    };
    if version.is_empty() || kind.is_empty() {
        bail!("--trigger {text:?}: expected GROUP/VERSION/KIND");
    }
    Ok(GroupVersionKind {
        group: group.to_owned(),
        version: version.to_owned(),
        kind: kind.to_owned(),
    })
}

/// A plugin's triggers as `group/version/Kind`.
fn trigger_texts(plugin: &pb::Plugin) -> Vec<String> {
    plugin
        .triggers
        .iter()
        .map(|t| format!("{}/{}/{}", t.group, t.version, t.kind))
        .collect()
}

async fn plugin(
    client: &mut DataClient<AuthChannel>,
    command: PluginCommand,
) -> anyhow::Result<String> {
    match command {
        PluginCommand::Register {
            name,
            endpoint,
            triggers,
            arguments,
            properties,
        } => {
            let plugin = pb::Plugin {
                r#type: pb::PluginType::Prepare as i32,
                name: name.clone(),
                endpoint,
                arguments,
                properties: key_values("--property", &properties)?,
                triggers: triggers
                    .iter()
                    .map(|t| parse_trigger(t))
                    .collect::<anyhow::Result<_>>()?,
            };
            client
                .register_plugin(pb::RegisterPluginRequest {
                    plugin: Some(plugin),
                })
                .await
                .map_err(status)?;
            Ok(format!("{name}\n"))
        }
        PluginCommand::List { output } => {
            let mut stream = client
                .list_plugins(pb::ListPluginsRequest {
                    window: Some(pb::Window {
                        max_count: PAGE,
                        ..Default::default()
                    }),
                    ..Default::default()
                })
                .await
                .map_err(status)?
                .into_inner();
            let mut plugins = Vec::new();
            while let Some(p) = stream.message().await.map_err(status)? {
                plugins.push(p);
            }
            let trigger_text = |p: &pb::Plugin| trigger_texts(p).join(",");
            let mut table = Table::new(["NAME", "ENDPOINT", "TRIGGERS"]);
            for p in &plugins {
                table.row([p.name.clone(), p.endpoint.clone(), trigger_text(p)]);
            }
            let names: Vec<String> = plugins.iter().map(|p| p.name.clone()).collect();
            let items = plugins
                .iter()
                .map(|p| json!({"name": p.name, "endpoint": p.endpoint, "triggers": trigger_text(p)}))
                .collect();
            listing(&output, "plugin", &table, &names, items)
        }
        PluginCommand::Get { name } => {
            let p = client
                .get_plugin(pb::GetRequest { id: name })
                .await
                .map_err(status)?
                .into_inner();
            let triggers = trigger_texts(&p);
            render(
                &json!({"name": p.name, "endpoint": p.endpoint, "triggers": triggers, "arguments": p.arguments}),
                false,
            )
        }
        PluginCommand::Delete { name } => {
            let deleted = client
                .delete_plugin(pb::DeleteRequest { id: name.clone() })
                .await
                .map_err(status)?
                .into_inner()
                .deleted;
            if !deleted {
                bail!("plugin not found: {name}");
            }
            Ok(String::new())
        }
    }
}

async fn deployment(
    client: &mut DataClient<AuthChannel>,
    command: DeploymentCommand,
) -> anyhow::Result<String> {
    match command {
        DeploymentCommand::Create {
            template,
            site,
            parent,
            merge,
            metadata,
            instance_key,
        } => {
            let mut merged = Package::new();
            for path in &merge {
                merged.extend(read_package_file(path)?);
            }
            let response = client
                .create_deployment(pb::CreateDeploymentRequest {
                    parent_deployment_id: parent.unwrap_or_default(),
                    template_id: template.unwrap_or_default(),
                    site_id: site.unwrap_or_default(),
                    merge_package_yaml: merged.to_yaml(),
                    merge_metadata: key_values("--metadata", &metadata)?,
                    instance_key: instance_key.unwrap_or_default(),
                    ..Default::default()
                })
                .await
                .map_err(status)?
                .into_inner();
            Ok(format!("{}\n", response.deployment_id))
        }
        DeploymentCommand::List {
            parent,
            prepared,
            approved,
            templates,
            sites,
            listing: Listing { metadata, output },
        } => {
            let metadata_patterns = key_values("--metadata", &metadata)?;
            let mut rows = Vec::new();
            let mut after_id = String::new();
            loop {
                let page = client
                    .list_deployments(pb::ListDeploymentsRequest {
                        parent_deployment_id: parent.clone().unwrap_or_default(),
                        metadata_patterns: metadata_patterns.clone(),
                        template_id_patterns: templates.clone(),
                        site_id_patterns: sites.clone(),
                        prepared,
                        approved,
                        window: Some(pb::Window {
                            offset: 0,
                            max_count: PAGE,
                            after_id: after_id.clone(),
                        }),
                        ..Default::default()
                    })
                    .await
                    .map_err(status)?
                    .into_inner();
                rows.extend(page.deployments);
                if page.next_after_id.is_empty() {
                    break;
                }
                after_id = page.next_after_id;
            }
            let mut table = Table::new([
                "TEMPLATE", "SITE", "INSTANCE", "PREPARED", "APPROVED", "ID", "PARENT", "ERROR",
            ]);
            for r in &rows {
                table.row([
                    r.template_id.clone(),
                    r.site_id.clone(),
                    instance(r),
                    r.prepared.to_string(),
                    r.approved.to_string(),
                    r.deployment_id.clone(),
                    r.parent_deployment_id.clone(),
                    r.error.clone(),
                ]);
            }
            let ids: Vec<String> = rows.iter().map(|r| r.deployment_id.clone()).collect();
            let items = rows.iter().map(deployment_json).collect();
            listing(&output, "deployment", &table, &ids, items)
        }
        DeploymentCommand::Get { id, output } => {
            let deployment = client
                .get_deployment(pb::GetRequest { id })
                .await
                .map_err(status)?
                .into_inner();
            match output {
                GetFormat::Yaml => Ok(deployment.package_yaml),
                GetFormat::Json => {
                    let package = Package::from_yaml(&deployment.package_yaml)?;
                    let mut row = deployment_json(&deployment.info.unwrap_or_default());
                    if let Value::Object(map) = &mut row {
                        map.insert("package".into(), serde_json::to_value(package.objects())?);
                    }
                    render(&row, false)
                }
            }
        }
        DeploymentCommand::Update { id, file } => {
            let package = read_package_file(&file)?;
            client
                .update_deployment(pb::UpdateDeploymentRequest {
                    deployment_id: id,
                    package_yaml: package.to_yaml(),
                    modification_token: String::new(),
                })
                .await
                .map_err(status)?;
            Ok(String::new())
        }
        DeploymentCommand::Approve { id } => {
            client
                .approve_deployment(pb::ApproveDeploymentRequest { deployment_id: id })
                .await
                .map_err(status)?;
            Ok(String::new())
        }
        DeploymentCommand::Delete { id } => {
            let deleted = client
                .delete_deployment(pb::DeleteRequest { id: id.clone() })
                .await
                .map_err(status)?
                .into_inner()
                .deleted;
            if !deleted {
                bail!("deployment not found: {id}");
            }
            Ok(String::new())
        }
    }
}
