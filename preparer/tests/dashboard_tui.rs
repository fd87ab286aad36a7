//! `preparer dashboard` in a real terminal: tmux runs it against the real daemon, the test
//! types keys (`send-keys`) and reads the screen (`capture-pane`), as a person would. A
//! 10,000-site Placement created with the CLI expands on screen; the list is filtered, a
//! deployment opened; the daemon is stopped and restarted under the dashboard's eyes.

mod support;

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use support::binary::{
    BINARY, PlacementScene, cli, create_placement, ok, placement_scene, serve_on,
};

/// A tmux server of its own (its own socket, no configuration) with one window.
struct Tmux {
    program: PathBuf,
    socket: String,
}

impl Tmux {
    fn start(program: PathBuf, command: &str) -> Tmux {
        let socket = format!("preparer-dashboard-{}", std::process::id());
        let tmux = Tmux { program, socket };
        let output = tmux.run(&[
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "dash",
            "-x",
            "150",
            "-y",
            "40",
            command,
        ]);
        assert!(output.status.success(), "tmux starts: {output:?}");
        tmux
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new(&self.program)
            .args(["-u", "-L", &self.socket])
            .args(args)
            .env("LANG", "C.UTF-8")
            .output()
            .expect("tmux runs")
    }

    /// Types keys (tmux key names, or literal text with `-l`).
    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "dash"];
        args.extend_from_slice(keys);
        assert!(self.run(&args).status.success());
    }

    fn text(&self, text: &str) {
        assert!(
            self.run(&["send-keys", "-t", "dash", "-l", text])
                .status
                .success()
        );
    }

    /// With `PREPARER_SCREENSHOTS=DIR`, saves the screen, colours included, as `DIR/name`
    /// (SVG).
    fn save_screenshot(&self, name: &str) {
        if let Some(dir) = std::env::var_os("PREPARER_SCREENSHOTS") {
            let capture = self.run(&["capture-pane", "-e", "-p", "-t", "dash"]).stdout;
            let path = std::path::Path::new(&dir).join(name);
            let svg = support::terminal_svg::svg(&String::from_utf8_lossy(&capture), 150);
            std::fs::write(&path, svg).expect("screenshot written");
            eprintln!("screenshot: {}", path.display());
        }
    }

    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.run(&["capture-pane", "-p", "-t", "dash"]).stdout)
            .into_owned()
    }

    /// Waits until the screen shows what `check` wants (10 s at most).
    async fn until(&self, what: &str, mut check: impl FnMut(&str) -> bool) -> String {
        let started = Instant::now();
        loop {
            let screen = self.screen();
            if check(&screen) {
                return screen;
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "timed out waiting for the screen to show {what}; it shows:\n{screen}"
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

/// The status line's count of deployments and of prepared ones.
fn counts(screen: &str) -> Option<(usize, usize)> {
    let line = screen.lines().nth(1)?;
    let numbers: Vec<usize> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter(|n| !n.is_empty())
        .filter_map(|n| n.parse().ok())
        .collect();
    line.contains("deployments")
        .then(|| (numbers[0], numbers[1]))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_placement_expands_live_on_the_terminal_dashboard() {
    let tmux_program = match nephrite_test_services::program("tmux", "tmux") {
        Ok(path) => path,
        Err(unavailable) => {
            unavailable.skip("a_placement_expands_live_on_the_terminal_dashboard");
            return;
        }
    };
    let PlacementScene {
        mut daemon,
        store,
        sites,
        dir: _dir,
    } = placement_scene(&[]).await;

    let tmux = Tmux::start(
        tmux_program,
        &format!("{BINARY} --server {} dashboard", daemon.server),
    );
    tmux.until("the live banner", |s| s.contains("● live · 0 deployments"))
        .await;

    // The placement, created with the CLI, appears and expands on screen.
    let created = Instant::now();
    let parent = create_placement(&daemon.server);
    eprintln!("CLI create returned: {:?}", created.elapsed());
    let screen = tmux.until("the placement", |s| s.contains(&parent)).await;
    eprintln!("CLI create → on screen: {:?}", created.elapsed());
    assert!(screen.contains("topo"), "its template is shown:\n{screen}");
    let mut seen_partial = None;
    let total = sites + 1;
    let screen = tmux
        .until("every child prepared", |s| {
            if let Some((all, prepared)) = counts(s)
                && prepared < total
                && all > 1
            {
                seen_partial.get_or_insert((all, prepared));
            }
            counts(s) == Some((total, total))
        })
        .await;
    eprintln!(
        "CLI create → {sites} children prepared on screen: {:?} (seen on the way: {seen_partial:?} deployments/prepared)",
        created.elapsed()
    );
    let parent_row = screen
        .lines()
        .find(|l| l.starts_with(&parent))
        .expect("the parent's row");
    assert!(
        parent_row.contains("prepared") && parent_row.contains(&sites.to_string()),
        "{parent_row}"
    );
    tmux.save_screenshot("tui-deployments.svg");
    // Each child is a row with its template and site.
    assert!(
        screen
            .lines()
            .any(|l| l.contains("nf/gw") && l.contains("dc/00000")),
        "{screen}"
    );

    // Filter to ten sites.
    tmux.keys(&["/"]);
    tmux.text("site=dc/0004* prepared=yes");
    tmux.keys(&["Enter"]);
    let screen = tmux.until("ten rows", |s| s.contains(" 10 shown")).await;
    let rows: Vec<&str> = screen.lines().filter(|l| l.contains("nf/gw")).collect();
    assert_eq!(rows.len(), 10, "{screen}");
    assert!(rows.iter().all(|r| r.contains("dc/0004")), "{screen}");

    // Open the second.
    tmux.keys(&["Down", "Enter"]);
    let screen = tmux
        .until("the package", |s| s.contains("kind: ConfigMap"))
        .await;
    assert!(screen.contains("site dc/00041"), "{screen}");
    assert!(screen.contains(&format!("parent {parent}")), "{screen}");
    assert!(
        screen.contains("workers: '8'"),
        "the merged package:\n{screen}"
    );
    tmux.save_screenshot("tui-deployment.svg");

    // A change made with the CLI while it is open.
    let child = screen
        .lines()
        .find_map(|l| l.strip_prefix("Deployment "))
        .expect("the open deployment's id")
        .trim()
        .to_owned();
    let deleted = Instant::now();
    ok(cli(&daemon.server, &["deployment", "delete", &child]));
    tmux.until("the delete", |s| {
        s.contains(&format!("{child} was deleted"))
    })
    .await;
    eprintln!("CLI delete → on screen: {:?}", deleted.elapsed());
    tmux.until("nine rows", |s| s.contains(" 9 shown")).await;

    // The daemon goes away and comes back.
    daemon.child.kill().unwrap();
    daemon.child.wait().unwrap();
    tmux.until("the banner", |s| {
        s.contains("daemon unreachable, reconnecting")
    })
    .await;
    let port = daemon.server.rsplit(':').next().unwrap().parse().unwrap();
    let _restarted = serve_on(&store, port, &[]).await;
    tmux.until("live again", |s| s.contains("● live")).await;

    // Delete the first of the nine from the dashboard: asked, then done.
    tmux.keys(&["Home", "x"]);
    let screen = tmux
        .until("the question", |s| s.contains("and its descendants? y / n"))
        .await;
    let question = screen
        .lines()
        .find_map(|l| l.strip_prefix("Delete "))
        .expect("the question names the deployment");
    let victim = question.split_whitespace().next().unwrap().to_owned();
    tmux.keys(&["y"]);
    tmux.until("the delete", |s| s.contains(&format!("deleted {victim}")))
        .await;
    tmux.until("eight rows", |s| s.contains(" 8 shown")).await;

    tmux.keys(&["q"]);
}
