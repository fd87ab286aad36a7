//! Running the client subcommands against a Data API.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, anyhow, bail};
use nephrite_krm::{Gvk, Package};
use nephrite_preparer_client::{
    CatalogQuery, DataApi, DeploymentQuery, DeploymentRequest, Metadata, Plugin, PluginQuery,
    PluginType, PreparerClient, Site, SiteInfo, Template, TemplateInfo,
};
use nephrite_runtime::Endpoint;
use serde_json::{Value, json};

use nephrite_runtime::table::Table;

use super::output::{deployment_json, instance, listing, pairs, render};
use super::{
    CatalogCommand, Cli, Command, DeploymentCommand, GetFormat, Listing, PluginCommand, PluginKind,
};

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
    let client = PreparerClient::new(channel);
    let text = match cli.command {
        Command::Serve(_) | Command::Dashboard => {
            bail!("serve and dashboard are not one-shot client commands")
        }
        Command::Template(command) => catalog(&client, Catalog::Templates, command).await?,
        Command::Site(command) => catalog(&client, Catalog::Sites, command).await?,
        Command::Plugin(command) => plugin(&client, command).await?,
        Command::Deployment(command) => deployment(&client, command).await?,
    };
    print!("{text}");
    Ok(())
}

/// `k=v` arguments as a map.
fn key_values(what: &str, items: &[String]) -> anyhow::Result<BTreeMap<String, String>> {
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
        client: &dyn DataApi,
        id: String,
        metadata: Metadata,
        package_yaml: String,
    ) -> anyhow::Result<bool> {
        Ok(match self {
            Catalog::Templates => {
                let info = TemplateInfo { id, metadata };
                client
                    .register_template(Template { info, package_yaml })
                    .await?
            }
            Catalog::Sites => {
                let info = SiteInfo {
                    id,
                    metadata,
                    ..SiteInfo::default()
                };
                client.register_site(Site { info, package_yaml }).await?
            }
        })
    }

    /// Every (id, metadata) matching `query`.
    async fn list(
        self,
        client: &dyn DataApi,
        query: CatalogQuery,
    ) -> anyhow::Result<Vec<(String, Metadata)>> {
        Ok(match self {
            Catalog::Templates => client
                .all_templates(query)
                .await?
                .into_iter()
                .map(|t| (t.id, t.metadata))
                .collect(),
            Catalog::Sites => client
                .all_sites(query)
                .await?
                .into_iter()
                .map(|s| (s.id, s.metadata))
                .collect(),
        })
    }

    /// An entry's metadata and package.
    async fn get(self, client: &dyn DataApi, id: &str) -> anyhow::Result<(Metadata, String)> {
        Ok(match self {
            Catalog::Templates => {
                let t = client.get_template(id).await?;
                (t.info.metadata, t.package_yaml)
            }
            Catalog::Sites => {
                let s = client.get_site(id).await?;
                (s.info.metadata, s.package_yaml)
            }
        })
    }

    /// Deletes an entry; whether it existed.
    async fn delete(self, client: &dyn DataApi, id: &str) -> anyhow::Result<bool> {
        Ok(match self {
            Catalog::Templates => client.delete_template(id).await?,
            Catalog::Sites => client.delete_site(id).await?,
        })
    }
}

async fn catalog(
    client: &dyn DataApi,
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
                .await?;
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
            let query = CatalogQuery {
                id_patterns: ids,
                metadata_patterns: key_values("--metadata", &metadata)?,
                ..CatalogQuery::default()
            };
            let rows = kind.list(client, query).await?;
            let mut table = Table::new(["ID", "METADATA"]);
            for (id, metadata) in &rows {
                table.row([id.clone(), pairs(metadata)]);
            }
            let ids: Vec<String> = rows.iter().map(|(id, _)| id.clone()).collect();
            let items = rows
                .iter()
                .map(|(id, m)| json!({ "id": id, "metadata": m }))
                .collect();
            listing(&output, noun, &table, &ids, items)
        }
        CatalogCommand::Get { id, output } => {
            let (metadata, package_yaml) = kind.get(client, &id).await?;
            match output {
                GetFormat::Yaml => Ok(package_yaml),
                GetFormat::Json => {
                    let package = Package::from_yaml(&package_yaml)?;
                    render(
                        &json!({ "id": id, "metadata": metadata, "package": package.objects() }),
                        false,
                    )
                }
            }
        }
        CatalogCommand::Delete { id } => {
            if !kind.delete(client, &id).await? {
                bail!("{noun} not found: {id}");
            }
            Ok(String::new())
        }
    }
}

fn parse_trigger(text: &str) -> anyhow::Result<Gvk> {
    let parts: Vec<&str> = text.split('/').collect();
    let (group, version, kind) = match parts.as_slice() {
        [group, version, kind] => (*group, *version, *kind),
        [version, kind] => ("", *version, *kind),
        _ => bail!("--trigger {text:?}: expected GROUP/VERSION/KIND"),
    };
    if version.is_empty() || kind.is_empty() {
        bail!("--trigger {text:?}: expected GROUP/VERSION/KIND");
    }
    Ok(Gvk {
        group: group.to_owned(),
        version: version.to_owned(),
        kind: kind.to_owned(),
    })
}

