//! Printing a plan: `-o json` and `-o yaml` print the [`PlanReport`] (one document with
//! `packageVariantSets`, `gates`, `deployedTopology`, `rolloutOrder` and, when present,
//! `capacities` and `unplaced`); `-o table` prints one line per deployed instance.

use nephrite_runtime::table::Table;
use nephrite_topology::Plan;
use nephrite_topology::status::{PlanReport, plan_report};

/// The output formats of `ntc plan`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// One YAML document.
    Yaml,
    /// One JSON document.
    Json,
    /// A table for people.
    Table,
}

/// Serialising the report failed.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// JSON.
    #[error("writing JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// YAML.
    #[error("writing YAML: {0}")]
    Yaml(#[from] serde_norway::Error),
}

/// Renders `plan` in `format`.
pub fn render(plan: &Plan, format: Format) -> Result<String, OutputError> {
    match format {
        Format::Json => {
            let report: PlanReport = plan_report(plan);
            let mut text = serde_json::to_string_pretty(&report)?;
            text.push('\n');
            Ok(text)
        }
        Format::Yaml => Ok(serde_norway::to_string(&plan_report(plan))?),
        Format::Table => Ok(table(plan)),
    }
}

fn table(plan: &Plan) -> String {
    let order = plan.rollout_order();
    let stage_of = |v: usize| {
        order
            .iter()
            .position(|stage| stage.contains(plan.nf_type(v)))
            .map_or(0, |s| s + 1)
    };
    let mut table = Table::new(["DEPLOYED ID", "CLUSTER", "TYPE", "STAGE", "WAITS FOR"]);
    for (v, variant) in plan.variants().iter().enumerate() {
        let waits: Vec<&str> = plan
            .gates(v)
            .iter()
            .map(|g| plan.variants()[g.waits_for].id.as_str())
            .collect();
        table.row([
            variant.id.clone(),
            variant.cluster.clone(),
            plan.nf_type(v).to_string(),
            stage_of(v).to_string(),
            if waits.is_empty() {
                "-".to_owned()
            } else {
                waits.join(",")
            },
        ]);
    }
    let mut out = table.render();
    for instance in plan.unplaced() {
        out.push_str(&format!(
            "instance {instance}: no cluster matches its selector\n"
        ));
    }
    out
}
