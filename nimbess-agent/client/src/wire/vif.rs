//! Protobuf ⇄ [`crate::vif`]: a VIF's identity and the `VifInfo` the `Vifs` service answers
//! with. A plugged VIF is one whose `port` is set; its other port fields are empty otherwise.

use nephrite_proto::nimbess::cni::v1 as pb;

use super::{WireError, parse, parse_optional};
use crate::vif::{Plugged, VifEntry, VifRef, VifView};

impl From<pb::VifRef> for VifRef {
    fn from(vif: pb::VifRef) -> Self {
        VifRef {
            pod_uid: vif.pod_uid,
            key: vif.key,
        }
    }
}

impl From<&VifRef> for pb::VifRef {
    fn from(vif: &VifRef) -> Self {
        pb::VifRef {
            pod_uid: vif.pod_uid.clone(),
            key: vif.key.clone(),
        }
    }
}

impl From<&VifView> for pb::VifInfo {
    fn from(view: &VifView) -> Self {
        let plugged = view.plugged.as_ref();
        pb::VifInfo {
            vif: Some((&view.entry.vif).into()),
            network: view.entry.network.clone(),
            address: view.entry.address.to_string(),
            gateway: view.gateway.map(|g| g.to_string()).unwrap_or_default(),
            pod_namespace: view.entry.pod_namespace.clone(),
            pod_name: view.entry.pod_name.clone(),
            port: plugged.map(|p| p.port.clone()).unwrap_or_default(),
            container_id: plugged.map(|p| p.container_id.clone()).unwrap_or_default(),
            ifname: plugged.map(|p| p.ifname.clone()).unwrap_or_default(),
            mac: plugged
                .and_then(|p| p.mac)
                .map(|m| m.to_string())
                .unwrap_or_default(),
            reserved_mac: view.entry.mac.map(|m| m.to_string()).unwrap_or_default(),
        }
    }
}

impl TryFrom<pb::VifInfo> for VifView {
    type Error = WireError;

    fn try_from(info: pb::VifInfo) -> Result<Self, WireError> {
        let plugged = if info.port.is_empty() {
            None
        } else {
            Some(Plugged {
                port: info.port,
                container_id: info.container_id,
                ifname: info.ifname,
                mac: parse_optional("mac", &info.mac)?,
            })
        };
        Ok(VifView {
            entry: VifEntry {
                vif: info.vif.unwrap_or_default().into(),
                network: info.network,
                address: parse("address", &info.address)?,
                pod_namespace: info.pod_namespace,
                pod_name: info.pod_name,
                mac: parse_optional("reserved_mac", &info.reserved_mac)?,
            },
            gateway: parse_optional("gateway", &info.gateway)?,
            plugged,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    fn view(plugged: bool) -> VifView {
        VifView {
            entry: VifEntry {
                vif: VifRef {
                    pod_uid: "u1".into(),
                    key: "network/ns/a/0".into(),
                },
                network: "a".into(),
                address: "10.1.0.2/24".parse().expect("cidr"),
                pod_namespace: "ns".into(),
                pod_name: "p".into(),
                mac: Some("0e:00:00:00:00:01".parse().expect("mac")),
            },
            gateway: Some(Ipv4Addr::new(10, 1, 0, 1)),
            plugged: plugged.then(|| Plugged {
                port: "port_c1_eth1".into(),
                container_id: "c1".into(),
                ifname: "eth1".into(),
                mac: Some("0e:00:00:00:00:01".parse().expect("mac")),
            }),
        }
    }

    #[test]
    fn views_round_trip_plugged_or_not() {
        for plugged in [false, true] {
            let view = view(plugged);
            let back = VifView::try_from(pb::VifInfo::from(&view)).expect("parses");
            assert_eq!(back, view);
        }
    }

    #[test]
    fn a_bad_field_of_a_view_is_named() {
        let mut wire = pb::VifInfo::from(&view(true));
        wire.reserved_mac = "0e:00".into();
        let e = VifView::try_from(wire).expect_err("bad MAC");
        assert!(e.to_string().contains("reserved_mac"), "{e}");
        let mut wire = pb::VifInfo::from(&view(false));
        wire.address = "10.1.0.2".into();
        let e = VifView::try_from(wire).expect_err("no prefix");
        assert!(e.to_string().starts_with("address \"10.1.0.2\""), "{e}");
    }
}
