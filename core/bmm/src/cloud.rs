//! What the provider observed in BMM, in the decisions' own terms.
//!
//! These are views, not the REST client's types: the daemon maps API responses into them, and
//! the decisions never see JSON. Status strings stay strings the API sent, read through
//! [`Lifecycle`] so that an unknown status is never mistaken for Ready.

use std::collections::BTreeMap;

/// Where an object is in its life, folded from the API's per-kind status enums.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lifecycle {
    /// Pending, Provisioning, Configuring, Updating, Rebooting: on its way.
    InProgress,
    /// Ready (or Registered for a site).
    Ready,
    /// Deleting or Terminating.
    Deleting,
    /// Error.
    Error,
}

impl Lifecycle {
    /// Reads an API status string; an unknown one counts as in progress.
    pub fn of(status: &str) -> Lifecycle {
        match status {
            "Ready" | "Registered" => Lifecycle::Ready,
            "Deleting" | "Terminating" => Lifecycle::Deleting,
            "Error" => Lifecycle::Error,
            _ => Lifecycle::InProgress,
        }
    }
}

/// A VPC seen in the site.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloudVpc {
    /// Its id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its status string.
    pub status: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// The attached NSG.
    pub nsg_id: Option<String>,
}

/// A subnet seen in the VPC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloudSubnet {
    /// Its id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// The VPC it belongs to.
    pub vpc_id: String,
    /// Its status string.
    pub status: String,
    /// The prefix the platform allocated (`ipv4Prefix`, without a length in some responses).
    pub ipv4_prefix: Option<String>,
    /// Its prefix length.
    pub prefix_length: Option<u8>,
}

/// A network security group seen in the site.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloudNsg {
    /// Its id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its status string.
    pub status: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
}

/// An IP block seen in the site.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloudIpBlock {
    /// Its id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its status string.
    pub status: String,
    /// Its prefix and length (`10.0.0.0/23`).
    pub cidr: String,
}

/// An instance seen in the site.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloudInstance {
    /// Its id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its VPC.
    pub vpc_id: String,
    /// Its status string.
    pub status: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// The machine it runs on.
    pub machine_id: Option<String>,
    /// Addresses of its interfaces, primary interface first.
    pub addresses: Vec<String>,
}

/// Whether an object carries the provider's owner label for `owner`.
pub fn is_ours(labels: &BTreeMap<String, String>, owner: &str) -> bool {
    labels.get(crate::OWNER_LABEL).is_some_and(|v| v == owner)
}
