//! Connections per client address: at most `--max-connections-per-client` open at once (over
//! both listeners), so one client cannot take every socket and task of the router. A
//! connection over the cap is closed as soon as it is accepted.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

/// The open connections of each client address, against a cap.
#[derive(Debug, Default)]
pub(crate) struct ClientLimit {
    max: Option<usize>,
    open: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

/// One open connection of a client; released when dropped.
pub(crate) struct ClientSlot {
    client: IpAddr,
    open: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

impl ClientLimit {
    /// A limit of `max` connections per client address (`None`: no limit).
    pub(crate) fn new(max: Option<usize>) -> Self {
        ClientLimit {
            max,
            open: Arc::default(),
        }
    }

    /// A slot for one more connection of `client`, or `None` when it has `max` open.
    pub(crate) fn acquire(&self, client: IpAddr) -> Option<ClientSlot> {
        let max = self.max?;
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let count = open.entry(client).or_default();
        if *count >= max {
            return None;
        }
        *count += 1;
        Some(ClientSlot {
            client,
            open: self.open.clone(),
        })
    }

    /// Whether connections are counted at all.
    pub(crate) fn is_limited(&self) -> bool {
        self.max.is_some()
    }
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = open.get_mut(&self.client) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.client);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_gets_at_most_max_slots_and_a_closed_one_frees_its_slot() {
        let limit = ClientLimit::new(Some(2));
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let first = limit.acquire(a).unwrap();
        let _second = limit.acquire(a).unwrap();
        assert!(limit.acquire(a).is_none());
        assert!(
            limit.acquire(b).is_some(),
            "another address has its own count"
        );
        drop(first);
        assert!(limit.acquire(a).is_some());
    }
}
