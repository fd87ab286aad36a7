//! Rendering rows for people (tables) and scripts (JSON / YAML).

use nephrite_preparer_client::DeploymentInfo;
use nephrite_runtime::table::Table;
use serde_json::{Value, json};

use super::ListFormat;

/// A deployment row in TKO's DeploymentInfo shape.
pub(super) fn deployment_json(info: &DeploymentInfo) -> Value {
    json!({
        "deploymentId": info.id,
        "parentDeploymentId": info.parent_id,
        "templateId": info.template_id,
        "siteId": info.site_id,
        "metadata": info.metadata,
        "created": info.created,
        "updated": info.updated,
        "prepared": info.prepared,
        "approved": info.approved,
        "error": info.error,
        "instanceKey": info.instance_key,
    })
}

/// A listing in `format`: `table` as given; `json` / `yaml` the items; `name` as `KIND/ID`
/// lines; `jsonpath=` over `{"kind": "List", "items": [...]}`.
pub(super) fn listing(
    format: &ListFormat,
    kind: &str,
    table: &Table,
    ids: &[String],
    items: Vec<Value>,
) -> anyhow::Result<String> {
    Ok(match format {
        ListFormat::Table => table.render(),
        ListFormat::Name => ids.iter().map(|id| format!("{kind}/{id}\n")).collect(),
        ListFormat::Json | ListFormat::Yaml => {
            render(&Value::Array(items), *format == ListFormat::Yaml)?
        }
        ListFormat::JsonPath(template) => template.render(&json!({"kind": "List", "items": items})),
    })
}

/// The name a person recognises a child deployment by: its instance key (the NF's deployed id,
/// when ntc created it), `-` for a deployment without one.
pub(super) fn instance(info: &DeploymentInfo) -> String {
    if info.instance_key.is_empty() {
        "-".to_owned()
    } else {
        info.instance_key.clone()
    }
}

/// `k=v` pairs as text.
pub(super) fn pairs<'a>(map: impl IntoIterator<Item = (&'a String, &'a String)>) -> String {
    let mut pairs: Vec<String> = map.into_iter().map(|(k, v)| format!("{k}={v}")).collect();
    pairs.sort();
    pairs.join(",")
}

/// JSON or YAML text of `value`.
pub(super) fn render(value: &Value, yaml: bool) -> anyhow::Result<String> {
    Ok(if yaml {
        serde_norway::to_string(value)?
    } else {
        let mut text = serde_json::to_string_pretty(value)?;
        text.push('\n');
        text
    })
}
