//! The agent's persistent state: the model (networks, ports with their
//! render facts), the IPAM pools and the reserved VIFs ([`crate::vif`]).
//!
//! Two files in the state directory: a snapshot (`state.json`, written
//! atomically: temporary file, fsync, rename) and a journal
//! (`state.journal`, one JSON record per line) that ADD and DEL append to, so
//! a change costs one small write however many ports exist. Appends are not
//! fsynced (an fsync costs more than the whole rest of an ADD here): a
//! `kill -9` of the agent loses nothing that was written (the page cache
//! belongs to the kernel), and what a host crash could lose — the last
//! appends — describes veths and namespaces that did not survive the crash
//! either.
//! The journal is folded into a new snapshot when it outgrows the snapshot
//! (amortized O(1) per change), on start, on reload and on GC. Loading reads
//! the snapshot and replays the journal; records are idempotent (a crash
//! between the snapshot's rename and the journal's truncation replays
//! records the snapshot already holds), and a torn last line is ignored.

use std::io::Write as _;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};

use nephrite_pipeline::{Ipam, Ipv6Cidr, Model, Owner, Port, PortId};
use serde::{Deserialize, Serialize};

use crate::vif::{VifEntry, VifRef, Vifs};

/// File name of the snapshot inside the state directory.
pub const STATE_FILE: &str = "state.json";
/// File name of the journal inside the state directory.
pub const JOURNAL_FILE: &str = "state.journal";
/// The journal is folded into the snapshot once it is larger than this and
/// than the snapshot.
const JOURNAL_FLOOR: u64 = if cfg!(test) { 4 * 1024 } else { 64 * 1024 };

/// What survives a restart.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PersistedState {
    /// Networks, meta pipelines, ports and their facts.
    pub model: Model,
    /// Address pools.
    pub ipam: Ipam,
    /// Reserved VIFs (absent from the files of agents before VIFs).
    #[serde(default)]
    pub vifs: Vifs,
}

/// One change, as the journal records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Record {
    /// `owner` holds `address` on `network`.
    Held {
        /// Meta key.
        network: String,
        /// The address.
        address: Ipv4Addr,
        /// The holder.
        owner: Owner,
    },
    /// `owner` holds the IPv6 `address` on the dual-stack `network`.
    Held6 {
        /// Meta key.
        network: String,
        /// The address.
        address: Ipv6Addr,
        /// The holder.
        owner: Owner,
    },
    /// `owner` holds nothing anywhere any more.
    Released {
        /// The former holder.
        owner: Owner,
    },
    /// The port is as given (added or re-rendered).
    PortPut {
        /// The port with its slot and facts.
        port: Port,
        /// Its IPv6 address on a dual-stack network (absent in older
        /// journals: none).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        address6: Option<Ipv6Cidr>,
    },
    /// The port is gone.
    PortGone {
        /// Its id.
        port: PortId,
    },
    /// The VIF is reserved as given (its address is journaled by a `Held` before it).
    VifPut {
        /// The reservation.
        vif: VifEntry,
    },
    /// The VIF is released.
    VifGone {
        /// Which.
        vif: VifRef,
    },
}

impl Record {
    /// Apply to a state; applying twice is the same as once.
    ///
    /// # Errors
    /// The record contradicts the state (names an unknown network, an
    /// address held by another container).
    pub fn replay(&self, state: &mut PersistedState) -> Result<(), nephrite_pipeline::Error> {
        match self {
            Record::Held {
                network,
                address,
                owner,
            } => state.ipam.hold(network, *address, owner),
            Record::Held6 {
                network,
                address,
                owner,
            } => state.ipam.hold6(network, *address, owner),
            Record::Released { owner } => {
                state.ipam.release_everywhere(owner);
                Ok(())
            }
            Record::PortPut { port, address6 } => {
                if state.model.port(&port.id).is_some() {
                    state.model.remove_port(&port.id)?;
                }
                state.model.insert_port6(port.clone(), *address6).map(drop)
            }
            Record::PortGone { port } => {
                if state.model.port(port).is_some() {
                    state.model.remove_port(port)?;
                }
                Ok(())
            }
            Record::VifPut { vif } => {
                state.vifs.put(vif.clone());
                Ok(())
            }
            Record::VifGone { vif } => {
                state.vifs.remove(vif);
                Ok(())
            }
        }
    }
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
    /// A journal record contradicts the state before it.
    #[error("state {path} line {line}: {source}")]
    Replay {
        /// The journal.
        path: String,
        /// 1-based line.
        line: usize,
        /// The model's verdict.
        source: nephrite_pipeline::Error,
    },
}

/// The state files of one agent.
#[derive(Debug)]
pub struct StateStore {
    dir: PathBuf,
    journal: Option<std::fs::File>,
    journal_len: u64,
    snapshot_len: u64,
}

