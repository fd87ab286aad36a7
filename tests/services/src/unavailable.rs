//! Why a test cannot have the service it asked for, and the one way a test reacts to that.
//!
//! A test that needs PostgreSQL on a laptop without it should say so loudly and stop, not pass
//! silently; the same test on CI (`CI=true`) must fail, because CI installs every package in
//! [`DEBIAN_PACKAGES`](crate::DEBIAN_PACKAGES). A service that *is* installed but fails to start
//! is a bug, never a skip: [`Unavailable::skip`] panics on it everywhere.

use std::fmt;
use std::path::PathBuf;

/// A service or tool a test needs but cannot have: what is missing, why, and how to get it.
///
/// Returned by [`Postgres::start`](crate::Postgres::start), [`Etcd::start`](crate::Etcd::start),
/// [`tool`](crate::tool) and [`require_root`](crate::require_root). A test hands it to
/// [`Unavailable::skip`], or propagates it with `?` to fail.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{what} {cause}")]
pub struct Unavailable {
    what: String,
    cause: Cause,
}

/// The reason behind an [`Unavailable`].
#[derive(Debug, Clone)]
enum Cause {
    /// The program is not installed in any of the places searched.
    NotInstalled {
        package: &'static str,
        looked_in: Vec<PathBuf>,
    },
    /// The test needs root and the process is not root.
    NotRoot { why: String },
    /// Something fetched rather than installed from Debian (a Python environment from PyPI)
    /// could not be had, e.g. offline.
    NotProvisioned { detail: String, how: String },
    /// The program is installed but could not be started or did not become ready.
    Failed { detail: String },
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cause::NotInstalled { package, looked_in } => {
                let places: Vec<String> =
                    looked_in.iter().map(|p| p.display().to_string()).collect();
                write!(
                    f,
                    "is not installed (looked in {}) (install: apt-get install -y {package})",
                    if places.is_empty() {
                        "no directories".to_owned()
                    } else {
                        places.join(", ")
                    }
                )
            }
            Cause::NotRoot { why } => {
                write!(
                    f,
                    "needs root ({why}) (install: nothing; run the tests as root)"
                )
            }
            Cause::NotProvisioned { detail, how } => {
                write!(f, "could not be provisioned: {detail} (install: {how})")
            }
            Cause::Failed { detail } => write!(f, "failed: {detail}"),
        }
    }
}

impl Unavailable {
    /// `what` (e.g. "HAProxy (haproxy)") is not installed; `package` is the Debian package that
    /// provides it; `looked_in` the directories searched.
    pub(crate) fn not_installed(
        what: impl Into<String>,
        package: &'static str,
        looked_in: Vec<PathBuf>,
    ) -> Self {
        Unavailable {
            what: what.into(),
            cause: Cause::NotInstalled { package, looked_in },
        }
    }

    /// The test needs root for `why` and the process is not root.
    pub(crate) fn not_root(why: impl Into<String>) -> Self {
        Unavailable {
            what: "this test".to_owned(),
            cause: Cause::NotRoot { why: why.into() },
        }
    }

    /// `what` must be fetched (not installed from Debian) and could not be: `detail` says why,
    /// `how` what provisions it. Missing, like a package that is not installed: skipped outside
    /// CI, a failure on CI.
    pub(crate) fn not_provisioned(
        what: impl Into<String>,
        detail: impl Into<String>,
        how: impl Into<String>,
    ) -> Self {
        Unavailable {
            what: what.into(),
            cause: Cause::NotProvisioned {
                detail: detail.into(),
                how: how.into(),
            },
        }
    }

    /// `what` is installed but failed (to start, to become ready, ...): `detail` says how,
    /// including the server's log tail where there is one.
    pub(crate) fn failed(what: impl Into<String>, detail: impl Into<String>) -> Self {
        Unavailable {
            what: what.into(),
            cause: Cause::Failed {
                detail: detail.into(),
            },
        }
    }

    /// What is missing, e.g. `"PostgreSQL (initdb)"`.
    pub fn what(&self) -> &str {
        &self.what
    }

    /// The Debian package that provides what is missing, when installing a package is the fix.
    pub fn package(&self) -> Option<&'static str> {
        match &self.cause {
            Cause::NotInstalled { package, .. } => Some(package),
            Cause::NotRoot { .. } | Cause::NotProvisioned { .. } | Cause::Failed { .. } => None,
        }
    }

    /// How to make the service available: the `apt-get` line, "run the tests as root", or (for
    /// a service that is installed but failed) that it is a bug to investigate.
    pub fn how_to_install(&self) -> String {
        match &self.cause {
            Cause::NotInstalled { package, .. } => format!("apt-get install -y {package}"),
            Cause::NotRoot { .. } => "run the tests as root".to_owned(),
            Cause::NotProvisioned { how, .. } => how.clone(),
            Cause::Failed { .. } => {
                "nothing to install: it is installed but failed; see the detail".to_owned()
            }
        }
    }

    /// True when the service is merely absent (not installed, not provisioned, not root), so
    /// skipping outside CI is right; false when it is installed but failed, which is always a test failure.
    pub fn is_missing(&self) -> bool {
        !matches!(self.cause, Cause::Failed { .. })
    }

    /// Skip the test `test_name`: prints `SKIPPED <test_name>: <why> (install: ...)` to stderr
    /// and returns, so a test can `return e.skip("my_test")`.
    ///
    /// # Panics
    ///
    /// When the environment has `CI=true` (or `CI=1`), because on CI a missing service is a
    /// failure; and always when the service is installed but failed to start
    /// ([`Unavailable::is_missing`] is false), because that is a bug, not a missing package.
    pub fn skip(self, test_name: &str) {
        self.skip_under(
            test_name,
            running_on_ci(std::env::var("CI").ok().as_deref()),
        );
    }

    /// [`Unavailable::skip`] with the CI decision taken by the caller (testable without
    /// touching the process environment).
    pub(crate) fn skip_under(self, test_name: &str, on_ci: bool) {
        if !self.is_missing() {
            panic!("FAILED {test_name}: {self}");
        }
        if on_ci {
            panic!("FAILED {test_name} (CI=true, so a missing service is a failure): {self}");
        }
        eprintln!("SKIPPED {test_name}: {self}");
    }
}

/// Whether the `CI` environment value means "running on CI" (`true` or `1`, any case).
pub(crate) fn running_on_ci(ci: Option<&str>) -> bool {
    ci.is_some_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
}

#[cfg(test)]
mod tests;
