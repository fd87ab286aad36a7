//! The state directory of a detached `up`/`down` pair (`cargo xtask kube`, `cargo xtask
//! cluster`): `--dir DIR`, or a fresh temporary directory that `up` remembers in a file under
//! `target/kube`, so that `down` without `--dir` finds the last one.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use nephrite_test_services::kube_apiserver::kube_root;

/// One command's state directories.
#[derive(Debug, Clone, Copy)]
pub struct StateDirs {
    /// The xtask command (`kube`, `cluster`): names the temporary directories and the hints.
    pub command: &'static str,
    /// The file under `target/kube` naming the directory of the last `up` without `--dir`.
    pub record: &'static str,
}

/// The directory an `up` works in.
#[derive(Debug)]
pub struct UpDir {
    /// The directory, absolute.
    pub dir: PathBuf,
    /// Whether it is remembered (no `--dir` was given).
    remembered: bool,
    command: &'static str,
}

impl UpDir {
    /// The command that stops what `up` started there.
    pub fn down_command(&self) -> String {
        if self.remembered {
            format!("cargo xtask {} down", self.command)
        } else {
            format!(
                "cargo xtask {} down --dir {}",
                self.command,
                self.dir.display()
            )
        }
    }
}

/// `--dir DIR` (or `--dir=DIR`), if given: the only arguments `up` and `down` take.
pub fn dir_flag(args: &[String], usage: &str) -> anyhow::Result<Option<PathBuf>> {
    match args {
        [] => Ok(None),
        [flag, dir] if flag == "--dir" => Ok(Some(PathBuf::from(dir))),
        [flag] if flag.starts_with("--dir=") => Ok(Some(PathBuf::from(&flag["--dir=".len()..]))),
        _ => bail!("unexpected arguments {args:?}\n\n{usage}"),
    }
}

impl StateDirs {
    /// For `up`: `dir` made absolute, or a fresh temporary directory, remembered before
    /// anything starts (so `down` can remove what a failed `up` left).
    pub fn up(self, dir: Option<PathBuf>) -> anyhow::Result<UpDir> {
        let (dir, remembered) = match dir {
            Some(dir) => (absolute(&dir)?, false),
            None => {
                let dir = tempfile::Builder::new()
                    .prefix(&format!("nephrite-{}-", self.command))
                    .tempdir()
                    .context("creating a temporary directory")?
                    .keep();
                (dir, true)
            }
        };
        if remembered {
            std::fs::create_dir_all(kube_root()).context("creating target/kube")?;
            let record = self.record_path();
            std::fs::write(&record, dir.to_string_lossy().as_bytes())
                .with_context(|| format!("writing {}", record.display()))?;
        }
        Ok(UpDir {
            dir,
            remembered,
            command: self.command,
        })
    }

    /// For `down`: `dir` made absolute, or the one the last `up` without `--dir` remembered.
    pub fn down(self, dir: Option<PathBuf>) -> anyhow::Result<PathBuf> {
        match dir {
            Some(dir) => absolute(&dir),
            None => {
                let record = self.record_path();
                let remembered = std::fs::read_to_string(&record).with_context(|| {
                    format!(
                        "no --dir given and nothing remembered in {} (was `cargo xtask {} up` \
                         run without --dir?)",
                        record.display(),
                        self.command
                    )
                })?;
                Ok(PathBuf::from(remembered))
            }
        }
    }

    /// Forgets `dir` once `down` removed it, if it is the remembered one.
    pub fn forget(self, dir: &Path) {
        let record = self.record_path();
        if std::fs::read_to_string(&record).is_ok_and(|remembered| Path::new(&remembered) == dir) {
            let _ = std::fs::remove_file(&record);
        }
    }

    fn record_path(self) -> PathBuf {
        kube_root().join(self.record)
    }
}

/// `dir` made absolute against the current directory (the processes name it on their command
/// lines, which `down` checks from anywhere).
fn absolute(dir: &Path) -> anyhow::Result<PathBuf> {
    std::path::absolute(dir).with_context(|| format!("resolving {}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn the_dir_flag_in_both_spellings_and_nothing_else() {
        assert_eq!(dir_flag(&args(&[]), "u").unwrap(), None);
        assert_eq!(
            dir_flag(&args(&["--dir", "/x"]), "u").unwrap(),
            Some(PathBuf::from("/x"))
        );
        assert_eq!(
            dir_flag(&args(&["--dir=/y"]), "u").unwrap(),
            Some(PathBuf::from("/y"))
        );
        let error = dir_flag(&args(&["--dri", "/x"]), "the usage").unwrap_err();
        assert!(error.to_string().contains("\"--dri\""), "{error}");
        assert!(error.to_string().contains("the usage"), "{error}");
    }

    #[test]
    fn a_given_dir_is_absolute_and_not_remembered() {
        let dirs = StateDirs {
            command: "kube",
            record: "never-written-by-this-test",
        };
        let up = dirs.up(Some(PathBuf::from("relative/state"))).unwrap();
        assert!(up.dir.is_absolute());
        assert!(up.dir.ends_with("relative/state"));
        assert_eq!(
            up.down_command(),
            format!("cargo xtask kube down --dir {}", up.dir.display())
        );
        assert!(!dirs.record_path().exists());
        let down = dirs.down(Some(PathBuf::from("relative/state"))).unwrap();
        assert_eq!(down, up.dir);
    }
}
