//! `ntc status`: where each (instance, site) of a topology deployment stands, read through the
//! Data API — planned, created, prepared, waiting for which gates, approved, to be deleted or
//! left as an orphan, and whether its content is about to change.
//!
//! It plans the deployment's NFTopology against the current sites exactly as the tracker
//! does, and reads the children as the re-plan reads them, so what it shows is what the next
//! re-plan would act on; it writes nothing. The rows are `nephrite_topology::replan`'s
//! ([`instance_statuses`], rendered by `render_table`).

use nephrite_krm::Package;
use nephrite_preparer_client::DataApi;
use nephrite_topology::replan::{StatusRow, instance_statuses};
use nephrite_topology::{RolloutPolicy, plan};

use super::follow::{Fingerprints, existing_children};
use super::{TkoError, data, topology_of};

/// The status rows of the NFTopology (named `topology`, or the first one when empty) in
/// deployment `parent`, planned under `policy` against the current sites.
pub async fn status_rows(
    data: &dyn DataApi,
    parent: &str,
    topology: &str,
    policy: &RolloutPolicy,
) -> Result<Vec<StatusRow>, TkoError> {
    let deployment = data.get_deployment(parent).await?;
    let package = Package::from_yaml(&deployment.package_yaml).map_err(|e| TkoError::Package {
        deployment: parent.to_owned(),
        message: e.to_string(),
    })?;
    let (topology, classes) = topology_of(parent, &package, topology)?;
    let clusters = data::clusters(data).await?;
    let plan =
        plan::plan(&topology, &classes, &clusters, policy).map_err(|source| TkoError::Plan {
            deployment: parent.to_owned(),
            source,
        })?;
    let existing =
        existing_children(data, parent, plan.topology(), &Fingerprints::default()).await?;
    Ok(instance_statuses(&plan, &existing, plan.deletion_policy()))
}
