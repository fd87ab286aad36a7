use std::path::Path;

use super::*;

fn spawn_sh(dir: &Path, script: &str, grace: Duration) -> ServerProcess {
    let mut command = Command::new("/bin/sh");
    command.args(["-c", script]);
    ServerProcess::spawn(
        "test server",
        command,
        &dir.join("server.log"),
        Signal::TERM,
        grace,
        dir,
    )
    .expect("sh starts")
}

fn gone(pid: u32) -> bool {
    !Path::new(&format!("/proc/{pid}")).exists()
}

#[test]
fn a_server_that_exits_during_start_up_is_reported_with_its_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = spawn_sh(
        dir.path(),
        "echo 'listen tcp: bind: address already in use' >&2; exit 3",
        Duration::from_secs(5),
    );
    let not_ready = server
        .wait_until_ready(Duration::from_secs(30), || false)
        .expect_err("the server exited");
    assert!(not_ready.address_in_use, "{}", not_ready.detail);
    assert!(
        not_ready
            .detail
            .starts_with("test server exited during start-up"),
        "{}",
        not_ready.detail
    );
    assert!(
        not_ready.detail.contains("exit status: 3"),
        "{}",
        not_ready.detail
    );
    assert!(
        not_ready.detail.contains("address already in use"),
        "{}",
        not_ready.detail
    );
}

#[test]
fn a_server_that_never_gets_ready_times_out_with_an_empty_log_said_so() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = spawn_sh(dir.path(), "exec sleep 30", Duration::from_secs(5));
    let not_ready = server
        .wait_until_ready(Duration::from_millis(100), || false)
        .expect_err("never ready");
    assert!(!not_ready.address_in_use);
    assert!(
        not_ready.detail.contains("not ready after"),
        "{}",
        not_ready.detail
    );
    assert!(
        not_ready.detail.contains("(log is empty)"),
        "{}",
        not_ready.detail
    );
    let pid = server.pid();
    drop(server);
    assert!(gone(pid), "dropping a server that never got ready stops it");
}

#[test]
fn readiness_is_reported_as_soon_as_the_check_passes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = spawn_sh(dir.path(), "exec sleep 30", Duration::from_secs(5));
    let mut checks = 0;
    server
        .wait_until_ready(Duration::from_secs(30), || {
            checks += 1;
            checks == 3
        })
        .expect("ready on the third check");
    assert_eq!(checks, 3);
}

#[test]
fn a_server_ignoring_its_shutdown_signal_is_killed_after_the_grace_period() {
    let dir = tempfile::tempdir().expect("tempdir");
    // An ignored signal stays ignored across exec, so `sleep` ignores SIGTERM.
    let mut server = spawn_sh(
        dir.path(),
        "trap '' TERM; exec sleep 30",
        Duration::from_millis(200),
    );
    let pid = server.pid();
    server.stop();
    assert!(server.exited().is_some());
    assert!(gone(pid), "pid {pid} still runs");
}

#[test]
fn stopping_twice_or_after_the_server_exited_is_harmless() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = spawn_sh(dir.path(), "exit 0", Duration::from_secs(5));
    server.stop();
    server.stop();
    assert!(server.exited().is_some());
}

#[test]
fn a_log_tail_keeps_only_the_end_of_a_long_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("long.log");
    let mut text = "old line\n".repeat(2000);
    text.push_str("the last line\n");
    std::fs::write(&log, &text).expect("write log");
    let tail = log_tail(&log);
    assert!(tail.len() <= LOG_TAIL_BYTES as usize);
    assert!(tail.ends_with("the last line\n"));
    assert!(log_tail(&dir.path().join("absent.log")).starts_with("(cannot read log:"));
}
