//! The dashboards at scale (`cargo bench -p nephrite-preparer --bench dashboard`): a SQLite
//! store filled with N deployments (default 100,000; `PREPARER_BENCH_DASHBOARD_DEPLOYMENTS`)
//! behind a real daemon with its web dashboard, and
//!
//! 1. the terminal dashboard's state and drawing (the real [`App`] drawn on ratatui's
//!    `TestBackend`, 150×40) fed by the real feed: time to the first frame with rows, to the
//!    whole store listed, from opening to the first live change on screen (a deployment
//!    created through the Data API as soon as the dashboard is live, until a frame shows it:
//!    the listing plus the `Watch` from its revision), and per change after that;
//! 2. the same without the network: a frame with N rows, one update applied and drawn, a
//!    filter over N rows;
//! 3. the web page: `GET /` until it shows all N (from the daemon's start: the web feed's
//!    listing), its median, one page with a filter, from opening the page's event stream to
//!    the first live change in it (a deployment created right after opening), and per change
//!    the time until the page's event stream sends it.
//!
//! Every figure line carries the load average (two cores shared with other builds).

use std::time::{Duration, Instant};

use clap::Parser as _;
use nephrite_preparer::daemon::{ServeCommand, start};
use nephrite_preparer::dashboard::{
    Connection, DeploymentFilter, DeploymentRow, Feed, FeedConfig, Update,
};
use nephrite_preparer::store::{self, DeploymentInfo, NewDeployment};
use nephrite_preparer::tui::app::App;
use nephrite_preparer::tui::{connector, draw};
use nephrite_proto::nephrite::preparer::data::v1 as pb;
use nephrite_proto::nephrite::preparer::data::v1::data_client::DataClient;
use nephrite_runtime::ServeArgs;
use nephrite_test_services::machine::load_average;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::layout::Rect;
use tokio::sync::mpsc;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const CHANGES: usize = 30;

/// Fresh terminal dashboards listed from scratch (time to first frame and to all listed).
const LISTING_RUNS: usize = 5;

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn median(mut values: Vec<Duration>) -> Duration {
    values.sort();
    values[values.len() / 2]
}

fn figure(what: &str, value: String) {
    println!("{what:<58} {value:<34} (load {})", load_average());
}

#[tokio::main]
async fn main() {
    let total: usize = std::env::var("PREPARER_BENCH_DASHBOARD_DEPLOYMENTS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(100_000);
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = format!("sqlite:{}", dir.path().join("p.db").display());
    let filled = Instant::now();
    fill(&spec, total).await;
    figure(
        &format!("fill {total} deployments"),
        format!("{:.1} s", filled.elapsed().as_secs_f64()),
    );

    let web_port = nephrite_test_services::free_loopback_port().expect("port");
    let command = ServeCommand {
        serve: ServeArgs::try_parse_from(["serve", "--listen", "127.0.0.1:0"]).expect("args"),
        store: spec,
        auto_approve: true,
        interval: Duration::from_secs(3),
        plugin_timeout: Duration::from_secs(30),
        lease: Duration::from_secs(30),
        retry_backoff: Duration::from_millis(100),
        max_backoff: Duration::from_secs(1),
        concurrency: 4,
        revisions_kept: nephrite_preparer::store::DEFAULT_REVISIONS_KEPT,
        web: Some(([127, 0, 0, 1], web_port).into()),
        plugin_credentials: Default::default(),
    };
    let started = Instant::now();
    let daemon = start(&command, false).await.expect("daemon");
    let server = format!(
        "http://{}",
        daemon.endpoint.to_string().trim_start_matches("tcp://")
    );
    let mut client = DataClient::new(
        nephrite_runtime::dial(&daemon.endpoint)
            .await
            .expect("dial"),
    );
    client
        .register_template(pb::RegisterTemplateRequest {
            id: "nf".into(),
            package_yaml: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: nf}\ndata: {a: '1'}\n"
                .into(),
            ..Default::default()
        })
        .await
        .expect("template");

    web(
        &format!("http://127.0.0.1:{web_port}"),
        total,
        started,
        &mut client,
    )
    .await;
    terminal(&server, total, &mut client).await;
    offline(total);
    daemon.stop().await.expect("stop");
}

