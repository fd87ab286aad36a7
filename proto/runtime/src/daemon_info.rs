//! The `nephrite.daemon.v1.Daemon` service every daemon serves.

use std::time::SystemTime;

use nephrite_proto::daemon_v1::daemon_server::Daemon;
use nephrite_proto::daemon_v1::{DaemonInfo, GetInfoRequest};
use tonic::{Request, Response, Status};

use crate::shutdown::ShutdownHandle;

/// Who a daemon is: reported by `GetInfo` and in logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DaemonIdentity {
    /// Daemon name, e.g. `"preparer"`.
    pub name: String,
    /// Release version, usually `env!("CARGO_PKG_VERSION")`.
    pub version: String,
    /// Build or commit identifier, when known.
    pub build: Option<String>,
}

impl DaemonIdentity {
    /// A daemon named `name` at `version`, build unknown.
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        DaemonIdentity {
            name: name.into(),
            version: version.into(),
            build: None,
        }
    }

    /// The same identity with a build or commit identifier.
    #[must_use]
    pub fn with_build(mut self, build: impl Into<String>) -> Self {
        self.build = Some(build.into());
        self
    }
}

pub(crate) struct DaemonInfoService {
    pub(crate) identity: DaemonIdentity,
    pub(crate) started_at: SystemTime,
    pub(crate) services: Vec<String>,
    pub(crate) shutdown: ShutdownHandle,
}

#[tonic::async_trait]
impl Daemon for DaemonInfoService {
    async fn get_info(
        &self,
        _request: Request<GetInfoRequest>,
    ) -> Result<Response<DaemonInfo>, Status> {
        Ok(Response::new(DaemonInfo {
            name: self.identity.name.clone(),
            version: self.identity.version.clone(),
            build: self.identity.build.clone().unwrap_or_default(),
            started_at: Some(self.started_at.into()),
            services: self.services.clone(),
            draining: self.shutdown.is_triggered(),
        }))
    }
}
