//! Root and the system accounts services run as.
//!
//! PostgreSQL refuses to run as root, and CI runs tests as root; so when the test process is
//! root, `initdb` and `postgres` run as the `postgres` account that Debian's package creates
//! (through `std`'s `Command::uid`/`gid`, which also drops supplementary groups).

use std::path::Path;

use crate::Unavailable;

/// Ok when the process runs as root (effective uid 0); otherwise [`Unavailable`] saying `why`
/// the test needs root.
pub fn require_root(why: &str) -> Result<(), Unavailable> {
    if running_as_root() {
        Ok(())
    } else {
        Err(Unavailable::not_root(why))
    }
}

/// Whether the process's effective uid is 0.
pub fn running_as_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// A system account's numeric ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Account {
    pub(crate) uid: u32,
    pub(crate) gid: u32,
}

/// The account `name` from `/etc/passwd`, or from `getent passwd` (NSS) when it is not there.
pub(crate) fn lookup_account(name: &str) -> Option<Account> {
    let from_file = std::fs::read_to_string(Path::new("/etc/passwd"))
        .ok()
        .and_then(|passwd| account_in_passwd(&passwd, name));
    from_file.or_else(|| {
        let out = std::process::Command::new("getent")
            .args(["passwd", name])
            .output()
            .ok()?;
        account_in_passwd(&String::from_utf8_lossy(&out.stdout), name)
    })
}

/// The account `name` in passwd(5) text (`name:x:uid:gid:gecos:home:shell` lines).
pub(crate) fn account_in_passwd(passwd: &str, name: &str) -> Option<Account> {
    passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        if fields.next()? != name {
            return None;
        }
        let _password = fields.next()?;
        let uid = fields.next()?.parse().ok()?;
        let gid = fields.next()?.parse().ok()?;
        Some(Account { uid, gid })
    })
}

#[cfg(test)]
mod tests;
