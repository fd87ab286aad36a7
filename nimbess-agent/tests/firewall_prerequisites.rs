//! The kernel driver's host prerequisites: an agent started on a host
//! without `nft` refuses at once, naming the program and the package to
//! install, instead of failing every Service later in its log. No root
//! needed: the check comes before any netlink socket.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn the_kernel_driver_without_nft_exits_at_start_naming_the_package() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let empty_path = dir.path().join("bin");
    std::fs::create_dir(&empty_path).expect("an empty PATH directory");
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, "driver: kernel\nnetworks: []\n").expect("config");
    let mut child = Command::new(env!("CARGO_BIN_EXE_nimbess-agent"))
        .arg("serve")
        .arg("--config")
        .arg(&config)
        .arg("--socket")
        .arg(dir.path().join("agent.sock"))
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .env_clear()
        .env("PATH", &empty_path)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start nimbess-agent");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if started.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            panic!("the agent without nft is still running after 20 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stderr = std::io::read_to_string(child.stderr.take().expect("stderr")).expect("stderr");
    assert!(!status.success(), "exit {status}, stderr: {stderr}");
    assert!(
        stderr.contains("`nft`") && stderr.contains("package nftables"),
        "the error names the program and the package: {stderr}"
    );
    assert!(
        stderr.contains(&empty_path.display().to_string()),
        "the error names the PATH searched: {stderr}"
    );
    assert!(
        !dir.path().join("agent.sock").exists(),
        "no socket was served"
    );
}
