//! Rendering rows for people (tables) and scripts (JSON / YAML).

use nephrite_proto::nephrite::preparer::data::v1::DeploymentInfo;
use serde_json::{Value, json};

/// A deployment row in TKO's DeploymentInfo shape.
pub(super) fn deployment_json(info: &DeploymentInfo) -> Value {
    let metadata: std::collections::BTreeMap<_, _> = info.metadata.iter().collect();
    json!({
        "deploymentId": info.deployment_id,
        "parentDeploymentId": info.parent_deployment_id,
        "templateId": info.template_id,
        "siteId": info.site_id,
        "metadata": metadata,
        "created": info.created,
        "updated": info.updated,
        "prepared": info.prepared,
        "approved": info.approved,
        "error": info.error,
    })
}

/// Aligned columns.
pub(super) fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for row in rows {
        for (at, cell) in row.iter().enumerate() {
            if let Some(width) = widths.get_mut(at) {
                *width = (*width).max(cell.chars().count());
            }
        }
    }
    let mut out = String::new();
    let mut line = |cells: Vec<&str>| {
        let text: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(at, cell)| format!("{cell:<width$}", width = widths[at]))
            .collect();
        out.push_str(text.join("  ").trim_end());
        out.push('\n');
    };
    line(headers.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
    out
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
