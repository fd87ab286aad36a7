//! The web dashboard of `preparer serve --web` in a real headless Chromium, driven through
//! chromedriver (WebDriver) as a person would use it: open the page, watch a 10,000-site
//! Placement created with the CLI appear and turn prepared without reloading, filter, follow a
//! deep link to a deployment.

mod support;

use std::time::Instant;

use nephrite_proto::nephrite::data::v1::data_client::DataClient;
use serde_json::json;
use support::binary::{cli, ok, serve};
use support::webdriver::Browser;
use support::*;

#[tokio::test(flavor = "multi_thread")]
async fn a_placement_expands_live_on_the_web_dashboard() {
    let name = "a_placement_expands_live_on_the_web_dashboard";
    let programs = nephrite_test_services::program("chromium", "chromium").and_then(|chromium| {
        nephrite_test_services::program("chromedriver", "chromium-driver")
            .map(|driver| (chromium, driver))
    });
    let (chromium, chromedriver) = match programs {
        Ok(programs) => programs,
        Err(unavailable) => {
            unavailable.skip(name);
            return;
        }
    };
    let sites = dashboard_sites();
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("p.db").display());
    store_sites(&store, sites).await;
    let web_port = nephrite_test_services::free_loopback_port().expect("port");
    let web = format!("127.0.0.1:{web_port}");
    let daemon = serve(&store, &["--web", &web]).await;
    let endpoint: nephrite_runtime::Endpoint = daemon.server.parse().unwrap();
    let mut client = DataClient::new(nephrite_runtime::dial(&endpoint).await.unwrap());
    register_template(&mut client, "nf/gw", GATEWAY).await;
    register_template(&mut client, "topo", &topology("nf/gw", "metro")).await;

    let browser = Browser::start(&chromedriver, &chromium).await;
    let page = format!("http://{web}");
    browser.open(&format!("{page}/")).await;
    browser
        .until(
            "the live stream",
            "return document.getElementById('connection').textContent === 'live'",
        )
        .await;
    // Set on this document only: a reload would lose it.
    browser
        .script("window.notReloaded = true; return true", json!([]))
        .await;

    // The placement, created with the CLI, appears pending and turns prepared.
    let created = Instant::now();
    let parent = ok(cli(
        &daemon.server,
        &["deployment", "create", "--template", "topo"],
    ));
    let parent = parent.trim().to_owned();
    let state = format!(
        "var row = document.querySelector('tr[data-id=\"{parent}\"]'); return row ? row.cells[3].textContent : ''"
    );
    let first = browser.until("the placement's row", &state).await;
    eprintln!(
        "CLI create → on the page: {:?} (as {first})",
        created.elapsed()
    );
    assert_eq!(
        first, "pending",
        "the placement shows pending before its {sites} children are made"
    );
    let prepared = format!(
        "var row = document.querySelector('tr[data-id=\"{parent}\"]'); return row && row.cells[3].textContent === 'prepared'"
    );
    browser.until("the placement prepared", &prepared).await;
    let summary = browser
        .until(
            "every child prepared",
            &format!(
                "var s = document.getElementById('summary').textContent; return s.startsWith('{total} deployments, {total} prepared') ? s : ''",
                total = sites + 1
            ),
        )
        .await;
    eprintln!(
        "CLI create → {sites} children prepared on the page: {:?} ({summary})",
        created.elapsed()
    );
    assert_eq!(
        browser
            .script("return window.notReloaded === true", json!([]))
            .await,
        json!(true),
        "the page was not reloaded"
    );
    let parent_children = browser
        .script(
            &format!(
                "return document.querySelector('tr[data-id=\"{parent}\"]').cells[5].textContent"
            ),
            json!([]),
        )
        .await;
    assert_eq!(parent_children, json!(sites.to_string()));
    save_screenshot(&browser, "web-deployments.png").await;

    // Filter by site and state, with the form's labelled fields.
    browser.type_into("#f-site", "dc/0004*").await;
    browser.click("#f-prepared option[value='yes']").await;
    browser.click("form.filter button[type='submit']").await;
    let shown = browser
        .until("ten rows", "var s = document.getElementById('summary'); return s && s.textContent.endsWith('10 shown') ? document.querySelectorAll('#live tbody tr').length : 0")
        .await;
    assert_eq!(shown, json!(10));
    assert!(
        browser.url().await.contains("site=dc%2F0004*")
            || browser.url().await.contains("site=dc/0004"),
        "{}",
        browser.url().await
    );
    let sites_shown = browser
        .script("return Array.from(document.querySelectorAll('#live tbody tr')).map(r => r.cells[2].textContent).join(' ')", json!([]))
        .await;
    assert_eq!(
        sites_shown,
        json!(
            "dc/00040 dc/00041 dc/00042 dc/00043 dc/00044 dc/00045 dc/00046 dc/00047 dc/00048 dc/00049"
        )
    );

    // Follow a row's deep link.
    browser.click("#live tbody tr:nth-child(2) td.id a").await;
    let url = browser.url().await;
    assert!(url.starts_with(&format!("{page}/deployments/")), "{url}");
    let package = browser
        .until(
            "the package",
            "var p = document.querySelector('#live pre'); return p ? p.textContent : ''",
        )
        .await;
    assert!(
        package.as_str().is_some_and(|p| p.contains("workers: '8'")),
        "the merged package: {package}"
    );
    let text = browser
        .script(
            "return document.getElementById('live').innerText",
            json!([]),
        )
        .await;
    assert!(
        text.as_str()
            .is_some_and(|t| t.contains("dc/00041") && t.contains(&parent)),
        "{text}"
    );
    save_screenshot(&browser, "web-deployment.png").await;

    // A deep link typed in: the placement, with its children.
    browser.open(&format!("{page}/deployments/{parent}")).await;
    let caption = browser
        .until(
            "the children",
            "var c = document.querySelector('#live caption'); return c ? c.textContent : ''",
        )
        .await;
    assert!(
        caption
            .as_str()
            .is_some_and(|c| c.starts_with(&format!("Children: {sites}"))),
        "{caption}"
    );

    // A change made with the CLI while the deployment is open.
    let child = url.rsplit('/').next().unwrap().to_owned();
    browser.open(&url).await;
    browser
        .until(
            "the live stream",
            "return document.getElementById('connection').textContent === 'live'",
        )
        .await;
    let deleted = Instant::now();
    ok(cli(&daemon.server, &["deployment", "delete", &child]));
    browser
        .until(
            "the delete",
            "return document.getElementById('live').textContent.includes('no such deployment')",
        )
        .await;
    eprintln!("CLI delete → on the page: {:?}", deleted.elapsed());
    browser.quit().await;
}

/// With `PREPARER_SCREENSHOTS=DIR`, saves the window as `DIR/name`.
async fn save_screenshot(browser: &Browser, name: &str) {
    if let Some(dir) = std::env::var_os("PREPARER_SCREENSHOTS") {
        let path = std::path::Path::new(&dir).join(name);
        std::fs::write(&path, browser.screenshot().await).expect("screenshot written");
        eprintln!("screenshot: {}", path.display());
    }
}
