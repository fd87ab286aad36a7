//! Checks of a cluster or machine spec that the CRD schema makes on a management cluster, for
//! standalone mode (`apply -f`), where no API server validates. Each problem names its field.

use std::collections::BTreeSet;

use crate::cidr::Ipv4Cidr;
use crate::crd::{NvidiaBMMClusterSpec, NvidiaBMMMachineSpec, RuleProtocol};

/// One refused field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct FieldError {
    /// The field's path, e.g. `spec.subnets[1].cidr`.
    pub field: String,
    /// What is wrong with it.
    pub problem: String,
}

fn err(field: impl Into<String>, problem: impl Into<String>) -> FieldError {
    FieldError {
        field: field.into(),
        problem: problem.into(),
    }
}

fn check_name(out: &mut Vec<FieldError>, field: String, name: &str) {
    let len = name.chars().count();
    if !(2..=256).contains(&len) {
        out.push(err(
            field,
            format!("{name:?} must be 2 to 256 characters long"),
        ));
    }
}

fn check_port_range(range: &str) -> Result<(), String> {
    let parse = |p: &str| p.parse::<u16>().ok().filter(|p| *p > 0);
    let ok = match range.split_once('-') {
        Some((lo, hi)) => matches!((parse(lo), parse(hi)), (Some(lo), Some(hi)) if lo <= hi),
        None => parse(range).is_some(),
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{range:?} is not a port (1-65535) or a range \"LOW-HIGH\""
        ))
    }
}

/// Every problem of a cluster spec (empty when it is valid).
pub fn validate_cluster(spec: &NvidiaBMMClusterSpec) -> Vec<FieldError> {
    let mut out = Vec::new();
    if spec.site_ref.name.is_none() && spec.site_ref.id.is_none() {
        out.push(err("spec.siteRef", "needs name or id"));
    }
    check_name(&mut out, "spec.vpc.name".into(), &spec.vpc.name);
    if spec.vpc.labels.as_ref().is_some_and(|l| l.len() > 9) {
        out.push(err(
            "spec.vpc.labels",
            "at most 9 labels (the API allows 10, one is the provider's)",
        ));
    }
    if spec.subnets.is_empty() {
        out.push(err("spec.subnets", "at least one subnet is required"));
    }
    let mut names = BTreeSet::new();
    let mut cidrs: Vec<(usize, Ipv4Cidr)> = Vec::new();
    for (i, subnet) in spec.subnets.iter().enumerate() {
        check_name(&mut out, format!("spec.subnets[{i}].name"), &subnet.name);
        if !names.insert(subnet.name.as_str()) {
            out.push(err(
                format!("spec.subnets[{i}].name"),
                format!("{:?} is used twice", subnet.name),
            ));
        }
        match subnet.cidr.parse::<Ipv4Cidr>() {
            Ok(cidr) => {
                if let Some((j, _)) = cidrs
                    .iter()
                    .find(|(_, c)| c.contains(&cidr) || cidr.contains(c))
                {
                    out.push(err(
                        format!("spec.subnets[{i}].cidr"),
                        format!("{cidr} overlaps spec.subnets[{j}].cidr"),
                    ));
                }
                cidrs.push((i, cidr));
            }
            Err(e) => out.push(err(format!("spec.subnets[{i}].cidr"), e.to_string())),
        }
    }
    if let Some(nsg) = &spec.vpc.network_security_group {
        check_name(
            &mut out,
            "spec.vpc.networkSecurityGroup.name".into(),
            &nsg.name,
        );
        for (i, rule) in nsg.rules.iter().enumerate() {
            let at = format!("spec.vpc.networkSecurityGroup.rules[{i}]");
            if let Some(range) = &rule.port_range {
                if matches!(rule.protocol, RuleProtocol::Icmp | RuleProtocol::Any) {
                    out.push(err(
                        format!("{at}.portRange"),
                        "ports are only allowed for TCP and UDP",
                    ));
                } else if let Err(problem) = check_port_range(range) {
                    out.push(err(format!("{at}.portRange"), problem));
                }
            }
            for (field, value) in [
                ("sourceCIDR", &rule.source_cidr),
                ("destinationCIDR", &rule.destination_cidr),
            ] {
                if let Some(Err(e)) = value.as_ref().map(|v| v.parse::<Ipv4Cidr>()) {
                    out.push(err(format!("{at}.{field}"), e.to_string()));
                }
            }
            if rule.priority.is_some_and(|p| !(0..=60000).contains(&p)) {
                out.push(err(format!("{at}.priority"), "must be 0 to 60000"));
            }
        }
    }
    if let Some(endpoint) = &spec.control_plane_endpoint
        && !(0..=65535).contains(&endpoint.port)
    {
        out.push(err("spec.controlPlaneEndpoint.port", "must be 0 to 65535"));
    }
    out
}

/// Every problem of a machine spec, checked against its cluster's subnet names.
pub fn validate_machine(spec: &NvidiaBMMMachineSpec, cluster_subnets: &[&str]) -> Vec<FieldError> {
    let mut out = Vec::new();
    if spec.instance_type.id.is_none() && spec.instance_type.machine_id.is_none() {
        out.push(err("spec.instanceType", "needs id or machineID"));
    }
    if !cluster_subnets.contains(&spec.network.subnet_name.as_str()) {
        out.push(err(
            "spec.network.subnetName",
            format!(
                "{:?} is not a subnet of the cluster",
                spec.network.subnet_name
            ),
        ));
    }
    for (i, extra) in spec.network.additional_interfaces.iter().enumerate() {
        if !cluster_subnets.contains(&extra.subnet_name.as_str()) {
            out.push(err(
                format!("spec.network.additionalInterfaces[{i}].subnetName"),
                format!("{:?} is not a subnet of the cluster", extra.subnet_name),
            ));
        }
        if extra
            .virtual_function_id
            .is_some_and(|v| !(1..=16).contains(&v))
        {
            out.push(err(
                format!("spec.network.additionalInterfaces[{i}].virtualFunctionId"),
                "must be 1 to 16",
            ));
        }
    }
    if spec.labels.as_ref().is_some_and(|l| l.len() > 9) {
        out.push(err(
            "spec.labels",
            "at most 9 labels (the API allows 10, one is the provider's)",
        ));
    }
    out
}

#[cfg(test)]
mod tests;
