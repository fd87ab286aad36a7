//! Whether a process runs, for tests that check a server or a child went away.

/// Whether process `pid` runs: it exists and is not a zombie (a zombie has exited and only
/// waits for its parent, or init, to reap it).
pub fn runs(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        // The state follows the command name, which is in parentheses and may hold any byte.
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
    })
}

#[cfg(test)]
mod tests {
    use super::runs;

    #[test]
    fn a_running_process_runs_and_an_exited_one_does_not_even_before_it_is_reaped() {
        assert!(runs(std::process::id()));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        // Not waited for yet: once `true` exits it is a zombie.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while runs(pid) {
            assert!(std::time::Instant::now() < deadline, "`true` never exited");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(
            std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "a zombie"
        );
        child.wait().unwrap();
        assert!(!runs(pid));
    }
}
