//! The agent's persistent state: the model (networks, ports with their
//! render facts) and the IPAM pools, in one JSON file written atomically
//! (temporary file, fsync, rename) after every change.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use nephrite_pipeline::{Ipam, Model};
use serde::{Deserialize, Serialize};

/// File name of the state inside the state directory.
pub const STATE_FILE: &str = "state.json";

/// What survives a restart.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PersistedState {
    /// Networks, meta pipelines, ports and their facts.
    pub model: Model,
    /// Address pools.
    pub ipam: Ipam,
}

/// Why state could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// IO on the state directory failed.
    #[error("state {path}: {source}")]
    Io {
        /// The file or directory.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The state file is not valid.
    #[error("state {path} is corrupt: {source}")]
    Corrupt {
        /// The file.
        path: String,
        /// The parser's error.
        source: serde_json::Error,
    },
}

/// The state file of one agent.
#[derive(Debug, Clone)]
pub struct StateStore {
    dir: PathBuf,
}

impl StateStore {
    /// The store in `dir`, created (mode 0700) when missing.
    ///
    /// # Errors
    /// The directory cannot be created.
    pub fn open(dir: &Path) -> Result<Self, StateError> {
        std::fs::create_dir_all(dir).map_err(|source| StateError::Io {
            path: dir.display().to_string(),
            source,
        })?;
        Ok(StateStore {
            dir: dir.to_path_buf(),
        })
    }

    /// The state file's path.
    pub fn path(&self) -> PathBuf {
        self.dir.join(STATE_FILE)
    }

    /// The saved state, or an empty one when none was saved.
    ///
    /// # Errors
    /// Unreadable or corrupt file.
    pub fn load(&self) -> Result<PersistedState, StateError> {
        let path = self.path();
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|source| StateError::Corrupt {
                path: path.display().to_string(),
                source,
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(PersistedState::default()),
            Err(source) => Err(StateError::Io {
                path: path.display().to_string(),
                source,
            }),
        }
    }

    /// Save atomically.
    ///
    /// # Errors
    /// IO failure.
    pub fn save(&self, state: &PersistedState) -> Result<(), StateError> {
        let path = self.path();
        let tmp = self.dir.join(format!("{STATE_FILE}.tmp"));
        let io = |source| StateError::Io {
            path: tmp.display().to_string(),
            source,
        };
        let bytes = serde_json::to_vec_pretty(state).map_err(|source| StateError::Corrupt {
            path: path.display().to_string(),
            source,
        })?;
        let mut file = std::fs::File::create(&tmp).map_err(io)?;
        file.write_all(&bytes).map_err(io)?;
        file.sync_all().map_err(io)?;
        std::fs::rename(&tmp, &path).map_err(|source| StateError::Io {
            path: path.display().to_string(),
            source,
        })
    }
}
