//! The multi-VIF driver: a pod and the configuration → the VIFs the pod needs.
//!
//! Each enabled driver reads its own annotation or resources and is skipped when the pod has
//! none. Every driver's errors are collected, so one message tells the user everything wrong
//! with the pod; a pod with any error gets no plan at all (nothing is half-allocated).

use std::collections::BTreeMap;

use crate::annotations::{
    ADDITIONAL_SUBNETS, KURYR_CONFIG, MAX_REQUESTS, NETWORKS, OPAQUE_SRIOV_PREFIX, SPEC_PORTS,
    parse_id_list, parse_kuryr_config, parse_networks, parse_nimbess_config, parse_vf_count,
    valid_id,
};
use crate::{
    AttachmentFlavor, Config, Driver, MAIN_IFNAME, NetworkAttachment, PlanError, Pod, Target,
    VifError, VifRequest, VnicType,
};

/// The VIFs `pod` needs under `config`, the main VIF first, then each enabled driver's in
/// the configured order. `attachments` are the NetworkAttachmentDefinitions the handler knows
/// (only those the pod names are read). Deterministic: the same inputs give the same list.
pub fn desired(
    pod: &Pod,
    config: &Config,
    attachments: &[NetworkAttachment],
) -> Result<Vec<VifRequest>, PlanError> {
    let mut requests = vec![VifRequest {
        key: "main".to_owned(),
        driver: Driver::Generic,
        target: Target::PodNetwork,
        vnic_type: Some(VnicType::Normal),
        interface: Some(MAIN_IFNAME.to_owned()),
        attachment: None,
    }];
    let mut errors = Vec::new();
    for &driver in config.drivers.order() {
        let result = match driver {
            Driver::Generic => Ok(Vec::new()),
            Driver::AdditionalSubnets => additional_subnets(pod),
            Driver::Sriov => sriov(pod, config),
            Driver::SpecificPorts => specific_ports(pod),
            Driver::NpwgMultipleInterfaces => npwg(pod, config, attachments),
        };
        match result {
            Ok(more) => requests.extend(more),
            Err(e) => errors.push(e),
        }
    }
    if !errors.is_empty() {
        return Err(PlanError(errors));
    }
    let extra = requests.len() - 1;
    if extra > MAX_REQUESTS {
        return Err(PlanError(vec![VifError::Annotation {
            annotation: "(all drivers)".to_owned(),
            error: format!("{extra} additional VIFs (at most {MAX_REQUESTS})"),
        }]));
    }
    Ok(requests)
}

/// `key/<n>`, counting repeats of `key` from 0.
fn numbered(seen: &mut BTreeMap<String, usize>, key: String) -> String {
    let n = seen.entry(key.clone()).or_insert(0);
    let out = format!("{key}/{n}");
    *n += 1;
    out
}

fn additional_subnets(pod: &Pod) -> Result<Vec<VifRequest>, VifError> {
    let Some(value) = pod.annotations.get(ADDITIONAL_SUBNETS) else {
        return Ok(Vec::new());
    };
    let mut seen = BTreeMap::new();
    Ok(parse_id_list(ADDITIONAL_SUBNETS, value)?
        .into_iter()
        .map(|id| VifRequest {
            key: numbered(&mut seen, format!("subnet/{id}")),
            driver: Driver::AdditionalSubnets,
            target: Target::Subnet { id },
            vnic_type: Some(VnicType::Normal),
            interface: None,
            attachment: None,
        })
        .collect())
}

fn specific_ports(pod: &Pod) -> Result<Vec<VifRequest>, VifError> {
    let Some(value) = pod.annotations.get(SPEC_PORTS) else {
        return Ok(Vec::new());
    };
    let ids = parse_id_list(SPEC_PORTS, value)?;
    let mut requests: Vec<VifRequest> = Vec::with_capacity(ids.len());
    for id in ids {
        let key = format!("port/{id}");
        if requests.iter().any(|r| r.key == key) {
            return Err(VifError::Annotation {
                annotation: SPEC_PORTS.to_owned(),
                error: format!("port {id} is listed twice (a port plugs into one interface)"),
            });
        }
        requests.push(VifRequest {
            key,
            driver: Driver::SpecificPorts,
            target: Target::Port { id },
            vnic_type: None,
            interface: None,
            attachment: None,
        });
    }
    Ok(requests)
}

