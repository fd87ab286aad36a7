//! bmm-provider: the Cluster API infrastructure provider for NVIDIA Bare Metal Manager, its
//! REST client and standalone mode. The BMM simulator, `bmm-sim`, is its own crate
//! (`nephrite-bmm-sim`, in `sim/`), which the provider uses only in its tests.
//!
//! - [`cli`]: the `bmm-provider` command line, one module per role (its flags and how its
//!   configuration is assembled).
//! - [`client`]: the BMM REST client.
//! - [`observe`]: fills the pure decisions' observations from the API and performs their actions.
//! - [`standalone`]: `bmm-provider apply -f / status / delete` with a local state file.
//! - [`sites`]: `apply --register-sites`: provisioned clusters as the preparer's Sites.
//! - [`controller`]: `bmm-provider serve`, `ccm` and `machine-api`: the Cluster API, node and
//!   OpenShift Machine API controllers.
//! - [`daemon`]: a role's controllers behind the shared daemon server.
//! - [`machine_api_actuator`]: the OpenShift Machine API actuator as a library trait (the
//!   controller `bmm-provider machine-api` runs is in [`controller`]).
//! - [`clusterctl`]: the clusterctl provider artefacts (`bmm-provider clusterctl --out DIR`).
//!
//! The decisions themselves live in `nephrite-bmm`.

pub mod cli;
pub mod client;
pub mod clusterctl;
pub mod controller;
pub mod daemon;
pub mod machine_api_actuator;
pub mod metrics;
pub mod observe;
pub mod sites;
pub mod standalone;