async fn fill(spec: &str, total: usize) {
    let store = store::open(spec).await.expect("store");
    let mut made = 0;
    while made < total {
        let rows: Vec<_> = (made..(made + 5000).min(total))
            .map(|n| NewDeployment {
                info: DeploymentInfo {
                    id: format!("d{n:09}"),
                    template_id: "nf".into(),
                    site_id: format!("site/{:05}", n % 10_000),
                    metadata: [("Site.region".to_owned(), format!("r{:03}", n % 100))].into(),
                    created: "2026-01-01T00:00:00Z".into(),
                    updated: "2026-01-01T00:00:00Z".into(),
                    prepared: !n.is_multiple_of(3),
                    ..DeploymentInfo::default()
                },
                package_yaml: String::new(),
                author: "bench".into(),
            })
            .collect();
        made += rows.len();
        store.create_deployments(rows).await.expect("fill");
    }
}

async fn create(client: &mut DataClient<tonic::transport::Channel>) -> String {
    client
        .create_deployment(pb::CreateDeploymentRequest {
            template_id: "nf".into(),
            ..Default::default()
        })
        .await
        .expect("create")
        .into_inner()
        .deployment_id
}

/// The terminal dashboard over the network, drawn on a test backend.
async fn terminal(server: &str, total: usize, client: &mut DataClient<tonic::transport::Channel>) {
    let area = Rect::new(0, 0, 150, 40);
    // A fresh dashboard (app, screen, feed, connections) per run; the last one stays for the
    // changes.
    let mut paints = Vec::new();
    let mut listings = Vec::new();
    let mut first_changes = Vec::new();
    let mut last = None;
    for _ in 0..LISTING_RUNS {
        let mut screen =
            Terminal::new(TestBackend::new(area.width, area.height)).expect("terminal");
        let mut app = App::new(area);
        let (tx, mut updates) = mpsc::channel(4096);
        let started = Instant::now();
        let feed = tokio::spawn(
            Feed::new(
                connector(server, &Default::default()).expect("server"),
                FeedConfig::default(),
            )
            .run(tx),
        );
        let mut first_paint = None;
        while app.board.deployment_count() < total {
            pump(&mut app, &mut updates, &mut screen).await;
            if first_paint.is_none() && app.board.deployment_count() > 0 {
                first_paint = Some(started.elapsed());
            }
        }
        listings.push(started.elapsed());
        paints.push(first_paint.unwrap_or_default());
        while *app.board.connection() != Connection::Live {
            pump(&mut app, &mut updates, &mut screen).await;
        }
        // The first live change: made as soon as the dashboard is live.
        let id = create(client).await;
        while app.board.deployment(&id).is_none() {
            pump(&mut app, &mut updates, &mut screen).await;
        }
        first_changes.push(started.elapsed());
        if let Some((_, _, _, previous)) = last.replace((app, screen, updates, feed)) {
            let previous: tokio::task::JoinHandle<()> = previous;
            previous.abort();
        }
    }
    figure(
        &format!("TUI: first frame with rows, median of {LISTING_RUNS}"),
        format!(
            "{:.1} ms (range {:.1}–{:.1})",
            ms(median(paints.clone())),
            ms(*paints.iter().min().expect("runs")),
            ms(*paints.iter().max().expect("runs"))
        ),
    );
    figure(
        &format!("TUI: all {total} listed and drawn, median of {LISTING_RUNS}"),
        format!(
            "{:.1} ms (range {:.1}–{:.1})",
            ms(median(listings.clone())),
            ms(*listings.iter().min().expect("runs")),
            ms(*listings.iter().max().expect("runs"))
        ),
    );
    figure(
        &format!("TUI: opening → first live change on screen, median of {LISTING_RUNS}"),
        format!(
            "{:.1} ms (range {:.1}–{:.1})",
            ms(median(first_changes.clone())),
            ms(*first_changes.iter().min().expect("runs")),
            ms(*first_changes.iter().max().expect("runs"))
        ),
    );
    let (mut app, mut screen, mut updates, feed) = last.expect("runs");
    let mut times = Vec::new();
    for _ in 0..CHANGES {
        let made = Instant::now();
        let id = create(client).await;
        while app.board.deployment(&id).is_none() {
            pump(&mut app, &mut updates, &mut screen).await;
        }
        times.push(made.elapsed());
    }
    figure(
        &format!("TUI: change → frame, median of {CHANGES}"),
        format!(
            "{:.2} ms (slowest {:.2})",
            ms(median(times.clone())),
            ms(*times.iter().max().expect("times"))
        ),
    );
    feed.abort();
}

/// Waits for the feed's next updates, applies every one ready, draws a frame: the terminal
/// dashboard's loop without the keyboard.
async fn pump(
    app: &mut App,
    updates: &mut mpsc::Receiver<Update>,
    screen: &mut Terminal<TestBackend>,
) {
    let update = updates.recv().await.expect("feed");
    app.board.apply(update);
    while let Ok(update) = updates.try_recv() {
        app.board.apply(update);
    }
    screen.draw(|frame| draw::draw(frame, app)).expect("draw");
}

