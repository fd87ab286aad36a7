//! Named leases: one holder at a time for a name, apart from deployments (the leader election
//! of a controller's replicas). Expiry is on the preparer's store clock, so candidates on
//! hosts whose clocks differ agree on who holds a lease.

use std::time::Duration;

/// A named lease as the preparer answered it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// Its name.
    pub name: String,
    /// Who holds it (empty once released).
    pub holder: String,
    /// The holder's proof, for renewing and releasing it: set in the answers to acquire and
    /// renew, empty in [`crate::DataApi::get_lease`]'s.
    pub token: String,
    /// How many times it was granted anew (to another holder, or to one taking it back after
    /// a release or expiry): a fencing number, larger for every later holding.
    pub transitions: u64,
    /// When it ends unless renewed, RFC 3339 on the store's clock.
    pub expires: String,
    /// How long from the answer until it ends, on the store's clock (zero: expired or free).
    pub remaining: Duration,
}

impl Lease {
    /// Whether someone holds it (it is neither released nor expired at the answer).
    pub fn is_held(&self) -> bool {
        !self.holder.is_empty() && !self.remaining.is_zero()
    }
}
