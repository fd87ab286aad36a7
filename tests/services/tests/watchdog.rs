//! A server outlives no test process, even one killed with SIGKILL (no destructors run).
//!
//! The test re-runs this test binary to start etcd in a child process, kills that child with
//! SIGKILL, and waits for the watchdog to stop etcd and remove its directory.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use nephrite_test_services::process::runs;
use nephrite_test_services::{Etcd, MariaDb, Postgres, RabbitMq};

/// Which service the child process starts, from the environment the parent sets.
const SERVICE_VAR: &str = "NEPHRITE_WATCHDOG_SERVICE";

/// Run by the parent test only: start a service, print its pid and directory, then wait to be
/// killed.
#[test]
#[ignore = "started by killed_test_process_leaves_no_server_behind"]
fn watchdog_child() {
    let (pid, dir, keep): (u32, PathBuf, Box<dyn std::any::Any>) =
        match std::env::var(SERVICE_VAR).as_deref() {
            Ok("postgres") => {
                let pg = Postgres::start().expect("postgres starts");
                (pg.pid(), pg.dir().to_path_buf(), Box::new(pg))
            }
            Ok("etcd") => {
                let etcd = Etcd::start().expect("etcd starts");
                (etcd.pid(), etcd.dir().to_path_buf(), Box::new(etcd))
            }
            Ok("mariadb") => {
                let db = MariaDb::start().expect("mariadb starts");
                (db.pid(), db.dir().to_path_buf(), Box::new(db))
            }
            Ok("rabbitmq") => {
                let mq = RabbitMq::start().expect("rabbitmq starts");
                (mq.pid(), mq.dir().to_path_buf(), Box::new(mq))
            }
            _ => return,
        };
    // libtest may have written "test watchdog_child ... " on this line already.
    println!("\nSTARTED {pid} {}", dir.display());
    std::thread::sleep(Duration::from_secs(600));
    drop(keep);
}

fn killed_child_leaves_nothing(service: &str) -> anyhow::Result<()> {
    let mut child = Command::new(std::env::current_exe()?)
        .args([
            "watchdog_child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(SERVICE_VAR, service)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let stdout = child.stdout.take().context("child stdout")?;
    let started = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .find_map(|line| line.split_once("STARTED ").map(|(_, rest)| rest.to_owned()));
    let Some(started) = started else {
        child.kill()?;
        child.wait()?;
        anyhow::bail!("the child never started {service}");
    };
    let (pid, dir) = started.split_once(' ').context("pid and dir")?;
    let (server, dir): (u32, PathBuf) = (pid.parse()?, PathBuf::from(dir));
    assert!(runs(server) && dir.exists());

    child.kill()?; // SIGKILL: no destructor runs in the child
    child.wait()?;

    let deadline = Instant::now() + Duration::from_secs(60);
    while (runs(server) || dir.exists()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !runs(server),
        "{service} (pid {pid}) outlived the killed test process"
    );
    assert!(
        !dir.exists(),
        "{} outlived the killed test process",
        dir.display()
    );
    Ok(())
}

#[test]
fn killed_test_process_leaves_no_etcd_behind() -> anyhow::Result<()> {
    if let Err(e) = nephrite_test_services::tool(nephrite_test_services::Tool::EtcdServer) {
        e.skip("killed_test_process_leaves_no_etcd_behind");
        return Ok(());
    }
    killed_child_leaves_nothing("etcd")
}

#[test]
fn killed_test_process_leaves_no_postgres_behind() -> anyhow::Result<()> {
    if let Err(e) = nephrite_test_services::tool(nephrite_test_services::Tool::Postgres) {
        e.skip("killed_test_process_leaves_no_postgres_behind");
        return Ok(());
    }
    killed_child_leaves_nothing("postgres")
}

#[test]
fn killed_test_process_leaves_no_mariadb_behind() -> anyhow::Result<()> {
    if let Err(e) = nephrite_test_services::program("mariadbd", "mariadb-server") {
        e.skip("killed_test_process_leaves_no_mariadb_behind");
        return Ok(());
    }
    killed_child_leaves_nothing("mariadb")
}

#[test]
fn killed_test_process_leaves_no_rabbitmq_behind() -> anyhow::Result<()> {
    if let Err(e) = nephrite_test_services::program("epmd", "rabbitmq-server") {
        e.skip("killed_test_process_leaves_no_rabbitmq_behind");
        return Ok(());
    }
    killed_child_leaves_nothing("rabbitmq")
}