/// The board and the drawing alone.
fn offline(total: usize) {
    let area = Rect::new(0, 0, 150, 40);
    let mut screen = Terminal::new(TestBackend::new(area.width, area.height)).expect("terminal");
    let mut app = App::new(area);
    let row = |n: usize| DeploymentRow {
        id: format!("d{n:09}"),
        template_id: "nf".into(),
        site_id: format!("site/{:05}", n % 10_000),
        prepared: !n.is_multiple_of(3),
        updated: "t".into(),
        ..DeploymentRow::default()
    };
    let applied = Instant::now();
    for chunk in (0..total).collect::<Vec<_>>().chunks(1000) {
        app.board
            .apply(Update::Deployments(chunk.iter().map(|&n| row(n)).collect()));
    }
    figure(
        &format!("board: {total} rows applied (pages of 1,000)"),
        format!("{:.1} ms", ms(applied.elapsed())),
    );
    let frames: Vec<Duration> = (0..100)
        .map(|_| {
            let t = Instant::now();
            screen
                .draw(|frame| draw::draw(frame, &mut app))
                .expect("draw");
            t.elapsed()
        })
        .collect();
    figure(
        "frame (150×40) over the full list, median of 100",
        format!("{:.3} ms", ms(median(frames))),
    );
    let updates: Vec<Duration> = (0..1000)
        .map(|i| {
            let mut changed = row(i * 97 % total);
            changed.prepared = !changed.prepared;
            let t = Instant::now();
            app.board.apply(Update::Deployments(vec![changed]));
            screen
                .draw(|frame| draw::draw(frame, &mut app))
                .expect("draw");
            t.elapsed()
        })
        .collect();
    figure(
        "one update applied and drawn, median of 1,000",
        format!("{:.3} ms", ms(median(updates))),
    );
    let filter = DeploymentFilter::parse("site=site/0004* prepared=yes").expect("filter");
    let t = Instant::now();
    app.board.set_filter(filter);
    figure(
        &format!(
            "filter over {total} rows ({} shown)",
            app.board.visible().len()
        ),
        format!("{:.1} ms", ms(t.elapsed())),
    );
}

/// The web page and its event stream.
async fn web(
    base: &str,
    total: usize,
    started: Instant,
    client: &mut DataClient<tonic::transport::Channel>,
) {
    let http = reqwest::Client::new();
    let expect = format!("{total} deployments");
    loop {
        let body = match http.get(format!("{base}/")).send().await {
            Ok(response) => response.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        };
        if body.contains(&expect) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    figure(
        &format!("web: daemon start → GET / shows all {total}"),
        format!("{:.1} ms", ms(started.elapsed())),
    );
    let mut times = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        let body = http
            .get(format!("{base}/"))
            .send()
            .await
            .expect("GET")
            .text()
            .await
            .expect("body");
        times.push(t.elapsed());
        assert!(body.contains("<table>"));
    }
    figure(
        "web: GET / (first 100 rows), median of 20",
        format!("{:.2} ms", ms(median(times))),
    );
    let t = Instant::now();
    http.get(format!("{base}/?site=site/0004*&prepared=yes"))
        .send()
        .await
        .expect("GET")
        .text()
        .await
        .expect("body");
    figure(
        "web: GET / with a site and state filter",
        format!("{:.2} ms", ms(t.elapsed())),
    );
    // New deployments' ids (UUID v7) sort before the filled ones: each lands on page one.
    // Opening the page: its event stream (the daemon's web feed is live since it listed).
    let opened = Instant::now();
    let mut events = http
        .get(format!("{base}/events/deployments"))
        .send()
        .await
        .expect("events");
    let mut times = Vec::new();
    for n in 0..=CHANGES {
        let made = Instant::now();
        let id = create(client).await;
        let mut seen = String::new();
        while !seen.contains(&id) {
            let chunk = events
                .chunk()
                .await
                .expect("chunk")
                .expect("event stream open");
            seen.push_str(&String::from_utf8_lossy(&chunk));
        }
        if n == 0 {
            figure(
                "web: page opened → first live change in its event stream",
                format!("{:.1} ms", ms(opened.elapsed())),
            );
            figure(
                "web: first live change made → event",
                format!("{:.1} ms", ms(made.elapsed())),
            );
        } else {
            times.push(made.elapsed());
        }
    }
    figure(
        &format!("web: change → event, median of {CHANGES}"),
        format!("{:.1} ms (includes the 100 ms settle)", ms(median(times))),
    );
}