impl Clone for StateStore {
    /// Another handle on the same files (it opens the journal on its first append).
    fn clone(&self) -> Self {
        StateStore {
            dir: self.dir.clone(),
            journal: None,
            journal_len: 0,
            snapshot_len: self.snapshot_len,
        }
    }
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> StateError + '_ {
    move |source| StateError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Open `path` for writing, truncated (or appended to, `append`), readable
/// by its owner only: the state names every pod's container and namespace.
/// A file an older agent created with a wider mode is narrowed.
fn private_file(path: &Path, append: bool) -> Result<std::fs::File, StateError> {
    use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
    let file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .append(append)
        .truncate(!append)
        .mode(STATE_MODE)
        .open(path)
        .map_err(io_error(path))?;
    file.set_permissions(std::fs::Permissions::from_mode(STATE_MODE))
        .map_err(io_error(path))?;
    Ok(file)
}

/// Mode of the state files.
pub const STATE_MODE: u32 = 0o600;

impl StateStore {
    /// The store in `dir`, created when missing.
    ///
    /// # Errors
    /// The directory cannot be created.
    pub fn open(dir: &Path) -> Result<Self, StateError> {
        std::fs::create_dir_all(dir).map_err(io_error(dir))?;
        Ok(StateStore {
            dir: dir.to_path_buf(),
            journal: None,
            journal_len: 0,
            snapshot_len: 0,
        })
    }

    /// The snapshot's path.
    pub fn path(&self) -> PathBuf {
        self.dir.join(STATE_FILE)
    }

    /// The journal's path.
    pub fn journal_path(&self) -> PathBuf {
        self.dir.join(JOURNAL_FILE)
    }

    /// The saved state (snapshot plus journal), or an empty one when none
    /// was saved.
    ///
    /// # Errors
    /// Unreadable or corrupt files.
    pub fn load(&self) -> Result<PersistedState, StateError> {
        let path = self.path();
        let mut state = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|source| StateError::Corrupt {
                path: path.display().to_string(),
                source,
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => PersistedState::default(),
            Err(source) => {
                return Err(StateError::Io {
                    path: path.display().to_string(),
                    source,
                });
            }
        };
        let journal = self.journal_path();
        let text = match std::fs::read_to_string(&journal) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(source) => {
                return Err(StateError::Io {
                    path: journal.display().to_string(),
                    source,
                });
            }
        };
        let complete = text.ends_with('\n');
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let record: Record = match serde_json::from_str(line) {
                Ok(r) => r,
                // the last append was cut short by a crash: it never happened
                Err(_) if i + 1 == lines.len() && !complete => break,
                Err(source) => {
                    return Err(StateError::Corrupt {
                        path: format!("{} line {}", journal.display(), i + 1),
                        source,
                    });
                }
            };
            record
                .replay(&mut state)
                .map_err(|source| StateError::Replay {
                    path: journal.display().to_string(),
                    line: i + 1,
                    source,
                })?;
        }
        Ok(state)
    }

    /// Write a snapshot atomically and empty the journal.
    ///
    /// # Errors
    /// IO failure.
    pub fn save(&mut self, model: &Model, ipam: &Ipam, vifs: &Vifs) -> Result<(), StateError> {
        #[derive(Serialize)]
        struct Snapshot<'a> {
            model: &'a Model,
            ipam: &'a Ipam,
            vifs: &'a Vifs,
        }
        let path = self.path();
        let tmp = self.dir.join(format!("{STATE_FILE}.tmp"));
        let bytes = serde_json::to_vec(&Snapshot { model, ipam, vifs }).map_err(|source| {
            StateError::Corrupt {
                path: path.display().to_string(),
                source,
            }
        })?;
        let mut file = private_file(&tmp, false)?;
        file.write_all(&bytes).map_err(io_error(&tmp))?;
        file.sync_all().map_err(io_error(&tmp))?;
        std::fs::rename(&tmp, &path).map_err(io_error(&path))?;
        let journal = self.journal_path();
        let file = private_file(&journal, false)?;
        file.sync_all().map_err(io_error(&journal))?;
        self.journal = Some(file);
        self.journal_len = 0;
        self.snapshot_len = bytes.len() as u64;
        Ok(())
    }

    /// Append records to the journal (one write); fold the
    /// journal into a snapshot of `model`, `ipam` and `vifs` (which already hold
    /// the records) when it has outgrown the snapshot.
    ///
    /// # Errors
    /// IO failure.
    pub fn append(
        &mut self,
        records: &[Record],
        model: &Model,
        ipam: &Ipam,
        vifs: &Vifs,
    ) -> Result<(), StateError> {
        if self.journal_len > JOURNAL_FLOOR.max(self.snapshot_len) {
            return self.save(model, ipam, vifs);
        }
        let journal = self.journal_path();
        let mut bytes = Vec::new();
        for record in records {
            serde_json::to_writer(&mut bytes, record).map_err(|source| StateError::Corrupt {
                path: journal.display().to_string(),
                source,
            })?;
            bytes.push(b'\n');
        }
        let file = match &mut self.journal {
            Some(file) => file,
            None => {
                let file = private_file(&journal, true)?;
                self.journal_len = file.metadata().map_err(io_error(&journal))?.len();
                self.journal.insert(file)
            }
        };
        file.write_all(&bytes).map_err(io_error(&journal))?;
        self.journal_len += bytes.len() as u64;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
