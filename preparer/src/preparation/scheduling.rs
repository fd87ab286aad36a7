//! Calling scheduling plugins (`nephrite.preparer.plugin.v1.Scheduler/Schedule`) when a
//! Placement's entry has resolved its sites: every scheduler registered for the Placement's
//! GVK is asked, in name order, to choose among the sites the previous one left (the first
//! among all the entry's candidates), with the preparer's plugin credentials and timeout. The
//! Placement's children are made only for the last choice, in its order, and every choice is
//! recorded with its reason ([`Decision`]).
//!
//! An answer naming a site that is not a candidate, or naming one twice, is refused, as is a
//! scheduler that cannot answer: the caller then creates no child of the Placement at all, and
//! the deployment stays unprepared with the error (which names the plugin), retried with
//! backoff.

use std::collections::HashSet;
use std::time::Duration;

use nephrite_krm::Gvk;
use nephrite_merge::metadata::Metadata;
use nephrite_proto::nephrite::krm::v1::GroupVersionKind;
use nephrite_proto::nephrite::preparer::plugin::v1::scheduler_client::SchedulerClient;
use nephrite_proto::nephrite::preparer::plugin::v1::{CandidateSite, ScheduleRequest};
use nephrite_runtime::{ClientArgs, Endpoint};
use serde_json::{Value, json};

use crate::store::PluginRecord;

/// How a scheduling error's text starts (after the resource it concerns), so that its record
/// names [`SCHEDULING_FAILED`].
pub(super) const MESSAGE_PREFIX: &str = "scheduling failed: ";

/// The `Prepared=False` reason of a deployment whose scheduler failed or answered wrongly.
pub(super) const SCHEDULING_FAILED: &str = "SchedulingFailed";

/// The condition a scheduled Placement carries (`True`, its message the choices).
pub(super) const SCHEDULED: &str = "Scheduled";

/// A site a Placement entry may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Candidate {
    /// Site id.
    pub(crate) id: String,
    /// Its metadata.
    pub(crate) metadata: Metadata,
}

/// What a scheduler call needs besides the sites.
pub(crate) struct SchedulerCall<'a> {
    /// Time a scheduler gets per call.
    pub(crate) timeout: Duration,
    /// What the preparer presents to the plugin (`--plugin-*`).
    pub(crate) credentials: &'a ClientArgs,
}

/// Which Placement entry is being scheduled.
pub(crate) struct Entry<'a> {
    pub(crate) deployment_id: &'a str,
    pub(crate) package_yaml: &'a str,
    pub(crate) placement_gvk: &'a Gvk,
    pub(crate) placement: &'a str,
    /// The entry's `template` (a Template resource's name) and the id it resolved to.
    pub(crate) template: &'a str,
    pub(crate) template_id: &'a str,
}

/// One scheduler's choice for one Placement entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Decision {
    pub(crate) template: String,
    pub(crate) plugin: String,
    /// How many sites it chose among.
    pub(crate) candidates: usize,
    /// The sites it chose, in order.
    pub(crate) sites: Vec<String>,
    pub(crate) reason: String,
}

impl Decision {
    /// The decision as recorded in the Placement's `status.scheduling`.
    pub(crate) fn to_status(&self) -> Value {
        json!({
            "template": self.template,
            "plugin": self.plugin,
            "candidates": self.candidates,
            "sites": self.sites,
            "reason": self.reason,
        })
    }

    /// One line of the `Scheduled` condition's message.
    pub(crate) fn summary(&self) -> String {
        format!(
            "template {}: scheduler {} chose {} of {} sites ({}): {}",
            self.template,
            self.plugin,
            self.sites.len(),
            self.candidates,
            self.sites.join(", "),
            self.reason
        )
    }
}

/// Runs `schedulers` (in name order) over `candidates`: the sites finally chosen and each
/// scheduler's decision, or the error naming the scheduler that failed.
pub(crate) async fn schedule(
    schedulers: &[PluginRecord],
    call: &SchedulerCall<'_>,
    entry: &Entry<'_>,
    mut candidates: Vec<Candidate>,
) -> Result<(Vec<String>, Vec<Decision>), String> {
    let mut ordered: Vec<&PluginRecord> = schedulers.iter().collect();
    ordered.sort_by(|a, b| a.name.cmp(&b.name));
    let mut decisions = Vec::new();
    for plugin in ordered {
        let (sites, reason) = ask(plugin, call, entry, &candidates).await?;
        let chosen = chosen_sites(&plugin.name, entry, &candidates, &sites)?;
        decisions.push(Decision {
            template: entry.template.to_owned(),
            plugin: plugin.name.clone(),
            candidates: candidates.len(),
            sites,
            reason,
        });
        candidates = chosen;
    }
    Ok((candidates.into_iter().map(|c| c.id).collect(), decisions))
}

