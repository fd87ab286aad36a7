//! Facts about the host a daemon runs on.

/// The kernel's host name (`/proc/sys/kernel/hostname`: in a pod, the pod's name), trimmed;
/// `None` when it cannot be read or is empty. Daemons use it as their default identity (a
/// fabric host name, a leader-election holder, a Node name) and say which flag overrides it.
pub fn hostname() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_hostname_is_the_kernels_without_its_newline() {
        let kernel = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
        assert_eq!(super::hostname().as_deref(), Some(kernel.trim()));
    }
}
