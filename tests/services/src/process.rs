//! Whether a process runs, for tests that check a server or a child went away; how much memory
//! a server and its children hold, for tests that report what a service costs.

/// Whether process `pid` runs: it exists and is not a zombie (a zombie has exited and only
/// waits for its parent, or init, to reap it).
pub fn runs(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        // The state follows the command name, which is in parentheses and may hold any byte.
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
    })
}

/// The resident memory of `pid` and all its descendants, in bytes (0 for a process that is
/// gone). Read from `/proc/PID/status` (`VmRSS`) and `/proc/PID/task/*/children`; shared pages
/// count once per process, so forked workers are over-counted a little.
pub fn tree_rss_bytes(pid: u32) -> u64 {
    let own = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| vm_rss_bytes(&status))
        .unwrap_or(0);
    own + children(pid).into_iter().map(tree_rss_bytes).sum::<u64>()
}

/// The direct children of `pid`, across all its threads.
fn children(pid: u32) -> Vec<u32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|list| {
            list.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// `VmRSS:   1234 kB` in `/proc/PID/status` text, in bytes.
fn vm_rss_bytes(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::{children, runs, tree_rss_bytes, vm_rss_bytes};

    #[test]
    fn a_process_tree_counts_its_children_and_a_gone_one_nothing() {
        let mut shell = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & wait"])
            .spawn()
            .unwrap();
        let pid = shell.id();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while children(pid).is_empty() {
            assert!(std::time::Instant::now() < deadline, "sleep never started");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let sleep = children(pid)[0];
        let alone = |p: u32| {
            vm_rss_bytes(&std::fs::read_to_string(format!("/proc/{p}/status")).unwrap()).unwrap()
        };
        // The forked child's memory moves while it execs `sleep` and while the shell settles
        // into `wait`: read until a tree read falls between two identical reads of the parts.
        let (shell_alone, sleep_alone, tree) = loop {
            let before = (alone(pid), alone(sleep));
            let tree = tree_rss_bytes(pid);
            if before == (alone(pid), alone(sleep)) {
                break (before.0, before.1, tree);
            }
            assert!(std::time::Instant::now() < deadline, "memory never settled");
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        let _ = std::process::Command::new("kill")
            .arg(sleep.to_string())
            .status();
        shell.wait().unwrap();
        assert!(sleep_alone > 0 && shell_alone > 0);
        assert_eq!(tree, shell_alone + sleep_alone);
        assert_eq!(tree_rss_bytes(pid), 0, "reaped: gone");
        assert_eq!(
            vm_rss_bytes("Name:\tx\nVmRSS:\t   2048 kB\n"),
            Some(2 * 1024 * 1024)
        );
        assert_eq!(vm_rss_bytes("Name:\tkthreadd\n"), None);
    }

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