/// The candidates `answer` names, in its order; an error naming `plugin` when it names a site
/// that is not a candidate, or one twice.
fn chosen_sites(
    plugin: &str,
    entry: &Entry<'_>,
    candidates: &[Candidate],
    answer: &[String],
) -> Result<Vec<Candidate>, String> {
    let mut seen = HashSet::new();
    answer
        .iter()
        .map(|id| {
            if !seen.insert(id.as_str()) {
                return Err(format!(
                    "{MESSAGE_PREFIX}scheduler {plugin} chose site {id} twice for template {}",
                    entry.template
                ));
            }
            candidates
                .iter()
                .find(|c| &c.id == id)
                .cloned()
                .ok_or_else(|| {
                    format!(
                        "{MESSAGE_PREFIX}scheduler {plugin} chose site {id} for template {}, \
                         which is not one of its {} candidates",
                        entry.template,
                        candidates.len()
                    )
                })
        })
        .collect()
}

/// One scheduler on one entry: its answer (sites, reason).
async fn ask(
    plugin: &PluginRecord,
    call: &SchedulerCall<'_>,
    entry: &Entry<'_>,
    candidates: &[Candidate],
) -> Result<(Vec<String>, String), String> {
    let name = &plugin.name;
    let work = async {
        let endpoint: Endpoint = plugin.endpoint.parse().map_err(|e| {
            format!(
                "{MESSAGE_PREFIX}scheduler {name}: bad endpoint {}: {e}",
                plugin.endpoint
            )
        })?;
        let channel = call
            .credentials
            .dial(&endpoint)
            .await
            .map_err(|e| format!("{MESSAGE_PREFIX}scheduler {name}: {e}"))?;
        let gvk = entry.placement_gvk;
        let request = ScheduleRequest {
            deployment_id: entry.deployment_id.to_owned(),
            package_yaml: entry.package_yaml.to_owned(),
            target_gvk: Some(GroupVersionKind {
                group: gvk.group.clone(),
                version: gvk.version.clone(),
                kind: gvk.kind.clone(),
            }),
            target_name: entry.placement.to_owned(),
            template: entry.template.to_owned(),
            template_id: entry.template_id.to_owned(),
            candidates: candidates
                .iter()
                .map(|c| CandidateSite {
                    id: c.id.clone(),
                    metadata: c.metadata.clone().into_iter().collect(),
                })
                .collect(),
            arguments: plugin.arguments.clone(),
            properties: plugin.properties.clone().into_iter().collect(),
        };
        let response = SchedulerClient::new(channel)
            .schedule(request)
            .await
            .map_err(|status| {
                format!(
                    "{MESSAGE_PREFIX}scheduler {name} failed on template {}: {} ({:?})",
                    entry.template,
                    status.message(),
                    status.code()
                )
            })?
            .into_inner();
        Ok((response.site_ids, response.reason))
    };
    match tokio::time::timeout(call.timeout, work).await {
        Ok(result) => result,
        Err(_) => Err(format!(
            "{MESSAGE_PREFIX}scheduler {name} timed out on template {} after {} ms",
            entry.template,
            call.timeout.as_millis()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidates(ids: &[&str]) -> Vec<Candidate> {
        ids.iter()
            .map(|id| Candidate {
                id: (*id).to_owned(),
                metadata: Metadata::new(),
            })
            .collect()
    }

    fn entry(gvk: &Gvk) -> Entry<'_> {
        Entry {
            deployment_id: "d",
            package_yaml: "",
            placement_gvk: gvk,
            placement: "core",
            template: "gateway",
            template_id: "nf/gateway",
        }
    }

    fn answer(ids: &[&str]) -> Vec<String> {
        ids.iter().map(|id| (*id).to_owned()).collect()
    }

    #[test]
    fn a_choice_keeps_the_answers_order() {
        let gvk = Gvk::new("topology.nephio.org", "v1alpha1", "Placement");
        let chosen = chosen_sites(
            "pick",
            &entry(&gvk),
            &candidates(&["a", "b", "c"]),
            &answer(&["c", "a"]),
        )
        .unwrap();
        assert_eq!(chosen, candidates(&["c", "a"]));
    }

    #[test]
    fn a_site_outside_the_candidates_is_refused_naming_the_plugin() {
        let gvk = Gvk::new("topology.nephio.org", "v1alpha1", "Placement");
        let err = chosen_sites(
            "pick",
            &entry(&gvk),
            &candidates(&["a", "b"]),
            &answer(&["a", "z"]),
        )
        .unwrap_err();
        assert_eq!(
            err,
            "scheduling failed: scheduler pick chose site z for template gateway, which is \
             not one of its 2 candidates"
        );
    }

    #[test]
    fn a_site_chosen_twice_is_refused() {
        let gvk = Gvk::new("topology.nephio.org", "v1alpha1", "Placement");
        let err = chosen_sites(
            "pick",
            &entry(&gvk),
            &candidates(&["a", "b"]),
            &answer(&["b", "b"]),
        )
        .unwrap_err();
        assert_eq!(
            err,
            "scheduling failed: scheduler pick chose site b twice for template gateway"
        );
    }

    #[test]
    fn a_decision_reads_as_one_line() {
        let decision = Decision {
            template: "gateway".into(),
            plugin: "capacity".into(),
            candidates: 5,
            sites: answer(&["dc/a", "dc/b"]),
            reason: "most capacity".into(),
        };
        assert_eq!(
            decision.summary(),
            "template gateway: scheduler capacity chose 2 of 5 sites (dc/a, dc/b): most capacity"
        );
    }
}
