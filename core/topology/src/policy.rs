//! The rollout policy: rules of the form "an NF of type X waits until every connected NF of
//! type Y is published" (`x:y`). SMF waits for UPF (`smf:upf`) is the shipped default; any
//! number of rules may be configured. Rules that wait on each other in a circle (`a:b` + `b:a`,
//! or `a:a`) could never finish and are refused.
//!
//! The policy does not look at instances: the planner applies it to each deployed instance and
//! its connected neighbours (see [`crate::plan::Plan::gates`]).

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use petgraph::algo::tarjan_scc;
use petgraph::graphmap::DiGraphMap;

use crate::api::NfType;
use crate::error::TopologyError;

/// One rule: `waiter` waits for every connected instance of type `waits_for`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WaitRule {
    /// The gated type (X).
    pub waiter: NfType,
    /// The type it waits for (Y).
    pub waits_for: NfType,
}

impl WaitRule {
    /// `waiter` waits for `waits_for`.
    pub fn new(waiter: &str, waits_for: &str) -> Self {
        WaitRule {
            waiter: NfType::new(waiter),
            waits_for: NfType::new(waits_for),
        }
    }
}

impl fmt::Display for WaitRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.waiter, self.waits_for)
    }
}

impl FromStr for WaitRule {
    type Err = TopologyError;

    /// Reads `x:y` (case-insensitive, spaces around the names ignored).
    fn from_str(rule: &str) -> Result<Self, Self::Err> {
        let invalid = |reason: &str| TopologyError::InvalidRule {
            rule: rule.to_owned(),
            reason: reason.to_owned(),
        };
        let (waiter, waits_for) = rule
            .split_once(':')
            .ok_or_else(|| invalid("expected `waiter:waits-for`, e.g. `smf:upf`"))?;
        let (waiter, waits_for) = (waiter.trim(), waits_for.trim());
        if waiter.is_empty() || waits_for.is_empty() || waits_for.contains(':') {
            return Err(invalid("expected `waiter:waits-for`, e.g. `smf:upf`"));
        }
        Ok(WaitRule::new(waiter, waits_for))
    }
}

/// A set of [`WaitRule`]s without cycles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RolloutPolicy {
    rules: Vec<WaitRule>,
    waits: BTreeMap<NfType, Vec<NfType>>,
}

impl Default for RolloutPolicy {
    /// SMF waits for UPF.
    fn default() -> Self {
        RolloutPolicy::shipped_default()
    }
}

impl RolloutPolicy {
    /// The shipped default: `smf:upf`.
    pub fn shipped_default() -> Self {
        RolloutPolicy::from_acyclic(vec![WaitRule::new("smf", "upf")])
    }

    /// No rule: nothing waits.
    pub fn none() -> Self {
        RolloutPolicy::from_acyclic(Vec::new())
    }

    /// A policy of `rules` (duplicates dropped). Refuses rules that form a cycle, naming the
    /// types on it.
    pub fn new(rules: impl IntoIterator<Item = WaitRule>) -> Result<Self, TopologyError> {
        let mut rules: Vec<WaitRule> = rules.into_iter().collect();
        rules.sort();
        rules.dedup();
        let mut graph: DiGraphMap<&str, ()> = DiGraphMap::new();
        for rule in &rules {
            if rule.waiter == rule.waits_for {
                return Err(TopologyError::PolicyCycle {
                    types: vec![rule.waiter.to_string()],
                });
            }
            graph.add_edge(rule.waiter.as_str(), rule.waits_for.as_str(), ());
        }
        if let Some(cycle) = tarjan_scc(&graph).into_iter().find(|scc| scc.len() > 1) {
            let mut types: Vec<String> = cycle.into_iter().map(str::to_owned).collect();
            types.sort();
            return Err(TopologyError::PolicyCycle { types });
        }
        Ok(RolloutPolicy::from_acyclic(rules))
    }

    /// Reads rules written as `x:y`.
    pub fn parse<S: AsRef<str>>(rules: &[S]) -> Result<Self, TopologyError> {
        let rules = rules
            .iter()
            .map(|r| r.as_ref().parse())
            .collect::<Result<Vec<WaitRule>, _>>()?;
        RolloutPolicy::new(rules)
    }

    fn from_acyclic(rules: Vec<WaitRule>) -> Self {
        let mut waits: BTreeMap<NfType, Vec<NfType>> = BTreeMap::new();
        for rule in &rules {
            waits
                .entry(rule.waiter.clone())
                .or_default()
                .push(rule.waits_for.clone());
        }
        RolloutPolicy { rules, waits }
    }

    /// The rules, sorted.
    pub fn rules(&self) -> &[WaitRule] {
        &self.rules
    }

    /// The types `nf_type` waits for (empty when it waits for nothing).
    pub fn waits_for(&self, nf_type: &NfType) -> &[NfType] {
        self.waits.get(nf_type).map_or(&[], Vec::as_slice)
    }

    /// Whether `waiter` waits for `other`.
    pub fn is_gated_by(&self, waiter: &NfType, other: &NfType) -> bool {
        self.waits_for(waiter).contains(other)
    }

    /// The rollout order of `types`: stage 0 waits for nothing, stage n waits only for types of
    /// earlier stages. Types within a stage are sorted.
    pub fn stages<'a>(&self, types: impl IntoIterator<Item = &'a NfType>) -> Vec<Vec<NfType>> {
        let mut depth: BTreeMap<NfType, usize> = BTreeMap::new();
        let mut wanted: BTreeMap<NfType, usize> = BTreeMap::new();
        for nf_type in types {
            let d = self.depth_of(nf_type, &mut depth);
            wanted.insert(nf_type.clone(), d);
        }
        let mut stages: Vec<Vec<NfType>> = Vec::new();
        for (nf_type, stage) in wanted {
            if stages.len() <= stage {
                stages.resize_with(stage + 1, Vec::new);
            }
            stages[stage].push(nf_type);
        }
        stages.retain(|stage| !stage.is_empty());
        stages
    }

    // The rules are acyclic, so the recursion ends; its depth is bounded by the number of rules.
    fn depth_of(&self, nf_type: &NfType, depth: &mut BTreeMap<NfType, usize>) -> usize {
        if let Some(d) = depth.get(nf_type) {
            return *d;
        }
        let d = self
            .waits_for(nf_type)
            .iter()
            .map(|other| self.depth_of(other, depth) + 1)
            .max()
            .unwrap_or(0);
        depth.insert(nf_type.clone(), d);
        d
    }
}

#[cfg(test)]
mod tests;
