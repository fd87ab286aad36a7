//! The actions the cluster decision returns, in the API's terms.

use std::collections::BTreeMap;

use crate::cidr::Ipv4Cidr;
use crate::crd::NetworkVirtualizationType;

/// Creates an IP block (`routingType` `Datacenter Only`, IPv4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IpBlockCreate {
    /// Its name, [`super::ip_block_name`].
    pub name: String,
    /// The site.
    pub site_id: String,
    /// The smallest prefix covering the subnets.
    pub cidr: Ipv4Cidr,
}

/// Creates a VPC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VpcCreate {
    /// The client-chosen id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// The site.
    pub site_id: String,
    /// Virtualisation type.
    pub virtualization: NetworkVirtualizationType,
    /// The user's labels plus [`crate::OWNER_LABEL`].
    pub labels: BTreeMap<String, String>,
}

/// Creates a subnet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubnetCreate {
    /// Its name.
    pub name: String,
    /// The VPC.
    pub vpc_id: String,
    /// The IP block it is carved from.
    pub ip_block_id: String,
    /// The prefix length from `cidr`.
    pub prefix_length: u8,
}

/// One NSG rule in the API's shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NsgRuleCreate {
    /// Its name.
    pub name: String,
    /// INGRESS / EGRESS.
    pub direction: &'static str,
    /// TCP / UDP / ICMP / ANY.
    pub protocol: &'static str,
    /// PERMIT / DENY.
    pub action: &'static str,
    /// Source prefix (`0.0.0.0/0` when the spec has none).
    pub source_prefix: String,
    /// Destination prefix (`0.0.0.0/0` when the spec has none).
    pub destination_prefix: String,
    /// Destination port range, TCP/UDP only.
    pub destination_port_range: Option<String>,
    /// Priority.
    pub priority: Option<i32>,
}

/// Creates a network security group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NsgCreate {
    /// Its name.
    pub name: String,
    /// The site.
    pub site_id: String,
    /// Its rules.
    pub rules: Vec<NsgRuleCreate>,
    /// [`crate::OWNER_LABEL`].
    pub labels: BTreeMap<String, String>,
}

/// One step of the cluster reconcile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterAction {
    /// Put the finalizer on the object (before anything is created).
    AddFinalizer,
    /// Create the IP block.
    CreateIpBlock(IpBlockCreate),
    /// Create the VPC.
    CreateVpc(VpcCreate),
    /// Create a subnet.
    CreateSubnet(SubnetCreate),
    /// Create the NSG.
    CreateNsg(NsgCreate),
    /// Attach the NSG to the VPC (PATCH `networkSecurityGroupId`).
    AttachNsg {
        /// The VPC.
        vpc_id: String,
        /// The NSG.
        nsg_id: String,
    },
    /// Detach the NSG from the VPC before deleting it.
    DetachNsg {
        /// The VPC.
        vpc_id: String,
    },
    /// Delete the NSG.
    DeleteNsg {
        /// Its id.
        id: String,
    },
    /// Delete a subnet.
    DeleteSubnet {
        /// Its id.
        id: String,
    },
    /// Delete the VPC.
    DeleteVpc {
        /// Its id.
        id: String,
    },
    /// Delete the IP block the provider created.
    DeleteIpBlock {
        /// Its id.
        id: String,
    },
    /// Remove the finalizer: every cloud object is gone.
    RemoveFinalizer,
}