/// VFs per physnet summed over the containers: the seed's opaque-int resources (physnet in
/// the name) and device-plugin resources mapped by `config.sriov_resources`.
fn sriov(pod: &Pod, config: &Config) -> Result<Vec<VifRequest>, VifError> {
    let mut per_physnet: BTreeMap<String, usize> = BTreeMap::new();
    for container in &pod.containers {
        for resource in container.resources() {
            let physnet = if let Some(physnet) = resource.strip_prefix(OPAQUE_SRIOV_PREFIX) {
                if !valid_id(physnet) {
                    return Err(VifError::Resource {
                        container: container.name.clone(),
                        resource: resource.to_owned(),
                        error: format!("{physnet:?} is not a physical network name"),
                    });
                }
                physnet
            } else if let Some(physnet) = config.sriov_resources.get(resource) {
                physnet.as_str()
            } else {
                continue;
            };
            let quantity = container.requested(resource).unwrap_or_default();
            let count = parse_vf_count(&container.name, resource, quantity)?;
            let total = per_physnet.entry(physnet.to_owned()).or_insert(0);
            *total += count;
            if *total > MAX_REQUESTS {
                return Err(VifError::Resource {
                    container: container.name.clone(),
                    resource: resource.to_owned(),
                    error: format!("{total} VFs on {physnet} (at most {MAX_REQUESTS})"),
                });
            }
        }
    }
    let mut requests = Vec::new();
    for (physnet, count) in per_physnet {
        for n in 0..count {
            requests.push(VifRequest {
                key: format!("sriov/{physnet}/{n}"),
                driver: Driver::Sriov,
                target: Target::Physnet {
                    physnet: physnet.clone(),
                },
                vnic_type: Some(VnicType::Direct),
                interface: None,
                attachment: None,
            });
        }
    }
    Ok(requests)
}

fn npwg(
    pod: &Pod,
    config: &Config,
    attachments: &[NetworkAttachment],
) -> Result<Vec<VifRequest>, VifError> {
    let Some(value) = pod.annotations.get(NETWORKS) else {
        return Ok(Vec::new());
    };
    let mut seen = BTreeMap::new();
    let mut requests = Vec::new();
    for selection in parse_networks(&pod.namespace, value)? {
        let reference = format!("{}/{}", selection.namespace, selection.name);
        let attachment = attachments
            .iter()
            .find(|a| a.namespace == selection.namespace && a.name == selection.name)
            .ok_or_else(|| VifError::UnknownAttachment {
                attachment: reference.clone(),
            })?;
        let (target, vnic_type) = match config.attachments {
            AttachmentFlavor::Neutron => {
                let value = attachment.annotations.get(KURYR_CONFIG).ok_or_else(|| {
                    VifError::Attachment {
                        attachment: reference.clone(),
                        error: format!("no {KURYR_CONFIG} annotation naming its subnet"),
                    }
                })?;
                let kuryr = parse_kuryr_config(&reference, value)?;
                let vnic = if kuryr.sriov {
                    VnicType::Direct
                } else {
                    VnicType::Normal
                };
                (
                    Target::Subnet {
                        id: kuryr.subnet_id,
                    },
                    vnic,
                )
            }
            AttachmentFlavor::Nimbess => {
                let config = attachment
                    .config
                    .as_deref()
                    .ok_or_else(|| VifError::Attachment {
                        attachment: reference.clone(),
                        error: "no spec.config naming its Nimbess network".to_owned(),
                    })?;
                let name = parse_nimbess_config(&reference, config)?;
                (Target::Network { name }, VnicType::Normal)
            }
        };
        let key = match &selection.interface {
            Some(ifname) => format!("network/{reference}@{ifname}"),
            None => numbered(&mut seen, format!("network/{reference}")),
        };
        requests.push(VifRequest {
            key,
            driver: Driver::NpwgMultipleInterfaces,
            target,
            vnic_type: Some(vnic_type),
            interface: selection.interface,
            attachment: Some(reference),
        });
    }
    Ok(requests)
}
