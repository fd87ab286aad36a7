//! A WebDriver client for the few calls the web dashboard's tests make (start a headless
//! Chromium, open a page, find, type, click, run a script, take a screenshot), over
//! chromedriver's plain HTTP JSON API.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The key WebDriver names an element by.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// chromedriver and one headless Chromium session; both end on drop.
pub struct Browser {
    driver: Child,
    http: reqwest::Client,
    session: String,
    base: String,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts chromedriver on a free port and a headless Chromium (no sandbox: the tests run
    /// as root; no network: nothing but the page's own server is reachable).
    pub async fn start(chromedriver: &Path, chromium: &Path) -> Browser {
        let port = nephrite_test_services::free_loopback_port().expect("port");
        let driver = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let base = format!("http://127.0.0.1:{port}");
        let http = reqwest::Client::new();
        let started = Instant::now();
        while http.get(format!("{base}/status")).send().await.is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "chromedriver answers"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let profile = tempfile::tempdir().expect("profile dir");
        let args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--window-size=1200,700",
            &format!("--user-data-dir={}", profile.path().display()),
        ];
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            // confirm() dialogs (approve, delete) are answered yes.
            "unhandledPromptBehavior": "accept",
            "goog:chromeOptions": {"binary": chromium, "args": args},
        }}});
        let mut browser = Browser {
            driver,
            http,
            session: String::new(),
            base,
            _profile: profile,
        };
        let answer = browser.call("POST", "/session", capabilities).await;
        browser.session = answer["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("a session: {answer}"))
            .to_owned();
        browser
    }

    async fn call(&self, method: &str, path: &str, body: Value) -> Value {
        match self.try_call(method, path, body).await {
            Ok(value) => value,
            Err(value) => panic!("WebDriver {method} {path}: {value}"),
        }
    }

    /// A WebDriver call: its value, or the error value.
    async fn try_call(&self, method: &str, path: &str, body: Value) -> Result<Value, Value> {
        let url = format!("{}{path}", self.base);
        let request = match method {
            "GET" => self.http.get(url),
            "DELETE" => self.http.delete(url),
            _ => self.http.post(url).json(&body),
        };
        let answer: Value = request
            .send()
            .await
            .expect("chromedriver answers")
            .json()
            .await
            .expect("JSON");
        let value = answer["value"].clone();
        if value.get("error").is_some() {
            return Err(value);
        }
        Ok(value)
    }

    async fn session_call(&self, method: &str, path: &str, body: Value) -> Value {
        self.call(method, &format!("/session/{}{path}", self.session), body)
            .await
    }

    /// Opens `url` (waits for the page to load).
    pub async fn open(&self, url: &str) {
        self.session_call("POST", "/url", json!({ "url": url }))
            .await;
    }

    /// The page's address.
    pub async fn url(&self) -> String {
        self.session_call("GET", "/url", Value::Null)
            .await
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// Runs `script` (a function body; `arguments` holds `args`) and returns its value.
    pub async fn script(&self, script: &str, args: Value) -> Value {
        self.session_call(
            "POST",
            "/execute/sync",
            json!({ "script": script, "args": args }),
        )
        .await
    }

    /// The first element `css` selects.
    pub async fn find(&self, css: &str) -> String {
        let value = self
            .session_call(
                "POST",
                "/element",
                json!({"using": "css selector", "value": css}),
            )
            .await;
        value[ELEMENT].as_str().expect("an element id").to_owned()
    }

    /// Types `text` into an element.
    pub async fn type_into(&self, css: &str, text: &str) {
        let element = self.find(css).await;
        self.session_call(
            "POST",
            &format!("/element/{element}/value"),
            json!({ "text": text }),
        )
        .await;
    }

    /// Clicks an element; when the live page replaced it between finding and clicking, finds
    /// it again.
    pub async fn click(&self, css: &str) {
        for _ in 0..10 {
            let element = self.find(css).await;
            let path = format!("/session/{}/element/{element}/click", self.session);
            match self.try_call("POST", &path, json!({})).await {
                Ok(_) => return,
                Err(error) if error["error"] == "stale element reference" => continue,
                Err(error) => panic!("WebDriver click {css}: {error}"),
            }
        }
        panic!("{css} kept being replaced before it could be clicked");
    }

    /// A screenshot of the window, PNG.
    pub async fn screenshot(&self) -> Vec<u8> {
        use base64::Engine as _;
        let data = self.session_call("GET", "/screenshot", Value::Null).await;
        base64::engine::general_purpose::STANDARD
            .decode(data.as_str().expect("base64"))
            .expect("PNG")
    }

    /// Waits until `script` returns something truthy (20 s at most); returns it.
    pub async fn until(&self, what: &str, script: &str) -> Value {
        let started = Instant::now();
        loop {
            let value = self.script(script, json!([])).await;
            let truthy = match &value {
                Value::Null | Value::Bool(false) => false,
                Value::String(s) => !s.is_empty(),
                Value::Number(n) => n.as_f64() != Some(0.0),
                _ => true,
            };
            if truthy {
                return value;
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "timed out waiting for {what}; the page shows: {}",
                self.script("return document.body.innerText", json!([]))
                    .await
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}

impl Browser {
    /// Ends the session (Chromium exits), then chromedriver.
    pub async fn quit(self) {
        self.session_call("DELETE", "", Value::Null).await;
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
        let _ = self.driver.wait();
        // A test that failed half way leaves its Chromium behind chromedriver: end the
        // processes started with this session's own profile directory, and only those.
        let profile = self._profile.path().display().to_string();
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            if String::from_utf8_lossy(&cmdline).contains(&profile)
                && let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>()
            {
                let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
            }
        }
    }
}
