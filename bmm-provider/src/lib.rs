//! bmm-provider: the Cluster API infrastructure provider for NVIDIA Bare Metal Manager, its
//! REST client, the BMM simulator and standalone mode.
//!
//! - [`client`]: the BMM REST client.
//! - [`sim`]: `bmm-sim`, a simulator of the part of the BMM API the provider uses, checked
//!   against `api/openapi.yaml`.
//! - [`openapi`]: the embedded OpenAPI description and JSON-schema validation against it.
//! - [`observe`]: fills the pure decisions' observations from the API and performs their actions.
//! - [`standalone`]: `bmm-provider apply -f / status / delete` with a local state file.
//! - [`sites`]: `apply --register-sites`: provisioned clusters as the preparer's Sites.
//! - [`controller`]: `bmm-provider serve`: the Cluster API and node-lifecycle controllers.
//! - [`machine_api`]: the OpenShift Machine API actuator.
//! - [`clusterctl`]: the clusterctl provider artefacts (`bmm-provider clusterctl --out DIR`).
//!
//! The decisions themselves live in `nephrite-bmm`.

pub mod client;
pub mod clusterctl;
pub mod controller;
pub mod daemon;
pub mod machine_api;
pub mod metrics;
pub mod observe;
pub mod sites;
pub mod standalone;

pub mod openapi;
pub mod sim;
