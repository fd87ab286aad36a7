//! The web dashboard of `preparer serve --web` in a real headless Chromium, driven through
//! chromedriver (WebDriver) as a person would use it: open the page, watch a 10,000-site
//! Placement created with the CLI appear and turn prepared without reloading, filter, follow a
//! deep link to a deployment, read its history and diff, roll it back.

mod support;

use std::time::Instant;

use serde_json::json;
use support::binary::{cli, create_placement, ok, placement_scene};
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
    let web_port = nephrite_test_services::free_loopback_port().expect("port");
    let web = format!("127.0.0.1:{web_port}");
    let scene = placement_scene(&["--web", &web]).await;
    let (daemon, sites) = (&scene.daemon, scene.sites);

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
    let parent = create_placement(&daemon.server);
    let state = format!(
        "var row = document.querySelector('tr[data-id=\"{parent}\"]'); return row ? row.cells[3].textContent : ''"
    );
    let first = browser.until("the placement's row", &state).await;
    eprintln!(
        "CLI create → on the page: {:?} (as {first})",
        created.elapsed()
    );
    // A small placement (PREPARER_DASHBOARD_SITES) may finish before the first frame.
    if sites >= 5_000 {
        assert_eq!(
            first, "pending",
            "the placement shows pending before its {sites} children are made"
        );
    }
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

    // Its history: a CLI update is a new revision; the history page lists it, its diff link
    // shows the changed line, and Roll back to 1 (confirmed) adds a rollback revision.
    let child = url.rsplit('/').next().unwrap().to_owned();
    let package = ok(cli(
        &daemon.server,
        &["deployment", "get", &child, "-o", "yaml"],
    ));
    let changed = package.replace("workers: '8'", "workers: '9'");
    assert_ne!(changed, package, "{package}");
    let file = scene.dir.path().join("changed.yaml");
    std::fs::write(&file, changed).expect("package file");
    ok(cli(
        &daemon.server,
        &[
            "deployment",
            "update",
            &child,
            "-f",
            &file.display().to_string(),
        ],
    ));
    browser.open(&url).await;
    browser.click("a.history").await;
    let updated = browser
        .until(
            "the update in the history",
            "var r = Array.from(document.querySelectorAll('#live tbody tr')).find(r => r.cells[3].textContent === 'package updated'); return r ? r.dataset.revision : ''",
        )
        .await;
    let updated = updated.as_str().expect("a revision number").to_owned();
    browser
        .click(&format!("tr[data-revision='{updated}'] td:nth-child(5) a"))
        .await;
    let diff = browser
        .until(
            "the diff",
            "var p = document.querySelector('pre.diff'); return p ? p.innerText : ''",
        )
        .await;
    assert!(
        diff.as_str()
            .is_some_and(|d| d.contains("-  workers: '8'\n+  workers: '9'")),
        "{diff}"
    );
    save_screenshot(&browser, "web-diff.png").await;
    browser
        .open(&format!("{page}/deployments/{child}/history"))
        .await;
    browser.click("tr[data-revision='1'] form button").await;
    let newest = browser
        .until(
            "the rollback in the history",
            // (The loop's preparation of it may already be the newest row.)
            "var r = Array.from(document.querySelectorAll('#live tbody tr')).find(r => r.cells[3].textContent === 'rolled back to revision 1'); return r ? r.cells[2].textContent : ''",
        )
        .await;
    assert_eq!(
        newest,
        json!("anonymous"),
        "no credentials on this dashboard"
    );
    assert!(
        browser
            .url()
            .await
            .ends_with(&format!("/deployments/{child}/history"))
    );
    save_screenshot(&browser, "web-history.png").await;

    // A change made with the CLI while the deployment is open.
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

    // Delete one from its page, with the button (its confirmation answered yes).
    browser.open(&format!("{page}/?site=dc/00042")).await;
    let link = browser
        .until(
            "its row",
            "var a = document.querySelector('#live tbody tr td.id a'); return a ? a.href : ''",
        )
        .await;
    browser.open(link.as_str().expect("a link")).await;
    let victim = browser.url().await.rsplit('/').next().unwrap().to_owned();
    browser
        .until(
            "its page",
            "return document.querySelector('#live dl') !== null",
        )
        .await;
    browser.click("form[action$='/delete'] button").await;
    browser
        .until(
            "the list without it",
            &format!(
                "var s = document.getElementById('summary'); return s && s.textContent.startsWith('{} deployments')",
                sites - 1
            ),
        )
        .await;
    assert_eq!(browser.url().await, format!("{page}/"));
    let shown = browser
        .script(
            &format!("return document.querySelector('tr[data-id=\"{victim}\"]') === null"),
            json!([]),
        )
        .await;
    assert_eq!(shown, json!(true), "{victim} is gone from the list");
    browser.quit().await;
}

#[tokio::test]
async fn the_web_dashboard_speaks_the_apis_tls() {
    use rcgen::{CertificateParams, KeyPair};
    let dir = tempfile::tempdir().unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let cert_path = dir.path().join("server.pem");
    let key_path = dir.path().join("server.key");
    std::fs::write(&cert_path, cert.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();
    let web_port = nephrite_test_services::free_loopback_port().expect("port");
    let store = format!("sqlite:{}", dir.path().join("p.db").display());
    let _daemon = support::binary::serve_tls(
        &store,
        &cert_path,
        &key_path,
        &["--web", &format!("127.0.0.1:{web_port}")],
    )
    .await;
    let trusting = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(cert.pem().as_bytes()).unwrap())
        .build()
        .unwrap();
    let page = wait_for("the web page over TLS", || {
        let trusting = trusting.clone();
        async move {
            let response = trusting
                .get(format!("https://localhost:{web_port}/"))
                .send()
                .await
                .ok()?;
            response.text().await.ok()
        }
    })
    .await;
    assert!(page.contains("<nav aria-label=\"Views\">"), "{page}");
    // Plain HTTP is not served; an untrusted certificate is refused.
    let plain = reqwest::get(format!("http://127.0.0.1:{web_port}/")).await;
    assert!(plain.is_err(), "plaintext answered: {plain:?}");
    let untrusting = reqwest::get(format!("https://localhost:{web_port}/")).await;
    assert!(untrusting.is_err(), "an unknown certificate was accepted");
}

/// With `PREPARER_SCREENSHOTS=DIR`, saves the window as `DIR/name`.
async fn save_screenshot(browser: &Browser, name: &str) {
    if let Some(dir) = std::env::var_os("PREPARER_SCREENSHOTS") {
        let path = std::path::Path::new(&dir).join(name);
        std::fs::write(&path, browser.screenshot().await).expect("screenshot written");
        eprintln!("screenshot: {}", path.display());
    }
}
