//! A throwaway PostgreSQL, used the way a domain test uses it.

use std::net::TcpStream;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, ensure};
use nephrite_test_services::{Postgres, Tool, tool};

/// Start PostgreSQL or skip `test` (a failure under CI=true).
fn start_or_skip(test: &str) -> Option<Postgres> {
    match Postgres::start() {
        Ok(pg) => Some(pg),
        Err(e) => {
            e.skip(test);
            None
        }
    }
}

/// Run `sql` with the psql client against `url`, as a user of `Postgres::url()` would.
fn psql_at(url: &str, sql: &str) -> anyhow::Result<String> {
    let postgres = tool(Tool::Postgres)?;
    let psql = postgres.with_file_name("psql");
    let out = Command::new(&psql)
        .args(["-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql, url])
        .output()
        .with_context(|| format!("running {}", psql.display()))?;
    ensure!(
        out.status.success(),
        "psql {url}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8(out.stdout)?.trim().to_owned())
}

#[test]
fn a_row_written_is_read_back_and_the_server_is_gone_after_drop() -> anyhow::Result<()> {
    let Some(pg) = start_or_skip("a_row_written_is_read_back_and_the_server_is_gone_after_drop")
    else {
        return Ok(());
    };
    assert_eq!(
        pg.url(),
        format!("postgres://postgres@127.0.0.1:{}/postgres", pg.port())
    );

    pg.psql(
        "postgres",
        "CREATE TABLE devices (name text PRIMARY KEY, asn integer NOT NULL);
         INSERT INTO devices VALUES ('leaf-1', 65001);",
    )?;
    assert_eq!(
        psql_at(&pg.url(), "SELECT name, asn FROM devices")?,
        "leaf-1|65001"
    );
    psql_at(&pg.url(), "INSERT INTO devices VALUES ('spine-1', 65000)")?;
    assert_eq!(
        pg.psql("postgres", "SELECT name FROM devices ORDER BY asn")?
            .trim(),
        "spine-1\nleaf-1"
    );

    let (port, dir, pid) = (pg.port(), pg.dir().to_path_buf(), pg.pid());
    assert!(dir.join("data").join("PG_VERSION").is_file());
    drop(pg);

    assert!(
        TcpStream::connect(("127.0.0.1", port)).is_err(),
        "port {port} still accepts"
    );
    assert!(!dir.exists(), "{} was not removed", dir.display());
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "postgres (pid {pid}) still runs"
    );
    Ok(())
}

#[test]
fn a_created_database_is_reachable_at_its_own_url() -> anyhow::Result<()> {
    let Some(pg) = start_or_skip("a_created_database_is_reachable_at_its_own_url") else {
        return Ok(());
    };
    let url = pg.create_database("inventory test")?;
    assert_eq!(
        url,
        format!(
            "postgres://postgres@127.0.0.1:{}/inventory%20test",
            pg.port()
        )
    );
    assert_eq!(
        psql_at(&url, "SELECT current_database()")?,
        "inventory test"
    );
    Ok(())
}

#[test]
fn two_servers_run_side_by_side_without_sharing_data() -> anyhow::Result<()> {
    let test = "two_servers_run_side_by_side_without_sharing_data";
    let (Some(a), Some(b)) = (start_or_skip(test), start_or_skip(test)) else {
        return Ok(());
    };
    assert_ne!(a.port(), b.port());
    assert_ne!(a.dir(), b.dir());
    a.psql("postgres", "CREATE TABLE only_in_a (x int)")?;
    let in_b = b.psql(
        "postgres",
        "SELECT count(*) FROM pg_tables WHERE tablename = 'only_in_a'",
    )?;
    assert_eq!(in_b.trim(), "0");
    Ok(())
}

#[test]
fn a_failing_statement_names_the_database_statement_and_reason() {
    let Some(pg) = start_or_skip("a_failing_statement_names_the_database_statement_and_reason")
    else {
        return;
    };
    let err = pg
        .psql("postgres", "SELECT * FROM no_such_table")
        .expect_err("a query of a missing table fails");
    assert_eq!(err.database, "postgres");
    assert_eq!(err.sql, "SELECT * FROM no_such_table");
    assert!(err.detail.contains("no_such_table"), "{err}");
    assert!(err.detail.contains("does not exist"), "{err}");
}