async fn plugin(client: &dyn DataApi, command: PluginCommand) -> anyhow::Result<String> {
    match command {
        PluginCommand::Register {
            name,
            endpoint,
            plugin_type,
            triggers,
            arguments,
            properties,
        } => {
            let plugin = Plugin {
                plugin_type: match plugin_type {
                    PluginKind::Prepare => PluginType::Prepare,
                    PluginKind::Validate => PluginType::Validate,
                    PluginKind::Schedule => PluginType::Schedule,
                },
                name: name.clone(),
                endpoint,
                arguments,
                properties: key_values("--property", &properties)?,
                triggers: triggers
                    .iter()
                    .map(|t| parse_trigger(t))
                    .collect::<anyhow::Result<_>>()?,
            };
            client.register_plugin(plugin).await?;
            Ok(format!("{name}\n"))
        }
        PluginCommand::List { output } => {
            let plugins = client.all_plugins(PluginQuery::default()).await?;
            let trigger_text = |p: &Plugin| p.trigger_texts(false).join(",");
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
            let p = client.get_plugin(&name).await?;
            let triggers = p.trigger_texts(false);
            render(
                &json!({"name": p.name, "endpoint": p.endpoint, "triggers": triggers, "arguments": p.arguments}),
                false,
            )
        }
        PluginCommand::Delete { name } => {
            if !client.delete_plugin(&name).await? {
                bail!("plugin not found: {name}");
            }
            Ok(String::new())
        }
    }
}

async fn deployment(client: &dyn DataApi, command: DeploymentCommand) -> anyhow::Result<String> {
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
            let created = client
                .create_deployment(DeploymentRequest {
                    parent_id: parent.unwrap_or_default(),
                    template_id: template.unwrap_or_default(),
                    site_id: site.unwrap_or_default(),
                    merge_package_yaml: merged.to_yaml(),
                    merge_metadata: key_values("--metadata", &metadata)?,
                    instance_key: instance_key.unwrap_or_default(),
                    ..DeploymentRequest::default()
                })
                .await?;
            Ok(format!("{}\n", created.deployment_id))
        }
        DeploymentCommand::List {
            parent,
            prepared,
            approved,
            templates,
            sites,
            listing: Listing { metadata, output },
        } => {
            let rows = client
                .all_deployments(DeploymentQuery {
                    parent_id: parent,
                    metadata_patterns: key_values("--metadata", &metadata)?,
                    template_id_patterns: templates,
                    site_id_patterns: sites,
                    prepared,
                    approved,
                    ..DeploymentQuery::default()
                })
                .await?;
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
                    r.id.clone(),
                    r.parent_id.clone(),
                    r.error.clone(),
                ]);
            }
            let ids: Vec<String> = rows.iter().map(|r| r.id.clone()).collect();
            let items = rows.iter().map(deployment_json).collect();
            listing(&output, "deployment", &table, &ids, items)
        }
        DeploymentCommand::Get { id, output } => {
            let deployment = client.get_deployment(&id).await?;
            match output {
                GetFormat::Yaml => Ok(deployment.package_yaml),
                GetFormat::Json => {
                    let package = Package::from_yaml(&deployment.package_yaml)?;
                    let mut row = deployment_json(&deployment.info);
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
                .update_deployment(&id, package.to_yaml(), None)
                .await?;
            Ok(String::new())
        }
        DeploymentCommand::Approve { id } => {
            client.approve_deployment(&id).await?;
            Ok(String::new())
        }
        DeploymentCommand::History { id, output } => {
            let revisions = client.deployment_revisions(&id).await?;
            let mut table = Table::new(["REVISION", "CREATED", "AUTHOR", "SUMMARY"]);
            for r in &revisions {
                table.row([
                    r.number.to_string(),
                    r.created.clone(),
                    r.author.clone(),
                    r.summary.clone(),
                ]);
            }
            let names: Vec<String> = revisions
                .iter()
                .map(|r| format!("{id}@{}", r.number))
                .collect();
            let items = revisions
                .iter()
                .map(|r| {
                    json!({"revision": r.number, "created": r.created, "author": r.author,
                           "summary": r.summary})
                })
                .collect();
            listing(&output, "revision", &table, &names, items)
        }
        DeploymentCommand::Diff { id, from, to } => {
            let old = client.deployment_revision(&id, from).await?;
            let new = client.deployment_revision(&id, to).await?;
            Ok(super::diff::unified(
                &format!("deployment {id} revision {from}"),
                &old.package_yaml,
                &format!("deployment {id} revision {to}"),
                &new.package_yaml,
            ))
        }
        DeploymentCommand::Rollback { id, to } => {
            client.rollback_deployment(&id, to).await?;
            Ok(String::new())
        }
        DeploymentCommand::Delete { id } => {
            if !client.delete_deployment(&id).await? {
                bail!("deployment not found: {id}");
            }
            Ok(String::new())
        }
    }
}
