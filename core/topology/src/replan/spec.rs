//! What a child is: its identity ([`ChildKey`]), its content ([`ChildSpec`]) and the
//! [`Fingerprint`] of that content the child carries, so that the next re-plan can tell an
//! unchanged child without reading its package back.
//!
//! The fingerprint has two halves. The *placement* half covers what a TKO child deployment
//! cannot change in place (its template and its instance key, the deployed id); the *content*
//! half covers the whole spec. An update whose placement half differs must recreate the child
//! there ([`crate::replan::ChildUpdate::recreate`]); Porch changes both in place (the
//! PackageVariantSet's upstream and target list).

use std::fmt;
use std::str::FromStr;

use nephrite_krm::keys::NF_DEPLOYMENT_NAME;
use serde::Serialize;

use crate::api::{CapacitySpec, NFInterface, NfType, PackageRevisionReference};
use crate::plan::{NF_INSTANCE_LABEL, Plan};

/// The key under which a child carries its [`Fingerprint`]: a metadata key on a TKO child
/// deployment, an annotation on the `Deployment` resource of its package.
pub const SPEC_FINGERPRINT_KEY: &str = "topology.nephio.org/spec-fingerprint";

/// What re-planning refuses, naming the child at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplanError {
    /// A child lacks the metadata that says which topology and instance it is for.
    #[error(
        "child {child:?} on site {site:?} has no {key:?} metadata: cannot tell which NF instance it is for"
    )]
    MissingIdentity {
        /// The child's id.
        child: String,
        /// Its site.
        site: String,
        /// The missing metadata key.
        key: &'static str,
    },
    /// A stored fingerprint is not two 16-digit hex numbers joined by a dot.
    #[error("spec fingerprint {value:?} is not <16 hex digits>.<16 hex digits>")]
    BadFingerprint {
        /// The value as stored.
        value: String,
    },
}

/// The stable identity of a child: the same NF instance of the same topology on the same site
/// is the same child, whatever its capacity, networks, class or deployed id.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct ChildKey {
    /// The NFTopology's name.
    pub topology: String,
    /// The NF instance's name.
    pub instance: String,
    /// The site (cluster, deployment repository).
    pub site: String,
}

impl ChildKey {
    /// The key of `instance` of `topology` on `site`.
    pub fn new(
        topology: impl Into<String>,
        instance: impl Into<String>,
        site: impl Into<String>,
    ) -> Self {
        ChildKey {
            topology: topology.into(),
            instance: instance.into(),
            site: site.into(),
        }
    }

    /// The key of an observed child from its site and metadata (or labels): the topology from
    /// `nf-deployment-name`, the instance from `topology.nephio.org/nf-instance`, both of which
    /// the planner puts on every child. `child` names the child in the error.
    pub fn from_metadata<'a, M>(child: &str, site: &str, metadata: M) -> Result<Self, ReplanError>
    where
        M: IntoIterator<Item = (&'a String, &'a String)>,
    {
        let (mut topology, mut instance) = (None, None);
        for (k, v) in metadata {
            if k == NF_DEPLOYMENT_NAME {
                topology = Some(v);
            } else if k == NF_INSTANCE_LABEL {
                instance = Some(v);
            }
        }
        let missing = |key| ReplanError::MissingIdentity {
            child: child.to_owned(),
            site: site.to_owned(),
            key,
        };
        Ok(ChildKey::new(
            topology
                .ok_or_else(|| missing(NF_DEPLOYMENT_NAME))?
                .as_str(),
            instance.ok_or_else(|| missing(NF_INSTANCE_LABEL))?.as_str(),
            site,
        ))
    }
}

impl fmt::Display for ChildKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}@{}", self.topology, self.instance, self.site)
    }
}

/// The content of a child: everything either backend renders into it (the TKO child's
/// template, instance key, `Capacity` and `Interface`s; the Porch package's upstream, labels,
/// flavor annotation and injected `Capacity`).
///
/// Gating is not content: whether a child waits, and for whom, is rollout state that the
/// approvals and readiness gates track, so a UPF joining an SMF's network does not touch the
/// SMF's child.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChildSpec {
    /// The deployed id (the TKO instance key, the deployed topology's id).
    pub deployed_id: String,
    /// The NF type (a label on the child).
    pub nf_type: NfType,
    /// The upstream package (the TKO template is its `packageName`).
    pub package_ref: PackageRevisionReference,
    /// The class's flavor.
    pub flavor: Option<String>,
    /// The capacity profile.
    pub capacity: Option<CapacitySpec>,
    /// The attachment points, in the template's order.
    pub interfaces: Vec<NFInterface>,
}

impl ChildSpec {
    /// The fingerprint of this spec.
    pub fn fingerprint(&self) -> Fingerprint {
        let placement = fnv1a64(&[
            self.deployed_id.as_bytes(),
            b"\0",
            self.package_ref.package_name.as_bytes(),
        ]);
        // Serialising plain data (strings, numbers, options, vectors) cannot fail; the empty
        // fallback would only make every child look changed, never unchanged.
        let json = serde_json::to_vec(self).unwrap_or_default();
        Fingerprint {
            placement,
            content: fnv1a64(&[&json]),
        }
    }
}

/// A 128-bit digest of a [`ChildSpec`], written `<placement>.<content>` in hex.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Fingerprint {
    /// Digest of what a TKO child cannot change in place: deployed id and template.
    pub placement: u64,
    /// Digest of the whole spec.
    pub content: u64,
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}.{:016x}", self.placement, self.content)
    }
}

impl FromStr for Fingerprint {
    type Err = ReplanError;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        let bad = || ReplanError::BadFingerprint {
            value: value.to_owned(),
        };
        let (placement, content) = value.split_once('.').ok_or_else(bad)?;
        let half = |s: &str| {
            if s.len() == 16 && s.bytes().all(|b| b.is_ascii_hexdigit()) {
                u64::from_str_radix(s, 16).map_err(|_| bad())
            } else {
                Err(bad())
            }
        };
        Ok(Fingerprint {
            placement: half(placement)?,
            content: half(content)?,
        })
    }
}

fn fnv1a64(parts: &[&[u8]]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for byte in *part {
            hash ^= u64::from(*byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    hash
}

/// A child the plan wants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedChild {
    /// Its identity.
    pub key: ChildKey,
    /// Its variant (a position in [`Plan::variants`]).
    pub variant: usize,
    /// Its content.
    pub spec: ChildSpec,
    /// `spec`'s fingerprint.
    pub fingerprint: Fingerprint,
}

/// The key of variant `v` of `plan`.
pub(crate) fn variant_key(plan: &Plan, v: usize) -> ChildKey {
    let variant = &plan.variants()[v];
    ChildKey::new(
        plan.topology(),
        &plan.instances()[variant.instance].name,
        &variant.cluster,
    )
}

/// The children `plan` wants: one per variant, in the plan's order.
pub fn desired_children(plan: &Plan) -> Vec<PlannedChild> {
    plan.variants()
        .iter()
        .enumerate()
        .map(|(v, variant)| {
            let instance = &plan.instances()[variant.instance];
            let spec = ChildSpec {
                deployed_id: variant.id.clone(),
                nf_type: instance.nf_type.clone(),
                package_ref: instance.class.package_ref.clone(),
                flavor: instance.class.flavor.clone(),
                capacity: instance.capacity.clone(),
                interfaces: instance.interfaces.clone(),
            };
            PlannedChild {
                key: variant_key(plan, v),
                variant: v,
                fingerprint: spec.fingerprint(),
                spec,
            }
        })
        .collect()
}
